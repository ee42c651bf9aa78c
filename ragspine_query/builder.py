"""The one way a query pipeline is built: a frozen :class:`PipelineSpec` and :func:`build_pipeline`.

:class:`PipelineSpec` says *what* runs — the retrieval knobs (mode, channels' weights, the
summary tree, time decay, the graph store, a sensitivity ceiling:
:class:`~ragspine_query.retriever.RetrievalConfig`), the query-intelligence stages (gate,
transforms, tiers, post-processors, filter extraction, corrective retrieval, cache size:
:class:`~ragspine_query.intelligence.QueryIntelligence`), glossary multi-query, the
reranker and its depth, the router over several libraries and the embedding backend. An
edge (``ragspine query``, ``ragspine eval``, the HTTP service, a notebook) builds it once
from :class:`~ragspine_core.settings.Settings` and its own arguments
(:meth:`PipelineSpec.from_settings`, then :meth:`PipelineSpec.replace`); nothing below
reads the environment.

:func:`build_pipeline` turns a spec into the stage list and the
:class:`~ragspine_query.pipeline.runner.QueryPipeline` that runs it, over library paths,
opened :class:`~ragspine_query.library.Library` snapshots, or a retriever built by hand::

    settings = Settings.from_env()                      # the edge: read once
    spec = PipelineSpec.from_settings(settings).replace(mode="hybrid", postprocessor="mmr")
    pipeline = build_pipeline("data/artifacts/sample", spec, settings=settings)
    pipeline.run("battery supply chain risk", top_k=5, explain=True)

:func:`~ragspine_query.agent_api.build_narrative_retriever` (the agent seam) is this
function with snippets on top.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from ragspine_core.errors import ConfigError
from ragspine_core.glossary import Glossary, GlossaryQueryRewriter
from ragspine_core.settings import Settings
from ragspine_query.fusion import DEFAULT_RRF_K
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.library import Library, open_library
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever, RetrievalConfig, Router
from ragspine_query.source import Source, libraries_of

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider
    from ragspine_query.pipeline.plugins import PostProcessor, Transform
    from ragspine_query.rerank.listwise import ListwiseJudge
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.pipeline.stages import Stage

#: what a library argument of :func:`build_pipeline` may be
LibraryLike = str | os.PathLike[str] | Library
#: ``build_pipeline(..., reranker=FROM_SPEC)``: the reranker the spec names (the default)
FROM_SPEC: Any = "spec"
_RETRIEVAL_FIELDS = frozenset(f.name for f in dataclasses.fields(RetrievalConfig)) - {"rrf_k"}
_INTELLIGENCE_FIELDS = frozenset(f.name for f in dataclasses.fields(QueryIntelligence))


def _on_off(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    v = str(value or "on").strip().lower()
    if v not in ("on", "off"):
        raise ConfigError(f"{name} must be on or off, got {value!r}")
    return v == "on"


@dataclass(frozen=True, slots=True)
class PipelineSpec:
    """What a query pipeline runs (frozen, validated): everything but the resources
    (libraries, models, provider, a shared cache), which :func:`build_pipeline` takes."""

    #: mode, channel weights, summary tree, time decay, graph store, sensitivity ceiling
    retrieval: RetrievalConfig = RetrievalConfig()
    #: the query-intelligence stages; None: the retrieval stages alone (no gate, no grading)
    intelligence: QueryIntelligence | None = QueryIntelligence()
    #: ask the glossary's multi-query variants too (the gate uses the glossary either way)
    multi_query: bool = True
    #: a :func:`~ragspine_query.rerank.make_reranker` name; None: the listwise judge when a
    #: provider is given, else none
    reranker: str | None = None
    #: how many of the top hits the reranker reorders
    rerank_top_n: int = 10
    #: the RRF ``k`` that fuses the rankings of a query's variants
    rrf_k: float = DEFAULT_RRF_K
    #: several libraries: ``profile`` | ``all`` (none) | a callable ``query -> library ids``
    router: "str | Router | None" = "profile"
    #: the embedding backend of libraries opened by path (``auto``: the model each was built with)
    embedding: str = "auto"
    #: ``(name, transform)`` pairs run first (a caller's own), before the ones ``intelligence`` names
    extra_transforms: tuple[tuple[str, Any], ...] = field(default=())
    #: ``(name, post-processor)`` pairs run after the ones ``intelligence`` names
    extra_postprocessors: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.retrieval, RetrievalConfig):
            raise ConfigError(f"PipelineSpec.retrieval must be a RetrievalConfig, got {type(self.retrieval).__name__}")
        if self.intelligence is not None and not isinstance(self.intelligence, QueryIntelligence):
            raise ConfigError(f"PipelineSpec.intelligence must be a QueryIntelligence or None, got {type(self.intelligence).__name__}")
        if isinstance(self.rerank_top_n, bool) or not isinstance(self.rerank_top_n, int) or self.rerank_top_n < 1:
            raise ConfigError(f"rerank_top_n must be a whole number >= 1, got {self.rerank_top_n!r}")
        object.__setattr__(self, "extra_transforms", tuple(self.extra_transforms))
        object.__setattr__(self, "extra_postprocessors", tuple(self.extra_postprocessors))

    @property
    def mode(self) -> str:
        return self.retrieval.mode

    @classmethod
    def from_settings(cls, settings: Settings) -> "PipelineSpec":
        """The pipeline the ``RAGSPINE_*`` query variables describe (docs/configuration.md):
        ``RAGSPINE_RETRIEVAL_MODE``, ``RAGSPINE_DECAY_HALF_LIFE_DAYS``, ``RAGSPINE_TREE``,
        ``RAGSPINE_GRAPH_STORE``, the query-intelligence variables
        (:meth:`QueryIntelligence.from_settings`), ``RAGSPINE_MULTI_QUERY``,
        ``RAGSPINE_RERANKER``, ``RAGSPINE_ROUTER``, ``RAGSPINE_EMBEDDING``.

        Raises:
            ConfigError: a value that does not parse, naming the variable.
        """
        try:
            half_life = float(settings.decay_half_life_days or 0)
        except ValueError:
            raise ConfigError(f"RAGSPINE_DECAY_HALF_LIFE_DAYS must be a number of days (0 = off), "
                              f"got {settings.decay_half_life_days!r}") from None
        graph_cfg = None
        if (settings.graph_store or "inprocess") != "inprocess":
            from ragspine_query.graph.graph_channel import GraphChannelConfig

            graph_cfg = GraphChannelConfig(store=settings.graph_store)
        retrieval = RetrievalConfig(mode=settings.retrieval_mode or "auto", decay_half_life_days=half_life,
                                    tree=settings.tree or "off", graph=graph_cfg)
        return cls(retrieval=retrieval, intelligence=QueryIntelligence.from_settings(settings),
                   multi_query=_on_off(settings.multi_query, "RAGSPINE_MULTI_QUERY"),
                   reranker=settings.reranker or None, router=settings.router or "profile",
                   embedding=settings.embedding or "auto")

    def replace(self, **changes: Any) -> "PipelineSpec":
        """A copy with ``changes``: a field of the spec, of its
        :class:`~ragspine_query.retriever.RetrievalConfig` (``mode``, ``tree``,
        ``decay_half_life_days``, ``max_sensitivity``, …) or of its
        :class:`~ragspine_query.intelligence.QueryIntelligence` (``transforms``,
        ``postprocessor``, ``tiers``, ``corrective``, ``filters``, ``gate``, ``relax_filters``, …).

        Raises:
            ConfigError: an unknown name, or an intelligence field while ``intelligence`` is None.
        """
        own = {k: v for k, v in changes.items() if k in PipelineSpec.__dataclass_fields__}
        retrieval = {k: v for k, v in changes.items() if k in _RETRIEVAL_FIELDS and k not in own}
        smart = {k: v for k, v in changes.items() if k in _INTELLIGENCE_FIELDS and k not in own and k not in retrieval}
        unknown = set(changes) - set(own) - set(retrieval) - set(smart)
        if unknown:
            raise ConfigError(f"PipelineSpec has no setting {', '.join(sorted(unknown))}")
        if retrieval:
            own["retrieval"] = dataclasses.replace(own.get("retrieval", self.retrieval), **retrieval)
        if smart:
            base = own.get("intelligence", self.intelligence)
            if base is None:
                raise ConfigError(f"cannot set {', '.join(sorted(smart))}: this spec runs no query-intelligence stages "
                                  "(intelligence=None)")
            own["intelligence"] = dataclasses.replace(base, **smart)
        return dataclasses.replace(self, **own) if own else self


def glossary_transform(rewriter: GlossaryQueryRewriter) -> "Transform":
    """The glossary multi-query rewriter as a pipeline transform (variants of the user's query)."""
    def transform(variants: list[str]) -> list[str]:
        return rewriter.rewrite(variants[0]) + [v for v in variants[1:]]
    return transform


def build_pipeline(
    source: Source | LibraryLike | Sequence[LibraryLike],
    spec: PipelineSpec = PipelineSpec(),
    *,
    settings: Settings | None = None,
    provider: LLMProvider | None = None,
    embedding_backend: Any = FROM_SPEC,
    reranker: Any = FROM_SPEC,
    glossary: Glossary | None | str = "auto",
    cache: Any | None = None,
) -> QueryPipeline:
    """The query pipeline ``spec`` describes — the one builder of a stage list:

    ``extract_filters → gate → transforms → gate(variants) → retrieve (mask → channels →
    fuse, per variant; variant fusion) → rerank → postprocess → cut → postprocess(final)
    → restricted_strip → filter_fallback → corrective``

    (a stage with nothing to do is not listed). ``source``: library paths or opened
    :class:`~ragspine_query.library.Library` snapshots (one retriever each with
    ``spec.retrieval``, fused by a :class:`~ragspine_query.retriever.MultiIndexRetriever`
    routed by ``spec.router`` when there are several; an opened snapshot is shared, not
    reopened), or a retriever (a :class:`~ragspine_query.source.Source`) built by hand.

    ``settings`` locate the resources (model folders, endpoints, keys; default: the
    :class:`~ragspine_core.settings.Settings` defaults — the environment is read at an
    edge, ``Settings.from_env()``, and passed here). ``embedding_backend``: for libraries
    opened here, the backend of their dense channel (default: per library, the model it was
    built with, or ``spec.embedding``; None: BM25 only). ``reranker``: a reranker object
    or None, or a reranker name, instead of the one ``spec.reranker`` names. ``glossary``: ``auto`` (the
    glossary published with the first library that has one), a
    :class:`~ragspine_core.glossary.Glossary`, or None; it drives the competitor gate,
    multi-query variants, tier rules and filter extraction. ``cache``: a shared
    :class:`~ragspine_query.cache.ScopedCache` (default: a new one when the spec's
    ``cache_size > 0``).

    Transforms run in this order: the glossary's multi-query variants, ``spec.extra_transforms``,
    the ones ``spec.intelligence`` names (built-ins and plug-ins,
    :data:`~ragspine_query.pipeline.plugins.TRANSFORMS`), the adaptive tiers, then the
    registry's ``always`` entries the spec does not name. Post-processors: the named ones,
    ``spec.extra_postprocessors``, then the ``always`` entries.

    Raises:
        ConfigError: an LLM-only mode (``tiers=llm``, ``corrective=llm``, ``reranker=listwise``)
            without a provider; an unknown reranker or router.
    """
    settings = settings if settings is not None else Settings()
    src, glossary_obj = _open_source(source, spec, settings, embedding_backend, glossary)
    local, judge = _rerankers(spec, reranker, provider, settings)
    transforms: list[tuple[str, Any]] = []
    if spec.multi_query and glossary_obj is not None and glossary_obj.concepts:
        transforms.append(("glossary", glossary_transform(GlossaryQueryRewriter(glossary_obj))))
    transforms += list(spec.extra_transforms)
    stages = _stages(src, spec, glossary=glossary_obj, provider=provider, transforms=transforms, reranker=local, judge=judge)
    qi = spec.intelligence
    if cache is None and qi is not None and qi.cache_size > 0:
        from ragspine_query.cache import ScopedCache

        cache = ScopedCache(qi.cache_size, qi.cache_ttl_s)
    return QueryPipeline.from_stages(src, stages, cache=cache, variant=qi.describe() if qi is not None else "")


def _is_library_like(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike, Library))


