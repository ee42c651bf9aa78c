"""Entity extraction for the relation graph: offline, deterministic, per chunk.

Sources, strongest first (a name found by several keeps the strongest source):

* ``glossary`` — every entity and alias of the glossary (``ragspine_query.glossary``);
  all aliases of one concept map to one node (``g:<id>``);
* ``metadata`` — a chunk's ``entity`` field (comma/semicolon separated);
* ``title`` — the document title (HotpotQA-style passage titles become entity nodes;
  a trailing disambiguation ``(film)`` is dropped for matching);
* ``extracted`` — from the chunk text: English capitalised spans (``Lvn Pictures``,
  ``World War II``, ``Mahbub ul Haq``) and quoted titles (``"May"``); Chinese glossary
  names plus frequent CJK n-gram terms (document frequency >= 2, maximal, not edged by
  function characters).

Names are matched case-insensitively on a normalised key (:func:`entity_key`). Every
function here is pure; callers pass only non-RESTRICTED chunks (the relation-graph step
guarantees it), so nothing extracted here can come from RESTRICTED text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from ragspine_query.graph.names import STOP_WORDS, entity_key, word_key as _word_key

#: Source of an entity name, strongest first (ties in a merged node keep the first).
ENTITY_SOURCES = ("glossary", "metadata", "title", "extracted", "model")
SOURCE_RANK = {s: i for i, s in enumerate(ENTITY_SOURCES)}

#: Lowercase words allowed inside a capitalised span ("Mahbub ul Haq", "Bank of China").
_PARTICLES = frozenset("of the de la le du des del della da di von van der den ul al bin ibn y e und".split())
#: Capitalised words that are (almost) never an entity on their own (shared with the graph channel).
_STOP_CAPS = STOP_WORDS
_WORD = r"[A-Z0-9][\w'’\-\.&]*"
_CAP_SPAN = re.compile(
    rf"(?<![\w'’]){_WORD}(?:[ \t]+(?:(?:{'|'.join(sorted(_PARTICLES))})[ \t]+)*{_WORD})*", re.UNICODE)
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»\n]{2,80})[\"“”«»]")
_PAREN_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
#: CJK function characters that never start or end a term.
_CJK_EDGE_STOP = frozenset("的了是在和与及等为对中也有这那一不个之而于以其或并就都被把从到向由上下")


def title_aliases(title: str) -> tuple[str, ...]:
    """A document title and, when it ends in a disambiguation ``(…)``, the title without it."""
    t = title.strip()
    if not t:
        return ()
    short = _PAREN_TAIL.sub("", t).strip()
    return (t,) if not short or short == t else (t, short)


@lru_cache(maxsize=1 << 18)
def _useful(key: str) -> bool:
    if len(key) < 2 or key in _STOP_CAPS:
        return False
    if key.replace(" ", "").replace(".", "").isdigit():
        return False
    return any(ch.isalpha() for ch in key)


def english_spans(text: str) -> list[str]:
    """Capitalised spans and quoted titles of one text, in order of appearance (deduplicated)."""
    out: list[str] = []
    for m in _QUOTED.finditer(text):
        q = m.group(1).strip()
        if 1 <= len(q.split()) <= 8:
            out.append(q)
    for m in _CAP_SPAN.finditer(text):
        span = m.group(0).strip(" .,'’-")
        words = span.split()
        # drop leading/trailing stop words ("The", "In 1998 Acme")
        while words and (words[0].casefold().strip(".") in _STOP_CAPS or words[0].casefold() in _PARTICLES
                         or words[0].replace(".", "").isdigit()):
            words.pop(0)
        while words and (words[-1].casefold().strip(".") in _STOP_CAPS or words[-1].casefold() in _PARTICLES):
            words.pop()
        if not words:
            continue
        if all(w.replace(".", "").isdigit() for w in words):
            continue
        span = " ".join(words).strip(" .,;:'’-")
        if len(words) > 6:
            continue
        out.append(span)
    seen: set[str] = set()
    uniq = []
    for s in out:
        k = entity_key(s)
        if _useful(k) and k not in seen:
            seen.add(k)
            uniq.append(s)
    return uniq


def cjk_ngrams(text: str, n_min: int = 2, n_max: int = 8) -> set[str]:
    """Every CJK n-gram (``n_min``..``n_max`` characters) inside runs of CJK characters."""
    out: set[str] = set()
    if text.isascii():  # no CJK character, no run to scan
        return out
    for run in _CJK_RUN.findall(text):
        for n in range(n_min, min(n_max, len(run)) + 1):
            for i in range(len(run) - n + 1):
                g = run[i:i + n]
                if g[0] not in _CJK_EDGE_STOP and g[-1] not in _CJK_EDGE_STOP:
                    out.add(g)
    return out


def frequent_cjk_terms(texts: Sequence[str], *, min_df: int = 2, max_df_share: float = 0.05, per_chunk: int = 8) -> list[list[str]]:
    """Per text, its frequent CJK terms: n-grams in >= ``min_df`` texts and at most
    ``max_df_share`` of them, maximal (not inside a longer kept term of the same
    frequency), at most ``per_chunk`` per text by length x idf (ties by the term)."""
    grams = [cjk_ngrams(t) for t in texts]
    df: Counter[str] = Counter(g for gs in grams for g in gs)
    n = max(len(texts), 1)
    cap = max(min_df, int(max_df_share * n))
    kept = {g for g, c in df.items() if min_df <= c <= cap}
    # maximality: drop g when a longer kept gram containing it has the same df
    drop = set()
    for g in kept:
        if len(g) < 2:
            continue
        for sub_len in range(2, len(g)):
            for i in range(len(g) - sub_len + 1):
                s = g[i:i + sub_len]
                if s in kept and df[s] == df[g]:
                    drop.add(s)
    kept -= drop
    out = []
    for gs in grams:
        mine = [g for g in gs if g in kept]
        mine.sort(key=lambda g: (-len(g) * math.log(1 + n / df[g]), g))
        out.append(mine[:per_chunk])
    return out


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity name found in one chunk, with where the name came from."""

    key: str
    label: str
    source: str
    #: How many times the name occurs (titles/metadata count once).
    count: int = 1


