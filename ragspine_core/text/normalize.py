"""The one normal form queries and names are compared in: NFKC width folding, whitespace
collapsed, case folded. The result cache keys, the competitor gate and the router compare
these forms."""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")


def normalize_query(query: str, *, casefold: bool = True) -> str:
    """NFKC (full-width → half-width, compatibility forms), whitespace runs → one space,
    trimmed, and (``casefold=True``) case-folded."""
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", str(query))).strip()
    return text.casefold() if casefold else text


__all__ = ["normalize_query"]
