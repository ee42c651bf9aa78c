"""The normal forms text is compared and indexed in.

:func:`normalize_query`: NFKC width folding, whitespace collapsed, case folded. The result
cache keys, the competitor gate and the router compare these forms.

:func:`normalize_extracted`: the form every converter's extracted text is indexed in
(docs/formats.md, "Normalised text"): NFKC (ligatures ``ﬁ`` → ``fi``, Kangxi radicals
``⼦`` → ``子``, full-width letters and digits, compatibility forms) except the full-width
punctuation and ideographic space of Chinese and Japanese text (``，`` ``：`` ``（``
stay: they are that text's own form and the tokenizer splits at them anyway), C0/C1 control characters and
soft hyphens removed, vertical tab and form feed as line breaks; with ``join_hyphens``
(PDF and OCR text, whose line breaks are layout) a word broken by a hyphen at a line end
before a lower-case letter is joined (``effi-⏎ciency`` → ``efficiency``). The spec
tokenizer splits words at any character outside ``[a-z0-9]`` and CJK, so a ligature or a
control character inside a word would otherwise hide it from BM25.
"""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")
#: Controls (C0 but tab and newline, DEL, C1), the soft hyphen and a stray byte-order mark.
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u00ad\ufeff]")
_LINE_BREAKS = re.compile("\r\n?|[\x0b\x0c\u2028\u2029]")
#: A letter, ``-``, a line break (spaces around it), then a lower-case letter.
#: Full-width punctuation and the ideographic space: kept (CJK text's own form).
_KEPT_WIDE = re.compile("([\u3000\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]+)")
_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-[ \t]*\n[ \t]*(?=[a-zß-öø-ÿ])")


def normalize_query(query: str, *, casefold: bool = True) -> str:
    """NFKC (full-width → half-width, compatibility forms), whitespace runs → one space,
    trimmed, and (``casefold=True``) case-folded."""
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", str(query))).strip()
    return text.casefold() if casefold else text


def normalize_extracted(text: str, *, join_hyphens: bool = False) -> str:
    """Extracted text in its index form (see the module docstring); idempotent."""
    text = _LINE_BREAKS.sub("\n", text)
    text = _CONTROLS.sub("", text)
    if not text.isascii():
        text = "".join(piece if i % 2 else unicodedata.normalize("NFKC", piece)
                       for i, piece in enumerate(_KEPT_WIDE.split(text)))
        text = _CONTROLS.sub("", text)  # NFKC maps nothing onto a control, but stay sure
    if join_hyphens and "-" in text:
        text = _HYPHEN_BREAK.sub("", text)
    return text


def unnormalized_count(text: str) -> int:
    """How many characters of ``text`` are ligatures, compatibility forms or controls
    (what :func:`normalize_extracted` changes or drops; tab and newline not counted)."""
    return sum(1 for ch in text if (ch > "\x7e" or ch < " ") and ch not in "\t\n"
               and (_CONTROLS.match(ch) or _LINE_BREAKS.match(ch)
                    or not _KEPT_WIDE.match(ch) and unicodedata.normalize("NFKC", ch) != ch))


__all__ = ["normalize_extracted", "normalize_query", "unnormalized_count"]
