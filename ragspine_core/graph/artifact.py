"""The relation-graph artifact contract (writer: ``ragspine_index.graph.graph_files`` and ``ragspine_index.graph.community_file``).

One directory per snapshot (``relation_graph/``, registered in ``schema.ARTIFACT_REGISTRY``)::

    nodes.parquet     node_id, kind (entity|chunk), key, label, source, chunk_row, df
    edges.parquet     src, dst, type, weight, provenance, verified, label, evidence (list of the chunk ids
                      that state the edge: the chunk itself for about/mentions, at most 8 for the rest)
    indptr.npy        int64[n_nodes+1]  symmetric adjacency in CSR (both directions of every edge)
    indices.npy       int32[nnz]        neighbour node ids, ascending within a node
    weights.npy       float32[nnz]      edge weight
    etype.npy         uint8[nnz]        index into EDGE_TYPES (query-time type weights)
    chunk_node.npy    int32[n_rows]     snapshot chunk row -> node id (-1: not in the graph, e.g. RESTRICTED)
    aliases.parquet   alias (match key), node_id: every other name of an entity (glossary aliases, short titles)
    communities.parquet community_id, title, size, entity_nodes, member_chunks, summary, citations, quotes:
                      Louvain communities of the entities, each with an extractive summary (the quotes joined;
                      quotes[i] is a sentence of member chunk citations[i]) (empty when not built;
                      params.json "communities" says why)
    params.json       version, counts by node kind and edge type, build settings

Entity nodes come first (sorted by key), then one node per non-RESTRICTED chunk row in row
order. No node or edge label comes from RESTRICTED text: RESTRICTED chunks are never read
by an extractor and have no node (``chunk_node`` is -1 for them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

GRAPH_VERSION = 1
NODES_FILE = "nodes.parquet"
EDGES_FILE = "edges.parquet"
INDPTR_FILE = "indptr.npy"
INDICES_FILE = "indices.npy"
WEIGHTS_FILE = "weights.npy"
ETYPE_FILE = "etype.npy"
CHUNK_NODE_FILE = "chunk_node.npy"
PARAMS_FILE = "params.json"
ALIASES_FILE = "aliases.parquet"
COMMUNITIES_FILE = "communities.parquet"

#: Edge types, in the order of ``etype.npy`` codes.
#: (New types are appended: a code never changes meaning; ``about`` is in graphs built since relation_graph 2.)
EDGE_TYPES = ("mentions", "co_occurs", "subsidiary_of", "peer_of", "derived_from", "synonym", "model_relation", "about")
EDGE_TYPE_CODE = {t: i for i, t in enumerate(EDGE_TYPES)}
#: Entity–chunk edge types: ``about`` (the chunk's own document title / metadata entity) and ``mentions`` (any other name).
CHUNK_EDGE_TYPES = ("about", "mentions")
NODE_KINDS = ("entity", "chunk")
#: Edge provenance: deterministic rules, or a model (always stamped unverified).
PROVENANCE_DETERMINISTIC = "deterministic"
PROVENANCE_MODEL = "model-derived"


@dataclass(frozen=True, slots=True)
class GraphArrays:
    """The memory-mapped walk arrays of one relation graph (see the module docstring)."""

    directory: Path
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    etype: np.ndarray
    chunk_node: np.ndarray
    params: dict[str, Any]

    @property
    def n_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_entities(self) -> int:
        return int(self.params["counts"]["nodes"]["entity"])


def load_graph_arrays(directory: str | Path, *, n_rows: int | None = None) -> GraphArrays:
    """Memory-map a relation graph directory; checks the version and the row count.

    Raises:
        IndexIncompatibleError: another graph version, or a chunk map of the wrong length
            (re-materialize the relation_graph asset).
    """
    from ragspine_core.errors import IndexIncompatibleError

    d = Path(directory)
    try:
        params = json.loads((d / PARAMS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        from ragspine_core import integrity

        raise integrity.corrupt(*integrity.where_in_snapshot(d, PARAMS_FILE), f"is unreadable ({exc})") from None
    if not isinstance(params, dict) or params.get("version") != GRAPH_VERSION:
        raise IndexIncompatibleError(f"{d}: relation graph version {params.get('version')!r}, this reader understands "
                                     f"{GRAPH_VERSION}: re-materialize the relation_graph asset")
    from ragspine_core import integrity

    load: Callable[[str], np.ndarray] = lambda name: integrity.load_array(d, name)  # noqa: E731
    arrays = GraphArrays(d, load(INDPTR_FILE), load(INDICES_FILE), load(WEIGHTS_FILE), load(ETYPE_FILE),
                         load(CHUNK_NODE_FILE), params)
    if n_rows is not None and arrays.chunk_node.shape[0] != n_rows:
        raise IndexIncompatibleError(f"{d}: the graph maps {arrays.chunk_node.shape[0]} chunk rows, the snapshot has "
                                     f"{n_rows}: re-materialize the relation_graph asset")
    # bounds once at open, so no walk indexes outside an array (ragspine_core.integrity)
    n_nodes = max(0, arrays.indptr.shape[0] - 1) if arrays.indptr.ndim == 1 else 0
    integrity.check_csr(d, INDPTR_FILE, arrays.indptr, INDICES_FILE, arrays.indices, n_ptr=arrays.indptr.shape[0],
                        upper=n_nodes)
    integrity.check_array(d, WEIGHTS_FILE, arrays.weights, kind="f", length=arrays.indices.shape[0])
    integrity.check_ids(d, ETYPE_FILE, arrays.etype, len(EDGE_TYPES))
    if arrays.etype.shape[0] != arrays.indices.shape[0]:
        raise integrity.corrupt(*integrity.where_in_snapshot(d, ETYPE_FILE), f"has {arrays.etype.shape[0]} entries, not "
                                f"{arrays.indices.shape[0]}")
    integrity.check_ids(d, CHUNK_NODE_FILE, arrays.chunk_node, n_nodes, lower=-1)
    return arrays