def _open_source(source: Source | LibraryLike | Sequence[LibraryLike], spec: PipelineSpec, settings: Settings, embedding_backend: Any,
                 glossary: Glossary | None | str) -> tuple[Source, Glossary | None]:
    """The retriever to search and the glossary: ``source`` itself, or one retriever per library."""
    if glossary is not None and not isinstance(glossary, Glossary) and glossary != "auto":
        raise ConfigError(f"glossary must be 'auto', a Glossary or None, got {glossary!r}")
    given: Glossary | None = glossary if isinstance(glossary, Glossary) else None
    if _is_library_like(source) or (isinstance(source, Sequence) and not isinstance(source, str)
                                   and all(_is_library_like(x) for x in source)):
        paths: list[LibraryLike] = [cast(LibraryLike, source)] if _is_library_like(source) else list(cast(Sequence[LibraryLike], source))
        if not paths:
            raise ConfigError("build_pipeline needs at least one library")
        libs = [p if isinstance(p, Library) else open_library(p) for p in paths]
    else:
        libs = []
    found: Glossary | None = None
    if glossary == "auto":
        for lib in libs or libraries_of(cast(Source, source)):
            gpath = lib.artifact_path("glossary")
            if gpath is not None and gpath.is_file():
                found = Glossary.load(gpath)
                break
    glossary_obj = given or found
    if not libs:
        return cast(Source, source), glossary_obj
    from ragspine_query.backends import backend_for_library

    retrievers: dict[str, HybridRetriever] = {}
    for lib in libs:
        backend = embedding_backend
        if backend is FROM_SPEC:
            backend = backend_for_library(lib, spec.retrieval.mode, spec.embedding, settings=settings)
        retrievers[lib.library_id] = HybridRetriever(lib, embedding_backend=backend, config=spec.retrieval, settings=settings)
    if len(retrievers) == 1:
        return next(iter(retrievers.values())), glossary_obj
    router = spec.router
    if router is None or isinstance(router, str):
        from ragspine_query.router import make_router

        router = make_router(router or "all", retrievers, glossary_obj)
    return MultiIndexRetriever(retrievers, router=router), glossary_obj


