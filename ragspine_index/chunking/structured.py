"""Structure-aware chunkers: sections from a heading detector, sub-split by paragraphs.

* ``layout`` — sections at markdown headings; each chunk records its section heading.
* ``laws`` / ``book`` — the same with a statute / book heading detector.
* ``parent_child`` — markdown sections become parents (a section longer than
  ``parent_max_chars`` is cut into several parents); children are paragraph chunks
  inside one parent and point at it. The parent text is a generation-only window.
* ``qa`` — a question line opens a section holding the answer paragraphs after it; the
  section is the parent every chunk of that question/answer pair shares.

A section longer than ``max_chars`` is sub-split with the paragraph algorithm (same
budget and overlap), so every chunk stays within ``max_chars``; overlap never crosses a
section or parent boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ragspine_index.chunking.headings import Section, book_heading, find_sections, law_heading, markdown_heading, qa_heading
from ragspine_index.chunking.paragraph import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, chunk_range
from ragspine_index.chunking.spans import ChunkSpan, validate_budget

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument

#: Default parent budget of ``parent_child`` and ``qa``: four default chunks.
DEFAULT_PARENT_CHARS = 4 * DEFAULT_CHUNK_CHARS


@dataclass(frozen=True, slots=True)
class LayoutChunker:
    """Chunks per markdown section; ``heading`` is the nearest heading above the chunk."""

    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS

    name: ClassVar[str] = "layout"
    #: Bump whenever the spans this chunker produces for some input change.
    version: ClassVar[str] = "1"

    def __post_init__(self) -> None:
        validate_budget(self.max_chars, self.overlap_chars)

    @staticmethod
    def detect_heading(line: str) -> str | None:
        return markdown_heading(line)

    def sections(self, text: str) -> list[Section]:
        return find_sections(text, self.detect_heading)

    def split(self, text: str) -> list[ChunkSpan]:
        """Chunk a raw body."""
        out: list[ChunkSpan] = []
        for section in self.sections(text):
            for a, b in chunk_range(text, section.start, section.end, self.max_chars, self.overlap_chars):
                out.append(ChunkSpan(a, b, text[a:b], section.heading))
        return out

    def chunk(self, doc: SourceDocument) -> list[ChunkSpan]:
        """Chunk ``doc.body``."""
        return self.split(doc.body)


@dataclass(frozen=True, slots=True)
class LawsChunker(LayoutChunker):
    """A section per statute clause (第N条/款/项, Chinese or Arabic numerals); heading = marker.

    第N编/章/节 lines and markdown headings also open a section, so a chapter title is
    never glued to the end of the clause before it.
    """

    name: ClassVar[str] = "laws"
    version: ClassVar[str] = "1"

    @staticmethod
    def detect_heading(line: str) -> str | None:
        return law_heading(line)


@dataclass(frozen=True, slots=True)
class BookChunker(LayoutChunker):
    """A section per 第N章/节/篇, markdown heading, or numbered heading (``1.2 Title``)."""

    name: ClassVar[str] = "book"
    version: ClassVar[str] = "1"

    @staticmethod
    def detect_heading(line: str) -> str | None:
        return book_heading(line)


@dataclass(frozen=True, slots=True)
class ParentChildChunker(LayoutChunker):
    """Children of at most ``max_chars`` inside parents of at most ``parent_max_chars``."""

    parent_max_chars: int = DEFAULT_PARENT_CHARS

    name: ClassVar[str] = "parent_child"
    version: ClassVar[str] = "1"

    def __post_init__(self) -> None:
        validate_budget(self.max_chars, self.overlap_chars)
        if isinstance(self.parent_max_chars, bool) or not isinstance(self.parent_max_chars, int):
            raise ValueError(f"parent_max_chars must be an integer, got {self.parent_max_chars!r}")
        if self.parent_max_chars < self.max_chars:
            raise ValueError(
                f"parent_max_chars must be >= max_chars, got parent_max_chars={self.parent_max_chars} "
                f"< max_chars={self.max_chars}; a parent must be able to hold a whole child"
            )

    def split(self, text: str) -> list[ChunkSpan]:
        """Chunk a raw body; every chunk carries its parent span."""
        out: list[ChunkSpan] = []
        for section in self.sections(text):
            for p_start, p_end in chunk_range(text, section.start, section.end, self.parent_max_chars, 0):
                for a, b in chunk_range(text, p_start, p_end, self.max_chars, self.overlap_chars):
                    out.append(ChunkSpan(a, b, text[a:b], section.heading, p_start, p_end))
        return out


@dataclass(frozen=True, slots=True)
class QAChunker(ParentChildChunker):
    """Each question line with the answer paragraphs after it forms one shared parent.

    Text before the first question is its own parent with heading ``""``.
    """

    name: ClassVar[str] = "qa"
    version: ClassVar[str] = "1"

    @staticmethod
    def detect_heading(line: str) -> str | None:
        return qa_heading(line)
