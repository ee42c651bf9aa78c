"""The seam into an agent: RESTRICTED-free, fully cited, typed snippets (:class:`~ragspine_core.records.Snippet`).

On this path RESTRICTED rows are removed from the candidate mask *before* any channel
ranks them (``include_restricted=False``), so the ranks and fused scores a caller sees
are computed as if RESTRICTED chunks did not exist: a score cannot reveal how many of
them outranked a visible hit. The RESTRICTED strip before snippets are built stays as a
last guard (RESTRICTED exit #2); exit #1 is the listwise reranker, which never shows
RESTRICTED text to the judge.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, cast

from ragspine_query.fusion import DEFAULT_RRF_K
from ragspine_core.glossary import Glossary, GlossaryQueryRewriter
from ragspine_query.library import Library, open_library
from ragspine_query.limits import check_query
from ragspine_query.pipeline.explain import hit_candidates, now
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_query.pipeline.state import SearchResult, Snippets
from ragspine_query.pipeline.trace import current_tracer, tracing
from ragspine_core.records import Hit, Snippet, to_snippet
from ragspine_core.settings import Settings
from ragspine_query.backends import backend_for_library
from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig, check_top_k

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.rerank.listwise import ListwiseJudge
    from ragspine_query.source import Source
    from ragspine_query.pipeline.plugins import Transform


class SearchIndex(Protocol):
    def search(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = True) -> list[Hit]: ...


def glossary_transform(rewriter: GlossaryQueryRewriter) -> Transform:
    """The glossary multi-query rewriter as a pipeline transform (variants of the user's query)."""
    def transform(variants: list[str]) -> list[str]:
        return rewriter.rewrite(variants[0]) + [v for v in variants[1:]]
    return transform


class NarrativeIndex(QueryPipeline):
    """The narrative query pipeline over a retriever: one stage list
    (:func:`~ragspine_query.intelligence.query_stages`), searched with
    ``search(query, *, filters, top_k, include_restricted=False, explain)``.

    ``rewriter`` (the glossary multi-query rewriter) is the first transform, ``reranker``
    (local) or ``judge`` (listwise LLM) the rerank stage. ``intelligence`` selects the
    query-intelligence stages (gate, transforms, tiers, post-processors, filter
    extraction, corrective retrieval, cache); when it is None they are left out, unless a
    ``glossary`` or ``cache`` is given, which mean the default
    :class:`~ragspine_query.intelligence.QueryIntelligence`.
    """

    def __init__(self, retriever: Source, *, rewriter: GlossaryQueryRewriter | None = None, reranker: Reranker | None = None, judge: ListwiseJudge | None = None, rerank_top_n: int = 10, rrf_k: int = DEFAULT_RRF_K,
                 intelligence: Any | None = None, glossary: Glossary | None = None, provider: LLMProvider | None = None, cache: Any | None = None,
                 postprocessors: Sequence[tuple[str, Any]] = ()) -> None:
        from ragspine_query.intelligence import QueryIntelligence, build_query_pipeline

        if intelligence is None and (glossary is not None or cache is not None):
            intelligence = QueryIntelligence()
        transforms = [("glossary", glossary_transform(rewriter))] if rewriter is not None else []
        built = build_query_pipeline(retriever, intelligence, glossary=glossary, provider=provider, transforms=transforms,
                                     reranker=reranker, judge=judge, rerank_top_n=rerank_top_n, rrf_k=rrf_k, cache=cache,
                                     postprocessors=postprocessors)
        self._init_from(retriever, built.stages, cache=built.cache, variant=built.variant)
        self.retriever = retriever
        self.rewriter = rewriter
        self.reranker = reranker
        self.judge = judge
        self.rerank_top_n = rerank_top_n
        self.rrf_k = rrf_k

    @property
    def pipeline(self) -> "NarrativeIndex":
        """The pipeline itself (the index used to wrap one; kept for callers of ``index.pipeline.run``)."""
        return self


class NarrativeIndexRetriever:
    """``retrieve(query, filters=None, top_k=50) -> Snippets`` (typed :class:`~ragspine_core.records.Snippet` objects) for the agent."""

    def __init__(self, index: SearchIndex, *, retry_without_filters: bool = False) -> None:
        self.index = index
        #: the seed's retry_without_filters, for the *caller's* filters: opt-in (they are a
        #: constraint); when it runs, the result's ``dropped_filters`` lists them
        self.retry_without_filters = retry_without_filters

    def retrieve(self, query: str, *, filters: Mapping[str, Any] | None = None, top_k: int = 50, explain: bool = False) -> Snippets:
        """Cited, RESTRICTED-free snippets (:class:`~ragspine_core.records.Snippet`), best first (a
        list; ``.explain`` when asked for). A snippet is a frozen record: read it by attribute
        (``s.text``, ``s.locator``); ``s.to_dict()`` is its JSON (key access is deprecated).

        Raises:
            ConfigError: ``top_k`` is negative or not an integer.
            QueryError: the query is empty or longer than ``limits.MAX_QUERY_CHARS``.
        """
        check_query(query)
        top_k = check_top_k(top_k)
        with tracing(explain) as tracer:
            snippets, res = self._open_snippets(query, filters or None, top_k)
            dropped: tuple[dict[str, Any], ...] = ()
            if not snippets and res.refusal is None and filters and self.retry_without_filters:
                tracer.add("retry", "without-filters", 0.0, query=query,
                           detail="the caller's filtered result was empty (retry_without_filters is on)")
                from ragspine_query.pipeline.state import dropped_filter_records

                dropped = dropped_filter_records(filters, "caller", "the filtered result was empty (retry_without_filters)")
                snippets, res = self._open_snippets(query, None, top_k)
            ex = tracer.freeze(query).without_restricted() if explain else None
        out = Snippets(snippets, ex, res.refusal).carry(res)
        out.dropped_filters = dropped + tuple(out.dropped_filters)
        # every snippet carries the result's tier and confidence too (an agent sees only the dicts)
        assessment = result_assessment(out)
        out[:] = [sn.with_fields(**assessment) for sn in out]  # frozen records: copies that carry it
        return out

    def _open_snippets(self, query: str, filters: Mapping[str, Any] | None, top_k: int) -> tuple[list[Snippet], Any]:
        """Snippets of the top ``top_k`` hits (RESTRICTED rows never entered the ranking) and
        the result (its ``refusal``, if the query was refused by the gate or corrective
        retrieval; its tier and confidence)."""
        results = self.index.search(query, filters=filters, top_k=top_k, include_restricted=False)
        refusal = getattr(results, "refusal", None)
        t0 = now()
        # RESTRICTED exit #2 (a last guard): dropped before any snippet dict exists
        open_hits = [r for r in results if not r.chunk.is_restricted]
        snippets = [Snippet.from_dict(to_snippet(r)) for r in open_hits[:top_k]]
        current_tracer().add("snippets", "to_snippet", now() - t0, lambda: hit_candidates(open_hits[:top_k]), query=query)
        meta = SearchResult([], None, refusal)
        if isinstance(results, SearchResult):
            meta.carry(results)  # dropped_filters too
        return snippets, meta


def result_assessment(result: Any) -> dict[str, Any]:
    """``{"tier", "confidence": {"grade", "score"}, "needs_refinement"}`` of a result
    (None values where the pipeline did not assess it)."""
    conf = getattr(result, "confidence", None)
    return {"tier": getattr(result, "tier", None), "confidence": conf.to_dict() if conf is not None else None,
            "needs_refinement": getattr(result, "needs_refinement", None)}


def build_narrative_retriever(
    libraries: str | os.PathLike[str] | Library | Sequence[str | os.PathLike[str] | Library],
    provider: LLMProvider | None = None,
    *,
    embedding_backend: Any | None | str = "env",
    reranker: Reranker | None | str = "env",
    mode: str | None = None,
    glossary: Glossary | None | str = "auto",
    settings: Settings | None = None,
    intelligence: Any | None = None,
    cache: Any | None = None,
    rerank_top_n: int = 10,
    multi_query: bool | None = None,
    postprocessor: Any | None = None,
    router: Any | None | str = "env",
    relax_filters: bool | None = None,
    max_sensitivity: str | None = None,
) -> NarrativeIndexRetriever:
    """Wire the default chain over one or more published libraries (paths, or opened
    :class:`~ragspine_query.library.Library` snapshots, which several chains may share).

    Defaults come from ``settings`` (default :meth:`Settings.from_env`, the one place the
    environment is read; see docs/configuration.md): retrieval mode from
    ``RAGSPINE_RETRIEVAL_MODE`` (``auto``), embedding backend from ``RAGSPINE_EMBEDDING``
    (``auto``: the model the index was built with when installed, else BM25 only),
    reranker from ``RAGSPINE_RERANKER`` (unset: the LLM listwise judge over the top 10
    when a ``provider`` is given, else none). ``reranker=None`` or ``RAGSPINE_RERANKER=none`` means no
    reranker and no call to the provider. Glossary multi-query uses the
    glossary published with each library, and so does the competitor gate.

    ``intelligence`` (a :class:`~ragspine_query.intelligence.QueryIntelligence`; default
    from ``settings``: ``RAGSPINE_GATE``, ``RAGSPINE_TRANSFORMS``, ``RAGSPINE_TIERS``,
    ``RAGSPINE_POSTPROCESSOR``, ``RAGSPINE_CORRECTIVE``, ``RAGSPINE_QUERY_CACHE``) selects
    the query-intelligence stages; ``cache`` shares a
    :class:`~ragspine_query.cache.ScopedCache` between retrievers. Time-decayed RRF
    follows ``RAGSPINE_DECAY_HALF_LIFE_DAYS``. ``rerank_top_n``: how many of the top hits
    the reranker reorders (10). ``multi_query``: ask the glossary's multi-query variants
    too (default ``RAGSPINE_MULTI_QUERY``, on: +0.008 nDCG@10 on the sample's judged set,
    docs/evaluation.md); the gate uses the glossary either way. ``ragspine eval`` evaluates exactly this chain.

    ``postprocessor`` (the seed's keyword): a spec such as ``"mmr,lost_in_middle"``
    (replaces the intelligence's), or what
    :func:`~ragspine_query.postprocess.make_postprocessor` returns, or one
    ``(query, hits) -> hits`` callable (run after the configured ones).

    ``router`` (several libraries): ``"env"`` (``RAGSPINE_ROUTER``, default ``profile``:
    :class:`~ragspine_query.router.ProfileRouter` by glossary entities and library
    profiles, every library when nothing matches), ``"all"`` / None (no routing), or a
    callable ``query -> library ids``.

    ``relax_filters`` (default ``intelligence.relax_filters``, off): the caller's filters are
    a constraint; True lets an empty filtered result be retried without them (the seed's
    ``retry_without_filters``) and corrective retrieval drop them. Whatever is dropped is
    listed in the result's ``dropped_filters``.

    ``max_sensitivity`` (``PUBLIC`` or ``INTERNAL``; None = every open row): a caller's
    ceiling, applied in every library's candidate mask before any channel ranks
    (:attr:`~ragspine_query.retriever.RetrievalConfig.max_sensitivity`); no filter retry relaxes it.
    """
    paths = [libraries] if isinstance(libraries, (str, os.PathLike, Library)) else list(libraries)
    settings = settings or Settings.from_env()
    mode = mode or settings.retrieval_mode
    from ragspine_query.intelligence import QueryIntelligence

    try:
        half_life = float(settings.decay_half_life_days or 0)
    except ValueError:
        from ragspine_core.errors import ConfigError

        raise ConfigError(f"RAGSPINE_DECAY_HALF_LIFE_DAYS must be a number of days (0 = off), got {settings.decay_half_life_days!r}") from None
    graph_cfg = None
    if (settings.graph_store or "inprocess") != "inprocess":
        from ragspine_query.graph.graph_channel import GraphChannelConfig

        graph_cfg = GraphChannelConfig(store=settings.graph_store)
    config = RetrievalConfig(mode=mode, decay_half_life_days=half_life, tree=settings.tree or "off", graph=graph_cfg,
                             max_sensitivity=max_sensitivity)
    intelligence = intelligence if intelligence is not None else QueryIntelligence.from_settings(settings)
    retrievers: dict[str, HybridRetriever] = {}
    glossary_obj: Glossary | None = None
    for p in paths:
        lib = p if isinstance(p, Library) else open_library(p)  # an opened snapshot is shared, not reopened
        backend = embedding_backend
        if backend == "env":
            backend = backend_for_library(lib, config.mode, settings.embedding, settings=settings)
        retrievers[lib.library_id] = HybridRetriever(lib, embedding_backend=backend, config=config, settings=settings)
        if glossary == "auto" and glossary_obj is None:
            gpath = lib.artifact_path("glossary")
            if gpath is not None and gpath.is_file():
                glossary_obj = Glossary.load(gpath)
    if isinstance(glossary, Glossary):
        glossary_obj = glossary
    if len(retrievers) == 1:
        base: Source = next(iter(retrievers.values()))
    else:
        if router == "env" or isinstance(router, str):
            from ragspine_query.router import make_router

            router = make_router(settings.router if router == "env" else router, retrievers, glossary_obj)
        base = MultiIndexRetriever(retrievers, router=router)
    extra_post: list[Any] = []
    if isinstance(postprocessor, str):
        import dataclasses

        intelligence = dataclasses.replace(intelligence, postprocessor=postprocessor)
    elif callable(postprocessor):
        extra_post = [(getattr(postprocessor, "name", type(postprocessor).__name__), postprocessor)]
    elif postprocessor is not None:
        extra_post = list(postprocessor)
    if reranker == "env":
        from ragspine_query.rerank import make_reranker

        # unset RAGSPINE_RERANKER: the LLM judge when a provider was given, else none;
        # an explicit "none" means no reranker and no network call at all
        default = "listwise" if provider is not None else "none"
        reranker = make_reranker(settings.reranker or default, provider=provider, settings=settings)
    judge: ListwiseJudge | None = None
    local = reranker
    if reranker is not None and getattr(reranker, "is_listwise", False):
        local, judge = None, cast("ListwiseJudge", getattr(reranker, "judge", reranker))
    if multi_query is None:
        multi_query = settings.multi_query  # RAGSPINE_MULTI_QUERY, parsed and checked by Settings
    rewriter = GlossaryQueryRewriter(glossary_obj) if multi_query and glossary_obj and glossary_obj.concepts else None
    if relax_filters is not None and relax_filters != intelligence.relax_filters:
        import dataclasses

        intelligence = dataclasses.replace(intelligence, relax_filters=bool(relax_filters))
    return NarrativeIndexRetriever(NarrativeIndex(base, rewriter=rewriter, reranker=cast("Reranker | None", local), judge=judge, intelligence=intelligence,
                                                  glossary=glossary_obj, provider=provider, cache=cache, rerank_top_n=rerank_top_n,
                                                  postprocessors=extra_post), retry_without_filters=intelligence.relax_filters)
