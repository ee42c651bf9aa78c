"""Sentence-window chunker: one chunk per sentence, the neighbours as its parent window.

Retrieval matches a single, precise sentence; generation gets the ``window`` sentences on
each side as the parent span (generation-only ``parent_text``). Sentences come from the
same splitter as the paragraph chunker (paragraph breaks, then ``SENTENCE_ENDERS``); a
sentence longer than ``max_chars`` is hard-cut into pieces that each count as a sentence.
Each chunk records the nearest markdown heading above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ragspine_index.chunking.headings import find_sections, markdown_heading
from ragspine_index.chunking.paragraph import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, hard_cut, paragraph_spans, sentence_spans
from ragspine_index.chunking.spans import ChunkSpan, validate_budget

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument

DEFAULT_WINDOW_SENTENCES = 2


@dataclass(frozen=True, slots=True)
class SentenceWindowChunker:
    """One chunk per sentence; parent = ``window`` sentences before and after it.

    ``overlap_chars`` is validated like every chunker's budget but unused: sentences
    never overlap, the window supplies the context instead.
    """

    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    window: int = DEFAULT_WINDOW_SENTENCES

    name: ClassVar[str] = "sentence_window"
    #: Bump whenever the spans this chunker produces for some input change.
    version: ClassVar[str] = "1"

    def __post_init__(self) -> None:
        validate_budget(self.max_chars, self.overlap_chars)
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 0:
            raise ValueError(f"window must be an integer >= 0 (sentences on each side), got {self.window!r}")

    def sentences(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, heading)`` of every sentence, in body order."""
        out: list[tuple[int, int, str]] = []
        for section in find_sections(text, markdown_heading):
            for p_start, p_end in paragraph_spans(text, section.start, section.end):
                for s_start, s_end in sentence_spans(text, p_start, p_end):
                    for a, b in hard_cut(text, s_start, s_end, self.max_chars):
                        out.append((a, b, section.heading))
        return out

    def split(self, text: str) -> list[ChunkSpan]:
        """Chunk a raw body."""
        sentences = self.sentences(text)
        last = len(sentences) - 1
        out: list[ChunkSpan] = []
        for i, (a, b, heading) in enumerate(sentences):
            parent_start = sentences[max(0, i - self.window)][0]
            parent_end = sentences[min(last, i + self.window)][1]
            out.append(ChunkSpan(a, b, text[a:b], heading, parent_start, parent_end))
        return out

    def chunk(self, doc: SourceDocument) -> list[ChunkSpan]:
        """Chunk ``doc.body``."""
        return self.split(doc.body)
