"""Hybrid retrieval over one published library, and RRF routing over several.

Order of operations: metadata predicates (and, on the narrative path that
feeds snippets and prompts, "not RESTRICTED") → candidate mask; every channel the
library offers (:mod:`ragspine_query.pipeline.channels`: BM25 chunk field blended with
the document field, exact cosine when a dense channel is active, any registered one)
ranks the surviving rows only; weighted Reciprocal Rank Fusion
(:func:`~ragspine_query.fusion.weighted_rrf`); deterministic ties by ``chunk_id`` (rows
are assigned in ``chunk_id`` order, so ties break on row ascending). Hits load their
chunk text lazily, on first use.

(About 620 lines, one module on purpose: ``HybridRetriever``'s stages — mask, channel plan,
channels, fuse, per-channel scores — share the retriever's caches (masks, fusion plans, row
languages) and are read top to bottom as the order of operations above; ``RetrievalConfig``
is what configures them, and ``MultiIndexRetriever`` is the ~60-line RRF over several.)
"""

from __future__ import annotations

import math
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np

from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError
from ragspine_query.filters import Predicate, combined_mask, parse_filters
from ragspine_query.fusion import (DEFAULT_RRF_K, FusionPlan, fuse_mixed_languages, keep_head, plan_fusion, ranking_bounds, time_decayed, weighted_rrf,
                     weighted_score_fusion)
from ragspine_core.lexical.bm25_format import DEFAULT_DOC_WEIGHT
from ragspine_core.lexical.topk import top_k_rows
from ragspine_query.library import Follower, Library
from ragspine_query.limits import check_query
from ragspine_query.pipeline.channels import ChannelContext, DenseChannel, LexicalChannel, build_channels, selects
from ragspine_query.tree.config import DEFAULT_TREE_MODE, TreeConfig  # importing ragspine_query.tree registers the tree channel
from ragspine_query.pipeline.explain import NULL_TRACER, Candidate, Tracer, hit_candidates
from ragspine_query.pipeline.trace import tracing
from ragspine_query import graph as _graph  # noqa: F401  (importing ragspine_query.graph registers the graph channel)
from ragspine_query.graph.graph_channel import GraphChannelConfig
from ragspine_query.pipeline.state import SearchResult
from ragspine_core.records import SENSITIVITIES, Hit, lazy_hits, ranked_hits
from ragspine_core.text.language import LanguageProfile, query_language
from ragspine_core.runtime.kernels import query_kernels
from ragspine_core.runtime.threads import pin_query_threads
from ragspine_core.settings import Settings
from ragspine_query.backends import backend_for_library
from ragspine_query.modes import LEXICAL_MODES, normalize_mode

#: Channels fused *after* the language-aware plan of the others: the plan fuses the default's
#: channels into one ranking, then weighted RRF fuses that ranking (weight 1) with these
#: channels' (``GraphChannelConfig.stage_weight``, RRF k ``stage_rrf_k`` unless
#: ``RetrievalConfig.rrf_k`` is set). Graph mode thus keeps the default's fusion and adds the graph.
STAGED_CHANNELS = frozenset({"graph"})

_MASK_CACHE_SIZE = 32


