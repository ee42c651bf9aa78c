"""Retrieval over a RAPTOR summary tree: the ``tree`` channel, tree search with ``via``, themes.

RAPTOR (Sarthi et al., ICLR 2024) retrieves over its tree in two ways, both here:

* **collapsed tree** — every node and every leaf ranked together by similarity to the
  query (the paper's better variant);
* **tree traversal** — a top-down beam search: the best ``beam`` nodes of the top level,
  then the best ``beam`` of their children, down to the leaves.

A node's text is a *synthesis*: it is never returned as a result and never cited. A node
hit is answered with the leaf chunks it covers — the best ``leaves_per_node`` of them by
the query — and the node id is recorded as ``via``. :func:`tree_snippet` refuses to
build a snippet for a node (:class:`~ragspine_core.errors.SynthesisCitationError`).

Leaves and nodes are compared in the tree's vector space: the chunks' embeddings (the
query is embedded by the index's own model) or, for a tree over a BM25-only library, the
hashed-lexical space of :class:`~ragspine_core.dense.deterministic.DeterministicEmbeddingBackend`.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np

from ragspine_core.errors import ConfigError, SynthesisCitationError
from ragspine_query.pipeline.channels import Channel, ChannelContext, OnDemandChannel, register_builtin_channel
from ragspine_query.pipeline.state import Snippets
from ragspine_core.records import Hit, to_snippet
from ragspine_query.tree.config import TreeConfig
from ragspine_query.tree.reader import SummaryTree, TreeNode

__all__ = ["Theme", "TreeChannel", "TreeHit", "TreeRetriever", "TreeSearch", "global_overview", "tree_snippet"]


@dataclass(frozen=True, slots=True)
class TreeSearch:
    """One tree search: leaf chunk rows (best first), their scores, and per row the node
    it was reached through (``""`` for a leaf hit)."""

    rows: np.ndarray
    scores: np.ndarray
    via: tuple[str, ...]


class _Space:
    """The tree's vector space for one library: query vector, leaf and node scores."""

    def __init__(self, library: Any, tree: SummaryTree, embedding_backend: Any | None) -> None:
        kind, _, model = tree.vector_kind.partition(":")
        self.tree = tree
        if kind == "lexical":
            from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

            self.backend: Any = DeterministicEmbeddingBackend(dim=int(tree.meta["dim"]))
            if self.backend.model_id != model:
                raise ConfigError(f"summary tree space {tree.vector_kind!r} is unknown to this reader; "
                                  "re-materialize the summary_tree asset")
            self.leaf_vectors = tree.leaf_vectors
        elif kind == "embedding":
            if embedding_backend is None or getattr(embedding_backend, "model_id", None) != model:
                raise ConfigError(f"the summary tree lives in {model!r} embedding space: query with that model "
                                  "(hybrid or vector mode)")
            emb = library.embeddings()
            if emb is None or not np.array_equal(np.asarray(emb.rows), tree.leaf_rows):
                raise ConfigError("the summary tree's leaves are not the snapshot's embedded chunks; "
                                  "re-materialize summary_tree")
            self.backend = embedding_backend
            self.leaf_vectors = emb.vectors
        else:
            raise ConfigError(f"unknown summary tree space {tree.vector_kind!r}; re-materialize the summary_tree asset")
        self._last: tuple[str, np.ndarray] | None = None

    def query_vector(self, query: str) -> np.ndarray:
        last = self._last
        if last is not None and last[0] == query:
            return last[1]
        qv = np.asarray(self.backend.embed([query], kind="query"), dtype=np.float32)[0]
        self._last = (query, qv)
        return cast("np.ndarray", qv)


