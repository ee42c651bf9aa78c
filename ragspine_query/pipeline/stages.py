"""The query pipeline: an explicit list of stages, run in order by one loop.

``extract_filters → gate → transforms → gate(variants) → retrieve → rerank → postprocess
→ cut → postprocess(final) → restricted_strip → filter_fallback → corrective``

(:func:`~ragspine_query.intelligence.query_stages` builds the list; :func:`core_stages`
is the retrieval part, from the gate to the RESTRICTED strip.)

* the **gate** (optional, :mod:`ragspine_core.gate`) refuses a query naming a glossary
  competitor before anything runs, and drops generated variants that name one; a
  refusal is ``SearchResult.refusal``, not a silent empty list;
* a **transform** turns the query into variants (the first is the query itself), e.g.
  the glossary multi-query rewriter; registered ones run after the explicit ones;
* **retrieve**: mask → channels → fuse run inside the source (a
  :class:`~ragspine_query.retriever.HybridRetriever` or ``MultiIndexRetriever``), once
  per variant, with RESTRICTED rows already out of the candidate mask on the narrative
  path; variants are fused with :func:`~ragspine_query.fusion.weighted_rrf`;
* **rerank**: an optional local reranker, or the listwise LLM judge;
* **post-processors** (MMR, dedupe, …) see the deep list and may reorder or drop hits;
  one with ``final = True`` (lost-in-the-middle, compression) sees the final ``top_k``;
  a transform may return a list with a ``note`` and a post-processor may have a
  ``describe`` string: both show in ``explain``;
* the **RESTRICTED strip** is the last guard before snippets (anything a plugin let in
  is dropped here);
* filter extraction and corrective retrieval (:mod:`ragspine_query.filter_extraction`,
  :mod:`ragspine_query.corrective`) are stages too: one that must run the stages before
  it again calls :meth:`QueryState.rerun`.

A stage is added by listing it (:meth:`QueryPipeline.from_stages`), not by wrapping the
pipeline. (Why one module of ~600 lines: the result types, the state, the built-in stages
and the loop that runs them are read together; the query-intelligence stages live with
their logic in :mod:`ragspine_query.filter_extraction` and :mod:`ragspine_query.corrective`.) Tracing goes through a context variable (:mod:`.trace`). Transforms and
post-processors are protocols with registries (:mod:`.plugins`: :data:`TRANSFORMS`,
:data:`POSTPROCESSORS`, :func:`register_transform`, :func:`register_postprocessor`,
re-exported here, their old home; and :func:`~ragspine_query.pipeline.channels.register_channel`).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar, cast

from ragspine_query.fusion import DEFAULT_RRF_K, weighted_rrf
from ragspine_core.records import Hit, hits_to_frame
from ragspine_core.text.language import query_language
from ragspine_core.text.normalize import normalize_query
from ragspine_query.transforms.transform import in_language_of
from ragspine_query.cache import generation_of, invalidate_library, scope_of
from ragspine_query.pipeline.explain import Explain, hit_candidates, now
from ragspine_query.pipeline.trace import current_tracer, tracing
from ragspine_query.source import Source
from ragspine_query.pipeline.plugins import (  # noqa: F401 - the registries' names are re-exported from their old home
    POSTPROCESSORS, TRANSFORMS, PostProcessor, Transform, always_postprocessors, always_transforms, register_postprocessor,
    register_transform, registered_postprocessors, registered_transforms, unregister_postprocessor, unregister_transform)

if TYPE_CHECKING:
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.rerank.listwise import ListwiseJudge, ListwiseReranker


#: Whether a query variant (glossary alias, rewrite) ranks only rows in the user's query's
#: language. Every variant is *planned* in that language either way (so the mixed-language
#: fusion admits another language's rows only when they earn it). Measured on the sample's
#: judged set with glossary multi-query on: planned in the query's language and ranking
#: every row 0.8368, ranking only the query language's rows 0.8281 (docs/evaluation.md).
VARIANTS_OWN_LANGUAGE_ONLY = False


_R = TypeVar("_R")


def dropped_filter_records(predicates: Any, origin: str, why: str) -> tuple[dict[str, Any], ...]:
    """``{field, op, value, origin, why}`` of each dropped predicate (``origin``: ``caller`` or
    ``extracted``): what :attr:`SearchResult.dropped_filters` holds."""
    from ragspine_query.filters import parse_filters

    preds = parse_filters(predicates) if predicates else ()
    return tuple({"field": p.field, "op": p.op, "value": list(p.value) if isinstance(p.value, tuple) else p.value,
                  "origin": origin, "why": why} for p in preds)


class SearchResult(list[Any]):
    """A list of :class:`Hit` (best first) plus ``explain`` (when asked for) and ``to_frame()``.

    ``refusal`` is a :class:`~ragspine_core.gate.Refusal` (why nothing was retrieved: a
    competitor query, an ungroundable one) or None; a refused result holds no hits.

    Through a query pipeline (:func:`~ragspine_query.intelligence.build_query_pipeline`)
    every result also carries ``tier`` (the retrieval tier that ran: ``direct``,
    ``semantic``, ``multi_hop``, ``global``, ``multi_part``), ``confidence`` (a
    :class:`~ragspine_query.assessment.Confidence`: grade ``high|medium|low`` and score),
    ``needs_refinement``, ``filters`` (the extracted filters' outcome, or None) and
    ``dropped_filters``: every filter a fallback or retry dropped to produce this result, as
    dicts ``{field, op, value, origin: caller | extracted, why}`` (empty when none was).
    """

    __slots__ = ("explain", "refusal", "tier", "confidence", "needs_refinement", "filters", "dropped_filters")

    def __init__(self, hits: Sequence[Hit] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(hits)
        self.explain = explain
        self.refusal = refusal
        self.tier: str | None = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.filters: Any = None
        self.dropped_filters: tuple[dict[str, Any], ...] = ()

    def carry(self: _R, other: Any) -> _R:
        """Copy ``other``'s tier, confidence, needs_refinement, filters and dropped filters onto this result."""
        for name in ("tier", "confidence", "needs_refinement", "filters"):
            value = getattr(other, name, None)
            if value is not None:
                setattr(self, name, value)
        dropped = tuple(getattr(other, "dropped_filters", ()) or ())
        if dropped:
            setattr(self, "dropped_filters", tuple(getattr(self, "dropped_filters", ())) + dropped)
        return self

    def to_frame(self) -> Any:
        """A pandas DataFrame with provenance columns (see :func:`hits_to_frame`)."""
        return hits_to_frame(self)


class Snippets(list[Any]):
    """A list of snippet dicts plus ``explain`` (when asked for), ``refusal``, ``tier``,
    ``confidence``, ``needs_refinement``, ``filters``, ``dropped_filters`` (see :class:`SearchResult`) and ``to_frame()``."""

    __slots__ = ("explain", "refusal", "tier", "confidence", "needs_refinement", "filters", "dropped_filters")

    def __init__(self, snippets: Sequence[dict[str, Any]] = (), explain: Explain | None = None, refusal: Any = None) -> None:
        super().__init__(snippets)
        self.explain = explain
        self.refusal = refusal
        self.tier: str | None = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.filters: Any = None
        self.dropped_filters: tuple[dict[str, Any], ...] = ()

    carry = SearchResult.carry

    def to_frame(self) -> Any:
        return hits_to_frame(self)


def _transform_detail(variants: list[Any], out: Any) -> str:
    note = getattr(out, "note", "")  # a transform may say why it did nothing
    return " | ".join(variants) + (f" ({note})" if note else "")


def _is_restricted(hit: Hit) -> bool:
    return hit.chunk.is_restricted


# -- the state one run of the stage list carries ------------------------------------------
class QueryState:
    """What one run of a pipeline's stage list carries from stage to stage.

    ``query``, ``caller_filters`` (the filters this run was asked for), ``filters`` (what
    retrieval applies: the caller's, plus extracted predicates), ``top_k``,
    ``include_restricted``, ``extract`` (whether filter extraction may run), then what
    stages fill in: ``variants``, ``tier``, ``hits``, ``refusal``, ``applied_filters``,
    ``extraction`` (the predicates a filter stage applied, for its fallback),
    ``confidence``, ``needs_refinement`` and ``dropped_filters`` (see :class:`SearchResult`).

    A stage that must run the stages before it again (the filter fallback, corrective
    retrieval) calls :meth:`rerun`; the pipeline sets what that runs.
    """

    __slots__ = ("query", "caller_filters", "filters", "top_k", "include_restricted", "extract", "variants", "tier",
                 "hits", "refusal", "applied_filters", "extraction", "confidence", "needs_refinement", "dropped_filters",
                 "_rerun")

    def __init__(self, query: Any, filters: Any, top_k: int, include_restricted: bool, *, extract: bool = True,
                 tier: str | None = None) -> None:
        self.query = query
        self.caller_filters = filters
        self.filters = filters
        self.top_k = top_k
        self.include_restricted = include_restricted
        self.extract = extract
        self.variants: list[Any] = [query]
        self.tier = tier
        self.hits: list[Hit] = []
        self.refusal: Any = None
        self.applied_filters: Any = None
        self.extraction: Any = None
        self.confidence: Any = None
        self.needs_refinement: bool | None = None
        self.dropped_filters: tuple[dict[str, Any], ...] = ()
        self._rerun: Callable[..., "QueryState"] | None = None

    def rerun(self, query: Any, filters: Any, *, extract: bool = True, after: Any = None) -> "QueryState":
        """A fresh run of the stages before the current one (after stage ``after`` when
        given) for ``query`` and ``filters``: its final state."""
        if self._rerun is None:
            raise RuntimeError("rerun() is only available while a pipeline runs its stages")
        return self._rerun(query, filters, extract, after)

    def result(self, explain: Explain | None = None) -> SearchResult:
        """The state as a :class:`SearchResult` (hits, refusal, tier, confidence, filters)."""
        res = SearchResult(self.hits, explain, self.refusal)
        res.tier = self.tier
        res.confidence = self.confidence
        res.needs_refinement = self.needs_refinement
        res.filters = self.applied_filters
        res.dropped_filters = tuple(self.dropped_filters)
        return res


class Stage:
    """One step of a :class:`QueryPipeline`: ``stage(state) -> state``.

    Declared abilities (class attributes, never probed): ``name`` (shown in ``explain``
    and in :meth:`QueryPipeline.describe`), ``after_refusal`` (runs even when an earlier
    stage refused the query: the filter fallback and corrective retrieval do, retrieval
    does not).
    """

    name = "stage"
    after_refusal = False

    def __call__(self, state: QueryState) -> QueryState:  # pragma: no cover - the protocol
        raise NotImplementedError


class GateStage(Stage):
    """The competitor gate on the user's query: a refusal ends retrieval (``SearchResult.refusal``)."""

    name = "gate"

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def __call__(self, state: QueryState) -> QueryState:
        t0 = now()
        refusal = self.gate.check(state.query)
        current_tracer().add("gate", type(self.gate).__name__, now() - t0, query=state.query,
                             detail=lambda: f"refused: {refusal.reason}" if refusal else "passed")
        state.refusal = refusal
        return state


class TransformStage(Stage):
    """Query transforms, in order: each turns the variants (first = the user's query) into
    new ones; one may name the tier that runs (``tier``) or say why it did nothing (``note``)."""

    name = "transforms"

    def __init__(self, transforms: Sequence[tuple[str, Transform]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, state: QueryState) -> QueryState:
        tracer = current_tracer()
        variants = state.variants
        for name, t in self.transforms:
            t0 = now()
            out = t(variants)
            variants = list(out) or [state.query]
            state.tier = getattr(out, "tier", "") or state.tier  # the adaptive tiers say which tier runs
            tracer.add("transform", name, now() - t0, detail=lambda: _transform_detail(variants, out))
        state.variants = variants
        return state


class VariantGateStage(Stage):
    """The competitor gate on generated variants: a variant that names a competitor is dropped."""

    name = "gate(variants)"

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def __call__(self, state: QueryState) -> QueryState:
        variants = state.variants
        if len(variants) > 1 or variants[0] is not state.query:
            t0 = now()
            kept = [v for v in variants if self.gate.check(v) is None]
            current_tracer().add("gate", f"{type(self.gate).__name__}(variants)", now() - t0,
                                 detail=lambda: f"{len(variants) - len(kept)} of {len(variants)} variants refused")
            state.variants = kept or [state.query]
        return state


class RetrieveStage(Stage):
    """Mask → channels → fuse, inside the source (a retriever), once per variant; variants
    are fused with :func:`~ragspine_query.fusion.weighted_rrf`.

    ``deep``: a later stage (rerank, post-processors) wants a deep list, so every query
    asks ``max(top_k, 50)``; several variants always do (RRF over shallow lists is unstable).
    A source whose class declares ``traces_itself = True`` (the retrievers) records its own
    mask/channel/fuse stages; for any other a ``search`` stage is recorded here.
    """

    name = "retrieve"

    def __init__(self, source: Source, *, deep: bool = False, rrf_k: float = DEFAULT_RRF_K) -> None:
        self.source = source
        self.deep = deep
        self.rrf_k = rrf_k
        self._self_tracing = bool(getattr(type(source), "traces_itself", False))

    def _search(self, q: Any, state: QueryState, depth: int) -> list[Hit]:
        if self._self_tracing:
            return self.source.search(q, filters=state.filters, top_k=depth, include_restricted=state.include_restricted)
        tracer = current_tracer()
        t0 = tracer.clock()
        hits = self.source.search(q, filters=state.filters, top_k=depth, include_restricted=state.include_restricted)
        tracer.add("search", type(self.source).__name__, tracer.since(t0), lambda: hit_candidates(hits), query=q)
        return hits

    def _prefetch(self, variants: list[Any]) -> None:
        """Embed every variant's dense-channel texts in one batched call per model before the
        per-variant searches (a source with ``prefetch_queries``; they then hit the cache)."""
        prefetch = getattr(self.source, "prefetch_queries", None)
        if prefetch is None:
            return
        tracer = current_tracer()
        t0 = tracer.clock()
        n = prefetch(variants)
        tracer.add("embed", "query vectors", tracer.since(t0),
                   detail=lambda: f"{n} model texts of {len(variants)} variants; the ones not embedded yet in this "
                                      "process go to each model in one batched call")

    def __call__(self, state: QueryState) -> QueryState:
        variants, query = state.variants, state.query
        if len(variants) > 1:  # every variant is planned in the user's query's language (see in_language_of)
            lang = query_language(query)
            variants = [v if str(v) == str(query) else in_language_of(v, lang, only=VARIANTS_OWN_LANGUAGE_ONLY)
                        for v in variants]
        depth = max(state.top_k, 50) if (self.deep or len(variants) > 1) else state.top_k
        if len(variants) == 1:
            state.hits = self._search(variants[0], state, depth)
            return state
        self._prefetch(variants)
        per_variant: list[list[tuple[str, str]]] = []  # a list: two variants may share their text (HyDE probes)
        best: dict[tuple[str, str], Hit] = {}
        for q in variants:
            vh = self._search(q, state, depth)
            per_variant.append([(h.chunk_id, h.chunk.library_id) for h in vh])
            for h in vh:
                best.setdefault((h.chunk_id, h.chunk.library_id), h)
        t0 = now()
        keys, scores = weighted_rrf(per_variant, rrf_k=self.rrf_k)
        state.hits = [best[k].with_score(s, fused=s) for k, s in zip(keys[:depth], scores[:depth])]
        hits = state.hits
        current_tracer().add("fuse", "rrf(variants)", now() - t0, lambda: hit_candidates(hits),
                             detail=lambda: f"{len(variants)} variants, k={self.rrf_k}")
        return state


class RerankStage(Stage):
    """A local reranker, or the listwise LLM judge, over the top ``top_n`` hits."""

    name = "rerank"

    def __init__(self, reranker: Reranker | None = None, judge: ListwiseJudge | None = None, top_n: int = 10) -> None:
        self.reranker = reranker
        self.judge = judge
        self.top_n = top_n

    def __call__(self, state: QueryState) -> QueryState:
        t0 = now()
        tracer = current_tracer()
        note: Any = ""  # what the reranker leaves alone because of its languages (of the hits it was given)
        if self.reranker is not None and getattr(self.reranker, "is_listwise", False):
            report: list[str] = []  # the LLM judge says what its answer did (or why the fused order stays)
            state.hits, name = cast("ListwiseReranker", self.reranker).rank(state.query, state.hits, top_n=self.top_n, report=report), "listwise"
            note = "; ".join(report)
        elif self.reranker is not None:
            reranker, given = self.reranker, state.hits
            note = partial(_language_note, reranker, state.query, given, self.top_n)
            state.hits, name = reranker.rank(state.query, given, top_n=self.top_n), type(reranker).__name__
        else:
            from ragspine_query.rerank.listwise import listwise_rerank

            report = []
            state.hits, name = listwise_rerank(state.query, state.hits, self.judge, top_n=self.top_n, report=report), "listwise"  # type: ignore[arg-type]
            note = "; ".join(report)
        hits = state.hits
        tracer.add("rerank", name, now() - t0, lambda: hit_candidates(hits), detail=note)
        return state


def _language_note(reranker: Reranker, query: str, hits: list[Hit], top_n: int) -> str:
    from ragspine_query.rerank.reranker import language_note

    return language_note(reranker, query, hits, top_n)


class PostprocessStage(Stage):
    """Post-processors in order. Deep ones (MMR, …) see the deep list; ``final`` ones
    (lost-in-the-middle, compression) the ``top_k`` that is returned — the
    :class:`CutStage` between them cuts — so a reorder cannot push good hits past the cut."""

    name = "postprocess"

    def __init__(self, postprocessors: Sequence[tuple[str, PostProcessor]], *, final: bool = False) -> None:
        self.postprocessors = list(postprocessors)
        self.final = final

    def __call__(self, state: QueryState) -> QueryState:
        tracer = current_tracer()
        for name, p in self.postprocessors:
            t0 = now()
            hits = list(p(state.query, state.hits))
            state.hits = hits[: state.top_k] if self.final else hits
            tracer.add("postprocess", name, now() - t0, lambda: hit_candidates(state.hits), detail=getattr(p, "describe", ""))
        return state


class CutStage(Stage):
    """The deep list cut to ``top_k``."""

    name = "cut"

    def __call__(self, state: QueryState) -> QueryState:
        state.hits = state.hits[: state.top_k]
        return state


class RestrictedStripStage(Stage):
    """The last guard: RESTRICTED hits dropped (they left the candidate mask before
    ranking already; this catches anything a plugin let in). Only when the run excludes them."""

    name = "restricted_strip"

    def __call__(self, state: QueryState) -> QueryState:
        if state.include_restricted:
            return state
        t0 = now()
        kept = [h for h in state.hits if not _is_restricted(h)]
        current_tracer().add("restricted_strip", "mask+guard", now() - t0, lambda: hit_candidates(kept),
                             detail="RESTRICTED rows left the candidate mask before ranking; last guard")
        state.hits = kept
        return state


class PipelineStage(Stage):
    """Any object with ``run(query, *, filters, top_k, include_restricted, explain)`` as one
    stage (a pipeline that is not a :class:`QueryPipeline`): its result becomes the state."""

    name = "pipeline"

    def __init__(self, pipeline: Any) -> None:
        self.pipeline = pipeline

    def __call__(self, state: QueryState) -> QueryState:
        tracer = current_tracer()
        res = self.pipeline.run(state.query, filters=state.filters, top_k=state.top_k,
                                include_restricted=state.include_restricted, explain=tracer.enabled)
        tracer.extend(getattr(res, "explain", None))
        state.hits = list(res)
        state.refusal = getattr(res, "refusal", None)
        state.tier = getattr(res, "tier", None)
        state.confidence = getattr(res, "confidence", None)
        state.needs_refinement = getattr(res, "needs_refinement", None)
        state.applied_filters = getattr(res, "filters", None)
        state.dropped_filters = tuple(getattr(res, "dropped_filters", ()) or ())
        return state


def core_stages(source: Source, *, transforms: Sequence[tuple[str, Transform]] = (), reranker: Reranker | None = None,
                judge: ListwiseJudge | None = None, rerank_top_n: int = 10, rrf_k: float = DEFAULT_RRF_K,
                postprocessors: Sequence[tuple[str, PostProcessor]] = (), gate: Any | None = None) -> list[Stage]:
    """The retrieval stages, in order: gate → transforms → gate(variants) → retrieve (mask →
    channels → fuse, per variant; variant fusion) → rerank → post-process → cut → final
    post-process → RESTRICTED strip. A stage with nothing to do is not listed."""
    post = list(postprocessors)
    deep_post = [x for x in post if not getattr(x[1], "final", False)]
    final_post = [x for x in post if getattr(x[1], "final", False)]
    ranks = reranker is not None or judge is not None
    stages: list[Stage] = []
    if gate is not None:
        stages.append(GateStage(gate))
    if transforms:
        stages.append(TransformStage(transforms))
    if gate is not None:
        stages.append(VariantGateStage(gate))
    stages.append(RetrieveStage(source, deep=ranks or bool(post), rrf_k=rrf_k))
    if ranks:
        stages.append(RerankStage(reranker, judge, rerank_top_n))
    if deep_post:
        stages.append(PostprocessStage(deep_post))
    stages.append(CutStage())
    if final_post:
        stages.append(PostprocessStage(final_post, final=True))
    stages.append(RestrictedStripStage())
    return stages


class QueryPipeline:
    """An explicit list of stages run in order: ``run`` returns a :class:`SearchResult`.

    ``QueryPipeline(source, transforms=…, reranker=…, postprocessors=…, gate=…)`` lists
    :func:`core_stages` (registered transforms and post-processors after the explicit
    ones); :func:`~ragspine_query.intelligence.build_query_pipeline` lists the
    query-intelligence stages around them (filter extraction, corrective retrieval).
    :meth:`from_stages` takes any list. ``cache`` (a
    :class:`~ragspine_query.cache.ScopedCache`) memoises whole runs, keyed by the scope
    of the libraries searched, the pipeline's ``variant`` and the arguments.
    """

    def __init__(
        self,
        source: Source,
        *,
        transforms: Sequence[tuple[str, Transform]] = (),
        reranker: Reranker | None = None,
        judge: ListwiseJudge | None = None,
        rerank_top_n: int = 10,
        rrf_k: float = DEFAULT_RRF_K,
        postprocessors: Sequence[tuple[str, PostProcessor]] = (),
        use_registered: bool = True,
        gate: Any | None = None,
    ) -> None:
        #: ``gate.check(text) -> Refusal | None`` (see :mod:`ragspine_core.gate`): the user's
        #: query is checked before anything runs, every generated variant before retrieval
        self.gate = gate
        self.transforms = list(transforms) + (always_transforms() if use_registered else [])
        self.postprocessors = list(postprocessors) + (always_postprocessors() if use_registered else [])
        self.reranker = reranker
        self.judge = judge
        self.rerank_top_n = rerank_top_n
        self.rrf_k = rrf_k
        self._set_stages(source, core_stages(source, transforms=self.transforms, reranker=reranker, judge=judge,
                                             rerank_top_n=rerank_top_n, rrf_k=rrf_k, postprocessors=self.postprocessors,
                                             gate=gate))

    def _set_stages(self, source: Source | None, stages: Sequence[Stage], *, cache: Any | None = None, variant: str = "") -> None:
        self.source = source
        self.stages: list[Stage] = list(stages)
        self.cache = cache
        self.variant = variant  # what else makes two pipelines' results differ (their configuration), for the cache key
        self.scope = scope_of(source) if source is not None else ""

    @classmethod
    def from_stages(cls, source: Source | None, stages: Sequence[Stage], *, cache: Any | None = None, variant: str = "") -> "QueryPipeline":
        """A pipeline that runs ``stages`` over ``source`` (the retriever the stages search)."""
        self = cls.__new__(cls)
        self._init_from(source, stages, cache=cache, variant=variant)
        return self

    def _init_from(self, source: Source | None, stages: Sequence[Stage], *, cache: Any | None = None, variant: str = "") -> None:
        self.gate, self.transforms, self.postprocessors = None, [], []
        self.reranker = self.judge = None
        self.rerank_top_n, self.rrf_k = 10, DEFAULT_RRF_K
        self._set_stages(source, stages, cache=cache, variant=variant)

    def describe(self) -> str:
        """The stage list, e.g. ``extract_filters → gate → transforms → … → corrective``."""
        return " → ".join(s.name for s in self.stages) + (" (cached)" if self.cache is not None else "")

    # -- running --------------------------------------------------------------------------
    def run(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = False, explain: bool = False) -> SearchResult:
        """Run the stage list for ``query`` (RESTRICTED removed before ranking unless
        ``include_restricted``); ``explain=True`` fills ``SearchResult.explain``."""
        with tracing(explain) as tracer:
            t0 = now()
            key = self.cache_key(query, filters, top_k, include_restricted) if self.cache is not None else ""
            if self.cache is not None:
                value, found = self.cache.get(key)
                if found:  # a hit's trace is the cache stage alone
                    hits, refusal, meta = value
                    tracer.add("cache", "hit", now() - t0, query=query, detail=lambda: f"scope {self.scope}")
                    return SearchResult(hits, tracer.freeze(query) if explain else None, refusal).carry(meta)
            state = self._run_stages(QueryState(query, filters, top_k, include_restricted), len(self.stages), None)
            ex = None
            if explain:
                ex = tracer.freeze(query)
                if not include_restricted:
                    ex = ex.without_restricted()
            res = state.result(ex)
            if self.cache is not None:
                meta = SearchResult().carry(res)  # tier, confidence, needs_refinement, filters
                self.cache.set(key, (tuple(res), res.refusal, meta))
            return res

    search = run  # a pipeline is searched like a retriever (the narrative index, ``ragspine eval``)

    def _run_stages(self, state: QueryState, stop: int, after: Any) -> QueryState:
        from ragspine_query.assessment import default_tier

        state.tier = default_tier(self.source)
        start = 0 if after is None else self.stages.index(after) + 1
        for i in range(start, stop):
            stage = self.stages[i]
            if state.refusal is not None and not stage.after_refusal:
                continue
            state._rerun = self._rerunner(i, state.top_k, state.include_restricted)
            state = stage(state)
        state._rerun = None
        return state

    def _rerunner(self, stop: int, top_k: int, include_restricted: bool) -> Callable[..., QueryState]:
        def rerun(query: Any, filters: Any, extract: bool, after: Any) -> QueryState:
            return self._run_stages(QueryState(query, filters, top_k, include_restricted, extract=extract), stop, after)
        return rerun

    def cache_key(self, query: str, filters: Any, top_k: int, include_restricted: bool) -> str:
        import json

        f = json.dumps(filters, sort_keys=True, default=str, ensure_ascii=False) if filters else ""
        # the generation: a newer snapshot that withholds rows of the open one retires its entries
        generation = generation_of(self.source if self.source is not None else getattr(self, "pipeline", None))
        return "\x1f".join((self.scope, self.variant, generation, normalize_query(query), f, str(int(top_k)),
                             str(bool(include_restricted))))

    def invalidate_library(self, library_id: str) -> int:
        """Drop every cached result of ``library_id`` (any snapshot); returns how many (0 without a cache)."""
        return invalidate_library(self.cache, library_id) if self.cache is not None else 0


def stages_of(pipeline: Any) -> tuple[Source | None, list[Stage]]:
    """``(source, stages)`` of a pipeline: a :class:`QueryPipeline`'s own list, or any
    other ``run``-able as one :class:`PipelineStage`."""
    if isinstance(pipeline, QueryPipeline):
        return pipeline.source, list(pipeline.stages)
    return getattr(pipeline, "source", None), [PipelineStage(pipeline)]