def check_top_k(top_k: Any) -> int:
    """``top_k`` as an int, or :class:`ConfigError` for a negative or non-integer value."""
    if isinstance(top_k, bool):
        top_k = None
    try:
        value = operator.index(top_k)
    except TypeError:
        value = -1
    if value < 0:
        raise ConfigError(f"top_k must be a whole number >= 0, got {top_k!r}; e.g. --top-k 5")
    return value


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """Knobs of one retriever (validated). ``channel_weights``: fusion weight per channel
    name (a mapping or pairs; missing channels weigh 1.0).

    In ``auto`` mode without ``channel_weights`` the BM25/dense weights and ``rrf_k`` of
    each query come from the language-aware plan (:func:`~ragspine_query.fusion.plan_fusion`);
    ``hybrid`` (or explicit ``channel_weights``) fuses with these static values."""

    mode: str = "auto"
    depth: int = 100
    rrf_k: int = DEFAULT_RRF_K
    doc_weight: float = DEFAULT_DOC_WEIGHT
    channel_weights: Any = field(default=())
    #: time-decayed RRF (the Go retrieval seed's FuseOptions): each fused score times
    #: ``0.5 ** (age_days / half_life)`` of the chunk's ``valid_as_of``; 0 = off (the default)
    decay_half_life_days: float = 0.0
    #: the day ages are counted to (ISO ``YYYY-MM-DD``); empty = today
    decay_reference: str = ""
    #: the RAPTOR summary-tree channel: a :class:`~ragspine_query.tree.TreeConfig` or its
    #: mode ``off`` (the default) | ``collapsed`` | ``traversal``
    tree: Any = DEFAULT_TREE_MODE
    #: the graph channel's knobs in ``graph`` mode (a :class:`~ragspine_query.graph.GraphChannelConfig`; None = defaults)
    graph: Any = None
    #: the highest sensitivity this retriever may rank (``PUBLIC`` or ``INTERNAL``; None = every
    #: open row): rows above it, or with a sensitivity it does not know, leave the candidate mask
    #: before any channel ranks, whatever the filters (a hard constraint no retry relaxes)
    max_sensitivity: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", normalize_mode(self.mode))
        if self.max_sensitivity is not None:
            level = str(self.max_sensitivity).strip().upper()
            if level not in SENSITIVITIES[:-1]:
                raise ConfigError(f"max_sensitivity must be one of {', '.join(SENSITIVITIES[:-1])} "
                                  f"(RESTRICTED is never served), got {self.max_sensitivity!r}")
            object.__setattr__(self, "max_sensitivity", level)
        object.__setattr__(self, "tree", TreeConfig.of(self.tree))
        if not (math.isfinite(self.decay_half_life_days) and self.decay_half_life_days >= 0):
            raise ConfigError(f"decay_half_life_days must be a finite number >= 0 (0 = off), got {self.decay_half_life_days}")
        if self.decay_reference:
            from datetime import date

            try:
                date.fromisoformat(self.decay_reference)
            except ValueError:
                raise ConfigError(f"decay_reference must be an ISO date like 2025-06-30, got {self.decay_reference!r}") from None
        if self.depth <= 0:
            raise ConfigError(f"depth must be > 0, got {self.depth}")
        if self.rrf_k < 0:
            raise ConfigError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if not (math.isfinite(self.doc_weight) and self.doc_weight >= 0):
            raise ConfigError(f"doc_weight must be a finite number >= 0, got {self.doc_weight}")
        pairs = tuple(sorted(dict(self.channel_weights).items()))
        for name, w in pairs:
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0):
                raise ConfigError(f"channel weight for {name!r} must be a finite number > 0, got {w!r}")
        object.__setattr__(self, "channel_weights", tuple((str(n), float(w)) for n, w in pairs))

    def weight(self, channel: str) -> float:
        return cast("float", dict(self.channel_weights).get(channel, 1.0))


_DEFAULT_BACKEND: Any = object()  # "use the index's own embedding model" (the notebook default)
_NOTIFIED: set[str] = set()


def _default_backend(library: Library, mode: str, settings: Settings | None) -> Any | None:
    """The backend of the model the index was built with; BM25 (with a one-time notice)
    when its extra is missing and ``mode`` is ``auto``. ``settings`` complete the
    backend's spec; None: the :class:`Settings` defaults (the environment is read at an
    edge, ``Settings.from_env()``, and passed in)."""
    if library.embedding_model_id is None or mode in LEXICAL_MODES:
        return None
    if settings is None:
        settings = Settings()
    try:
        return backend_for_library(library, mode, strict=True, settings=settings)
    except ImportError as exc:
        if mode != "auto":
            raise ConfigError(f"retrieval mode {mode!r} needs the index's embedding model {library.embedding_model_id!r}: {exc}") from exc
        extra = getattr(exc, "extra", None)
        key = f"{library.embedding_model_id}"
        if key not in _NOTIFIED:
            _NOTIFIED.add(key)
            warnings.warn(
                f"library {library.library_id!r} has {library.embedding_model_id!r} vectors but the model's extra is not "
                f"installed ({exc}); searching with BM25 only. Install it with: pip install 'ragspine[{extra or 'embed-onnx'}]'",
                RuntimeWarning, stacklevel=3)
        return None


