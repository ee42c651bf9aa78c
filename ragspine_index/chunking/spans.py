"""Span records and the small text helpers every chunker shares.

A span is a half-open character range ``[start, end)`` into a document body. Chunkers
only ever produce spans; the chunk text is always ``body[start:end]``, so a citation's
locator points at exactly the characters that were indexed.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_PARENT = -1


@dataclass(frozen=True, slots=True)
class Span:
    """A chunk range produced by :func:`~.paragraph.chunk_text` (text not attached)."""

    start: int
    end: int
    heading: str = ""
    parent_start: int = NO_PARENT
    parent_end: int = NO_PARENT


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """One chunk a chunker cut from a body: ``text == body[start:end]``.

    ``parent_start``/``parent_end`` delimit the generation-only parent window
    (``-1`` when the chunker has no parents); the parent always contains the chunk.
    """

    start: int
    end: int
    text: str
    heading: str = ""
    parent_start: int = NO_PARENT
    parent_end: int = NO_PARENT



def validate_budget(max_chars: int, overlap_chars: int) -> None:
    """Raise ``ValueError`` unless ``0 <= overlap_chars < max_chars``.

    Raises:
        ValueError: the message names the offending value and the rule it breaks.
    """
    for label, value in (("max_chars", max_chars), ("overlap_chars", overlap_chars)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{label} must be an integer, got {value!r}")
    if max_chars <= 0:
        raise ValueError(f"max_chars must be > 0, got {max_chars}")
    if overlap_chars < 0:
        raise ValueError(f"overlap_chars must be >= 0, got {overlap_chars}")
    if overlap_chars >= max_chars:
        raise ValueError(
            f"overlap_chars must be smaller than max_chars, got overlap_chars={overlap_chars} "
            f">= max_chars={max_chars}; lower the overlap or raise the budget"
        )


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` past leading/trailing whitespace (``str.isspace``)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def skip_space(text: str, pos: int, limit: int) -> int:
    """First index ``>= pos`` (and ``<= limit``) that is not whitespace."""
    while pos < limit and text[pos].isspace():
        pos += 1
    return pos


def iter_lines(text: str, start: int = 0, end: int | None = None):
    """Yield ``(line_start, line_end)`` for each ``\\n``-terminated line in ``[start, end)``.

    ``line_end`` excludes the newline. Only ``\\n`` separates lines (unlike
    ``str.splitlines``, which also splits on form feeds and Unicode separators).
    """
    stop = len(text) if end is None else end
    pos = start
    while pos < stop:
        nl = text.find("\n", pos, stop)
        if nl < 0:
            yield pos, stop
            return
        yield pos, nl
        pos = nl + 1
