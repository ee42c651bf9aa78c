"""Heading detectors and the section splitter the structure-aware chunkers share.

A detector looks at one line (without its newline) and returns the heading text when the
line opens a new section, else ``None``. :func:`find_sections` turns a body into
sections: each starts at a heading line and runs to the next one. Lines inside fenced
code blocks (```` ``` ```` or ``~~~``) never open a section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ragspine_index.chunking.spans import iter_lines, trim

HeadingDetector = Callable[[str], "str | None"]

# Chinese numerals as used in statute and chapter numbering, plus ASCII and full-width digits.
_NUMERAL = r"[零〇一二三四五六七八九十百千万两壹贰叁肆伍陆柒捌玖拾佰仟0-9０-９]+"
_MARKDOWN = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_LAW_CLAUSE = re.compile(rf"^\s*(第{_NUMERAL}[条款项])")
_LAW_PART = re.compile(rf"^\s*(第{_NUMERAL}[编章节].*)$")
_BOOK_PART = re.compile(rf"^\s*(第{_NUMERAL}[章节篇].*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,3}\.(?:\d{1,3}\.?)*[ \t]+\S.*)$")
_QA_PREFIX = re.compile(r"^\s*(?:[Qq]|问)\s*[:：]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

#: Longest line the book and law detectors accept as a chapter/numbered heading; a longer
#: line is running text that happens to start with a number.
MAX_HEADING_CHARS = 80
_HEADING_TERMINAL_PUNCT = frozenset("。！？；.!?;,，:：、")


@dataclass(frozen=True, slots=True)
class Section:
    """``[start, end)`` of a body that opens with ``heading`` (``""`` before the first)."""

    start: int
    end: int
    heading: str


def markdown_heading(line: str) -> str | None:
    """ATX markdown heading (``# Title`` … ``###### Title``) → its text."""
    match = _MARKDOWN.match(line)
    if match is None:
        return None
    return match.group(2).strip() or None


def _short_heading(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) <= MAX_HEADING_CHARS and stripped[-1:] not in _HEADING_TERMINAL_PUNCT


def law_heading(line: str) -> str | None:
    """A statute clause line (第N条 / 第N款 / 第N项 → the marker), a 第N编/章/节 line, or markdown."""
    clause = _LAW_CLAUSE.match(line)
    if clause is not None:
        return clause.group(1)
    part = _LAW_PART.match(line)
    if part is not None and _short_heading(line):
        return part.group(1).strip()
    return markdown_heading(line)


def book_heading(line: str) -> str | None:
    """第N章/节/篇, a markdown heading, or a numbered heading (``1. Intro`` / ``1.2 Title``)."""
    md = markdown_heading(line)
    if md is not None:
        return md
    for pattern in (_BOOK_PART, _NUMBERED):
        match = pattern.match(line)
        if match is not None and _short_heading(line):
            return match.group(1).strip()
    return None


def qa_heading(line: str) -> str | None:
    """A question: ``Q:`` / ``Q：`` / ``问:`` / ``问：`` prefix, or a line ending in ``?``/``？``."""
    stripped = line.strip()
    if not stripped:
        return None
    md = markdown_heading(line)
    if _QA_PREFIX.match(stripped) or stripped.endswith(("?", "？")):
        return md if md is not None else stripped
    return None


def find_sections(text: str, detect: HeadingDetector) -> list[Section]:
    """Split ``text`` at every heading line ``detect`` recognises.

    Sections are contiguous and cover the whole body except whitespace-only stretches;
    the text before the first heading (if not blank) is a section with heading ``""``.
    """
    sections: list[Section] = []
    current_start, current_heading = 0, ""
    fence = ""
    for line_start, line_end in iter_lines(text):
        line = text[line_start:line_end]
        fence_match = _FENCE.match(line)
        if fence:
            marker = fence_match.group(1) if fence_match is not None else ""
            if marker[:1] == fence[0] and len(marker) >= len(fence):  # same fence char, at least as long
                fence = ""
            continue
        if fence_match is not None:
            fence = fence_match.group(1)
            continue
        heading = detect(line)
        if heading is None:
            continue
        _close(text, sections, current_start, line_start, current_heading)
        current_start, current_heading = line_start, heading
    _close(text, sections, current_start, len(text), current_heading)
    return sections


def _close(text: str, sections: list[Section], start: int, end: int, heading: str) -> None:
    a, b = trim(text, start, end)
    if a < b:
        sections.append(Section(start, end, heading))
