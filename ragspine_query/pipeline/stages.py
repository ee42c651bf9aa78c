"""The query pipeline: an explicit list of stages, run in order by one loop.

``extract_filters → gate → transforms → gate(variants) → retrieve → rerank → postprocess
→ cut → postprocess(final) → restricted_strip → filter_fallback → corrective``

(:func:`~ragspine_query.builder.build_pipeline` builds the list; :func:`core_stages`
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
pipeline. Three modules: :mod:`.state` (the result types and the state one run carries),
this one (the built-in stages and :func:`core_stages`) and :mod:`.runner` (the loop that
runs them, :class:`~ragspine_query.pipeline.runner.QueryPipeline`); the query-intelligence
stages live with their logic in :mod:`ragspine_query.filter_extraction` and
:mod:`ragspine_query.corrective`. Tracing goes through a context variable (:mod:`.trace`).
Transforms and post-processors are protocols with registries (:mod:`.plugins`:
:data:`TRANSFORMS`, :data:`POSTPROCESSORS`, :func:`register_transform`,
:func:`register_postprocessor`; and :func:`~ragspine_query.pipeline.channels.register_channel`).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Sequence, cast

from ragspine_query.fusion import DEFAULT_RRF_K, weighted_rrf
from ragspine_core.records import Hit
from ragspine_core.text.language import query_language
from ragspine_query.transforms.transform import in_language_of
from ragspine_query.pipeline.explain import hit_candidates, now
from ragspine_query.pipeline.trace import current_tracer
from ragspine_query.pipeline.state import QueryState
from ragspine_query.source import Source
from ragspine_query.pipeline.plugins import PostProcessor, Transform

if TYPE_CHECKING:
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.rerank.listwise import ListwiseJudge, ListwiseReranker


#: Whether a query variant (glossary alias, rewrite) ranks only rows in the user's query's
#: language. Every variant is *planned* in that language either way (so the mixed-language
#: fusion admits another language's rows only when they earn it). Measured on the sample's
#: judged set with glossary multi-query on: planned in the query's language and ranking
#: every row 0.8368, ranking only the query language's rows 0.8281 (docs/evaluation.md).
VARIANTS_OWN_LANGUAGE_ONLY = False


def _transform_detail(variants: list[Any], out: Any) -> str:
    note = getattr(out, "note", "")  # a transform may say why it did nothing
    return " | ".join(variants) + (f" ({note})" if note else "")


def _is_restricted(hit: Hit) -> bool:
    return hit.chunk.is_restricted


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
