"""HyDE — Hypothetical Document Embeddings (Gao et al., "Precise Zero-Shot Dense Retrieval
without Relevance Labels", ACL 2023).

An LLM writes a short passage that would answer the query; the *dense* channel embeds
that passage instead of the query, while the lexical channel keeps the user's words
(a hypothetical passage is a probe, never a citable fact, and its invented terms would
only add lexical noise). Without a provider, or when the LLM fails, the query runs as is
and ``explain`` says why; so does a passage in another language than the query (a
model's slip, not a probe of the query's language).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragspine_query.transforms.transform import MAX_PROBE_CHARS, ChannelQuery, Variants, ask_llm, feature_max_tokens, other_language

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

SYSTEM = ("You write a short, factual-sounding passage (3-5 sentences) that would answer the user's search query, "
          "as it might appear in a report. Answer with the passage only.")


class HyDETransform:
    """The first variant becomes a :class:`ChannelQuery` whose ``vector`` text is the
    hypothetical passage (other variants are left alone)."""

    name = "hyde"

    def __init__(self, provider: LLMProvider | None, *, dense_channels: tuple[str, ...] = ("vector",)) -> None:
        self.provider = provider
        self.dense_channels = dense_channels

    def __call__(self, variants: list[str]) -> Variants:
        query = variants[0]
        reply, note = ask_llm(self.provider, SYSTEM, str(query), max_tokens=feature_max_tokens("hyde"))
        if reply is None:
            return Variants(variants, f"hyde: {note}")
        probe = " ".join(reply.split())[:MAX_PROBE_CHARS]
        if other_language(str(query), probe):
            return Variants(variants, "hyde: the LLM answered in another language: plain query")
        texts = dict(getattr(query, "channel_texts", {}))
        texts.update({c: probe for c in self.dense_channels})
        first = query.replace(channel_texts=texts, origin="hyde") if isinstance(query, ChannelQuery) \
            else ChannelQuery(query, channel_texts=texts, origin="hyde")
        return Variants([first, *variants[1:]], f"hyde: dense probe of {len(probe)} chars; lexical keeps the query")
