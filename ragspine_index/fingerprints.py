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

import unicodedata
from typing import Iterable

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


__all__ = ["MIN_SENTENCE_CHARS", "contains_fingerprint", "norm_sentence", "norm_text", "restricted_keys",
           "sentence_keys", "text_hits", "text_key", "tree_fingerprints"]
