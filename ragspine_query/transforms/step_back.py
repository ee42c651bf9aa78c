"""Step-back prompting (Zheng et al., "Take a Step Back: Evoking Reasoning via Abstraction
in Large Language Models", ICLR 2024): retrieve for a more generic question as well as the
specific one, and fuse both.

With an LLM the step-back question is asked of it; without one (or when it fails) a
deterministic abstraction (also when its answer is in another language or repeats the query) drops the specifics — years, quarters, dates, figures — so
"Acme China revenue in 2024Q3" also searches "Acme China revenue".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ragspine_query.transforms.transform import Variants, ask_llm, feature_max_tokens, merge, reply_lines, same_language_lines

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

SYSTEM = ("Rewrite the user's search query as a more generic 'step-back' question about the underlying concept or "
          "background needed to answer it. Answer with one question only.")

_SPECIFICS = re.compile(
    r"\b(?:(?:19|20)\d{2}(?:\s*[-/]?\s*(?:q[1-4]|h[12]|\d{1,2}))?|q[1-4](?:\s*(?:19|20)\d{2})?|fy\s*\d{2,4}|h[12]\s*(?:19|20)\d{2}"
    r"|\d+(?:[.,]\d+)*\s*(?:%|percent|million|billion|m|bn|k)?)(?!\w)",
    re.IGNORECASE)
_FILLER = re.compile(r"\b(?:in|for|during|of|as of|by|on|to)\s*(?=[?.!,]|$)", re.IGNORECASE)


def abstract_query(query: str) -> str:
    """The query without years, quarters, dates and figures (whitespace tidied)."""
    text = _SPECIFICS.sub(" ", query)
    text = " ".join(text.split())
    text = _FILLER.sub("", text).strip(" ,;:-")
    return re.sub(r"\s+([?.!,;:])", r"\1", " ".join(text.split()))


class StepBackTransform:
    """Adds one step-back question (LLM, else the deterministic abstraction)."""

    name = "step_back"

    def __init__(self, provider: LLMProvider | None = None) -> None:
        self.provider = provider

    def __call__(self, variants: list[str]) -> Variants:
        query = str(variants[0])
        reply, note = (ask_llm(self.provider, SYSTEM, query, max_tokens=feature_max_tokens("step_back"))
                       if self.provider is not None else (None, ""))
        lines, dropped = same_language_lines(query, reply_lines(reply, limit=3) if reply else [])
        lines = [line for line in lines if line.casefold() != query.strip().casefold()][:1]
        if reply is not None and not lines:
            note = "the LLM answered in another language" if dropped else "the LLM repeated the query or gave no question"
        if lines:
            return Variants(merge(list(variants), lines), "step_back: LLM")
        generic = abstract_query(query)
        how = "deterministic (no LLM)" if self.provider is None else f"deterministic ({note or 'empty LLM reply'})"
        if not generic or generic.casefold() == query.strip().casefold() or len(generic.split()) < 2:
            return Variants(variants, f"step_back: {how}: nothing specific to drop; skipped")
        return Variants(merge(list(variants), [generic]), f"step_back: {how}")