class Gazetteer:
    """Known names (glossary aliases, titles, metadata entities) matched in text by word n-grams.

    English text is matched on word n-grams (up to ``max_words``); CJK text on
    substrings of CJK runs. Keys map to their node key (aliases of one concept share it).
    """

    def __init__(self, names: Mapping[str, str], *, max_words: int = 6) -> None:
        #: normalised name -> node key
        self.names = dict(names)
        self.max_words = max_words
        self._cjk = {k for k in self.names if _CJK_RUN.fullmatch(k.replace(" ", ""))}
        self._cjk_lengths = sorted({len(k) for k in self._cjk}, reverse=True)

    def find(self, text: str) -> Counter[str]:
        """Node keys of the known names in ``text`` with their counts."""
        found: Counter[str] = Counter()
        if not self.names:
            return found
        raw = _WORDS.findall(text)
        n = len(raw)
        keyed: dict[int, str] = {}  # word keys, computed only for the windows looked up
        for i in range(n):
            # an English name starts capitalised (or with a digit): "Her" the film, not "her"
            if not (raw[i][:1].isupper() or raw[i][:1].isdigit()):
                continue
            parts: list[str] = []
            for j in range(i + 1, min(n, i + self.max_words) + 1):
                k = keyed.get(j - 1)
                if k is None:
                    k = keyed[j - 1] = _word_key(raw[j - 1])
                parts.append(k)
                node = self.names.get(" ".join(parts))
                if node is not None:
                    found[node] += 1
        if self._cjk:
            for run in _CJK_RUN.findall(text):
                for ln in self._cjk_lengths:
                    for i in range(len(run) - ln + 1):
                        node = self.names.get(run[i:i + ln])
                        if node is not None:
                            found[node] += 1
        return found


_WORDS = re.compile(r"[\w'’\-\.&]+")


def metadata_entities(entity_field: str) -> list[str]:
    """The names in a chunk's ``entity`` metadata field (comma/semicolon/pipe separated)."""
    return [p.strip() for p in re.split(r"[,;|，；]", entity_field or "") if p.strip()]


def extract_mentions(text: str, *, title: str = "", entity_field: str = "", gazetteer: Gazetteer | None = None,
                     cjk_terms: Iterable[str] = ()) -> list[Mention]:
    """Every entity mention of one chunk (deterministic; sorted by key).

    Keys of gazetteer hits are node keys (``g:<id>`` for glossary concepts); others are
    :func:`entity_key` of the surface name.
    """
    best: dict[str, Mention] = {}

    def add(key: str, label: str, source: str, count: int = 1) -> None:
        if not key or not _useful(key.removeprefix("g:")):
            return
        prev = best.get(key)
        if prev is None or SOURCE_RANK[source] < SOURCE_RANK[prev.source]:
            best[key] = Mention(key, prev.label if prev is not None and prev.source == "glossary" else label, source,
                                max(count, prev.count if prev else 1))
        elif count > prev.count:
            best[key] = Mention(prev.key, prev.label, prev.source, count)

    gaz = gazetteer.names if gazetteer is not None else {}
    for t in title_aliases(title):
        k = entity_key(t)
        add(gaz.get(k, k), t, "title")
    for name in metadata_entities(entity_field):
        k = entity_key(name)
        add(gaz.get(k, k), name, "metadata")
    if gazetteer is not None:
        for node, c in gazetteer.find(text).items():
            add(node, node, "glossary" if node.startswith("g:") else "title", c)
    counts = Counter()
    labels: dict[str, str] = {}
    for span in english_spans(text):
        k = entity_key(span)
        node = gaz.get(k, k)
        counts[node] += 1
        labels.setdefault(node, span)
    for node, c in counts.items():
        add(node, labels[node], "extracted", c)
    for term in cjk_terms:
        add(gaz.get(term, term), term, "extracted")
    return sorted(best.values(), key=lambda m: m.key)
