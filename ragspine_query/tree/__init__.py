"""RAPTOR summary trees on the query side: the reader, the ``tree`` channel, themes.

Importing this package registers the ``tree`` channel (off unless
``RetrievalConfig(tree="collapsed"|"traversal")``, ``ragspine query --tree …`` or
``RAGSPINE_TREE``). Node texts are syntheses: results and citations are always leaf
chunks, with the node they were reached through as ``via``.
"""

from ragspine_query.tree.config import DEFAULT_TREE_MODE, TREE_MODES, TreeConfig
from ragspine_query.tree.reader import SummaryTree, TreeNode, load_summary_tree
from ragspine_query.tree.tree_channel import Theme, TreeChannel, TreeHit, TreeRetriever, TreeSearch, global_overview, tree_snippet

__all__ = ["DEFAULT_TREE_MODE", "TREE_MODES", "SummaryTree", "Theme", "TreeChannel", "TreeConfig", "TreeHit", "TreeNode",
           "TreeRetriever", "TreeSearch", "global_overview", "load_summary_tree", "tree_snippet"]
