"""Parse one ``.md``/``.markdown``/``.txt`` file: one document, optional front matter
(:mod:`.front_matter`)."""

from __future__ import annotations

from pathlib import Path

from ragspine_core.errors import DocumentError

from ragspine_index.chunking import find_sections, markdown_heading
from ragspine_index.sources.paths import printable_path
from ragspine_index.source_documents.encoding import decode_text
from ragspine_index.source_documents.front_matter import split_front_matter
from ragspine_index.source_documents.metadata import make_document, default_doc_id
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.source_documents.sensitivity import first_body_lines, front_matter_kind

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
MARKDOWN_SUFFIXES = (".md", ".markdown")


def parse_document(data: bytes, rel_path: str, library_id: str,
                   folder_sensitivity: str | None = None, *,
                   doc_id_default: str | None = None) -> SourceDocument | list[DocumentError]:
    """Parse the bytes of one ``.md``/``.markdown``/``.txt`` file (``rel_path`` is POSIX;
    ``folder_sensitivity``: the ``[defaults]`` sensitivity of its folder, see
    :func:`.metadata.make_document`); ``doc_id_default`` is the ``doc_id`` when front
    matter sets none (default: from the path)."""
    shown = printable_path(rel_path)
    decoded = decode_text(data, shown)
    if isinstance(decoded, DocumentError):
        return [decoded]
    text = decoded.replace("\r\n", "\n")
    if not text.strip():
        hint = "add text or delete the file"
        return [DocumentError(shown, "the file contains only whitespace", field="body", hint=hint)]
    parsed = split_front_matter(text, shown)
    if isinstance(parsed, DocumentError):
        return [parsed]
    meta, body, body_line, front_lines = parsed
    if not body.strip():
        return [
            DocumentError(
                shown,
                f"no text after the front matter (body starts on line {body_line})",
                field="body",
                hint="add the document text below the closing '---'",
            )
        ]
    suffix = Path(rel_path).suffix.lower()
    title = _first_markdown_heading(body) if suffix in MARKDOWN_SUFFIXES else ""
    marking_lines = [
        (f"front matter line {lineno}", line, front_matter_kind(line)) for lineno, line in front_lines
    ] + first_body_lines(body, lambda n: f"line {body_line + n}")
    return make_document(
        meta,
        body,
        library_id=library_id,
        source_path=shown,
        error_path=shown,
        default_doc_id=doc_id_default or default_doc_id(rel_path),
        default_title=title or Path(shown).stem,
        marking_lines=marking_lines,
        folder_sensitivity=folder_sensitivity,
        sensitivity_fix=(
            "set it explicitly in front matter at the top of the file ('---', 'sensitivity: RESTRICTED' "
            "or PUBLIC/INTERNAL, '---'); an explicit sensitivity turns this check off"
        ),
    )


def _first_markdown_heading(body: str) -> str:
    """The first markdown heading outside code fences (the same rule the layout chunker uses)."""
    return next((section.heading for section in find_sections(body, markdown_heading) if section.heading), "")
