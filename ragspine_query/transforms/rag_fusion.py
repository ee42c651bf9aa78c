"""RAG-Fusion (Rackauckas, "RAG-Fusion: a New Take on Retrieval-Augmented Generation",
2024): an LLM writes N reformulations of the query; each is retrieved and the rankings
are fused with the one Reciprocal Rank Fusion (:func:`~ragspine_query.fusion.weighted_rrf`,
which the query pipeline applies to every variant list).

Without a provider, or when the LLM fails, the transform is skipped with a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragspine_core.errors import ConfigError
from ragspine_query.transforms.transform import Variants, ask_llm, feature_max_tokens, merge, reply_lines

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

SYSTEM = ("You generate alternative search queries. Given a search query, write {n} different rephrasings that "
          "would find the same information (synonyms, more specific or more general wording). One per line, no numbering.")


class RagFusionTransform:
    """Adds up to ``n`` LLM reformulations of the user's query after the existing variants."""

    name = "fusion"

    def __init__(self, provider: LLMProvider | None, *, n: int = 3) -> None:
        if n < 1:
            raise ConfigError(f"RAG-Fusion needs n >= 1 variants, got {n}")
        self.provider = provider
        self.n = n

    def __call__(self, variants: list[str]) -> Variants:
        reply, note = ask_llm(self.provider, SYSTEM.format(n=self.n), str(variants[0]), max_tokens=feature_max_tokens("fusion", times=self.n))
        if reply is None:
            return Variants(variants, f"fusion: {note}")
        new = reply_lines(reply, limit=self.n)
        out = merge(list(variants), new)
        return Variants(out, f"fusion: {len(out) - len(variants)} LLM variants, fused by RRF")
