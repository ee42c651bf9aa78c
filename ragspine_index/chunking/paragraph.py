"""The default chunker: paragraphs packed into a character budget.

The budget is counted in characters (not model tokens) so chunking stays offline,
dependency-free and deterministic. The algorithm, on a body of text:

1. Paragraphs are the runs of text between blank lines, trimmed of whitespace.
2. Consecutive paragraphs are packed into one chunk while the chunk, measured from its
   first character to the end of the last paragraph, stays within ``max_chars``.
3. When a paragraph no longer fits, the chunk is closed and the next one starts a little
   *earlier* than the paragraph: at the first sentence start (else the first word start,
   else a plain character position) inside the last ``overlap_chars`` of the previous
   chunk. Starting earlier, rather than copying text, keeps every chunk a contiguous
   substring of the body, so ``body[start:end]`` is always the chunk text.
4. A paragraph longer than ``max_chars`` is cut on its own: at sentence enders
   (``SENTENCE_ENDERS``), sentences packed greedily, and a sentence that is still too
   long is hard-cut every ``max_chars`` characters. These sub-chunks never overlap each
   other (nor the chunk before them).

ASCII enders (``.!?;``) end a sentence only before whitespace or the end of the
paragraph, so ``3.5%`` or ``v1.2`` are not cut; the CJK enders (``。！？；``) always do.
Closing quotes and brackets right after an ender stay with their sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ragspine_index.chunking.spans import ChunkSpan, Span, skip_space, trim, validate_budget

if TYPE_CHECKING:  # the chunkers only read ``doc.body``; no runtime dependency on the model
    from ragspine_index.source_documents.model import SourceDocument

DEFAULT_CHUNK_CHARS = 480
DEFAULT_OVERLAP_CHARS = 80
SENTENCE_ENDERS = "。！？；.!?;"

_ASCII_ENDERS = frozenset(".!?;")
_ENDERS = frozenset(SENTENCE_ENDERS)
# Characters that close a sentence together with the ender before them: 。” / ." / ?) …
_CLOSERS = frozenset("\"'”’」』）)]】》〉")
# A blank line: a newline, any whitespace-only lines, and the next newline.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*(?:\n[^\S\n]*)*\n")


def paragraph_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Trimmed, non-empty paragraph ranges of ``text[start:end]`` (split on blank lines)."""
    stop = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for match in _PARAGRAPH_BREAK.finditer(text, start, stop):
        a, b = trim(text, pos, match.start())
        if a < b:
            out.append((a, b))
        pos = match.end()
    a, b = trim(text, pos, stop)
    if a < b:
        out.append((a, b))
    return out


def sentence_ends(text: str, start: int, end: int) -> list[int]:
    """Positions just after each sentence end in ``text[start:end]`` (enders + closers)."""
    ends: list[int] = []
    i = start
    while i < end:
        ch = text[i]
        if ch not in _ENDERS:
            i += 1
            continue
        j = i + 1
        while j < end and (text[j] in _ENDERS or text[j] in _CLOSERS):
            j += 1
        ascii_only = all(c in _ASCII_ENDERS or c in _CLOSERS for c in text[i:j])
        if not ascii_only or j == end or text[j].isspace():
            ends.append(j)
        i = j
    return ends


def sentence_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Trimmed, non-empty sentence ranges of ``text[start:end]`` (no paragraph logic)."""
    out: list[tuple[int, int]] = []
    pos = start
    for cut in [*sentence_ends(text, start, end), end]:
        a, b = trim(text, pos, cut)
        if a < b:
            out.append((a, b))
        pos = cut
    return out


def hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` into trimmed, non-overlapping pieces of at most ``max_chars``."""
    pieces: list[tuple[int, int]] = []
    pos = skip_space(text, start, end)
    while pos < end:
        a, b = trim(text, pos, min(pos + max_chars, end))
        if a < b:
            pieces.append((a, b))
        pos = skip_space(text, min(pos + max_chars, end), end)
    return pieces