class HybridRetriever:
    """BM25 (+ dense, + registered channels) retrieval over one library with metadata pre-filtering.

    Without ``embedding_backend`` the index's own embedding model is used (``auto``
    mode falls back to BM25, with a one-time warning naming the extra, when the model's
    extra is missing), completed by ``settings`` (model folder, endpoint, key; default: the
    :class:`~ragspine_core.settings.Settings` defaults — nothing here reads the
    environment: an edge reads it once, ``Settings.from_env()``, and passes it; the CLI
    and :func:`~ragspine_query.builder.build_pipeline` pass the backend they built from
    their own settings); pass ``embedding_backend=None`` for BM25 only.
    """

    def __init__(self, library: Library, *, embedding_backend: Any | None = _DEFAULT_BACKEND, config: RetrievalConfig = RetrievalConfig(),
                 settings: Settings | None = None) -> None:
        self.library = library
        self.config = config
        # kept to rebuild this retriever over the library's current snapshot (follow)
        self._given = (embedding_backend, settings)
        self._follower = Follower()
        pin_query_threads(settings)  # the first retriever pins the pools (None: the Settings defaults)
        mode = config.mode
        emb_model = library.embedding_model_id
        if embedding_backend is _DEFAULT_BACKEND:
            embedding_backend = _default_backend(library, mode, settings)
        if mode in LEXICAL_MODES:
            embedding_backend = None
        elif mode in ("hybrid", "vector"):
            if embedding_backend is None or emb_model is None:
                raise ConfigError(
                    f"retrieval mode {mode!r} needs a dense channel: the library "
                    f"{library.library_id!r} has {'no embeddings (materialize chunk_embeddings with an embedding backend)' if emb_model is None else 'embeddings'}"
                    f"{'' if embedding_backend is not None else ' and no embedding backend was given (pip install ragspine[embed-onnx] or set RAGSPINE_EMBEDDING)'}"
                )
        elif emb_model is None:  # auto without vectors in the index
            embedding_backend = None
        if embedding_backend is not None and getattr(embedding_backend, "model_id", None) != emb_model:
            raise EmbeddingModelMismatchError(
                f"query embedding model {getattr(embedding_backend, 'model_id', None)!r} differs from the model "
                f"the index was built with ({emb_model!r}); use the same backend (RAGSPINE_EMBEDDING) or "
                "re-materialize chunk_embeddings"
            )
        self.embedding_backend = embedding_backend
        # the snapshot is immutable, so a predicate tuple always yields the same mask
        self._masks: dict[tuple[tuple[Predicate, ...], bool, int], np.ndarray | None] = {}
        self.channels = build_channels(ChannelContext(library, config, self.active_mode, embedding_backend))
        named = dict(config.channel_weights)  # else the channel's own default (graph: tuned, docs/evaluation.md)
        self._weights = [named.get(c.name, c.default_weight) for c in self.channels]
        # graph mode fuses with the graph channel's tuned RRF k unless the config sets its own
        own_k = [c.fusion_rrf_k for c in self.channels] if config.mode == "graph" else []
        self._rrf_k = next((k for k in own_k if k is not None), config.rrf_k) if config.rrf_k == DEFAULT_RRF_K else config.rrf_k
        # the second stage of a staged fusion (the default's fused ranking + the graph's): weight and k
        graph_cfg = config.graph or GraphChannelConfig()
        self._stage_weight = float(graph_cfg.stage_weight)
        self._stage_keep_head = int(graph_cfg.stage_keep_head)
        stage_k = graph_cfg.stage_rrf_k
        self._stage_rrf_k = (stage_k if stage_k is not None else config.rrf_k) if config.rrf_k == DEFAULT_RRF_K else config.rrf_k
        self._on_demand = any(c.on_demand for c in self.channels)
        self._profile: LanguageProfile | None = None
        self._plans: dict[tuple[str, tuple[str, ...]], FusionPlan] = {}  # see fusion_plan
        self._row_language: np.ndarray | None = None
        self._hidden: tuple[int, np.ndarray] | None = None  # (library generation, mask): see hidden_mask

    @property
    def language_profile(self) -> LanguageProfile:
        """How the library's open chunks divide between languages (counted once, lazily).

        RESTRICTED chunks are not counted: the plan, and the shares that explain and the
        eval JSON show, say nothing about them."""
        if self._profile is None:
            langs = self._row_languages()
            restricted = self.hidden_mask()
            self._profile = LanguageProfile.from_labels((langs[~restricted] if restricted.any() else langs).tolist())
        return self._profile

    def _row_languages(self) -> np.ndarray:
        if self._row_language is None:
            col = self.library.column("language")
            self._row_language = np.where(col == "", "en", col) if col.size else col
        return self._row_language

    def fusion_plan(self, query: str) -> FusionPlan | None:
        """The language-aware fusion plan for ``query`` (``auto`` mode, and the default's
        channels in ``graph`` mode), or None when the static configuration applies: another
        forced mode, explicit ``channel_weights``, or no dense channel next to BM25."""
        # graph mode plans the default's channels (the graph channel is fused after them, see search)
        names = tuple(c.name for c in self.channels if selects(query, c) and c.name not in STAGED_CHANNELS)
        if self.config.mode not in ("auto", "graph") or self.config.channel_weights or not {"bm25", "vector"} <= set(names):
            return None
        # the plan depends on the query only through its language (the profile is the
        # snapshot's): planned once per language and channel set
        key = (query_language(query), names)
        plan = self._plans.get(key)
        if plan is None:
            plan = plan_fusion(key[0], self.language_profile, list(names))
            if len(self._plans) < 64:
                self._plans[key] = plan
        return plan

    def _fuse_mixed(self, plan: FusionPlan, channels: list[Any], lists: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~ragspine_query.fusion.fuse_mixed_languages` over this query's channel rankings."""
        served = {c.name: c.languages for c in channels}
        cross = frozenset(c.name for c in channels if c.cross_lingual)
        return fuse_mixed_languages([(c.name, r, sc) for c, (r, sc) in zip(channels, lists)],
                                    row_language=self._row_languages(), query_language=plan.query_language,
                                    policy=plan.mixed, channel_languages=served, cross_lingual=cross)  # type: ignore[arg-type]

    def _fuse_planned(self, plan: FusionPlan | None, channels: list[Any], lists: list[Any], weights: list[Any], rrf_k: float,
                      top: int | None) -> tuple[Any, Any]:
        """``lists`` fused by ``plan``'s method (mixed, convex or RRF; no plan: RRF with ``weights``, ``rrf_k``)."""
        if plan is not None and plan.method == "mixed":
            return self._fuse_mixed(plan, channels, lists)
        if plan is not None and plan.method == "convex":
            return weighted_score_fusion(lists, weights=weights, depth=plan.depth, top=top)
        return weighted_rrf([r for r, _ in lists], weights=weights, rrf_k=rrf_k, top=top)

    @property
    def library_retrievers(self) -> Mapping[str, "HybridRetriever"]:
        """This retriever, under its library's id (the :class:`~ragspine_query.source.Source` protocol)."""
        return {self.library.library_id: self}

    @property
    def library_id(self) -> str:
        return self.library.library_id

    @property
    def active_mode(self) -> str:
        """``hybrid``, ``vector``, ``bm25`` or ``graph`` — what actually runs."""
        if self.config.mode == "graph":
            return "graph"
        if self.embedding_backend is None:
            return "bm25"
        return "vector" if self.config.mode == "vector" else "hybrid"

    # -- candidate mask ----------------------------------------------------------------
    def hidden_mask(self) -> np.ndarray:
        """Rows this retriever never ranks for a caller: RESTRICTED ones and, under a
        ``max_sensitivity`` ceiling, every row above it or of an unknown sensitivity (fails closed)."""
        generation = self.library.generation  # a newer snapshot withheld rows since: computed again
        if self._hidden is None or self._hidden[0] != generation:
            hidden = self.library.restricted_mask()
            if self.config.max_sensitivity is not None:  # the library's own rule for rows above a ceiling
                hidden = hidden | self.library.rows_above(self.config.max_sensitivity)
                hidden.setflags(write=False)
            self._hidden = (generation, hidden)
        return self._hidden[1]

    def allowed_mask(
        self, filters: Mapping[str, Any] | Sequence[Predicate] | None, *, include_restricted: bool = True
    ) -> np.ndarray | None:
        """Rows satisfying every predicate (None = every row); the last few masks are reused.

        With ``include_restricted=False`` RESTRICTED rows are removed too, *before* any
        channel ranks: visible ranks and fused scores then say nothing about them.
        """
        preds = parse_filters(filters, allowed_fields=self.library.filter_fields()) if filters else ()
        # a newer snapshot that withdraws documents changes the mask (Library.restricted_mask)
        key = (preds, include_restricted, int(getattr(self.library, "generation", 0)))
        if key in self._masks:
            return self._masks[key]
        mask: np.ndarray | None = None
        if preds:
            cols = {p.field: self.library.column(p.field) for p in preds}
            mask = combined_mask(preds, cols, self.library.n_chunks)
        if not include_restricted or self.config.max_sensitivity is not None:  # a ceiling holds even for an admin search
            restricted = self.library.restricted_mask() if self.config.max_sensitivity is None else self.hidden_mask()
            if restricted.any():
                mask = ~restricted if mask is None else (mask & ~restricted)
        if mask is not None:
            mask.setflags(write=False)
        if len(self._masks) >= _MASK_CACHE_SIZE:
            self._masks.pop(next(iter(self._masks)), None)
        self._masks[key] = mask
        return mask

    # -- channels (kept for callers of the old methods) -----------------------------------
    def lexical(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The ``bm25`` channel: chunk field + ``doc_weight`` × document field (exact, pruned)."""
        return LexicalChannel(self.library, self.config.doc_weight).search(query, depth, allowed)

    def dense(self, query: str, depth: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The ``vector`` channel: exact cosine over the allowed rows."""
        if self.embedding_backend is None:
            return top_k_rows(np.zeros(0, np.int64), np.zeros(0, np.float32), 0)
        return DenseChannel(self.library, self.embedding_backend).search(query, depth, allowed)

    # -- reopening -------------------------------------------------------------------
    def follow(self) -> bool:
        """Reopen the library's current snapshot when this retriever's snapshot must stop
        serving (:class:`~ragspine_query.library.Follower`, the one mechanism: a file changed,
        truncated or removed since open, the background check found damage, or the folder was
        pruned or quarantined, and ``current`` names other files). The query that finds the
        damage fails with the located error (:meth:`Library.ensure_verified`); the first query
        after ``current`` names intact files answers from them, without a restart. True when
        it reopened (every cache of this retriever is rebuilt with it).

        Raises:
            RagspineError: ``current`` cannot be opened either (its own located error, after
                what happened to this reader's snapshot).
        """
        def install(library: Library) -> None:
            fresh = HybridRetriever(library, embedding_backend=self._given[0], config=self.config, settings=self._given[1])
            fresh._follower = self._follower
            self.__dict__.update(fresh.__dict__)

        return self._follower.follow(lambda: self.library, install)

    _follow = follow

    # -- public verbs ----------------------------------------------------------------
    #: records its mask, channel and fuse stages into the trace in progress (:mod:`~ragspine_query.pipeline.trace`)
    traces_itself = True

    def prefetch_queries(self, queries: Sequence[str]) -> int:
        """Embed, ahead of :meth:`search`, the texts ``queries`` (a query's variants) will
        give this retriever's dense channels: one batched call per model for the texts it
        has not embedded yet in this process (:mod:`ragspine_core.dense.query_vectors`);
        the searches then read the vectors back. Same channels and texts as
        :meth:`search` plans (a channel the language plan weighs 0 embeds nothing).
        Returns the number of texts handed to the models."""
        wanted: dict[int, tuple[Any, dict[str, None]]] = {}
        for q in queries:
            channels, _, texts, _, _ = self._channel_plan(q, NULL_TRACER)
            for ch, text in zip(channels, texts):
                model = getattr(ch, "model", None) if isinstance(ch, DenseChannel) else None
                if model is not None:
                    wanted.setdefault(id(model), (model, {}))[1][str(text)] = None
        if not wanted:  # BM25 only: nothing to embed (and the dense package is not imported)
            return 0
        from ragspine_core.dense.query_vectors import query_vectors

        n = 0
        for model, distinct in wanted.values():
            query_vectors(model, list(distinct))
            n += len(distinct)
        return n

    def search(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | Sequence[Predicate] | None = None,
        top_k: int = 10,
        include_restricted: bool = True,
        explain: bool = False,
    ) -> SearchResult:
        """Top-``top_k`` hits (a list; ``.explain`` is set when ``explain=True``; ``.to_frame()``).

        ``include_restricted=True`` (the default, for evaluation and admin use) keeps
        RESTRICTED hits, which must be stripped at the exits; ``False`` removes them
        before ranking, as the narrative path (snippets, prompts) does.

        The stages, in order: :meth:`_mask_stage` (filters, RESTRICTED, a variant's
        language) → :meth:`_channel_plan` (which channels, their weights and texts) →
        :meth:`_channels_stage` (each channel ranks the allowed rows) →
        :meth:`_fuse_stage` (weighted RRF / language-aware fusion, time decay, each
        channel's score of the top hits).

        Raises:
            ConfigError: ``top_k`` is negative.
            QueryError: the query is outside the limits of :mod:`ragspine_query.limits`
                (too long, too many words, nothing searchable).
        """
        check_query(query)
        top_k = check_top_k(top_k)
        self.follow()  # a snapshot found damaged or removed: reopen the library's current one
        self.library.ensure_verified()  # the background pass over the large files (library.py) found no damage
        with tracing(explain) as tracer:
            hits = self._search(query, filters, top_k, include_restricted, tracer)
            return SearchResult(hits, tracer.freeze(query) if explain else None)

    def _search(self, query: str, filters: Any, top_k: int, include_restricted: bool, tracer: Tracer) -> list[Hit]:
        if top_k == 0:
            return []
        allowed = self._mask_stage(query, filters, include_restricted, tracer)
        if allowed is not None and not allowed.any():
            return []
        channels, weights, texts, plan, rrf_k = self._channel_plan(query, tracer)
        decay = self.config.decay_half_life_days > 0
        # one channel: the fused order is the channel's order, so its top_k is enough (an
        # explained query takes the general path, whose trace shows the channel's whole ranking and the fusion)
        depth = top_k if (len(channels) == 1 and not tracer.enabled and not decay) else max(self.config.depth, top_k)
        if plan is not None and plan.method in ("convex", "mixed"):  # its normalisation range is fixed, whatever top_k
            depth = max(depth, plan.depth if plan.method == "convex" else plan.mixed.depth)  # type: ignore[union-attr]  # a mixed plan has its policy
        lists, via_of = self._channels_stage(channels, texts, depth, allowed, tracer)
        if not tracer.enabled and len(lists) == 1 and (plan is None or plan.method != "mixed") and weights[0] > 0 and not decay and not via_of:
            # one channel: its order is the fused order and RRF is w / (k + rank) (what
            # weighted_rrf returns for one list, computed without the general machinery)
            rows, scores = lists[0]
            order = rows[:top_k].tolist()
            # hits read their id, scores and chunk from the ranking on first use
            return ranked_hits(self.library.chunks_by_rows, order, self.library.chunk_ids(), channels[0].name,
                               scores[: len(order)].tolist(), weight=weights[0], rrf_k=rrf_k)
        return self._fuse_stage(query, plan, channels, weights, lists, via_of, rrf_k, top_k, tracer)

    def _mask_stage(self, query: str, filters: Any, include_restricted: bool, tracer: Tracer) -> np.ndarray | None:
        """The candidate mask: the filters, RESTRICTED rows unless included, and — for a
        variant that ranks its own language only, in a mixed library — that language."""
        t0 = tracer.clock()
        allowed = self.allowed_mask(filters, include_restricted=include_restricted)
        if getattr(query, "language_only", False) and self.language_profile.mixed:
            same = self._row_languages() == query_language(query)  # a variant ranks its own language only
            allowed = same if allowed is None else (allowed & same)
        def detail() -> str:
            # counted over the rows the caller may see: the library's RESTRICTED rows are no number here
            n_all = self.library.n_chunks
            if self.config.max_sensitivity is not None:  # and, under a ceiling, the rows above it are none either
                n_all -= int(np.count_nonzero(self.hidden_mask()))
            elif not include_restricted:
                n_all -= int(np.count_nonzero(self.library.restricted_mask()))
            return f"{n_all if allowed is None else int(np.count_nonzero(allowed))} of {n_all} rows allowed"

        tracer.add("mask", "filters" + ("" if include_restricted else "+not-restricted"), tracer.since(t0), query=query,
                   detail=detail)
        return allowed

    def _channel_plan(self, query: str, tracer: Tracer) -> tuple[list[Any], list[float], list[str], FusionPlan | None, float]:
        """``(channels, weights, texts, plan, rrf_k)`` for ``query``: on-demand channels only
        when the query names them, a :class:`~ragspine_query.transforms.transform.ChannelQuery`'s
        per-channel text, and the language-aware plan's weights (a channel weighted 0 is not run)."""
        channels, weights, texts = self.channels, self._weights, [query] * len(self.channels)
        if self._on_demand:  # the tiers' graph/tree channels run only for the queries that name them
            picked: list[Any] = [(c, w) for c, w in zip(channels, weights) if selects(query, c)]
            channels, weights, texts = [p[0] for p in picked], [p[1] for p in picked], [query] * len(picked)
        for_channel = getattr(query, "for_channel", None)
        if for_channel is not None:  # a ChannelQuery (transforms, tiers): per-channel text, or skip
            picked = [(c, w, for_channel(c.name)) for c, w in zip(channels, weights)]
            picked = [p for p in picked if p[2] is not None]
            if picked:
                channels, weights, texts = [p[0] for p in picked], [p[1] for p in picked], [p[2] for p in picked]
        rrf_k: float = self._rrf_k
        plan = self.fusion_plan(query)
        if plan is not None:  # language-aware weights; a channel weighted 0 is not run at all
            picked = [(c, plan.weight(c.name, w), t) for c, w, t in zip(channels, weights, texts)]
            for c, w, _ in picked:
                if w <= 0:
                    tracer.add("channel", c.name, 0.0, query=query, detail=f"skipped: weight 0 — {plan.describe()}")
            picked = [p for p in picked if p[1] > 0] or picked[:1]
            channels, weights, texts = [p[0] for p in picked], [p[1] for p in picked], [p[2] for p in picked]
            rrf_k = plan.rrf_k
        return list(channels), list(weights), list(texts), plan, rrf_k

    def _channels_stage(self, channels: list[Any], texts: list[str], depth: int, allowed: np.ndarray | None,
                        tracer: Tracer) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[int, str]]:
        """Each channel's ranking of the allowed rows (``search``, or ``search_with_via``
        for a channel that declares ``reaches_via``) and each row's ``via`` node."""
        lists: list[tuple[np.ndarray, np.ndarray]] = []
        via_of: dict[int, str] = {}  # row -> the summary-tree node it was reached through (first channel wins)
        for ch, text in zip(channels, texts):
            t0 = tracer.clock()
            if ch.reaches_via:  # the tree channel: node hits answered by leaves
                rows, scores, vias = ch.search_with_via(text, depth, allowed)
                for r, v in zip(rows.tolist(), vias):
                    if v:
                        via_of.setdefault(r, v)
            else:
                rows, scores = ch.search(text, depth, allowed)
            if allowed is not None and rows.size:  # a plugin channel must honour the mask too
                keep = allowed[rows]
                if not keep.all():
                    rows, scores = rows[keep], scores[keep]
            lists.append((rows, scores))
            tracer.add("channel", ch.name, tracer.since(t0), lambda: self._candidates(rows, scores), query=text,
                       detail=lambda: ch.describe(text, depth, allowed) or "")  # e.g. the tree channel's `via` nodes
        return lists, via_of

    def _fuse_stage(self, query: str, plan: FusionPlan | None, channels: list[Any], weights: list[float],
                    lists: list[tuple[np.ndarray, np.ndarray]], via_of: dict[int, str], rrf_k: float, top_k: int,
                    tracer: Tracer) -> list[Hit]:
        """The channels' rankings fused (weighted RRF, or the plan's convex / mixed-language
        fusion; time decay when on) into the top ``top_k`` hits with each channel's score."""
        names = [c.name for c in channels]
        decay = self.config.decay_half_life_days > 0
        t0 = tracer.clock()
        staged = [i for i, c in enumerate(channels) if c.name in STAGED_CHANNELS] if plan is not None else []
        fused_rows: Any
        fused: Any
        if staged:
            # the default's channels fused as the default fuses them (whole ranking), then that
            # ranking and the graph's by weighted RRF: what the default finds stays, the graph adds
            base = [i for i in range(len(channels)) if i not in staged]
            base_rows, _ = self._fuse_planned(plan, [channels[i] for i in base], [lists[i] for i in base],
                                              [weights[i] for i in base], rrf_k, None)
            for i in staged:
                weights[i] = self._stage_weight
            fused_rows, fused = weighted_rrf([base_rows] + [lists[i][0] for i in staged],
                                             weights=[1.0] + [weights[i] for i in staged], rrf_k=self._stage_rrf_k,
                                             top=None if decay else top_k)
            fused_rows, fused = keep_head(base_rows, fused_rows, fused, self._stage_keep_head)
        else:
            fused_rows, fused = self._fuse_planned(plan, channels, lists, weights, rrf_k, None if decay else top_k)
        if decay:
            fused_rows, fused = time_decayed(fused_rows, fused, self.library.column("valid_as_of"),
                                             half_life_days=self.config.decay_half_life_days, reference=self.config.decay_reference)
        order = fused_rows[:top_k].tolist()
        fused_top = fused[:top_k].tolist()
        per_channel = self._channel_scores(names, lists, fused_rows, order, top_k, decay, plan)
        score_dicts = []
        for d, f in zip(per_channel, fused_top):
            sd = {"bm25": d.pop("bm25", 0.0), "vector": d.pop("vector", 0.0)}
            sd.update(d)
            sd["fused"] = f
            score_dicts.append(sd)
        ids = self.library.chunk_ids()
        vias = [via_of.get(r, "") for r in order] if via_of else None
        hits = lazy_hits(self.library.chunks_by_rows, order, [ids[r] for r in order], fused_top, score_dicts, vias)
        tracer.add("fuse", "rrf(channels)" + ("+time-decay" if decay else ""), tracer.since(t0), lambda: hit_candidates(hits),
                   query=query, detail=lambda: self._fuse_detail(plan, names, weights, staged, rrf_k, decay, vias))
        if len(lists) > 1 and tracer.enabled:  # what each channel pulled in that no other channel found
            shown = {name: set(r.tolist()) for name, (r, _) in zip(names, lists)}
            for name in names:
                others = set().union(*(v for k, v in shown.items() if k != name))
                only = [h for h, r in zip(hits, order) if r in shown[name] and r not in others]
                tracer.add("only_in", name, 0.0, [c for c in hit_candidates(hits) if c.chunk_id in {h.chunk_id for h in only}],
                           query=query, detail=f"{len(only)} of the top {len(order)} found by {name} alone")
        return hits

    def _fuse_detail(self, plan: FusionPlan | None, names: list[str], weights: list[float], staged: list[int], rrf_k: float,
                     decay: bool, vias: list[str] | None) -> str:
        """What ``explain`` says of the fusion: the plan or the weights, the graph stage, decay, tree nodes."""
        shown_via = [f"#{i}←{v[:13]}" for i, v in enumerate(vias or (), start=1) if v][:5]
        staged_detail = "".join(f"; then rrf(default, {names[i]}) k={self._stage_rrf_k} weights default=1 {names[i]}={weights[i]:g}"
                                for i in staged) + (f"; the default's first {self._stage_keep_head} kept first"
                                                    if staged and self._stage_keep_head else "")
        return ((f"language-aware {plan.describe()}{staged_detail}" if plan is not None
                 else f"k={rrf_k} weights={dict(zip(names, weights))}")
                + (f" half_life={self.config.decay_half_life_days}d" if decay else "")
                + (f" via tree nodes: {' '.join(shown_via)}" if shown_via else ""))

    def _channel_scores(self, names: list[str], lists: list[tuple[np.ndarray, np.ndarray]], fused_rows: np.ndarray,
                        order: list[int], top_k: int, decay: bool, plan: FusionPlan | None) -> list[dict[str, float]]:
        """Each channel's own score of each top row (absent when the channel did not rank it)."""
        per_channel: list[dict[str, float]] = [{} for _ in order]
        jit = query_kernels()
        if len(lists) == 1 and len(order) <= lists[0][1].shape[0] and not decay and (plan is None or plan.method != "mixed"):
            name = names[0]
            for d, s in zip(per_channel, lists[0][1][: len(order)].tolist()):
                d[name] = s
        elif jit is not None and order and all(s.dtype.kind == "f" and s.shape == r.shape for r, s in lists):
            # each channel's score of the top rows in one GIL-free loop (the numpy lookup
            # below gives the same dicts)
            vals, found = jit.pick_scores(np.ascontiguousarray(fused_rows[:top_k], dtype=np.int64),
                                          np.concatenate([r for r, _ in lists], dtype=np.int64),
                                          np.concatenate([s for _, s in lists], dtype=np.float64), ranking_bounds([r for r, _ in lists]))
            for d, has, vs in zip(per_channel, found.tolist(), vals.tolist()):
                for name, h, v in zip(names, has, vs):
                    if h:
                        d[name] = v
        else:
            pos = {r: i for i, r in enumerate(order)}
            top = np.sort(np.asarray(order, dtype=np.int64))
            for name, (rows, scores) in zip(names, lists):
                if not rows.size or not top.size:
                    continue
                # the few rows of this channel that made the top_k, found in numpy (a Python
                # loop over every one of its `depth` rows held the GIL for ~60 µs a channel)
                at = np.minimum(np.searchsorted(top, rows), top.shape[0] - 1)
                hit = np.flatnonzero(top[at] == rows)
                for r, s in zip(rows[hit].tolist(), scores[hit].tolist()):
                    per_channel[pos[r]][name] = s
        return per_channel

    def _candidates(self, rows: np.ndarray, scores: np.ndarray) -> list[Candidate]:
        ids = self.library.chunk_ids()
        sens = self.library.column("sensitivity")
        lib = self.library.library_id
        return [Candidate(i, ids[r], lib, float(s), str(sens[r])) for i, (r, s) in enumerate(zip(rows.tolist(), scores.tolist()), start=1)]


Router = Callable[[str], Sequence[str]]


class MultiIndexRetriever:
    """Route a query to libraries, search each independently, fuse with weighted RRF.

    If the router raises or returns nothing usable, every library is searched (the safe
    availability fallback). Hits keep their ``library_id``; ties break on
    ``(chunk_id, library)``. ``weights`` (by library) default to 1.0.
    """

    def __init__(self, retrievers: Mapping[str, HybridRetriever], *, router: Router | None = None, rrf_k: int = DEFAULT_RRF_K,
                 weights: Mapping[str, float] | None = None) -> None:
        if not retrievers:
            raise ConfigError("MultiIndexRetriever needs at least one library")
        self.retrievers = dict(sorted(retrievers.items()))
        self.router = router
        self.rrf_k = rrf_k
        self.weights = dict(weights or {})

    def route(self, query: str) -> list[str]:
        if self.router is None:
            return list(self.retrievers)
        try:
            chosen = [lib for lib in self.router(query) if lib in self.retrievers]
        except Exception:  # routing failure must not lose availability
            chosen = []
        return chosen or list(self.retrievers)

    traces_itself = True

    @property
    def library_retrievers(self) -> Mapping[str, HybridRetriever]:
        """The retrievers searched, by library id (the :class:`~ragspine_query.source.Source` protocol)."""
        return self.retrievers

    def follow(self) -> bool:
        """:meth:`HybridRetriever.follow` for every library, before routing (the router's
        profiles are then those of the snapshots searched). A library whose current snapshot
        cannot be opened either is left as it is: its own search raises the located error
        when the query is routed to it. True when one reopened."""
        from ragspine_query.source import follow

        return any([follow(r) for r in self.retrievers.values()])  # every one (a list, not a short-circuit)

    def prefetch_queries(self, queries: Sequence[str]) -> int:
        """:meth:`HybridRetriever.prefetch_queries` for every library the queries route to."""
        libs: dict[str, None] = {}
        for q in queries:
            libs.update(dict.fromkeys(self.route(q)))
        return sum(self.retrievers[lib].prefetch_queries(queries) for lib in libs)

    def search(self, query: str, *, filters: Mapping[str, Any] | Sequence[Predicate] | None = None, top_k: int = 10, include_restricted: bool = True,
               explain: bool = False) -> SearchResult:
        """Route, search every chosen library (each records its own stages when traced),
        fuse the libraries' rankings with weighted RRF. The query limits apply (:mod:`ragspine_query.limits`)."""
        check_query(query)
        top_k = check_top_k(top_k)
        self.follow()  # before routing: a reopened library is profiled and searched as what it is now
        with tracing(explain) as tracer:
            hits = self._search(query, filters, top_k, include_restricted, tracer)
            return SearchResult(hits, tracer.freeze(query) if explain else None)

    def _search(self, query: str, filters: Any, top_k: int, include_restricted: bool, tracer: Tracer) -> list[Hit]:
        t0 = tracer.clock()
        libs = self.route(query)
        tracer.add("route", type(self.router).__name__ if self.router else "all", tracer.since(t0), query=query,
                   detail=lambda: self._route_detail(query, libs))
        rankings: dict[str, list[tuple[str, str]]] = {}
        best: dict[tuple[str, str], Hit] = {}
        for lib in libs:
            res = self.retrievers[lib].search(query, filters=filters, top_k=max(top_k, 50), include_restricted=include_restricted)
            rankings[lib] = [(h.chunk_id, lib) for h in res]
            for h in res:
                best[(h.chunk_id, lib)] = h
        t0 = tracer.clock()
        keys, scores = weighted_rrf(rankings, weights=self.weights, rrf_k=self.rrf_k)
        hits = [best[k].with_score(s, fused=s) for k, s in zip(keys[:top_k], scores[:top_k])]
        tracer.add("fuse", "rrf(libraries)", tracer.since(t0), lambda: hit_candidates(hits), query=query)
        return hits

    def _route_detail(self, query: str, libs: list[str]) -> str:
        """The libraries routed to, and why when the router can say (``ProfileRouter.decide``)."""
        decide = getattr(self.router, "decide", None)
        why = ""
        if decide is not None:
            try:
                why = decide(query)[1]
            except Exception:  # the route itself fell back to every library
                why = "the router failed: every library"
        return ", ".join(libs) + (f" ({why})" if why else "")
