"""Query intelligence, wired: one frozen config and the function that builds the pipeline.

:class:`QueryIntelligence` selects the pieces (all optional, all visible in ``explain``):

* ``gate`` — the competitor gate (:mod:`ragspine_core.gate`), on by default whenever
  the glossary names a competitor;
* ``transforms`` — ``normalize, decompose, step_back, fusion, hyde``
  (:mod:`ragspine_query.transforms`) or a plug-in's name (the
  :data:`~ragspine_query.pipeline.plugins.TRANSFORMS` registry);
* ``tiers`` — ``off | rules | llm`` or a tier to force (``direct``, ``semantic``,
  ``multi_hop``, ``global``, ``multi_part``) (:mod:`ragspine_query.tiers`);
* ``postprocessor`` — ``mmr, lost_in_middle, compress`` (:mod:`ragspine_query.postprocess`)
  or a plug-in's name (:data:`~ragspine_query.pipeline.plugins.POSTPROCESSORS`);
* ``filters`` — automatic filter extraction ``off | rules | llm``
  (:mod:`ragspine_query.filter_extraction`), applied as a preference;
* ``relax_filters`` — whether a retry may drop the *caller's* filters (off: they are a
  constraint; extracted filters are always droppable); a dropped filter is listed in the
  result's ``dropped_filters``;
* ``corrective`` — ``off | relevance | dynamic | static | llm`` (:mod:`ragspine_query.corrective`);
  with ``off`` every result is still graded (``confidence``, ``needs_refinement``) but
  nothing is retried, stripped or refused;
* ``cache_size`` / ``cache_ttl_s`` — the scoped result cache (:mod:`ragspine_query.cache`).

Time-decayed RRF is a retriever knob (``RetrievalConfig.decay_half_life_days``).
Build from the environment with :meth:`QueryIntelligence.from_settings` (the variables
are in ``docs/configuration.md``); from a notebook, construct it and pass it to
:func:`build_query_pipeline` or ``build_narrative_retriever(intelligence=…)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence, Callable

from ragspine_core.errors import ConfigError
from ragspine_query.filter_extraction import DEFAULT_MIN_CONFIDENCE
from ragspine_query.fusion import DEFAULT_RRF_K
from ragspine_query.postprocess import DEFAULT_MMR_LAMBDA, make_postprocessor
from ragspine_query.source import Source, libraries_of
from ragspine_query.transforms import make_transforms, parse_transform_spec

if TYPE_CHECKING:
    from ragspine_core.glossary import Glossary
    from ragspine_core.settings import Settings
    from ragspine_core.llm import LLMProvider
    from ragspine_query.rerank.reranker import Reranker
    from ragspine_query.rerank.listwise import ListwiseJudge

TIER_MODES = ("off", "rules", "llm", "direct", "semantic", "multi_hop", "global", "multi_part")
CORRECTIVE_MODES = ("off", "relevance", "dynamic", "static", "llm")
FILTER_MODES = ("off", "rules", "llm")
#: Filter extraction's default: off, as the seed has it ("a separate optional stage"). On the
#: judged sample it gains nDCG overall but loses on multi-hop questions (docs/query-intelligence.md).
DEFAULT_FILTERS = "off"


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    v = (value or "off").strip().lower().replace("-", "_")
    if v in ("none", "0", "false", "no"):
        v = "off"
    if v in ("on", "1", "true", "yes", "auto"):
        v = allowed[1]
    if v not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return v


@dataclass(frozen=True, slots=True)
class QueryIntelligence:
    """Which query-intelligence stages run (validated; defaults: gate on, everything else off)."""

    gate: bool = True
    transforms: str = ""
    tiers: str = "off"
    postprocessor: str = ""
    mmr_lambda: float = DEFAULT_MMR_LAMBDA
    corrective: str = "off"
    cache_size: int = 0
    cache_ttl_s: float = 300.0
    fusion_n: int = 3
    filters: str = DEFAULT_FILTERS
    filter_min_confidence: float = DEFAULT_MIN_CONFIDENCE
    filter_fill: bool = True
    #: fuse the filtered and unfiltered rankings (reciprocal rank) instead of preferring the filtered one
    filter_blend: bool = True
    #: a caller's filters are a constraint; True lets a retry drop them (the result lists what it dropped)
    relax_filters: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "transforms", ",".join(parse_transform_spec(self.transforms)))
        object.__setattr__(self, "tiers", _choice(self.tiers, TIER_MODES, "tier mode"))
        object.__setattr__(self, "corrective", _choice(self.corrective, CORRECTIVE_MODES, "corrective mode"))
        object.__setattr__(self, "filters", _choice(self.filters, FILTER_MODES, "filter extraction mode"))
        if not (0.0 <= self.filter_min_confidence <= 1.0):
            raise ConfigError(f"filter_min_confidence must be in [0, 1], got {self.filter_min_confidence}")
        make_postprocessor(self.postprocessor, mmr_lambda=self.mmr_lambda)  # validates names and λ (factories get source=None)
        if not (0.0 <= self.mmr_lambda <= 1.0):
            raise ConfigError(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda}")
        if self.cache_size < 0 or not (self.cache_ttl_s > 0 and not math.isnan(self.cache_ttl_s)):
            raise ConfigError(f"cache_size must be >= 0 (0 = off) and cache_ttl_s > 0, got {self.cache_size}, {self.cache_ttl_s}")

    @classmethod
    def from_settings(cls, settings: "Settings") -> "QueryIntelligence":
        """The configuration the ``RAGSPINE_*`` query variables describe (parsed and checked
        by :class:`~ragspine_core.settings.Settings`)."""
        return cls(
            gate=settings.query_gate,
            transforms=settings.query_transforms,
            tiers=settings.query_tiers or "off",
            postprocessor=settings.postprocessor,
            mmr_lambda=settings.mmr_lambda,
            corrective=settings.corrective or "off",
            cache_size=settings.query_cache_size,
            cache_ttl_s=settings.query_cache_ttl_s,
            filters=settings.filter_extraction or DEFAULT_FILTERS,
        )

    def describe(self) -> str:
        return (f"gate={'on' if self.gate else 'off'} transforms={self.transforms or 'none'} tiers={self.tiers} "
                f"post={self.postprocessor or 'none'} mmr_lambda={self.mmr_lambda} corrective={self.corrective} "
                f"filters={self.filters}@{self.filter_min_confidence}{'+fill' if self.filter_fill else ''}{'+blend' if self.filter_blend else ''} cache={self.cache_size}"
                + (" relax_filters" if self.relax_filters else ""))


def _entity_counter(glossary: "Glossary") -> Callable[[str], int]:
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


def query_stages(
    source: Source,
    intelligence: QueryIntelligence | None = QueryIntelligence(),
    *,
    glossary: "Glossary | None" = None,
    provider: LLMProvider | None = None,
    transforms: Sequence[tuple[str, Any]] = (),
    reranker: Reranker | None = None,
    judge: ListwiseJudge | None = None,
    rerank_top_n: int = 10,
    rrf_k: float = DEFAULT_RRF_K,
    postprocessors: Sequence[tuple[str, Any]] = (),
) -> list[Any]:
    """The stage list of a query pipeline over ``source`` (a retriever), in order:

    ``extract_filters → gate → transforms → gate(variants) → retrieve (mask → channels →
    fuse, per variant; variant fusion) → rerank → postprocess → cut → postprocess(final)
    → restricted_strip → filter_fallback → corrective``

    A stage with nothing to do is not listed. ``intelligence=None``: the retrieval stages
    alone (no gate, no filter extraction, no grading). ``transforms`` (e.g. the glossary
    rewriter) run first, then the ones the spec names (``intelligence.transforms``: built-ins
    and plug-ins alike, looked up in :data:`~ragspine_query.pipeline.plugins.TRANSFORMS`),
    then the adaptive tiers; ``always`` entries
    (:func:`~ragspine_query.pipeline.plugins.register_transform`, …) run after the listed
    ones unless the spec names them. Post-processors likewise: the spec's, ``postprocessors``,
    then the always-entries.

    Raises:
        ConfigError: an LLM-only mode (``tiers=llm``, ``corrective=llm``) without a provider.
    """
    from ragspine_query.pipeline.plugins import PostprocessorContext, TransformContext, always_postprocessors, always_transforms
    from ragspine_query.pipeline.stages import core_stages

    qi = intelligence
    if qi is None:
        return core_stages(source, transforms=list(transforms) + always_transforms(TransformContext(provider=provider)),
                           reranker=reranker, judge=judge, rerank_top_n=rerank_top_n, rrf_k=rrf_k,
                           postprocessors=list(postprocessors) + always_postprocessors(PostprocessorContext(source=source)))
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
    post = named_post + list(postprocessors)
    # the registry's always-entries after the listed ones; one the spec names runs once, where the spec puts it
    always_t = always_transforms(TransformContext(provider=provider, fusion_n=qi.fusion_n), named=frozenset(n for n, _ in named))
    always_p = always_postprocessors(PostprocessorContext(source=source, mmr_lambda=qi.mmr_lambda),
                                     named=frozenset(n for n, _ in named_post))
    stages = core_stages(source, transforms=chain + always_t, reranker=reranker, judge=judge, rerank_top_n=rerank_top_n,
                         rrf_k=rrf_k, postprocessors=post + always_p, gate=gate)
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


def build_query_pipeline(
    source: Source,
    intelligence: QueryIntelligence | None = QueryIntelligence(),
    *,
    glossary: "Glossary | None" = None,
    provider: LLMProvider | None = None,
    transforms: Sequence[tuple[str, Any]] = (),
    reranker: Reranker | None = None,
    judge: ListwiseJudge | None = None,
    rerank_top_n: int = 10,
    rrf_k: float = DEFAULT_RRF_K,
    cache: Any | None = None,
    postprocessors: Sequence[tuple[str, Any]] = (),
) -> Any:
    """A :class:`~ragspine_query.pipeline.runner.QueryPipeline` over ``source`` (a
    retriever) that runs :func:`query_stages` — ``run(query, *, filters, top_k,
    include_restricted, explain)``. ``cache`` is a shared
    :class:`~ragspine_query.cache.ScopedCache` (default: a new one when ``cache_size > 0``);
    it memoises whole runs, keyed by the libraries' snapshots and this configuration.

    Raises:
        ConfigError: an LLM-only mode (``tiers=llm``, ``corrective=llm``) without a provider.
    """
    from ragspine_query.pipeline.runner import QueryPipeline

    stages = query_stages(source, intelligence, glossary=glossary, provider=provider, transforms=transforms, reranker=reranker,
                          judge=judge, rerank_top_n=rerank_top_n, rrf_k=rrf_k, postprocessors=postprocessors)
    qi = intelligence
    if cache is None and qi is not None and qi.cache_size > 0:
        from ragspine_query.cache import ScopedCache

        cache = ScopedCache(qi.cache_size, qi.cache_ttl_s)
    return QueryPipeline.from_stages(source, stages, cache=cache, variant=qi.describe() if qi is not None else "")


__all__ = ["CORRECTIVE_MODES", "DEFAULT_FILTERS", "FILTER_MODES", "QueryIntelligence", "TIER_MODES", "build_query_pipeline",
           "query_stages"]
