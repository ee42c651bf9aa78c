"""Adaptive retrieval tiers (Adaptive-RAG, Jeong et al., NAACL 2024; the Cortex seed's
``ClassifyQueryComplexity``): a classifier sorts each query into a tier and the tier
picks the channels that run.

=================  ==========================================  =====================================
tier               when (rule-based classifier)                channels
=================  ==========================================  =====================================
``direct``         quoted phrases, identifiers/codes, <= 3     ``bm25`` only
                   words that are not a question
``semantic``       everything else                             ``bm25`` + ``vector``
``multi_hop``      relational questions: compare/versus,       ``bm25`` + ``vector`` + ``graph``
                   "relationship between", "impact of … on",  (the relation-graph channel)
                   "which … subsidiary/parent/peer"
``global``         overview questions: summarise, overall,     ``bm25`` + ``vector`` + the relation
                   trends, themes, landscape, big picture      graph's ``community`` channel (chunks
                                                               of the communities the query matches)
                                                               and/or the summary tree's channel
                                                               (``tree``/``raptor``, when on)
``multi_part``     several questions in one: two sentences,    ``bm25`` + ``vector``, and the query
                   "…; …", "X and Y" between clauses           is **decomposed** (Adaptive-RAG's
                                                               multi-step path): its sub-questions
                                                               are retrieved and fused by RRF
=================  ==========================================  =====================================

A tier can be forced (Cortex's ``Mode``): ``TierClassifier(force="multi_hop")``,
``QueryIntelligence(tiers="multi_hop")``, ``ragspine query --tiers multi_hop``.

Every tier runs a real path: when the channel a tier needs is not registered (or not
built for the library), the tier falls back to ``semantic`` and ``explain`` says so. An
optional LLM classifier (through the provider) may replace the rules; its failure falls
back to the rules, with a note.

The tier is applied as the last transform: every variant becomes a
:class:`~ragspine_query.transforms.transform.ChannelQuery` restricted to the tier's channels.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ragspine_core.errors import ConfigError
from ragspine_query.source import Source, channels_of
from ragspine_query.transforms.transform import Variants, ask_llm, feature_max_tokens, with_channels

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

TIERS: tuple[str, ...] = ("direct", "semantic", "multi_hop", "global", "multi_part")
GRAPH_CHANNELS: tuple[str, ...] = ("graph",)
GLOBAL_CHANNELS: tuple[str, ...] = ("community", "tree", "raptor", "summary", "summary_tree")
BASE_CHANNELS: tuple[str, ...] = ("bm25", "vector")

_GLOBAL = re.compile(
    r"\b(?:summari[sz]e|summary|overview|overall|big picture|landscape|main (?:themes?|topics|points|issues|trends)|"
    r"key (?:themes?|trends|takeaways)|themes?|trends?|in general|high[- ]level|across (?:all|the (?:group|company|companies|portfolio)))\b",
    re.IGNORECASE)
_MULTI = re.compile(
    r"\b(?:compare|comparison|compared|versus|vs\.?|relationship|related to|relate to|impact of .+ on|effect of .+ on|"
    r"how does .+ (?:affect|influence|impact)|between .+ and|subsidiar(?:y|ies)|parent (?:company|of)|peers?|"
    r"both .+ and|which .+ (?:that|whose|who))\b",
    re.IGNORECASE)
_QUESTION = re.compile(r"^\s*(?:what|why|how|which|who|whom|when|where|does|do|is|are|can|could|should|would|will)\b|\?\s*$",
                       re.IGNORECASE)
_IDENT = re.compile(r"\"[^\"]+\"|'[^']+'|\b\w*\d\w*[A-Za-z_]\w*\b|\b[A-Za-z]\w*\d\w*\b|\b\w+_\w+\b|\b[A-Z]{2,}\d*\b")


def classify_query(query: str, *, entity_count: Callable[[str], int] | None = None) -> tuple[str, str]:
    """``(tier, reason)`` by the rules (deterministic, microseconds).

    ``entity_count(query)`` (e.g. glossary entities named) >= 2 makes a query multi-hop.
    """
    q = " ".join(str(query).split())
    if _GLOBAL.search(q):
        return "global", "overview wording"
    if _multi_part(q):
        return "multi_part", "several questions in one"
    if _MULTI.search(q):
        return "multi_hop", "relational wording"
    if entity_count is not None and entity_count(q) >= 2:
        return "multi_hop", "names two or more glossary entities"
    words = q.split()
    if _IDENT.search(q) and len(words) <= 6 and not _QUESTION.search(q):
        return "direct", "identifier or quoted phrase"
    if len(words) <= 3 and not _QUESTION.search(q):
        return "direct", "short keyword query"
    return "semantic", "default"


def _multi_part(q: str) -> bool:
    """Whether ``q`` asks several things: the deterministic splitter finds sub-questions
    (a comparison "compare A and B" is relational, not multi-part)."""
    from ragspine_query.transforms.decompose import COMPARE, split_question

    return not COMPARE.match(q) and len(split_question(q)) >= 2


LLM_SYSTEM = ("Classify the search query into exactly one retrieval tier: direct (exact keyword or identifier lookup), "
              "semantic (a conceptual question), multi_hop (relations between several entities or facts), global "
              "(an overview or summary across many documents), multi_part (several separate questions in one). "
              "Answer with the tier name only.")


class TierClassifier:
    """Rule-based by default; with ``use_llm=True`` and a provider, asks the LLM first."""

    def __init__(self, *, provider: LLMProvider | None = None, use_llm: bool = False, entity_count: Callable[[str], int] | None = None,
                 force: str | None = None) -> None:
        if use_llm and provider is None:
            raise ConfigError("the LLM tier classifier needs an LLM provider: set RAGSPINE_LLM_BASE_URL and RAGSPINE_LLM_MODEL, "
                              "or use the rule-based classifier (tiers=rules)")
        if force is not None and force not in TIERS:
            raise ConfigError(f"unknown tier {force!r} to force; allowed: {', '.join(TIERS)}")
        self.provider = provider
        self.use_llm = use_llm
        self.entity_count = entity_count
        self.force = force

    def classify(self, query: str) -> tuple[str, str]:
        if self.force is not None:
            return self.force, "forced"
        if self.use_llm:
            reply, note = ask_llm(self.provider, LLM_SYSTEM, str(query), max_tokens=feature_max_tokens("tiers"))
            if reply is not None:
                word = reply.strip().lower().replace("-", "_").split()[0].strip(".:,") if reply.split() else ""
                word = {"multihop": "multi_hop", "multi": "multi_hop", "hybrid": "semantic", "lexical": "direct",
                        "multipart": "multi_part"}.get(word, word)
                if word in TIERS:
                    return word, "LLM"
                note = "LLM answered no tier"
            tier, reason = classify_query(query, entity_count=self.entity_count)
            return tier, f"{reason} (rules: {note})"
        return classify_query(query, entity_count=self.entity_count)


def available_channels(source: Source) -> frozenset[str]:
    """Names of the channels a retriever actually built (union over a multi-index)."""
    return frozenset(c.name for c in channels_of(source))


def tier_channels(tier: str, available: Iterable[str]) -> tuple[str, frozenset[str] | None, str]:
    """``(tier that runs, channels or None for all, note)`` — with the fallback when a
    tier's channel is missing."""
    have = frozenset(available)
    base = frozenset(BASE_CHANNELS) & have or have
    if tier == "direct":
        if "bm25" in have:
            return "direct", frozenset({"bm25"}), "bm25 only"
        return "semantic", None, "direct tier needs the bm25 channel, which is absent: fell back to semantic"
    if tier == "multi_hop":
        graph = frozenset(GRAPH_CHANNELS) & have
        if graph:
            return "multi_hop", base | graph, f"channels {', '.join(sorted(base | graph))}"
        return "semantic", base, ("multi_hop tier needs the 'graph' channel, which this retriever did not build (not registered, "
                                   "no relation graph in the snapshot, or not enabled): fell back to semantic")
    if tier == "global":
        tree = frozenset(GLOBAL_CHANNELS) & have
        if tree:
            return "global", base | tree, f"channels {', '.join(sorted(base | tree))}"
        return "semantic", base, ("global tier needs a community or summary-tree channel (one of " + ", ".join(GLOBAL_CHANNELS)
                                  + "), which this retriever did not build (not registered, no relation graph or summary tree, or "
                                  "RAGSPINE_TREE=off): fell back to semantic")
    if tier == "multi_part":
        return "multi_part", base, f"decomposed; channels {', '.join(sorted(base))}"
    return "semantic", base, f"channels {', '.join(sorted(base))}"