def split_oversized(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Split one too-long paragraph at sentence enders, then hard-cut; no overlap."""
    pieces: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for s_start, s_end in sentence_spans(text, start, end):
        if current is not None and s_end - current[0] <= max_chars:
            current = (current[0], s_end)
            continue
        if current is not None:
            pieces.append(current)
            current = None
        cut = hard_cut(text, s_start, s_end, max_chars)
        pieces.extend(cut[:-1])
        current = cut[-1]  # the remainder may still pack with the next sentences
    if current is not None:
        pieces.append(current)
    return pieces


def _overlap_start(
    text: str, prev: tuple[int, int], para_start: int, para_end: int, max_chars: int, overlap_chars: int
) -> int:
    """Where the chunk holding ``[para_start, para_end)`` starts so it overlaps ``prev``.

    The start lies in the last ``overlap_chars`` of ``prev`` (strictly after its first
    character, so a chunk never swallows the previous one whole) and leaves the new
    chunk within ``max_chars``. Preference: a sentence start, then a word start, then
    the earliest allowed position. Returns ``para_start`` when no overlap fits.
    """
    prev_start, prev_end = prev
    low = max(prev_start + 1, prev_end - overlap_chars, para_end - max_chars)
    if overlap_chars == 0 or low >= prev_end:
        return para_start
    chosen = next((p for p in sentence_ends(text, prev_start, prev_end) if low <= p < prev_end), None)
    if chosen is None:
        chosen = next((p for p in range(low, prev_end) if text[p - 1].isspace()), low)
    return skip_space(text, chosen, prev_end)


def chunk_range(text: str, start: int, end: int, max_chars: int, overlap_chars: int) -> list[tuple[int, int]]:
    """The paragraph algorithm on ``text[start:end]``, returning absolute ``(start, end)``.

    Assumes a validated budget; every range is trimmed, non-empty, within
    ``[start, end)`` and at most ``max_chars`` long.
    """
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for p_start, p_end in paragraph_spans(text, start, end):
        if p_end - p_start > max_chars:
            if current is not None:
                spans.append(current)
                current = None
            spans.extend(split_oversized(text, p_start, p_end, max_chars))
            continue
        if current is not None and p_end - current[0] <= max_chars:
            current = (current[0], p_end)
            continue
        if current is not None:
            spans.append(current)
        chunk_start = p_start
        if spans:
            chunk_start = _overlap_start(text, spans[-1], p_start, p_end, max_chars, overlap_chars)
        current = (chunk_start, p_end)
    if current is not None:
        spans.append(current)
    return spans


def chunk_text(
    text: str, *, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS
) -> list[Span]:
    """Cut ``text`` into paragraph-packed chunks; each chunk is ``text[span.start:span.end]``.

    Parameters:
        text: the document body.
        max_chars: the most characters one chunk may hold (> 0).
        overlap_chars: roughly how many characters of the previous chunk a packed chunk
            repeats (``0 <= overlap_chars < max_chars``); oversized-paragraph pieces
            never overlap.

    Returns:
        Spans in document order, none empty or whitespace-only, none longer than
        ``max_chars``; together they cover every non-whitespace character.

    Raises:
        ValueError: ``max_chars <= 0``, ``overlap_chars < 0`` or ``overlap_chars >= max_chars``.
    """
    validate_budget(max_chars, overlap_chars)
    return [Span(a, b) for a, b in chunk_range(text, 0, len(text), max_chars, overlap_chars)]


@dataclass(frozen=True, slots=True)
class ParagraphChunker:
    """The default chunker (see the module docstring); no headings, no parents."""

    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS

    name: ClassVar[str] = "paragraph"
    #: Bump whenever the spans this chunker produces for some input change.
    version: ClassVar[str] = "1"

    def __post_init__(self) -> None:
        validate_budget(self.max_chars, self.overlap_chars)

    def split(self, text: str) -> list[ChunkSpan]:
        """Chunk a raw body."""
        ranges = chunk_range(text, 0, len(text), self.max_chars, self.overlap_chars)
        return [ChunkSpan(a, b, text[a:b]) for a, b in ranges]

    def chunk(self, doc: SourceDocument) -> list[ChunkSpan]:
        """Chunk ``doc.body``."""
        return self.split(doc.body)
