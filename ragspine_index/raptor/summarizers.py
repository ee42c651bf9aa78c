"""Summarizers of the RAPTOR tree's clusters, and the cache that makes re-runs free.

A :class:`Summarizer` turns the texts of one cluster into one text (a *synthesis*: it
is shown as a theme, never cited). Two implementations:

* :class:`ExtractiveSummarizer` (the default; offline, deterministic): sentences ranked
  by centrality — cosine of their term vector to the cluster's centroid, as in
  centroid-based extractive summarization (Radev et al. 2004) — picked greedily with
  redundancy removal (maximal marginal relevance, Carbonell & Goldstein 1998) within a
  character budget, and emitted in source order. Every sentence of its output is a
  sentence of an input text.
* :class:`LLMSummarizer`: one chat call per cluster through the
  :class:`ragspine_core.llm.LLMProvider` seam.

:class:`SummaryCache` stores summaries by (summarizer id, hashes of the member texts in
order), so re-materializing an unchanged library makes no LLM call and a changed
document re-summarizes only the clusters whose members changed.
"""

from __future__ import annotations

import hashlib
import math
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.text.tokenize import tokenize

if TYPE_CHECKING:
    from ragspine_core.llm import LLMProvider

__all__ = ["EXTRACTIVE_VERSION", "LLM_SUMMARIZER_VERSION", "SUMMARIZER_NAMES", "ExtractiveSummarizer", "LLMSummarizer",
           "SummaryCache", "Summarizer", "make_summarizer", "members_key", "split_sentences", "text_sha"]

EXTRACTIVE_VERSION = "1"
LLM_SUMMARIZER_VERSION = "1"
#: ``_library.toml`` ``summarizer`` values: ``none`` builds no tree.
SUMMARIZER_NAMES = ("extractive", "llm", "none")

# a sentence ends at 。！？； (CJK, no space needed) or at .!?; followed by white space
_SENTENCE_END = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (stripped, non-empty), in order; each is a substring of ``text``."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def members_key(summarizer_id: str, texts: Sequence[str]) -> str:
    """The cache key of one cluster: the summarizer and the hashes of its member texts, in order."""
    h = hashlib.sha256(summarizer_id.encode("utf-8") + b"\x00")
    for t in texts:
        h.update(text_sha(t).encode("ascii"))
    return h.hexdigest()


@runtime_checkable
class Summarizer(Protocol):
    """``summarize(texts) -> text``; ``id`` names the method and its settings (the cache key)."""

    @property
    def id(self) -> str: ...

    #: Whether a call costs a request to a model (counted as LLM calls).
    @property
    def is_llm(self) -> bool: ...

    def summarize(self, texts: Sequence[str]) -> str: ...


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    """Centrality-ranked sentences with redundancy removal, within ``max_chars``.

    Parameters:
        max_chars: the summary's length budget in characters (> 0); the first pick is
            always kept (cut at the budget when it alone is longer).
        redundancy: a candidate whose cosine to an already picked sentence exceeds this
            is skipped (0 < redundancy <= 1).
    """

    max_chars: int = 600
    redundancy: float = 0.7
    is_llm: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars <= 0:
            raise ConfigError(f"extractive summary max_chars must be an integer > 0, got {self.max_chars!r}")
        if not 0 < self.redundancy <= 1:
            raise ConfigError(f"extractive summary redundancy must be in (0, 1], got {self.redundancy!r}")

    @property
    def id(self) -> str:
        return f"extractive@{EXTRACTIVE_VERSION}:{self.max_chars}:{self.redundancy:g}"

    def summarize(self, texts: Sequence[str]) -> str:
        sentences: list[tuple[int, int, str]] = []  # (member, position, sentence)
        for m, text in enumerate(texts):
            seen: set[str] = set()
            for p, s in enumerate(split_sentences(text)):
                if s not in seen:
                    seen.add(s)
                    sentences.append((m, p, s))
        if not sentences:
            return ""
        # term vectors (1 + log tf, L2-normalised) of every sentence, as one small matrix
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        for i, (_, _, s) in enumerate(sentences):
            for t, c in Counter(tokenize(s)).items():
                rows.append(i)
                cols.append(vocab.setdefault(t, len(vocab)))
                vals.append(1.0 + math.log(c))
        mat = np.zeros((len(sentences), max(1, len(vocab))))
        mat[rows, cols] = vals
        mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
        centre = mat.sum(axis=0)
        centre /= max(float(np.linalg.norm(centre)), 1e-12)
        central = np.round(mat @ centre, 12)
        # best first; ties by (member, position): deterministic
        order = sorted(range(len(sentences)), key=lambda i: (-central[i], sentences[i][0], sentences[i][1]))
        picked: list[int] = []
        used = 0
        for i in order:
            s = sentences[i][2]
            if picked and used + 1 + len(s) > self.max_chars:
                continue
            if picked and float((mat[picked] @ mat[i]).max()) > self.redundancy:
                continue
            picked.append(i)
            used += len(s) + (1 if used else 0)
            if used >= self.max_chars:
                break
        picked.sort(key=lambda i: (sentences[i][0], sentences[i][1]))
        out = " ".join(sentences[i][2] for i in picked)
        return out[: self.max_chars] if len(picked) == 1 else out


_LLM_INSTRUCTION = (
    "You summarize a group of related passages from one document library. Write one concise paragraph "
    "(at most {words} words) that states the main themes the passages share. Use only facts stated in the "
    "passages; do not add citations, headings or lists.")