def _top(scores: np.ndarray, ok: np.ndarray | None, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores (descending, ties by index), among ``ok`` when given."""
    idx = np.arange(scores.shape[0]) if ok is None else np.flatnonzero(ok)
    if idx.size == 0 or k <= 0:
        return np.zeros(0, np.int64)
    s = scores[idx]
    if idx.size > k:
        part = np.argpartition(-s, k - 1)[:k]
        cut = s[part].min()
        part = np.flatnonzero(s >= cut)  # keep every tie at the cut, then order
        idx, s = idx[part], s[part]
    order = np.lexsort((idx, -s))
    return idx[order][:k]


def barred_nodes(tree: SummaryTree, hidden_rows: np.ndarray) -> np.ndarray | None:
    """Bool per node: its subtree covers a row of ``hidden_rows`` (bool per chunk row), so its
    summary says something of a row the caller may not see. None when no leaf is hidden."""
    hidden_leaf = np.asarray(hidden_rows, dtype=bool)[tree.leaf_rows]
    if not tree.n_nodes or not hidden_leaf.any():
        return None
    seen = np.concatenate(([0], np.cumsum(hidden_leaf[tree.leaves_pos], dtype=np.int64)))
    ip = np.asarray(tree.leaves_indptr, dtype=np.int64)
    return (seen[ip[1:]] - seen[ip[:-1]]) > 0


def search_tree(space: _Space, query: str, depth: int, allowed: np.ndarray | None, config: TreeConfig,
                barred: np.ndarray | None = None) -> TreeSearch:
    """Rank leaf chunk rows through the tree (``config.mode``: collapsed or traversal).
    ``barred`` (bool per node, :func:`barred_nodes`): nodes never ranked, walked or named."""
    tree = space.tree
    if depth <= 0 or tree.leaf_rows.size == 0:
        return TreeSearch(np.zeros(0, np.int64), np.zeros(0, np.float32), ())
    qv = space.query_vector(query)
    leaf_scores = np.asarray(space.leaf_vectors @ qv, dtype=np.float32)
    node_scores = np.asarray(tree.node_vectors @ qv, dtype=np.float32) if tree.n_nodes else np.zeros(0, np.float32)
    leaf_ok = None if allowed is None else np.asarray(allowed)[tree.leaf_rows]
    if leaf_ok is not None and tree.n_nodes:
        counts = np.add.reduceat(leaf_ok[tree.leaves_pos].astype(np.int64), tree.leaves_indptr[:-1]) if tree.leaves.size else 0
        node_ok = np.asarray(counts) > 0
    else:
        node_ok = None
    if barred is not None:  # a node over a row above the caller's ceiling: not served, whatever the filters
        node_ok = ~barred if node_ok is None else (node_ok & ~barred)
    rows: list[int] = []
    scores: list[float] = []
    via: list[str] = []
    emitted: set[int] = set()

    def best_leaves(i: int, k: int) -> list[int]:
        lo, hi = tree.leaves_indptr[i], tree.leaves_indptr[i + 1]
        pos = tree.leaves_pos[lo:hi]
        if leaf_ok is not None:
            pos = pos[leaf_ok[pos]]
        pos = np.asarray([p for p in pos.tolist() if p not in emitted], dtype=np.int64)
        if pos.size == 0:
            return []
        order = np.lexsort((pos, -leaf_scores[pos]))
        return cast("list[int]", pos[order][:k].tolist())

    def emit(p: int, score: float, node: str) -> None:
        emitted.add(p)
        rows.append(int(tree.leaf_rows[p]))
        scores.append(score)
        via.append(node)

    if config.mode == "collapsed":
        top_leaves = _top(leaf_scores, leaf_ok, depth)
        top_nodes = _top(node_scores, node_ok, depth) if tree.n_nodes else np.zeros(0, np.int64)
        # one ranking of leaves and nodes; ties: leaves first, then by index
        items = sorted([(-float(leaf_scores[p]), 0, int(p)) for p in top_leaves]
                       + [(-float(node_scores[i]), 1, int(i)) for i in top_nodes])
        for neg, kind, i in items:
            if len(rows) >= depth:
                break
            if kind == 0:
                if i not in emitted:
                    emit(i, -neg, "")
            else:
                for p in best_leaves(i, config.leaves_per_node):
                    if len(rows) >= depth:
                        break
                    emit(p, -neg, tree.node_ids[i])
    else:  # traversal: beam search from the top level down to the leaves
        level = tree.top_level
        frontier = [int(i) for i in tree.nodes_at(level) if node_ok is None or node_ok[i]]
        frontier = [frontier[j] for j in _top(node_scores[frontier], None, config.beam)] if frontier else []
        while level > 1 and frontier:
            kids = sorted({int(c) for i in frontier for c in tree.children_of(i)})
            kids = [c for c in kids if node_ok is None or node_ok[c]]
            frontier = [kids[j] for j in _top(node_scores[kids], None, config.beam)] if kids else []
            level -= 1
        reached: dict[int, str] = {}
        for i in frontier:  # best node first: a leaf is credited to the best node that reaches it
            for p in best_leaves(i, tree.leaves_indptr[i + 1] - tree.leaves_indptr[i]):
                reached.setdefault(p, tree.node_ids[i])
        for p in sorted(reached, key=lambda p: (-float(leaf_scores[p]), p))[:depth]:
            emit(p, float(leaf_scores[p]), reached[p])
    return TreeSearch(np.asarray(rows, np.int64), np.asarray(scores, np.float32), tuple(via))


class TreeChannel(Channel):
    """The ``tree`` retrieval channel: leaf chunk rows ranked through the summary tree."""

    name = "tree"
    #: declared ability: rows are reached through summary nodes (``search_with_via`` gives each row's node)
    reaches_via = True

    def __init__(self, library: Any, config: TreeConfig, embedding_backend: Any | None,
                 max_sensitivity: str | None = None) -> None:
        tree = library.summary_tree()
        if tree is None:
            raise ConfigError(f"library {library.library_id!r} has no summary tree: materialize the summary_tree asset")
        self.library = library
        self.config = config
        self.space = _Space(library, tree, embedding_backend)
        #: nodes over a row above the caller's ceiling (``max_sensitivity``): never served to it
        rows_above = getattr(library, "rows_above", None)
        self.barred = barred_nodes(tree, rows_above(max_sensitivity)) if (max_sensitivity and rows_above) else None

    def search_via(self, query: str, depth: int, allowed: np.ndarray | None) -> TreeSearch:
        return search_tree(self.space, query, depth, allowed, self.config, self.barred)

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        found = self.search_via(query, depth, allowed)
        return found.rows, found.scores

    def search_with_via(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """What the fused pipeline calls: ``search`` plus each row's node id (``""`` for a leaf hit),
        which the fused :class:`~ragspine_core.records.Hit` keeps as ``via``."""
        found = self.search_via(query, depth, allowed)
        return found.rows, found.scores, found.via

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str:
        """For ``--explain``: the mode and which nodes answered with which leaves (``via``)."""
        found = self.search_via(query, depth, allowed)
        ids = self.library.chunk_ids()
        by_node: dict[str, list[str]] = {}
        for r, v in zip(found.rows.tolist(), found.via):
            if v:
                by_node.setdefault(v, []).append(ids[r][:12])
        parts = [f"{v[:13]}→{','.join(c[:3])}{'…' if len(c) > 3 else ''}" for v, c in list(by_node.items())[:5]]
        return (f"{self.config.mode} ({self.space.tree.vector_kind}); {len(by_node)} node hit(s) answered by their leaves"
                + (": via " + "; ".join(parts) if parts else ""))


def _tree_factory(ctx: ChannelContext) -> Channel | None:
    config = TreeConfig.of(getattr(ctx.config, "tree", None))
    if config.mode == "off":
        if ctx.library.artifact_path("summary_tree") is None:
            return None
        # tree off: only the global tier's queries run it (collapsed tree, opened on first use)
        return OnDemandChannel("tree", lambda: _tree_factory(ChannelContext(
            ctx.library, _TreeOn(ctx.config), ctx.active_mode, ctx.embedding_backend)))
    tree = ctx.library.summary_tree()
    if tree is None:
        return None  # a snapshot without a tree: the other channels answer
    kind = tree.vector_kind.partition(":")[0]
    if kind == "embedding" and ctx.embedding_backend is None:
        return None  # an embedding-space tree needs the query embedded (BM25-only mode skips it)
    return TreeChannel(ctx.library, config, ctx.embedding_backend, getattr(ctx.config, "max_sensitivity", None))


class _TreeOn:
    """``config`` with the collapsed tree switched on (the global tier's on-demand channel)."""

    def __init__(self, config: Any) -> None:
        self._config = config
        self.tree = TreeConfig(mode="collapsed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


register_builtin_channel("tree", _tree_factory)


# ------------------------------------------------------------------ hits with `via`
@dataclass(frozen=True, slots=True)
class TreeHit:
    """A leaf chunk found through the tree; ``via`` is the node it was reached through (or ``""``)."""

    hit: Hit
    via: str = ""


def tree_snippet(item: Any) -> dict[str, Any]:
    """The snippet dict of a leaf hit (``to_snippet`` plus ``via``).

    Raises:
        SynthesisCitationError: ``item`` is a node (or anything marked ``is_synthesis``):
            a snippet's citation is always a source span, never generated text.
        ValueError: a RESTRICTED chunk (the last guard of :func:`~ragspine_core.records.to_snippet`).
    """
    if isinstance(item, (TreeNode, Theme)) or getattr(item, "is_synthesis", False):
        node = getattr(item, "node_id", "?")
        raise SynthesisCitationError(f"refusing to cite summary node {node}: its text is a synthesis; cite the leaf chunks "
                                     "it covers (TreeHit / Theme.citations) instead")
    hit, via = (item.hit, item.via) if isinstance(item, TreeHit) else (item, getattr(item, "via", ""))
    if getattr(hit.chunk, "is_synthesis", False):
        raise SynthesisCitationError(f"refusing to cite {hit.chunk.chunk_id}: it is generated text")
    snippet = to_snippet(hit)
    snippet["via"] = via
    return snippet


class TreeRetriever:
    """Search a library through its summary tree only, keeping each leaf's ``via``.

    RESTRICTED chunks are never leaves of a tree; with ``include_restricted=False`` (the
    default) they are also out of the candidate mask, so a node is answered only with
    open leaves.
    """

    def __init__(self, library: Any, *, config: TreeConfig | str = "collapsed", embedding_backend: Any | None = None) -> None:
        from ragspine_query.library import Follower

        self.library = library
        self.config = TreeConfig.of(config)
        if self.config.mode == "off":
            raise ConfigError("TreeRetriever needs tree mode collapsed or traversal, got 'off'")
        self.channel = TreeChannel(library, self.config, embedding_backend)
        self._backend = embedding_backend
        self._follower = Follower()

    def follow(self) -> bool:
        """Reopen the library's current snapshot when this one must stop serving (damaged,
        pruned, quarantined: :class:`~ragspine_query.library.Follower`, as
        :meth:`HybridRetriever.follow <ragspine_query.HybridRetriever.follow>` does); True when it did."""
        def install(library: Any) -> None:
            fresh = TreeRetriever(library, config=self.config, embedding_backend=self._backend)
            fresh._follower = self._follower
            self.__dict__.update(fresh.__dict__)

        return self._follower.follow(lambda: self.library, install)

    def _allowed(self, filters: Any, include_restricted: bool) -> np.ndarray | None:
        from ragspine_query.filters import combined_mask, parse_filters

        mask = None
        if filters:
            preds = parse_filters(filters, allowed_fields=self.library.filter_fields())
            mask = combined_mask(preds, {p.field: self.library.column(p.field) for p in preds}, self.library.n_chunks)
        if not include_restricted:
            r = self.library.restricted_mask()
            mask = ~r if mask is None else (mask & ~r)
        return mask

    def search(self, query: str, *, top_k: int = 10, filters: Any = None, include_restricted: bool = False) -> list[TreeHit]:
        """The leaves the tree finds, best first. Like a retriever's search, it first follows the
        library (:meth:`follow`) and waits for the snapshot's check, so a file changed since
        open fails the query with a located error instead of ranking from it.

        Raises:
            IndexCorruptError / IndexNotFoundError: the snapshot is damaged or was removed and
                ``current`` names no intact one (the error names the file and the repair).
        """
        self.follow()
        self.library.ensure_verified()
        found = self.channel.search_via(query, top_k, self._allowed(filters, include_restricted))
        chunks = self.library.chunks_by_rows(found.rows.tolist())
        return [TreeHit(Hit(c, float(s), {"tree": float(s), "fused": float(s)}, v), v)
                for c, s, v in zip(chunks, found.scores.tolist(), found.via)]

    def snippets(self, query: str, *, top_k: int = 10, filters: Any = None) -> Snippets:
        """Cited snippet dicts (leaf source spans, with ``via``); never a RESTRICTED chunk. A
        list with ``to_frame()``."""
        return Snippets([tree_snippet(h) for h in self.search(query, top_k=top_k, filters=filters)
                         if not h.hit.chunk.is_restricted])


# ------------------------------------------------------------------ the global entry point
@dataclass(frozen=True, slots=True)
class Theme:
    """A top-level theme of a library: its summary (a synthesis, shown, never cited) and
    the leaf snippets that ground it (``citations``, each with ``via`` = this node)."""

    node_id: str
    level: int
    summary: str
    n_leaves: int
    doc_ids: tuple[str, ...]
    score: float
    citations: tuple[dict[str, Any], ...]
    is_synthesis: bool = True


def global_overview(library: Any, query: str | None = None, *, top_n: int = 5, leaves_per_node: int = 3,
                    embedding_backend: Any | None = None) -> list[Theme]:
    """Questions about a whole library ("what are the main risks across all filings"):
    the top level's themes, best first, each grounded in its best leaf chunks.

    With ``query`` the themes are ranked by it; without, by the number of chunks they
    cover. A theme cites exactly the leaves its summary quotes (an extractive summary is
    built only from its members' sentences), in quoting order; a generated summary quotes
    none, and then cites the ``leaves_per_node`` leaves closest to the node. A theme whose
    leaves are RESTRICTED now (never, for a consistent snapshot) is left out.
    """
    tree = library.summary_tree()
    if tree is None or tree.n_nodes == 0:
        return []
    space = _Space(library, tree, embedding_backend)
    restricted = library.restricted_mask()
    top = tree.nodes_at(tree.top_level)
    if query:
        qv = space.query_vector(query)
        node_scores = np.asarray(tree.node_vectors[top] @ qv, dtype=np.float32)
    else:
        node_scores = tree.n_leaves[top].astype(np.float32)
    order = np.lexsort((top, -node_scores))
    themes: list[Theme] = []
    for j in order:
        i = int(top[j])
        cover = tree.leaves_of(i)
        if restricted[cover].any():
            continue
        pos = tree.leaves_pos[tree.leaves_indptr[i]:tree.leaves_indptr[i + 1]]
        n = tree.node(i)
        # grounded: cite exactly the leaves the node's (extractive) summary quotes, in the order it quotes them
        quoted = _quoted_leaves(library, n.text, [int(tree.leaf_rows[p]) for p in pos.tolist()])
        target = np.asarray(tree.node_vectors[i], dtype=np.float32)
        ls = np.asarray(space.leaf_vectors[pos] @ target, dtype=np.float32)  # type: ignore[index]
        if quoted:
            chunks = [c for c, _ in quoted]
            score_of = {int(tree.leaf_rows[p]): float(ls[k]) for k, p in enumerate(pos.tolist())}
            scores = [score_of[r] for _, r in quoted]
        else:  # a generated (LLM) summary quotes nothing: the leaves closest to the node itself
            best = pos[np.lexsort((pos, -ls))][:leaves_per_node]
            chunks = library.chunks_by_rows([int(tree.leaf_rows[p]) for p in best])
            scores = [float(ls[np.flatnonzero(pos == p)[0]]) for p in best.tolist()]
        cites = []
        for c, s in zip(chunks, scores):
            cites.append(tree_snippet(TreeHit(Hit(c, s, {"tree": s, "fused": s}, tree.node_ids[i]), tree.node_ids[i])))
        themes.append(Theme(n.node_id, n.level, n.text, n.n_leaves, n.doc_ids, float(node_scores[j]), tuple(cites)))
        if len(themes) >= top_n:
            break
    return themes


_QUOTE_END = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+")


def _quoted_leaves(library: Any, summary: str, rows: Sequence[int]) -> list[tuple[Any, int]]:
    """``(chunk, row)`` of the leaves (among ``rows``) holding a sentence of ``summary``, in
    the order the summary quotes them, each once; RESTRICTED rows never (a tree has none)."""
    sents = [x.strip() for x in _QUOTE_END.split(summary) if x and len(x.strip()) >= 8]
    if not sents:
        return []
    chunks = library.chunks_by_rows(list(rows))
    out: list[tuple[Any, int]] = []
    seen: set[int] = set()
    for sent in sents:
        for c, r in zip(chunks, rows):
            if sent in c.text and not c.is_restricted:
                if r not in seen:
                    seen.add(r)
                    out.append((c, r))
                break
    return out
