"""Chunkers: every chunk is a contiguous span of its document body.

``make_chunker(name, **params)`` builds one of :func:`chunker_names` (the built-ins of
:data:`CHUNKER_NAMES`, then any class given to :func:`register_chunker`);
``build_chunks(doc, chunker)`` turns a parsed document into chunk records with
deterministic ids and contextual index text.
"""

from __future__ import annotations

from ragspine_index.chunking.build import build_chunks, chunk_spans
from ragspine_index.chunking.contextual import HEADER_SEPARATOR, context_header, index_text
from ragspine_index.chunking.headings import Section, book_heading, find_sections, law_heading, markdown_heading, qa_heading
from ragspine_index.chunking.ids import make_chunk_id, make_parent_id
from ragspine_index.chunking.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    SENTENCE_ENDERS,
    ParagraphChunker,
    chunk_text,
    paragraph_spans,
    sentence_spans,
)
from ragspine_index.chunking.chunker_registry import (
    CHUNKER_NAMES,
    CHUNKER_VERSIONS,
    CHUNKERS,
    DEFAULT_CHUNKER,
    Chunker,
    chunker_names,
    chunker_params,
    chunker_signature,
    make_chunker,
    register_chunker,
)
from ragspine_index.chunking.semantic import (
    DEFAULT_BREAKPOINT_PERCENTILE,
    DEFAULT_EMBED_WINDOW,
    LexicalEmbedder,
    SemanticChunker,
    SentenceEmbedder,
)
from ragspine_index.chunking.sentence_window import DEFAULT_WINDOW_SENTENCES, SentenceWindowChunker
from ragspine_index.chunking.spans import NO_PARENT, ChunkSpan, Span, validate_budget
from ragspine_index.chunking.structured import DEFAULT_PARENT_CHARS, BookChunker, LawsChunker, LayoutChunker, ParentChildChunker, QAChunker

__all__ = [
    "CHUNKERS",
    "CHUNKER_NAMES",
    "CHUNKER_VERSIONS",
    "DEFAULT_BREAKPOINT_PERCENTILE",
    "DEFAULT_CHUNKER",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_EMBED_WINDOW",
    "DEFAULT_OVERLAP_CHARS",
    "DEFAULT_PARENT_CHARS",
    "DEFAULT_WINDOW_SENTENCES",
    "HEADER_SEPARATOR",
    "NO_PARENT",
    "SENTENCE_ENDERS",
    "BookChunker",
    "ChunkSpan",
    "Chunker",
    "LawsChunker",
    "LayoutChunker",
    "LexicalEmbedder",
    "ParagraphChunker",
    "ParentChildChunker",
    "QAChunker",
    "Section",
    "SemanticChunker",
    "SentenceEmbedder",
    "SentenceWindowChunker",
    "Span",
    "book_heading",
    "build_chunks",
    "chunk_spans",
    "chunk_text",
    "chunker_names",
    "chunker_params",
    "chunker_signature",
    "context_header",
    "find_sections",
    "index_text",
    "law_heading",
    "make_chunk_id",
    "make_chunker",
    "register_chunker",
    "make_parent_id",
    "markdown_heading",
    "paragraph_spans",
    "qa_heading",
    "sentence_spans",
    "validate_budget",
]