class AdaptiveTierTransform:
    """The tier as the pipeline's last transform: classify the user's query, then restrict
    every variant to the tier's channels (a pinned variant, e.g. corrective widening, is kept).
    The ``multi_part`` tier first adds the query's sub-questions (:class:`DecomposeTransform`:
    the LLM's when a provider is given, else the deterministic splitter); each passes the
    competitor gate before retrieval like every variant."""

    name = "tiers"

    def __init__(self, classifier: TierClassifier, source: Source, *, decomposer: Any | None = None) -> None:
        self.classifier = classifier
        self.source = source
        if decomposer is None:
            from ragspine_query.transforms.decompose import DecomposeTransform

            decomposer = DecomposeTransform(classifier.provider)
        self.decomposer = decomposer

    def __call__(self, variants: list[str]) -> Variants:
        asked, reason = self.classifier.classify(str(variants[0]))
        tier, channels, note = tier_channels(asked, available_channels(self.source))
        if tier == "multi_part":
            split = self.decomposer(list(variants))
            variants = list(split)
            note = f"{note}: {getattr(split, 'note', '')}"
        out = [with_channels(v, channels, origin=f"tier:{tier}") for v in variants]
        return Variants(out, f"tier {asked} ({reason}) -> {tier}: {note}", tier=tier)


__all__ = ["AdaptiveTierTransform", "GLOBAL_CHANNELS", "GRAPH_CHANNELS", "TIERS", "TierClassifier", "available_channels",
           "classify_query", "tier_channels"]
