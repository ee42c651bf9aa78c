"""Where in the original file a span of converted text came from.

A region is ``(start, end, fragment)``: ``fragment`` is ``page=4`` (PDF), ``slide=2``
(PPTX), ``sheet=Q3&cells=A5:F5`` (XLSX, one table row), ``cells=A5:F5`` (CSV) or
``anchor=revenue`` (the section under an HTML/DOCX heading). :func:`fragment_for`
gives the fragment of a chunk ``[start, end)``; the chunk's citation becomes
``<source>#<fragment>&chars=<start>-<end>``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Sequence
from urllib.parse import quote

from ragspine_index.converters.converted import column_letter

_CELL = re.compile(r"([A-Z]+)(\d+)")


def fragment_for(regions: Sequence[Sequence], start: int, end: int) -> str:
    """The fragment of the regions ``[start, end)`` overlaps (``""`` when none).

    * ``page``/``slide``: the first one; ``&end_page=N`` (``end_slide``) when the span
      runs onto later ones.
    * ``cells``: the smallest range covering the overlapped rows of the first sheet.
    * ``anchor``: the section the span starts in.
    """
    if not regions:
        return ""
    starts = [r[0] for r in regions]
    i = max(0, bisect_right(starts, start) - 1)
    hits = []
    for s, e, frag in regions[i:]:
        if s >= end:
            break
        if e > start:
            hits.append(frag)
    if not hits:
        return ""
    first = dict(_pairs(hits[0]))
    if "page" in first or "slide" in first:
        key = "page" if "page" in first else "slide"
        last = dict(_pairs(hits[-1])).get(key, first[key])
        return f"{key}={first[key]}" + (f"&end_{key}={last}" if last != first[key] else "")
    if "cells" in first:
        sheet = first.get("sheet")
        rows, cols = [], []
        for frag in hits:
            pairs = dict(_pairs(frag))
            if pairs.get("sheet") != sheet:
                break
            for ref in pairs["cells"].split(":"):
                match = _CELL.fullmatch(ref)
                if match:
                    cols.append(_col_index(match.group(1)))
                    rows.append(int(match.group(2)))
        cells = f"{column_letter(min(cols))}{min(rows)}:{column_letter(max(cols))}{max(rows)}"
        return (f"sheet={sheet}&" if sheet is not None else "") + f"cells={cells}"
    return hits[0]


def _pairs(fragment: str) -> list[tuple[str, str]]:
    out = []
    for part in fragment.split("&"):
        key, _, value = part.partition("=")
        out.append((key, value))
    return out


def _col_index(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def region_fragment(key: str, value: str) -> str:
    """``key=value`` with the value percent-encoded (sheet names and anchors may hold ``&``)."""
    return f"{key}={quote(value, safe='')}"
