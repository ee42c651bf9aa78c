"""Query decomposition (least-to-most / self-ask style, Zhou et al. 2023; Press et al. 2023):
a compound question becomes sub-questions; each is retrieved on its own (through the same
guarded pipeline: every sub-question passes the competitor gate) and the rankings are
fused with RRF, the user's query included.

With an LLM the sub-questions are asked of it; without one (or when it fails) a
deterministic splitter cuts at question marks, semicolons, "and"/"as well as" between
clauses and "compare A and/with B".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ragspine_core.errors import ConfigError
from ragspine_query.transforms.transform import (MAX_QUERY_CHARS, Variants, ask_llm, feature_max_tokens, merge, reply_lines,
                                                 same_language_lines)

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

SYSTEM = ("Break the user's question into at most {n} simpler sub-questions that together answer it. "
          "If it is already simple, repeat it. One sub-question per line, no numbering.")

_SENTENCE = re.compile(r"(?<=[?;])\s+|;\s*")
_CLAUSE = re.compile(r"\s*(?:,\s*)?\b(?:and also|as well as|and then|and|versus|vs\.?)\b\s*", re.IGNORECASE)
COMPARE = re.compile(r"^\s*(?:compare|comparison of|difference between|differences between)\s+(.+?)\s+(?:and|with|to|vs\.?|versus)\s+(.+?)\s*\??$",
                      re.IGNORECASE)


def split_question(query: str, *, limit: int = 4) -> list[str]:
    """Deterministic sub-questions of ``query`` (empty when it does not split)."""
    q = " ".join(query.split())
    m = COMPARE.match(q)
    if m:
        a, b = m.group(1).strip(), m.group(2).strip()
        return [a, b][:limit] if a and b else []
    parts = [p.strip() for p in _SENTENCE.split(q) if p.strip()]
    out: list[str] = []
    for p in parts:
        pieces = [x.strip(" ,") for x in _CLAUSE.split(p) if x.strip(" ,")]
        # split on "and" only between clauses of some substance (not "research and development")
        if len(pieces) > 1 and all(len(x.split()) >= 3 for x in pieces):
            out.extend(pieces)
        else:
            out.append(p)
    out = [o[:MAX_QUERY_CHARS] for o in out]
    return out[:limit] if len(out) > 1 else []


class DecomposeTransform:
    """Adds the sub-questions of the user's query (LLM, else the deterministic splitter)."""

    name = "decompose"

    def __init__(self, provider: LLMProvider | None = None, *, max_subquestions: int = 3) -> None:
        if max_subquestions < 1:
            raise ConfigError(f"max_subquestions must be >= 1, got {max_subquestions}")
        self.provider = provider
        self.max_subquestions = max_subquestions

    def __call__(self, variants: list[str]) -> Variants:
        query = str(variants[0])
        note = ""
        if self.provider is not None:
            reply, note = ask_llm(self.provider, SYSTEM.format(n=self.max_subquestions), query,
                                  max_tokens=feature_max_tokens("decompose", times=self.max_subquestions))
            lines = reply_lines(reply, limit=2 * self.max_subquestions) if reply else []
            subs, dropped = same_language_lines(query, lines)
            subs = [s for s in subs if s.casefold() != query.strip().casefold()][: self.max_subquestions]
            if subs:
                extra = f" ({dropped})" if dropped else ""
                return Variants(merge(list(variants), subs), f"decompose: {len(subs)} LLM sub-questions, fused by RRF{extra}")
            if reply is not None:
                note = dropped or "the LLM only repeated the question"
        subs = split_question(query, limit=self.max_subquestions)
        how = "deterministic (no LLM)" if self.provider is None else f"deterministic ({note or 'LLM gave no sub-question'})"
        if not subs:
            return Variants(variants, f"decompose: {how}: a single question; skipped")
        return Variants(merge(list(variants), subs), f"decompose: {how}: {len(subs)} sub-questions, fused by RRF")
