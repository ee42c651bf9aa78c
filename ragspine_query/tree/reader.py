"""Read a snapshot's RAPTOR summary tree (``schema.SUMMARY_TREE_DIR``), memory-mapped and read-only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ragspine_core import schema
from ragspine_core.errors import IndexIncompatibleError

#: The tree format versions this reader understands.
SUPPORTED_VERSIONS = ("1",)


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One internal node: a summary of its children. ``text`` is a synthesis — shown as a
    theme, never cited; cite the leaf chunks in ``leaf_rows`` (its provenance) instead."""

    index: int
    node_id: str
    level: int
    text: str
    n_leaves: int
    doc_ids: tuple[str, ...]
    is_synthesis: bool = True


@dataclass(frozen=True, slots=True)
class SummaryTree:
    """A published summary tree. Node ``i``'s children are ``children[children_indptr[i]:…]``
    (chunk rows on level 1, node indices above); the chunk rows it covers are
    ``leaves[leaves_indptr[i]:…]`` (ascending)."""

    directory: Path
    meta: dict[str, Any]
    node_ids: tuple[str, ...]
    levels: np.ndarray  # int32[n_nodes], 1 = just above the leaves
    texts: tuple[str, ...]
    n_leaves: np.ndarray
    doc_ids: tuple[tuple[str, ...], ...]
    node_vectors: np.ndarray  # float32[n_nodes, dim]
    children_indptr: np.ndarray
    children: np.ndarray
    leaves_indptr: np.ndarray
    leaves: np.ndarray
    leaf_rows: np.ndarray  # int32, ascending: every leaf chunk row
    leaf_vectors: np.ndarray | None  # only for a tree with its own (lexical) vector space
    #: position in ``leaf_rows`` of each entry of ``leaves`` (precomputed for scoring)
    leaves_pos: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def top_level(self) -> int:
        return int(self.levels.max()) if self.n_nodes else 0

    @property
    def vector_kind(self) -> str:
        """``embedding:<model id>`` (the chunks' space) or ``lexical:<model id>`` (hashed terms)."""
        return str(self.meta.get("vector_kind", ""))

    @property
    def summarizer_id(self) -> str:
        return str(self.meta.get("summarizer_id", ""))

    def nodes_at(self, level: int) -> np.ndarray:
        return np.flatnonzero(self.levels == level)

    def children_of(self, i: int) -> np.ndarray:
        return self.children[self.children_indptr[i]:self.children_indptr[i + 1]]

    def leaves_of(self, i: int) -> np.ndarray:
        """The chunk rows node ``i`` covers (its union provenance), ascending."""
        return self.leaves[self.leaves_indptr[i]:self.leaves_indptr[i + 1]]

    def node(self, i: int) -> TreeNode:
        return TreeNode(int(i), self.node_ids[i], int(self.levels[i]), self.texts[i], int(self.n_leaves[i]), self.doc_ids[i])


def load_summary_tree(directory: Path) -> SummaryTree:
    """Open the tree in ``directory`` (arrays memory-mapped).

    Raises:
        IndexIncompatibleError: an unknown version or arrays that disagree (re-materialize
            the ``summary_tree`` asset).
    """
    import pyarrow.parquet as pq

    from ragspine_core import integrity

    d = Path(directory)
    try:
        meta = json.loads((d / schema.TREE_META).read_text(encoding="utf-8"))
        table = pq.read_table(d / schema.TREE_NODES)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise integrity.corrupt(*integrity.where_in_snapshot(d, schema.TREE_META), f"or {schema.TREE_NODES} is unreadable "
                                f"({' '.join(str(exc).split())})") from None
    if not isinstance(meta, dict) or str(meta.get("version")) not in SUPPORTED_VERSIONS:
        raise IndexIncompatibleError(f"{d}: summary tree version {meta.get('version')!r} is not supported by this reader "
                                     f"({', '.join(SUPPORTED_VERSIONS)}); re-materialize the summary_tree asset")
    load: Callable[[str], np.ndarray] = lambda name: integrity.load_array(d, name)  # noqa: E731
    node_vectors = load(schema.TREE_NODE_VECTORS)
    leaf_rows = np.asarray(load(schema.TREE_LEAF_ROWS))
    leaves = np.asarray(load(schema.TREE_LEAVES))
    leaf_vectors = load(schema.TREE_LEAF_VECTORS) if (d / schema.TREE_LEAF_VECTORS).is_file() else None
    n = table.num_rows
    children_indptr = np.asarray(load(schema.TREE_CHILDREN_INDPTR))
    leaves_indptr = np.asarray(load(schema.TREE_LEAVES_INDPTR))
    if node_vectors.shape[0] != n or children_indptr.shape[0] != n + 1 or leaves_indptr.shape[0] != n + 1 \
            or (leaf_vectors is not None and leaf_vectors.shape[0] != leaf_rows.shape[0]):
        raise IndexIncompatibleError(f"{d}: the summary tree's arrays disagree with its {n} nodes; "
                                     "re-materialize the summary_tree asset")
    # bounds once at open (ragspine_core.integrity): no walk indexes outside an array
    children = np.asarray(load(schema.TREE_CHILDREN))
    upper = max(n, int(leaf_rows.max()) + 1 if leaf_rows.size else 0)
    integrity.check_csr(d, schema.TREE_CHILDREN_INDPTR, children_indptr, schema.TREE_CHILDREN, children,
                        n_ptr=n + 1, upper=upper)
    integrity.check_csr(d, schema.TREE_LEAVES_INDPTR, leaves_indptr, schema.TREE_LEAVES, leaves, n_ptr=n + 1,
                        upper=upper)
    integrity.check_array(d, schema.TREE_NODE_VECTORS, node_vectors, kind="f", ndim=2)
    pos = np.searchsorted(leaf_rows, leaves)
    if leaves.size and (pos.max() >= leaf_rows.size or not np.array_equal(leaf_rows[pos], leaves)):
        raise IndexIncompatibleError(f"{d}: a node covers a chunk that is not a leaf; re-materialize the summary_tree asset")
    return SummaryTree(
        d, meta, tuple(table.column("node_id").to_pylist()), np.asarray(table.column("level").to_numpy(), np.int32),
        tuple(table.column("text").to_pylist()), np.asarray(table.column("n_leaves").to_numpy(), np.int64),
        tuple(tuple(x) for x in table.column("doc_ids").to_pylist()), node_vectors, children_indptr,
        children, leaves_indptr, leaves, leaf_rows, leaf_vectors, pos.astype(np.int64))
