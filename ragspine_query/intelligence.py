"""Query intelligence: the frozen config of the stages around retrieval.

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
Build it from settings with :meth:`QueryIntelligence.from_settings` (the variables are in
``docs/configuration.md``); it is the ``intelligence`` of a
:class:`~ragspine_query.builder.PipelineSpec`, which
:func:`~ragspine_query.builder.build_pipeline` turns into the stage list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragspine_core.errors import ConfigError
from ragspine_query.filter_extraction import DEFAULT_MIN_CONFIDENCE
from ragspine_query.postprocess import DEFAULT_MMR_LAMBDA, make_postprocessor
from ragspine_query.transforms import parse_transform_spec

if TYPE_CHECKING:
    from ragspine_core.settings import Settings

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
    #: interleave the hits holding the extracted values with the unfiltered ranking instead of preferring the filtered one
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


__all__ = ["CORRECTIVE_MODES", "DEFAULT_FILTERS", "FILTER_MODES", "QueryIntelligence", "TIER_MODES"]
