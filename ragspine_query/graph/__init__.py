"""The relation graph on the query side: the artifact reader, ``GraphStore`` (in-process
numpy/scipy store, networkx adapter) and the ``graph`` channel (personalized PageRank).

Importing this package registers the ``graph`` channel (used by ``--mode graph``) and the
on-demand ``community`` channel (the adaptive ``global`` tier's community themes).
"""

from ragspine_core.graph.artifact import EDGE_TYPES, GraphArrays, load_graph_arrays
from ragspine_query.graph.graph_channel import GraphChannel, GraphChannelConfig
from ragspine_query.graph.communities import CommunityChannel, CommunityTheme, community_themes
from ragspine_core.graph.store import GraphStore, InProcessGraphStore, edges_to_csr

__all__ = ["CommunityChannel", "CommunityTheme", "EDGE_TYPES", "GraphArrays", "GraphChannel", "GraphChannelConfig", "GraphStore", "InProcessGraphStore",
           "community_themes", "edges_to_csr", "load_graph_arrays"]