def _rerankers(spec: PipelineSpec, reranker: Any, provider: LLMProvider | None,
               settings: Settings) -> tuple["Reranker | None", "ListwiseJudge | None"]:
    """``(local reranker, listwise judge)``: at most one is set."""
    if isinstance(reranker, str):  # FROM_SPEC, or a name
        from ragspine_query.rerank import make_reranker

        # no reranker named: none, even with a provider (the listwise judge is opt-in: with the
        # local Gemma 3 270M it lost 0.030 nDCG@10 on the sample, docs/llm-providers.md);
        # "listwise" or "auto" names it
        name = reranker if reranker is not FROM_SPEC else spec.reranker
        name = name if name is not None else "none"
        reranker = make_reranker(name, provider=provider, settings=settings)
    if reranker is not None and getattr(reranker, "is_listwise", False):
        return None, cast("ListwiseJudge", getattr(reranker, "judge", reranker))
    return cast("Reranker | None", reranker), None


def _entity_counter(glossary: Glossary) -> Callable[[str], int]:
    """``q -> how many glossary entities q names`` (normalised substring match), for the tier rules."""
    from ragspine_core.text.normalize import normalize_query

    names = [(normalize_query(n), c.id) for c in glossary.concepts if c.kind == "entity" for n in c.names]

    def count(q: str) -> int:
        nq = normalize_query(q)
        return len({cid for n, cid in names if n and n in nq})
    return count


