"""The ``graph`` channel: multi-hop retrieval by personalized PageRank (HippoRAG-style).

Seeds are (1) the entities named in the query — string match of the query's word n-grams
(and CJK substrings) against the graph's entity names, each weighted by its specificity
``log(1 + N / df)`` — and (2) the chunks the lexical (and, when active, dense) channel
ranks first, weighted ``1 / rank`` (the "embedding match": the query's nearest passages
stand in for its nearest entity names, as in HippoRAG 2's passage nodes). Personalized
PageRank spreads the seed mass over the typed graph (query-time weight per edge type);
a chunk's score is its node's mass. Selected by ``--mode graph``: the default's channels
(BM25 + dense) fused as the default fuses them (the language-aware plan), then that ranking
and the graph's fused by :func:`~ragspine_query.fusion.weighted_rrf`
(``GraphChannelConfig.stage_weight`` / ``stage_rrf_k``); without a dense channel, BM25 and
the graph by one weighted RRF (``fusion_weight`` / ``fusion_rrf_k``).

Labels the channel shows (``describe``) are entity names of the graph, which never come
from RESTRICTED text (the relation_graph asset's blocking check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragspine_core.errors import ConfigError, IndexNotFoundError
from ragspine_query.pipeline.channels import Channel, ChannelContext, DenseChannel, LexicalChannel, OnDemandChannel, register_builtin_channel
from ragspine_core.graph.artifact import ALIASES_FILE, EDGE_TYPES, NODES_FILE
from ragspine_core.graph.names import STOP_WORDS, WORDS, name_spans, word_key
from ragspine_core.graph.store import InProcessGraphStore

#: Query-time weight of each edge type (multiplies the stored weight; 0 drops the type).
DEFAULT_TYPE_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("mentions", 1.0), ("co_occurs", 0.5), ("subsidiary_of", 1.0), ("peer_of", 1.0), ("derived_from", 1.0),
    ("synonym", 1.0), ("model_relation", 0.5),
    # a chunk's own title/metadata entity: 3x its stored 3 (+0.007 R@5 on the HotpotQA tuning subset, docs/evaluation.md)
    ("about", 3.0))


#: The selectable PPR stores (:class:`~ragspine_core.graph.store.GraphStore` implementations).
GRAPH_STORES = ("inprocess", "networkx")


@dataclass(frozen=True, slots=True)
class GraphChannelConfig:
    """Knobs of the graph channel (validated)."""

    damping: float = 0.5
    #: chunks of the lexical/dense channels used as seeds (0, the default: entity seeds only;
    #: 5 lost 0.017 Recall@5 on the HotpotQA tuning subset, docs/evaluation.md)
    passage_seeds: int = 0
    passage_seed_weight: float = 1.0
    entity_seed_weight: float = 1.0
    max_entity_seeds: int = 12
    #: a lowercase one-word query term seeds only a glossary entity (English names are capitalised)
    capitalised_names: bool = True
    #: an entity named in more than this share of the library's chunks seeds no walk: a hub (the
    #: company itself, a metric every report names) does not locate a passage, and the walk from it
    #: only spreads over everything about it (1.0: no limit). 0.05 leaves hotpotqa-dev as it was
    #: (1 of its 2,059 query seeds is above 2 %) and drops `Acme China`, `revenue` on the sample.
    max_seed_share: float = 0.05
    #: ... and in at least this many chunks (in a small library every name is in > 5 % of it)
    hub_min_chunks: int = 10
    #: seed weight = log(1 + N / df) ** specificity_power
    specificity_power: float = 1.0
    type_weights: tuple[tuple[str, float], ...] = field(default=DEFAULT_TYPE_WEIGHTS)
    #: its fusion weight when RetrievalConfig.channel_weights does not name ``graph``
    #: (2.0: tuned on the HotpotQA tuning subset, docs/evaluation.md)
    fusion_weight: float = 2.0
    #: the RRF k of the fusion in ``graph`` mode (None: RetrievalConfig.rrf_k); used unless
    #: RetrievalConfig.rrf_k is set to other than its default (tuned on the HotpotQA tuning subset)
    fusion_rrf_k: int | None = 20
    #: graph mode with a language-aware plan (a dense channel next to BM25): the default's channels
    #: are fused by the plan into one ranking, then that ranking (weight 1) and the graph's (this
    #: weight) by RRF with ``stage_rrf_k`` (None: RetrievalConfig.rrf_k; an rrf_k set other than the
    #: default wins). 0.9 and 5: tuned on the HotpotQA tuning subset (docs/evaluation.md).
    #: Without a plan (BM25 only, or explicit channel weights) every channel is fused at once with
    #: ``fusion_weight`` / ``fusion_rrf_k``, as before.
    stage_weight: float = 0.9
    stage_rrf_k: int | None = 5
    #: ... and the first ``stage_keep_head`` of the default's ranking keep their places: the graph adds
    #: second hops below what the default ranks first (1: nDCG@10 0.881 -> 0.888 on the HotpotQA tuning
    #: subset, Recall@5 and both@5 unchanged; 2 lost Recall@2; docs/evaluation.md). 0: plain RRF.
    stage_keep_head: int = 1
    #: a chunk's score is its PPR mass / (weighted degree) ** chunk_degree_power (0: the mass itself)
    chunk_degree_power: float = 0.0
    #: the PPR store: ``inprocess`` (numpy/scipy CSR) or ``networkx`` (extra ``graph``; the same
    #: PageRank definition, slower; ``RAGSPINE_GRAPH_STORE``)
    store: str = "inprocess"

    def __post_init__(self) -> None:
        if self.store not in GRAPH_STORES:
            raise ConfigError(f"unknown graph store {self.store!r}; allowed: {', '.join(GRAPH_STORES)} (RAGSPINE_GRAPH_STORE)")
        if not 0.0 <= self.damping < 1.0:
            raise ConfigError(f"damping must be in [0, 1), got {self.damping}")
        for name in ("fusion_rrf_k", "stage_rrf_k"):
            k = getattr(self, name)
            if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
                raise ConfigError(f"{name} must be an integer >= 0 or None, got {k!r}")
        for name in ("fusion_weight", "stage_weight"):
            w = getattr(self, name)
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and w > 0):
                raise ConfigError(f"{name} must be a finite number > 0, got {w!r}")
        if not (math.isfinite(self.chunk_degree_power) and self.chunk_degree_power >= 0):
            raise ConfigError(f"chunk_degree_power must be a finite number >= 0, got {self.chunk_degree_power}")
        if not (math.isfinite(self.max_seed_share) and 0.0 < self.max_seed_share <= 1.0):
            raise ConfigError(f"max_seed_share must be in (0, 1] (1: no limit), got {self.max_seed_share}")
        if self.passage_seeds < 0 or self.max_entity_seeds < 0 or self.hub_min_chunks < 0 or self.stage_keep_head < 0:
            raise ConfigError("passage_seeds, max_entity_seeds, hub_min_chunks and stage_keep_head must be >= 0")
        unknown = [t for t, _ in self.type_weights if t not in EDGE_TYPES]
        if unknown:
            raise ConfigError(f"unknown edge type(s) {unknown}; allowed: {', '.join(EDGE_TYPES)}")
        if any(w < 0 or not math.isfinite(w) for _, w in self.type_weights):
            raise ConfigError("edge type weights must be finite and >= 0")


class GraphChannel(Channel):
    """Ranks chunk rows by their personalized PageRank mass from the query's seeds."""

    name = "graph"

    def __init__(self, library: Any, *, doc_weight: float = 2.0, backend: Any | None = None,
                 config: GraphChannelConfig = GraphChannelConfig()) -> None:
        import pyarrow.parquet as pq

        self.library = library
        self.config = config
        g = library.relation_graph()
        if g is None:
            raise IndexNotFoundError(f"library {library.library_id!r} has no relation graph: materialize the relation_graph "
                                     "asset (and index_manifest), or use --mode hybrid")
        directory = g.directory
        self.arrays = g
        tw = dict(DEFAULT_TYPE_WEIGHTS)
        tw.update(dict(config.type_weights))
        factor = np.asarray([tw.get(t, 1.0) for t in EDGE_TYPES], dtype=np.float64)
        w = np.asarray(g.weights, dtype=np.float64) * factor[np.asarray(g.etype)]
        self.store: Any
        if config.store == "networkx":
            from ragspine_core.graph.networkx_store import NetworkXGraphStore

            self.store = NetworkXGraphStore.from_csr(np.asarray(g.indptr), np.asarray(g.indices), w)
        else:
            self.store = InProcessGraphStore(g.indptr, g.indices, w)
        nodes = pq.read_table(directory / NODES_FILE, columns=["kind", "key", "label", "df", "chunk_row", "source"])
        n_ent = g.n_entities
        keys = nodes.column("key").to_pylist()[:n_ent]
        self._labels = nodes.column("label").to_pylist()[:n_ent]
        self._glossary = [s == "glossary" for s in nodes.column("source").to_pylist()[:n_ent]]
        df = np.asarray(nodes.column("df").to_numpy()[:n_ent], dtype=np.float64)
        n_chunks = max(int(g.params["counts"]["nodes"]["chunk"]), 1)
        self._idf = np.log1p(n_chunks / np.maximum(df, 1.0))
        self._hub = (df / n_chunks > config.max_seed_share) & (df >= config.hub_min_chunks)
        self._node_of = {k: i for i, k in enumerate(keys)}
        alias_path = directory / ALIASES_FILE
        if alias_path.is_file():
            al = pq.read_table(alias_path).to_pydict()
            for a, n in zip(al["alias"], al["node_id"]):
                self._node_of.setdefault(a, int(n))
        # a query is matched by its words (name_spans drops their commas and edge dots): every name is
        # also found under the key its words make ("Ringling, Montana" is asked as "ringling montana")
        for k, n in list(self._node_of.items()):
            if "," in k or "." in k:
                wk = " ".join(w for w in map(word_key, WORDS.findall(k)) if w)
                if wk and wk != k:
                    self._node_of.setdefault(wk, n)
        self._node_row = np.asarray(nodes.column("chunk_row").to_numpy(), dtype=np.int64)
        self._n_ent = n_ent
        rows_of_entries = np.repeat(np.arange(g.n_nodes, dtype=np.int64), np.diff(np.asarray(g.indptr)))
        deg = np.bincount(rows_of_entries, weights=w, minlength=g.n_nodes)[n_ent:]
        self._chunk_norm = (np.maximum(deg, 1e-12) ** -config.chunk_degree_power) if config.chunk_degree_power else None
        self._lexical = LexicalChannel(library, doc_weight) if config.passage_seeds else None
        self._dense = DenseChannel(library, backend) if (config.passage_seeds and backend is not None) else None
        self.default_weight = config.fusion_weight
        self.fusion_rrf_k = config.fusion_rrf_k

    def entity_seeds(self, query: str) -> dict[int, float]:
        """Entity node -> seed weight: the longest names found in the query, by specificity
        (hubs, named in more than ``max_seed_share`` of the chunks, left out)."""
        return self._entity_seeds(query)[0]

    def _entity_seeds(self, query: str) -> tuple[dict[int, float], list[int]]:
        """The seeds and the hub entities the query named (not seeds)."""
        found: dict[int, tuple[float, int, int]] = {}
        for key, i, j, cap in name_spans(query, capitalised_only=False):
            if key in STOP_WORDS or len(key) < 2:
                continue
            node = self._node_of.get(key)
            if node is None:
                continue
            # a lowercase single word ("artist") is no name, unless the glossary says so
            if not cap and self.config.capitalised_names and (j - i) < 2 and not self._glossary[node]:
                continue
            w = float(self._idf[node]) ** self.config.specificity_power
            if w > found.get(node, (0.0,))[0]:
                found[node] = (w, i, j)
        # a name inside a longer matched name ("Billy" in "Billy Martin") is dropped
        spans = [(i, j) for _, i, j in found.values() if i >= 0]
        seeds = {}
        for node, (w, i, j) in found.items():
            if i >= 0 and any(a <= i and j <= b and (b - a) > (j - i) for a, b in spans):
                continue
            seeds[node] = w
        hubs = sorted(n for n in seeds if self._hub[n])
        best = sorted(((n, w) for n, w in seeds.items() if not self._hub[n]), key=lambda kv: (-kv[1], kv[0]))
        return dict(best[: self.config.max_entity_seeds]), hubs

    def _passage_seeds(self, query: str, allowed: np.ndarray | None) -> dict[int, float]:
        seeds: dict[int, float] = {}
        chunk_node = self.arrays.chunk_node
        for ch in (self._lexical, self._dense):
            if ch is None:
                continue
            rows, _ = ch.search(query, self.config.passage_seeds, allowed)
            for rank, r in enumerate(rows.tolist(), start=1):
                node = int(chunk_node[r])
                if node >= 0:
                    seeds[node] = seeds.get(node, 0.0) + self.config.passage_seed_weight / rank
        return seeds

    def seeds(self, query: str, allowed: np.ndarray | None = None) -> dict[int, float]:
        ent = self.entity_seeds(query)
        total = sum(ent.values()) or 1.0
        out = {n: self.config.entity_seed_weight * w / total for n, w in ent.items()}
        for n, w in self._passage_seeds(query, allowed).items():
            out[n] = out.get(n, 0.0) + w
        return out

    def search(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        seeds = self.seeds(query, allowed)
        if not seeds:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        mass = self.store.personalized_pagerank(seeds, damping=self.config.damping)
        chunk_mass = mass[self._n_ent:]
        if self._chunk_norm is not None:
            chunk_mass = chunk_mass * self._chunk_norm
        rows = self._node_row[self._n_ent:]
        if allowed is not None:
            keep = allowed[rows]
            chunk_mass, rows = chunk_mass[keep], rows[keep]
        pos = chunk_mass > 0
        chunk_mass, rows = chunk_mass[pos], rows[pos]
        order = np.lexsort((rows, -chunk_mass))[:depth]
        return rows[order].astype(np.int64), chunk_mass[order].astype(np.float32)

    def describe(self, query: str, depth: int = 0, allowed: np.ndarray | None = None) -> str:
        """Which entities seeded the walk (names from open text and the glossary only)."""
        ent, hubs = self._entity_seeds(query)
        names = ", ".join(f"{self._labels[n]} ({w:.2f})" for n, w in sorted(ent.items(), key=lambda kv: (-kv[1], kv[0])))
        skipped = ", ".join(self._labels[n] for n in hubs)
        return (f"seed entities: {names or 'none'}"
                + (f"; hubs not seeded (named in > {self.config.max_seed_share:.0%} of chunks): {skipped}" if skipped else "")
                + f"; passage seeds: top {self.config.passage_seeds} per channel; damping {self.config.damping}")


def graph_withheld(ctx: ChannelContext) -> bool:
    """Whether the relation graph is withheld from this retriever's caller: its ceiling
    (``max_sensitivity``) is below an open row of the library. The graph's entities, their
    specificity and its edges are built over every open row, so a walk over it could carry
    what those rows say (docs/serving.md: per-ceiling graphs are not built)."""
    ceiling = getattr(ctx.config, "max_sensitivity", None)
    above = getattr(ctx.library, "has_rows_above", None)
    return ceiling is not None and (above is None or bool(above(ceiling)))


def _graph_factory(ctx: ChannelContext) -> "GraphChannel | OnDemandChannel | None":
    cfg = getattr(ctx.config, "graph", None) or GraphChannelConfig()
    if graph_withheld(ctx):
        if getattr(ctx.config, "mode", None) == "graph":
            raise ConfigError(f"mode graph: the relation graph of library {ctx.library.library_id!r} is derived from "
                              f"documents above this caller's ceiling ({ctx.config.max_sensitivity}), so it is not served "
                              "to it; ask in mode auto, hybrid or bm25")
        return None  # the multi-hop tier's on-demand graph channel is not built either
    if getattr(ctx.config, "mode", None) == "graph":
        return GraphChannel(ctx.library, doc_weight=ctx.config.doc_weight, backend=ctx.embedding_backend, config=cfg)
    if ctx.active_mode == "vector" or ctx.library.artifact_path("relation_graph") is None:
        return None
    # other modes: only the multi-hop tier's queries run it (opened on first use)
    return OnDemandChannel("graph", lambda: GraphChannel(ctx.library, doc_weight=ctx.config.doc_weight,
                                                         backend=ctx.embedding_backend, config=cfg), cfg.fusion_weight)


register_builtin_channel("graph", _graph_factory)
