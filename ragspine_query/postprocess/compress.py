"""Extractive contextual compression: keep the sentences of each hit that share a term
with the query (LangChain's "contextual compression" idea, extractive: no LLM, nothing
rewritten).

It writes the *prompt text* only: the hit's chunk gets ``parent_text`` = the kept
sentences (which :func:`~ragspine_core.records.to_snippet` emits as ``prompt_text``);
``text``, ``start``/``end`` and the locator stay exactly as indexed, so every citation
still points at the original span. A chunk with a parent text (small-to-big) is
compressed from the parent. When no sentence shares a term, the prompt text is left as
it was. Sentences keep their order.
"""

from __future__ import annotations

import dataclasses
import re

from ragspine_core.errors import ConfigError
from ragspine_core.records import Hit
from ragspine_core.text.tokenize import ENGLISH_STOP_WORDS

_SENT = re.compile(r"(?<=[.!?。！？])\s+|\n{2,}|(?<=[。！？])")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def _terms(text: str) -> set[str]:
    out: set[str] = set()
    for t in _TOKEN.findall(text.casefold()):
        if t in ENGLISH_STOP_WORDS:
            continue
        if len(t) > 1 and all("\u4e00" <= c <= "\u9fff" for c in t):  # CJK run: its bigrams
            out.update(t[i:i + 2] for i in range(len(t) - 1))
        elif len(t) > 1 or t.isdigit():
            out.add(t[:6] if len(t) > 6 else t)  # a crude shared stem: "margins" ~ "margin"
    return out


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def compress_text(query: str, text: str, *, max_sentences: int | None = None) -> str:
    """The sentences of ``text`` sharing a term with ``query``, in order (``text`` when none do)."""
    q = _terms(query)
    sents = sentences(text)
    scored = [(len(q & _terms(s)), i) for i, s in enumerate(sents)]
    keep = [i for n, i in scored if n > 0]
    if not keep:
        return text
    if max_sentences is not None and len(keep) > max_sentences:
        best = sorted(((n, i) for n, i in scored if n > 0), key=lambda x: (-x[0], x[1]))[:max_sentences]
        keep = sorted(i for _, i in best)
    return " ".join(sents[i] for i in keep)


class ExtractiveCompressor:
    """A ``final`` post-processor: each hit's prompt text reduced to its query-relevant sentences."""

    final = True

    def __init__(self, *, max_sentences: int | None = None) -> None:
        if max_sentences is not None and max_sentences < 1:
            raise ConfigError(f"max_sentences must be >= 1 (or None), got {max_sentences}")
        self.max_sentences = max_sentences
        self.describe = "writes prompt_text; text and span unchanged"

    def __call__(self, query: str, hits: list[Hit]) -> list[Hit]:
        out = []
        for h in hits:
            c = h.chunk
            source = c.parent_text or c.text
            short = compress_text(str(query), source, max_sentences=self.max_sentences)
            if short == source and not c.parent_text:
                out.append(h)
                continue
            out.append(Hit(dataclasses.replace(c, parent_text=short), h.score, dict(h.scores), h.via))
        return out
