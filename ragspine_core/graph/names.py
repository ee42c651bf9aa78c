"""Entity-name normalisation shared by the graph writer and the graph channel (they must agree)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

#: Words that are (almost) never an entity on their own (index-time extractor and query-time seeding).
STOP_WORDS = frozenset("""
a an the this that these those he she it they we i you his her its their our my your him them
in on at by for from with to of and or but if when while after before during since as so than
there here what which who whom whose where why how all any both each every some such no not
is are was were be been being has have had do does did can could will would shall should may might must
also however although though because between into over under about above below within without
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday one two three first second new
mr mrs ms dr st
""".split())
_WORD_STRIP = " .,;:-'\"“”"
WORDS = re.compile(r"[\w'’\-\.&]+")
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")


_POSSESSIVE = re.compile(r"'s\b")
_QUOTES = re.compile(r"[\"“”«»]")
_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=1 << 18)  # pure; names repeat across chunks (a build calls it ~50x per chunk)
def entity_key(name: str) -> str:
    """The match key of a name: NFKC, casefolded, ``'s``/leading ``the`` dropped, spaces collapsed."""
    s = unicodedata.normalize("NFKC", name).casefold().replace("’", "'")
    if "'" in s:
        s = _POSSESSIVE.sub("", s)
    s = _QUOTES.sub("", s)
    s = _SPACES.sub(" ", s).strip(" .,;:-'")
    if s.startswith("the ") and len(s) > 8:
        s = s[4:]
    return s


@lru_cache(maxsize=1 << 18)
def word_key(word: str) -> str:
    """One word's part of :func:`entity_key` (casefolded, possessive and edge punctuation dropped)."""
    w = unicodedata.normalize("NFKC", word).casefold().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    return w.strip(_WORD_STRIP)


def name_spans(text: str, *, max_words: int = 6, capitalised_only: bool = True) -> list[tuple[str, int, int, bool]]:
    """Candidate name keys of ``text``: ``(key, start word, end word, capitalised)`` for every
    word n-gram (up to ``max_words``; only those starting at a capitalised word or digit when
    ``capitalised_only``) and every substring of a CJK run (word positions -1, capitalised True)."""
    raw = WORDS.findall(text)
    words = [word_key(w) for w in raw]
    out: list[tuple[str, int, int]] = []
    n = len(words)
    for i in range(n):
        cap = raw[i][:1].isupper() or raw[i][:1].isdigit()
        if capitalised_only and not cap:
            continue
        for j in range(i + 1, min(n, i + max_words) + 1):
            out.append((" ".join(words[i:j]), i, j, cap))
    for run in CJK_RUN.findall(text):
        for a in range(len(run)):
            for b in range(a + 2, min(len(run), a + 8) + 1):
                out.append((run[a:b], -1, -1, True))
    return out
