"""Normalised fingerprints of RESTRICTED text: whole sentences, never substrings.

Two places ask "does this text repeat RESTRICTED text?": the summary tree's blocking
check (a node must not contain a RESTRICTED sentence) and the reclassification guard (an
old snapshot must not serve as open a passage that is RESTRICTED now). Both compare
**whole normalised sentences** (and whole normalised chunk texts): NFKC, case folded,
white space collapsed, closing punctuation dropped. A substring test would be an
oracle: an open note that merely *contains* a guessed RESTRICTED sentence inside a
longer sentence would change the answer. A sentence that also occurs in open text is
not RESTRICTED information (boilerplate shared with open documents) and is never a
fingerprint.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterable, Sequence

from ragspine_index.raptor.summarizers import split_sentences

#: Sentences shorter than this (after normalising) are too common to fingerprint.
MIN_SENTENCE_CHARS = 16
_CLOSING = ".!?;。！？；"


def norm_text(text: str) -> str:
    """``text`` NFKC-normalised, case folded, white space collapsed (what fingerprints are sought in)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tree_fingerprints(restricted_texts: Iterable[str], open_texts: Iterable[str]) -> list[str]:
    """The RESTRICTED sentences a summary-tree node must never contain: each RESTRICTED
    text's normalised sentences of at least :data:`MIN_SENTENCE_CHARS` characters that
    occur **nowhere** in open text — neither as an open sentence nor inside one.

    Excluding every sentence that open text already contains is what keeps the tree check
    from being an oracle: an open note that quotes a guessed RESTRICTED sentence (inside
    a longer sentence or not) removes that sentence from the set, so publication does not
    depend on whether the guess was right; boilerplate that a RESTRICTED document shares
    with open ones never blocks a library.
    """
    candidates: set[str] = set()
    for t in restricted_texts:
        candidates |= sentence_keys(t)
    if not candidates:
        return []
    opened = [norm_text(t) for t in open_texts]
    for t in opened:
        candidates -= {norm_sentence(s) for s in split_sentences(t)}
    corpus = "\n".join(opened)
    return sorted(c for c in candidates if c not in corpus)


def contains_fingerprint(text: str, fingerprints: Iterable[str]) -> bool:
    """True when normalised ``text`` contains one of ``fingerprints`` (from :func:`tree_fingerprints`)."""
    flat = norm_text(text)
    return any(fp in flat for fp in fingerprints)


def norm_sentence(sentence: str) -> str:
    """``sentence`` NFKC-normalised, case folded, white space collapsed, closing punctuation dropped."""
    folded = unicodedata.normalize("NFKC", sentence).casefold()
    return " ".join(folded.split()).rstrip(_CLOSING).strip()


def sentence_keys(text: str, *, min_chars: int = MIN_SENTENCE_CHARS) -> set[str]:
    """The normalised sentences of ``text`` of at least ``min_chars`` characters."""
    out = set()
    for s in split_sentences(text):
        key = norm_sentence(s)
        if len(key) >= min_chars:
            out.add(key)
    return out


def text_key(text: str) -> str:
    """A whole text (one chunk) normalised like a sentence: catches short RESTRICTED chunks."""
    return norm_sentence(text)


def restricted_keys(restricted_texts: Iterable[str], open_texts: Iterable[str], *, only: set[str] | None = None) -> set[str]:
    """Sentence and whole-text keys of ``restricted_texts`` that occur in none of ``open_texts``
    (restricted to the keys in ``only`` when given)."""
    keys: set[str] = set()
    for t in restricted_texts:
        keys |= sentence_keys(t)
        whole = text_key(t)
        if len(whole) >= MIN_SENTENCE_CHARS:
            keys.add(whole)
    if only is not None:
        keys &= only
    if not keys:
        return keys
    for t in open_texts:
        keys -= sentence_keys(t, min_chars=1)
        keys.discard(text_key(t))
        if not keys:
            break
    return keys


def text_hits(text: str, keys: set[str]) -> bool:
    """True when a whole sentence of ``text``, or ``text`` as a whole, is one of ``keys``."""
    if not keys:
        return False
    if text_key(text) in keys:
        return True
    return any(norm_sentence(s) in keys for s in split_sentences(text))


