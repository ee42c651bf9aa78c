"""The one language detector: how much of a text is written in CJK scripts.

Definition (used everywhere: parsing's ``language`` metadata, the tokenizer's analyzer
choice, the embedding auto-backend):

* A *word character* is any character for which ``str.isalnum()`` is true (letters and
  digits of every script; punctuation, spaces and symbols do not count).
* A *CJK character* is a word character in one of the ranges the spec tokenizer emits
  as unigrams/bigrams (:data:`CJK_RANGES`): Han ideographs (Unified, Extension A,
  Compatibility), Japanese kana (hiragana, katakana) and Hangul syllables. Kana and
  Hangul are included because every consumer treats them like ideographs: the tokenizer
  splits them into unigrams, and all-MiniLM maps them to ``[UNK]`` just the same. The
  rare astral Han extensions (B–G) are left out on purpose: the spec tokenizer (version
  1, recorded in every BM25 index) treats them as separators, and counting what the
  tokenizer drops would make the two disagree; adding them needs a tokenizer version bump.
* :func:`cjk_share` is the number of CJK characters divided by the number of word
  characters (0.0 when there are none).

Two decisions are made from that one number, with two named thresholds, because their
costs differ:

* :data:`ZH_LANGUAGE_THRESHOLD` (0.3): the ``language`` label of a document — ``zh``
  when CJK text makes up a clear part of it. A user filters on this label, so a mostly
  English page quoting a few Chinese names must stay ``en``.
* :data:`MULTILINGUAL_EMBEDDING_THRESHOLD` (0.2): which embedding model a library gets.
  MiniLM turns CJK characters into ``[UNK]``, so losing them is a recall failure, while
  the multilingual model handles English well: the choice leans towards multilingual
  earlier. (One CJK character carries roughly a word, 4–5 Latin letters, so 0.2 of the
  characters is already about half of the words.)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Literal

Language = Literal["zh", "en"]

#: ``detect_language`` says ``zh`` from this :func:`cjk_share` on.
ZH_LANGUAGE_THRESHOLD = 0.3
#: The embedding auto-backend picks the multilingual model from this :func:`cjk_share` on.
MULTILINGUAL_EMBEDDING_THRESHOLD = 0.2

#: A library *mixes languages* when its second most common chunk language holds at least
#: this share of its chunks (see :class:`LanguageProfile`). xquad-zh-en (30 % Chinese
#: chunks) mixes; a Chinese library with a few English titles (qbqtc: under 1 %) does not.
MIXED_LIBRARY_THRESHOLD = 0.1

#: Code-point ranges of the CJK characters (see the module docstring), inclusive.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xAC00, 0xD7AF),  # Hangul Syllables
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
)

#: The same ranges as the body of a regex character class, for tokenizers.
CJK_CHAR_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)


def is_cjk(ch: str) -> bool:
    """Whether the single character ``ch`` is a CJK character (see the module docstring)."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def cjk_share(text: str) -> float:
    """Fraction of the word characters of ``text`` that are CJK, in [0, 1] (0.0 for none).

    >>> cjk_share("营收增长 revenue")
    0.36363636363636365
    """
    words = cjk = 0
    for ch in text:
        if ch.isalnum():
            words += 1
            if ch >= "\u3040" and is_cjk(ch):
                cjk += 1
    return cjk / words if words else 0.0


def detect_language(text: str, *, threshold: float = ZH_LANGUAGE_THRESHOLD) -> Language:
    """``"zh"`` when :func:`cjk_share` of ``text`` is at least ``threshold``, else ``"en"``.

    >>> detect_language("营收 revenue growth rate"), detect_language("营收增长 revenue")
    ('en', 'zh')
    """
    share = cjk_share(text)
    return "zh" if share > 0.0 and share >= threshold else "en"


def query_language(query: str) -> Language:
    """The language a query is planned in: its own ``language`` attribute when it carries
    one (a variant keeps its user query's language, see
    :func:`ragspine_query.transforms.transform.in_language_of`), else :func:`detect_language`."""
    lang = getattr(query, "language", "")
    return lang if lang else detect_language(str(query))


@dataclass(frozen=True, slots=True)
class LanguageProfile:
    """How a library's chunks divide between languages (their ``language`` labels).

    ``counts`` is ``((language, n_chunks), ...)`` sorted by count descending, then by
    language; empty for an empty library. ``majority`` is the first language (``en``
    when there is none); the library is ``mixed`` when the second language holds at
    least :data:`MIXED_LIBRARY_THRESHOLD` of the chunks.
    """

    counts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_labels(cls, labels: Iterable[str]) -> "LanguageProfile":
        """Count ``labels`` (one per chunk; an empty label counts as ``en``)."""
        counted = Counter(str(lab or "en") for lab in labels)
        return cls(tuple(sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))))

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def majority(self) -> str:
        return self.counts[0][0] if self.counts else "en"

    def share(self, language: str) -> float:
        total = self.total
        return dict(self.counts).get(language, 0) / total if total else 0.0

    @property
    def mixed(self) -> bool:
        return len(self.counts) > 1 and self.counts[1][1] / self.total >= MIXED_LIBRARY_THRESHOLD

    def describe(self) -> str:
        """``"en 70% zh 30%"``, the form explain and the eval JSON show."""
        total = self.total
        return " ".join(f"{lang} {n / total:.0%}" for lang, n in self.counts) if total else "empty"


__all__ = [
    "CJK_CHAR_CLASS",
    "CJK_RANGES",
    "Language",
    "LanguageProfile",
    "MIXED_LIBRARY_THRESHOLD",
    "MULTILINGUAL_EMBEDDING_THRESHOLD",
    "ZH_LANGUAGE_THRESHOLD",
    "cjk_share",
    "detect_language",
    "is_cjk",
    "query_language",
]
