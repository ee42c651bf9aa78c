"""The document model: :class:`SourceDocument`, one parsed document, and
:class:`ParseResult`, what parsing a library found.

This module imports nothing of the build side (no chunking, no parsing): the chunkers and
the converters name the document model from here.

The body is the text after the front matter with CRLF turned into LF and a leading UTF-8
byte-order mark dropped; nothing else is touched. ``content_hash`` covers the body, the
ten metadata fields and the extras — not ``library_id`` or ``source_path``, so moving a
file that keeps its ``doc_id`` and ``source_locator`` does not count as a content change.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence

from ragspine_core.errors import DocumentError
from ragspine_core.records import DEFAULT_SENSITIVITY, METADATA_FIELDS, SENSITIVITIES
from ragspine_core.text.language import detect_language as _detect

#: Share of CJK ideographs among word characters from which a body is ``zh``.
CJK_LANGUAGE_THRESHOLD = 0.3
_CJK_RANGES = (
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x3134F),  # Extensions B–G
)


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One parsed document. Chunks are substrings of ``body``.

    ``body`` is the file text after the front matter, with CRLF turned into LF and
    nothing else changed. ``content_hash`` covers the body and every metadata field, so
    a metadata-only edit counts as a change. Build one with :meth:`create` to get the
    defaults and the hash filled in.
    """

    library_id: str
    doc_id: str
    source_path: str
    body: str
    title: str
    source_locator: str
    entity: str
    topic: str
    geography: str
    period: str
    language: str
    sensitivity: str
    valid_as_of: str
    extra: tuple[tuple[str, str], ...]
    content_hash: str
    #: Converted files only (:mod:`.converters`): sorted ``(start, end, fragment)`` ranges
    #: of ``body`` and where in the original file each came from (``page=4``…).
    regions: tuple[tuple[int, int, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.doc_id:
            raise ValueError(f"doc_id must be non-empty (source {self.source_path!r})")
        if self.sensitivity not in SENSITIVITIES:
            raise ValueError(
                f"sensitivity {self.sensitivity!r} of {self.doc_id!r} is not one of {', '.join(SENSITIVITIES)}"
            )
        if list(self.extra) != sorted(self.extra) or len({k for k, _ in self.extra}) != len(self.extra):
            raise ValueError(f"extra of {self.doc_id!r} must be sorted by key with unique keys")

    @classmethod
    def create(
        cls,
        *,
        library_id: str,
        doc_id: str,
        body: str,
        source_path: str = "",
        title: str = "",
        source_locator: str = "",
        entity: str = "",
        topic: str = "",
        geography: str = "",
        period: str = "",
        language: str = "",
        sensitivity: str = DEFAULT_SENSITIVITY,
        valid_as_of: str = "",
        extra: dict[str, str] | tuple[tuple[str, str], ...] = (),
        regions: tuple[tuple[int, int, str], ...] = (),
    ) -> SourceDocument:
        """Build a document from already-validated values; computes ``content_hash``.

        Empty ``title``/``source_locator`` fall back to ``doc_id``/``source_path``, an empty
        ``language`` is detected, ``sensitivity`` is upper-cased and ``extra`` sorted.
        """
        extra_items = tuple(sorted(dict(extra).items()))
        metadata = {
            "doc_id": doc_id,
            "title": title or doc_id,
            "source_locator": source_locator or source_path or doc_id,
            "entity": entity,
            "topic": topic,
            "geography": geography,
            "period": period,
            "language": language or detect_language(body),
            "sensitivity": (sensitivity or DEFAULT_SENSITIVITY).upper(),
            "valid_as_of": valid_as_of,
        }
        return cls(
            library_id=library_id,
            source_path=source_path or doc_id,
            body=body,
            extra=extra_items,
            content_hash=content_hash(body, metadata, extra_items, regions),
            regions=tuple(regions),
            **metadata,
        )

    def metadata(self) -> dict[str, str]:
        """The metadata fields plus the extra fields, as a flat dict."""
        out = {name: getattr(self, name) for name in METADATA_FIELDS}
        out.update(dict(self.extra))
        return out


@dataclass(frozen=True, slots=True)
class ParseResult:
    """What :func:`parse_library` found: documents by ``doc_id``, errors, skipped files."""

    documents: tuple[SourceDocument, ...]
    errors: tuple[DocumentError, ...]
    skipped: tuple[str, ...]
    library_id: str = ""
    #: What the user should know about the walk (a format skipped for a missing extra).
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


def detect_language(text: str) -> str:
    """``zh`` or ``en``: :func:`ragspine_core.text.language.detect_language` (the one detector)."""
    return _detect(text, threshold=CJK_LANGUAGE_THRESHOLD)


def content_hash(body: str, metadata: dict[str, str], extra: tuple[tuple[str, str], ...],
                 regions: Sequence[tuple[int, int, str]] = ()) -> str:
    """sha256 hex over canonical JSON of the body, the metadata fields, the extras and (a
    converted file's) regions."""
    payload: dict[str, Any] = {
        "body": body,
        "metadata": {name: metadata.get(name, "") for name in METADATA_FIELDS},
        "extra": [list(pair) for pair in extra],
    }
    if regions:
        payload["regions"] = [list(region) for region in regions]
    encoded = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
