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
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from ragspine_core.glossary import Glossary
from ragspine_query.builder import FROM_SPEC, PipelineSpec, build_pipeline
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.library import Library
from ragspine_query.limits import check_query
from ragspine_query.pipeline.explain import hit_candidates, now
from ragspine_query.pipeline.state import SearchResult, Snippets
from ragspine_query.pipeline.trace import current_tracer, tracing
from ragspine_core.records import Hit, Snippet, to_snippet
from ragspine_core.settings import Settings
from ragspine_query.retriever import check_top_k

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider
    from ragspine_query.source import Source


class SearchIndex(Protocol):
    def search(self, query: str, *, filters: Any = None, top_k: int = 10, include_restricted: bool = True) -> list[Hit]: ...


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
    libraries: str | os.PathLike[str] | Library | Sequence[str | os.PathLike[str] | Library] | Source,
    provider: LLMProvider | None = None,
    *,
    settings: Settings | None = None,
    spec: PipelineSpec | None = None,
    embedding_backend: Any = FROM_SPEC,
    reranker: Any = FROM_SPEC,
    glossary: Glossary | None | str = "auto",
    cache: Any | None = None,
    mode: str | None = None,
    intelligence: QueryIntelligence | None = None,
    rerank_top_n: int | None = None,
    multi_query: bool | None = None,
    postprocessor: Any | None = None,
    router: Any = FROM_SPEC,
    relax_filters: bool | None = None,
    max_sensitivity: str | None = None,
) -> NarrativeIndexRetriever:
    """The agent seam: :func:`~ragspine_query.builder.build_pipeline` over one or more
    published libraries (paths, or opened :class:`~ragspine_query.library.Library`
    snapshots, which several chains may share), returning cited, RESTRICTED-free
    snippets (``retrieve``). ``ragspine query``, ``ragspine eval`` and ``POST /v1/search``
    run this chain.

    ``spec`` (a :class:`~ragspine_query.builder.PipelineSpec`; default
    ``PipelineSpec.from_settings(settings)``) says what runs; ``settings`` (default: the
    :class:`~ragspine_core.settings.Settings` defaults — read the environment at your edge
    with ``Settings.from_env()`` and pass it) locate models and endpoints. With the
    defaults: ``auto`` retrieval (the embedding model the index was built with when its
    extra is installed, else BM25 only), the competitor gate and glossary multi-query with
    the glossary published with the library, and no reranker, with or without a
    ``provider`` (``reranker="listwise"`` or the spec's ``reranker="listwise"`` asks the LLM
    listwise judge to order the top 10; it is opt-in because with a small local model it
    lost on the judged sets, ``docs/llm-providers.md``).

    The keywords below change the spec for this call (each is a field of the spec):
    ``mode``; ``intelligence`` (a :class:`~ragspine_query.intelligence.QueryIntelligence`);
    ``rerank_top_n``; ``multi_query``; ``postprocessor`` (a spec such as
    ``"mmr,lost_in_middle"``, which replaces the intelligence's, or what
    :func:`~ragspine_query.postprocess.make_postprocessor` returns, or one ``(query, hits)
    -> hits`` callable, run after the configured ones); ``router`` (several libraries:
    ``"profile"``, ``"all"`` / None, or a callable ``query -> library ids``);
    ``relax_filters`` (True lets an empty filtered result be retried without the caller's
    filters, and corrective retrieval drop them; whatever is dropped is listed in the
    result's ``dropped_filters``); ``max_sensitivity`` (``PUBLIC`` or ``INTERNAL``: a
    ceiling applied in every library's candidate mask before any channel ranks; no filter
    retry relaxes it). ``embedding_backend``, ``reranker``, ``glossary`` and ``cache`` (a
    shared :class:`~ragspine_query.cache.ScopedCache`) go to ``build_pipeline``.
    """
    settings = settings if settings is not None else Settings()
    spec = spec if spec is not None else PipelineSpec.from_settings(settings)
    changes: dict[str, Any] = {}
    if mode is not None:
        changes["mode"] = mode
    if intelligence is not None:
        changes["intelligence"] = intelligence
    if rerank_top_n is not None:
        changes["rerank_top_n"] = rerank_top_n
    if multi_query is not None:
        changes["multi_query"] = bool(multi_query)
    if router is not FROM_SPEC:
        changes["router"] = router
    if max_sensitivity is not None:
        changes["max_sensitivity"] = max_sensitivity
    if isinstance(postprocessor, str):
        changes["postprocessor"] = postprocessor
    elif callable(postprocessor):
        changes["extra_postprocessors"] = (*spec.extra_postprocessors, (getattr(postprocessor, "name", type(postprocessor).__name__), postprocessor))
    elif postprocessor is not None:
        changes["extra_postprocessors"] = (*spec.extra_postprocessors, *postprocessor)
    if relax_filters is not None:
        changes["relax_filters"] = bool(relax_filters)
    spec = spec.replace(**changes)
    pipeline = build_pipeline(libraries, spec, settings=settings, provider=provider, embedding_backend=embedding_backend,
                              reranker=reranker, glossary=glossary, cache=cache)
    return NarrativeIndexRetriever(pipeline, retry_without_filters=spec.intelligence is not None and spec.intelligence.relax_filters)
