"""The query pipeline's runner: :class:`QueryPipeline` runs an explicit list of stages
(:mod:`.stages`) in order by one loop over a :class:`~ragspine_query.pipeline.state.QueryState`,
with an optional scoped cache of whole runs; :func:`stages_of` reads any pipeline's list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ragspine_query.fusion import DEFAULT_RRF_K
from ragspine_core.text.normalize import normalize_query
from ragspine_query.cache import generation_of, invalidate_library, scope_of
from ragspine_query.pipeline.explain import now
from ragspine_query.pipeline.trace import tracing
from ragspine_query.pipeline.state import QueryState, SearchResult
from ragspine_query.pipeline.stages import PipelineStage, Stage, core_stages
from ragspine_query.source import Source, follow
from ragspine_query.pipeline.plugins import PostProcessor, Transform, always_postprocessors, always_transforms

if TYPE_CHECKING:
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.rerank.listwise import ListwiseJudge


class QueryPipeline:
    """An explicit list of stages run in order: ``run`` returns a :class:`SearchResult`.

    ``QueryPipeline(source, transforms=…, reranker=…, postprocessors=…, gate=…)`` lists
    :func:`core_stages` (registered transforms and post-processors after the explicit
    ones); :func:`~ragspine_query.builder.build_pipeline` lists the
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
        follow(self.source)  # a library reopened after a repair/prune/quarantine: every stage sees it
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
        generation = generation_of(self)  # unwraps to the libraries behind the source, as scope_of does
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