class LLMSummarizer:
    """One chat completion per cluster, through an :class:`~ragspine_core.llm.LLMProvider`.

    ``model`` is part of :attr:`id` (and so of the cache key): a different model never
    reuses another model's summaries.

    A reply that is empty, or in another language than the passages (a script test,
    :func:`~ragspine_core.text.language.detect_language`), is not used: that cluster gets the
    extractive summary instead, ``fallbacks`` counts it, ``last_fell_back`` says so for the
    cluster just summarized (the cache does not keep it: the next build asks again) and the
    tree's ``tree.json`` records the count (``build.llm_fallbacks``).

    Raises (from :meth:`summarize`):
        ProviderError: the provider failed (server down, deadline, unusable body): the
            build fails with its message rather than publish a tree of other summaries.
    """

    is_llm = True

    def __init__(self, provider: LLMProvider | None, *, model: str | None = None, max_words: int = 120, max_tokens: int | None = None) -> None:
        if provider is None or not callable(getattr(provider, "chat", None)):
            raise ConfigError("the llm summarizer needs an LLM provider with a chat() method; set RAGSPINE_LLM_BASE_URL "
                              "and RAGSPINE_LLM_MODEL (the llm resource), or use summarizer = \"extractive\"")
        self.provider = provider
        self.model = model or str(getattr(provider, "model", "") or "unknown")
        self.max_words = int(max_words)
        if max_tokens is None:
            from ragspine_core.llm import feature_max_tokens

            max_tokens = feature_max_tokens("raptor")
        self.max_tokens = int(max_tokens)
        self.fallbacks = 0
        self.last_fell_back = False
        self._extractive = ExtractiveSummarizer()

    @property
    def id(self) -> str:
        """What a cached summary depends on: the prompt version, the model, the word target and
        the token cap (a summary cut at a smaller cap is not reused by a build with a larger one)."""
        return f"llm@{LLM_SUMMARIZER_VERSION}:{self.model}:{self.max_words}:t{self.max_tokens}"

    def messages(self, texts: Sequence[str]) -> list[dict]:
        body = "\n\n".join(f"[{i}] {t}" for i, t in enumerate(texts, start=1))
        return [{"role": "system", "content": _LLM_INSTRUCTION.format(words=self.max_words)},
                {"role": "user", "content": f"Passages:\n\n{body}\n\nSummary:"}]

    def summarize(self, texts: Sequence[str]) -> str:
        from ragspine_core.text.language import detect_language

        out = self.provider.chat(self.messages(texts), temperature=0.0, max_tokens=self.max_tokens).strip()
        self.last_fell_back = not out or detect_language(out) != detect_language(" ".join(texts))
        if self.last_fell_back:  # an empty or wrong-language reply: this cluster's extractive summary
            self.fallbacks += 1
            return self._extractive.summarize(texts)
        return out


def make_summarizer(name: str, *, llm: Any | None = None, max_chars: int = 600) -> Summarizer | None:
    """The summarizer a library asks for (``_library.toml`` ``summarizer``); None for ``none``.

    Raises:
        ConfigError: an unknown name (the allowed ones are listed), or ``llm`` without a provider.
    """
    n = (name or "extractive").strip().lower()
    if n == "none":
        return None
    if n == "extractive":
        return ExtractiveSummarizer(max_chars=max_chars)
    if n == "llm":
        return LLMSummarizer(llm)
    raise ConfigError(f"unknown summarizer {name!r}; allowed: {', '.join(SUMMARIZER_NAMES)}")


class SummaryCache:
    """(summarizer id, member texts' hashes) -> summary, in one SQLite file shared by libraries.

    Counts what it served: ``hits`` (from the cache) and ``misses`` (summarized now).
    """

    def __init__(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # members: the sha256 of each member text, space-separated (for the RESTRICTED purge)
        self._conn.execute("CREATE TABLE IF NOT EXISTS summary_cache (key TEXT PRIMARY KEY, summarizer_id TEXT NOT NULL, "
                           "summary TEXT NOT NULL, members TEXT NOT NULL DEFAULT '')")
        self._conn.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        row = self._conn.execute("SELECT summary FROM summary_cache WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, summarizer_id: str, summary: str, members: Sequence[str] = ()) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO summary_cache (key, summarizer_id, summary, members) VALUES (?,?,?,?)",
                               (key, summarizer_id, summary, " ".join(text_sha(t) for t in members)))

    def purge_members(self, text_hashes: Sequence[str], deleted_summaries: list[str] | None = None) -> int:
        """Delete every summary built (directly or through other summaries) from a text of
        these hashes — e.g. chunks of a document that is RESTRICTED now. Returns the rows
        deleted; their texts are appended to ``deleted_summaries`` when given (their node
        vectors in the embedding cache go too, ``purge.py``)."""
        doomed = set(text_hashes)
        deleted = 0
        while doomed:
            rows = [(k, s) for k, s, m in self._conn.execute("SELECT key, summary, members FROM summary_cache")
                    if doomed & set(m.split())]
            if not rows:
                break
            with self._conn:
                self._conn.executemany("DELETE FROM summary_cache WHERE key = ?", [(k,) for k, _ in rows])
            deleted += len(rows)
            if deleted_summaries is not None:
                deleted_summaries.extend(s for _, s in rows)
            doomed = {text_sha(s) for _, s in rows}  # summaries of those summaries go too
        return deleted

    def summarize(self, summarizer: Summarizer, texts: Sequence[str]) -> str:
        """The cached summary of ``texts``, or a new one (stored)."""
        key = members_key(summarizer.id, texts)
        found = self.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        out = summarizer.summarize(texts)
        if not getattr(summarizer, "last_fell_back", False):  # a fallback summary is not kept: the next build asks again
            self.put(key, summarizer.id, out, texts)
        return out

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "SummaryCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
