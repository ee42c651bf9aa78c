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

from .summarizers import split_sentences

#: Sentences shorter than this (after normalising) are too common to fingerprint.
MIN_SENTENCE_CHARS = 16
_CLOSING = ".!?;。！？；"


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


__all__ = ["MIN_SENTENCE_CHARS", "norm_sentence", "restricted_keys", "sentence_keys", "text_hits", "text_key"]