def _filter_fields(source: Source) -> frozenset[str] | None:
    libs = libraries_of(source)
    if not libs:
        return None
    return frozenset.intersection(*(frozenset(lib.filter_fields()) for lib in libs))


def _stages(source: Source, spec: PipelineSpec, *, glossary: Glossary | None, provider: LLMProvider | None,
            transforms: Sequence[tuple[str, Transform]], reranker: Reranker | None, judge: ListwiseJudge | None) -> list[Stage]:
    """The stage list of :func:`build_pipeline` over ``source``."""
    from ragspine_query.pipeline.plugins import PostprocessorContext, TransformContext, always_postprocessors, always_transforms
    from ragspine_query.pipeline.stages import core_stages
    from ragspine_query.postprocess import make_postprocessor
    from ragspine_query.transforms import make_transforms

    qi = spec.intelligence
    postprocessors: list[tuple[str, PostProcessor]] = list(spec.extra_postprocessors)
    if qi is None:
        return core_stages(source, transforms=list(transforms) + always_transforms(TransformContext(provider=provider)),
                           reranker=reranker, judge=judge, rerank_top_n=spec.rerank_top_n, rrf_k=spec.rrf_k,
                           postprocessors=postprocessors + always_postprocessors(PostprocessorContext(source=source)))
    named = make_transforms(qi.transforms, provider=provider, fusion_n=qi.fusion_n)
    chain = list(transforms) + named
    if qi.tiers != "off":
        from ragspine_query.tiers import AdaptiveTierTransform, TierClassifier

        count = _entity_counter(glossary) if glossary is not None and glossary.concepts else None
        force = qi.tiers if qi.tiers not in ("rules", "llm") else None
        classifier = TierClassifier(provider=provider, use_llm=qi.tiers == "llm", entity_count=count, force=force)
        chain.append(("tiers", AdaptiveTierTransform(classifier, source)))
    gate = None
    if qi.gate and glossary is not None:
        from ragspine_core.gate import CompetitorGate

        g = CompetitorGate(glossary)
        gate = g if g.active else None
    named_post = make_postprocessor(qi.postprocessor, source=source, mmr_lambda=qi.mmr_lambda)
    post = named_post + postprocessors
    # the registry's always-entries after the listed ones; one the spec names runs once, where the spec puts it
    always_t = always_transforms(TransformContext(provider=provider, fusion_n=qi.fusion_n), named=frozenset(n for n, _ in named))
    always_p = always_postprocessors(PostprocessorContext(source=source, mmr_lambda=qi.mmr_lambda),
                                     named=frozenset(n for n, _ in named_post))
    stages = core_stages(source, transforms=chain + always_t, reranker=reranker, judge=judge, rerank_top_n=spec.rerank_top_n,
                         rrf_k=spec.rrf_k, postprocessors=post + always_p, gate=gate)
    if qi.filters != "off":
        from ragspine_query.filter_extraction import ExtractFiltersStage, FilterFallbackStage, make_filter_extractor

        extractor = make_filter_extractor(qi.filters, glossary=glossary, source=source, provider=provider)
        stages = [ExtractFiltersStage(extractor, min_confidence=qi.filter_min_confidence, fields=_filter_fields(source), gate=gate),  # type: ignore[arg-type]
                  *stages, FilterFallbackStage(fill=qi.filter_fill, blend=qi.filter_blend)]
    # every result is graded (confidence, needs_refinement); only an active mode acts on the grade
    from ragspine_query.assessment import RelevanceGrader
    from ragspine_query.corrective import CorrectiveStage, LLMGrader, default_crag_config, dynamic_crag_config

    config = dynamic_crag_config() if qi.corrective == "dynamic" else default_crag_config()
    grader = (LLMGrader(provider) if qi.corrective == "llm" else None if qi.corrective in ("dynamic", "static")
              else RelevanceGrader(source))
    stages.append(CorrectiveStage(source, config=config, grader=grader, provider=provider, act=qi.corrective != "off",
                                  relax_caller_filters=qi.relax_filters))
    return stages


__all__ = ["FROM_SPEC", "PipelineSpec", "build_pipeline", "glossary_transform"]
