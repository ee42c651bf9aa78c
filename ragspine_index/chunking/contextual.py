"""Contextual retrieval: a deterministic header prepended to the index text only.

The header names what the chunk is about (title · entity · period · heading) using the
document's own metadata, never generated text. Only the text that is tokenized and
embedded gets it; the chunk ``text``, its locator and citations stay byte-identical.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragspine_index.chunking.spans import ChunkSpan

if TYPE_CHECKING:
    from ragspine_index.source_documents.model import SourceDocument

HEADER_SEPARATOR = " · "


def context_header(doc: SourceDocument, heading: str) -> str:
    """``title · entity · period · heading`` with empty and repeated parts left out.

    Whitespace inside each part is collapsed to single spaces so the header is one line.
    """
    parts: list[str] = []
    for raw in (doc.title, doc.entity, doc.period, heading):
        part = " ".join(str(raw).split())
        if part and part not in parts:
            parts.append(part)
    return HEADER_SEPARATOR.join(parts)


def index_text(doc: SourceDocument, span: ChunkSpan) -> str:
    """What to tokenize and embed: the header, a newline, then the chunk text."""
    header = context_header(doc, span.heading)
    return f"{header}\n{span.text}" if header else span.text