# ---------------------------------------------------------------- near duplicates (issue 37)
#: Shingle length: words, or single CJK characters (which carry a word's meaning), in a row.
SHINGLE_SIZE = 4
#: A text is derived from RESTRICTED text when at least this share of its shingles are
#: RESTRICTED-only shingles (in RESTRICTED text, in no open text now). Chosen on measured
#: edit distributions (``python -m ragspine_tools.bench.bench_near_duplicates``; docs/security.md):
#: every edit class that marks a document while touching each sentence stays far above it,
#: the most similar *other* document of a corpus stays far below it.
NEAR_DUPLICATE_SHARE = 0.5
#: ...and at least this many shingles are shared (a short text is left to the sentence rule).
MIN_SHARED_SHINGLES = 4
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")


def shingles(text: str) -> set[str]:
    """The word shingles of normalised ``text`` (punctuation and white space ignored, CJK
    characters one token each): what an edit that adds a comma per sentence, a bullet to
    a list or renames one header cell leaves mostly unchanged."""
    tokens = _TOKEN.findall(norm_text(text))
    if len(tokens) < SHINGLE_SIZE:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i:i + SHINGLE_SIZE]) for i in range(len(tokens) - SHINGLE_SIZE + 1)}


def containment(text_shingles: set[str], restricted: set[str]) -> float:
    """Share of ``text_shingles`` found in ``restricted`` (0 for an empty text)."""
    return len(text_shingles & restricted) / len(text_shingles) if text_shingles else 0.0


def _near(text_shingles: set[str], restricted: set[str]) -> bool:
    shared = len(text_shingles & restricted)
    return shared >= MIN_SHARED_SHINGLES and shared >= NEAR_DUPLICATE_SHARE * len(text_shingles)


def derived_from_restricted(candidates: Sequence[str], restricted_texts: Iterable[str],
                            open_texts: Callable[[], Iterable[str]]) -> list[bool]:
    """For each candidate text, whether it is (an edited copy of) RESTRICTED text: the one
    rule of every reclassification consumer (rollback and retained snapshots, the derived
    caches, tree and graph purges, the ANN rebuild; :mod:`..reclassification`, :mod:`..purge`).

    A candidate is derived when one of its whole normalised sentences, or its whole text,
    is a RESTRICTED sentence/text (:func:`restricted_keys`), **or** when at least
    :data:`NEAR_DUPLICATE_SHARE` of its shingles (and :data:`MIN_SHARED_SHINGLES`) are
    shingles of RESTRICTED text. Sentences and shingles that also occur in open text now
    (``open_texts()``, read only when some candidate is a hit) are not RESTRICTED: shared
    boilerplate and a declassified document never count.
    """
    candidates = list(candidates)
    restricted_texts = list(restricted_texts)
    if not candidates or not restricted_texts:
        return [False] * len(candidates)
    wanted_keys: set[str] = set()
    for t in candidates:
        wanted_keys |= sentence_keys(t, min_chars=1)
        wanted_keys.add(text_key(t))
    keys = restricted_keys(restricted_texts, (), only=wanted_keys)
    cand = [shingles(t) for t in candidates]
    wanted = set().union(*cand)
    hidden: set[str] = set()
    for t in restricted_texts:
        hidden |= shingles(t) & wanted
    if not keys and not any(_near(s, hidden) for s in cand):
        return [False] * len(candidates)
    opened = list(open_texts())
    if keys:
        keys = restricted_keys(restricted_texts, opened, only=keys)
    for t in opened:
        if not hidden:
            break
        hidden -= shingles(t)
    return [text_hits(t, keys) or _near(s, hidden) for t, s in zip(candidates, cand)]


__all__ = ["MIN_SENTENCE_CHARS", "NEAR_DUPLICATE_SHARE", "containment", "derived_from_restricted", "shingles", "contains_fingerprint", "norm_sentence", "norm_text", "restricted_keys",
           "sentence_keys", "text_hits", "text_key", "tree_fingerprints"]
