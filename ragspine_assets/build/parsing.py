"""Parse a raw library folder into validated :class:`SourceDocument` records.

A library is one folder under ``data/raw/<library>/``. Every ``.md``, ``.markdown``,
``.txt`` (one document per file, optional front matter) and ``.jsonl`` (one document per
line) file below it is parsed, in sorted relative-path order. Names starting with ``.`` or
``_`` are ignored at any depth (``_library.toml`` holds the library config); files with
other extensions are listed in :attr:`ParseResult.skipped`.

Bad input never aborts the library: each problem becomes a :class:`DocumentError` that
names the file (and line), the field and the fix, and every other document still parses.

Front matter is a first line that is exactly ``---``, then ``key: value`` lines, then a
line that is exactly ``---``. Values are plain strings (surrounding whitespace and one
pair of matching quotes removed); blank lines and ``#`` comment lines are allowed. Keys
that are not metadata fields become ``extra`` fields.

Defaults when a field is absent or empty:

* ``doc_id`` — the relative path without its extension, lowercased, with ``/`` and
  whitespace runs replaced by ``-`` (``reports/Q1 Note.md`` → ``reports-q1-note``).
  ``.jsonl`` lines must carry their own ``doc_id``.
* ``title`` — the first markdown heading (``.md``/``.markdown``), else the file stem
  (``.txt``); the ``doc_id`` for ``.jsonl``.
* ``source_locator`` — the source path (``notes/a.md``, or ``file.jsonl#L<line>``).
* ``sensitivity`` — ``INTERNAL``; ``language`` — detected (``zh``/``en``).

The body is the text after the front matter with CRLF turned into LF and a leading UTF-8
byte-order mark dropped; nothing else is touched. ``content_hash`` covers the body, the
ten metadata fields and the extras — not ``library_id`` or ``source_path``, so moving a
file that keeps its ``doc_id`` and ``source_locator`` does not count as a content change.
Error paths are relative to the library folder (``notes/a.md``, ``feed.jsonl#L7``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, fields
from datetime import date
from pathlib import Path
from typing import Any, Iterator

from ragspine_query.errors import ConfigError, DocumentError
from ragspine_query.records import DEFAULT_SENSITIVITY, METADATA_FIELDS, SENSITIVITIES

from .chunking import (
    CHUNKER_NAMES,
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    Chunker,
    find_sections,
    make_chunker,
    markdown_heading,
)

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
JSONL_SUFFIX = ".jsonl"
SUPPORTED_SUFFIXES = (*DOCUMENT_SUFFIXES, JSONL_SUFFIX)
MARKDOWN_SUFFIXES = (".md", ".markdown")
LIBRARY_CONFIG_FILE = "_library.toml"
FRONT_MATTER_FENCE = "---"
#: How many leading bytes are searched for a NUL byte (the binary-file test).
BINARY_SNIFF_BYTES = 8192
#: Share of CJK ideographs among word characters from which a body is ``zh``.
CJK_LANGUAGE_THRESHOLD = 0.3
ANALYZERS = ("auto", "spec", "english")
_BOM = "\ufeff"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CJK_RANGES = (
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x3134F),  # Extensions B–G
)
_FIX_FRONT_MATTER = (
    "front matter is a first line '---', then one 'key: value' per line, then a line '---'"
)


# --------------------------------------------------------------------------- records


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
            content_hash=content_hash(body, metadata, extra_items),
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

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True)
class LibraryConfig:
    """Per-library build settings, read from the optional ``_library.toml``.

    Raises ``ConfigError`` (listing the allowed values) for any invalid value.
    """

    chunker: str = "paragraph"
    max_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    analyzer: str = "auto"
    #: An embedding spec for ``make_embedding_backend``; validated there, not here.
    embedding: str = "auto"
    contextual: bool = True

    def __post_init__(self) -> None:
        for name in ("chunker", "analyzer", "embedding"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
            object.__setattr__(self, name, value.strip().lower())
        if self.chunker not in CHUNKER_NAMES:
            raise ConfigError(f"unknown chunker {self.chunker!r}; allowed: {', '.join(CHUNKER_NAMES)}")
        if self.analyzer not in ANALYZERS:
            raise ConfigError(f"unknown analyzer {self.analyzer!r}; allowed: {', '.join(ANALYZERS)}")
        for name in ("max_chars", "overlap_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if self.max_chars <= 0:
            raise ConfigError(f"max_chars must be > 0, got {self.max_chars}")
        if not 0 <= self.overlap_chars < self.max_chars:
            raise ConfigError(
                f"overlap_chars must satisfy 0 <= overlap_chars < max_chars ({self.max_chars}), "
                f"got {self.overlap_chars}"
            )
        if not isinstance(self.contextual, bool):
            raise ConfigError(f"contextual must be true or false, got {self.contextual!r}")

    def make_chunker(self) -> Chunker:
        """The configured chunker with this library's budget."""
        return make_chunker(self.chunker, max_chars=self.max_chars, overlap_chars=self.overlap_chars)


LIBRARY_CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(LibraryConfig))


# --------------------------------------------------------------------------- public API


def load_library_config(raw_dir: Path | str) -> LibraryConfig:
    """Read ``<raw_dir>/_library.toml``; defaults when the file is absent.

    Raises:
        ConfigError: unreadable or invalid TOML, an unknown key (the allowed keys are
            listed), or an invalid value; the message names the file.
    """
    path = Path(raw_dir) / LIBRARY_CONFIG_FILE
    if not path.is_file():
        return LibraryConfig()
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the library config: {exc}; fix the TOML syntax") from exc
    unknown = sorted(set(data) - set(LIBRARY_CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(map(repr, unknown))}; allowed keys: {', '.join(LIBRARY_CONFIG_KEYS)}"
        )
    try:
        return LibraryConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def parse_library(raw_dir: Path | str, library_id: str | None = None) -> ParseResult:
    """Parse every supported file under ``raw_dir`` (see the module docstring).

    Parameters:
        raw_dir: the library folder.
        library_id: defaults to the folder name.

    Returns:
        Documents sorted by ``doc_id``; one error per problem found (file order); the
        relative paths of files skipped for an unsupported extension. When two sources
        share a ``doc_id`` the first by sorted source path wins and the others are errors.

    Raises:
        ConfigError: ``raw_dir`` is not a folder, or ``library_id`` is empty.
    """
    root = Path(raw_dir)
    if not root.is_dir():
        raise ConfigError(f"library folder {str(root)!r} does not exist or is not a folder; create data/raw/<library>/")
    lib = root.resolve().name if library_id is None else library_id
    if not isinstance(lib, str) or not lib.strip():
        raise ConfigError(f"library_id must be a non-empty string, got {library_id!r}")

    documents: dict[str, SourceDocument] = {}
    errors: list[DocumentError] = []
    skipped: list[str] = []
    for rel, path in _library_files(root):
        suffix = Path(rel).suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            skipped.append(rel)
            continue
        parse = _parse_jsonl_file if suffix == JSONL_SUFFIX else _parse_document_file
        for item in parse(path, rel, lib):
            if isinstance(item, DocumentError):
                errors.append(item)
                continue
            first = documents.get(item.doc_id)
            if first is not None:
                errors.append(
                    DocumentError(
                        item.source_path,
                        f"doc_id {item.doc_id!r} is already used by {first.source_path}; this copy is not indexed",
                        field="doc_id",
                        hint="give one of the two a distinct doc_id",
                    )
                )
                continue
            documents[item.doc_id] = item
    return ParseResult(
        documents=tuple(documents[k] for k in sorted(documents)),
        errors=tuple(errors),
        skipped=tuple(skipped),
        library_id=lib,
    )


def parse_document(data: bytes, rel_path: str, library_id: str) -> SourceDocument | list[DocumentError]:
    """Parse the bytes of one ``.md``/``.markdown``/``.txt`` file (``rel_path`` is POSIX)."""
    problem = _check_bytes(data, rel_path)
    if problem is not None:
        return [problem]
    text = data.decode("utf-8").removeprefix(_BOM).replace("\r\n", "\n")
    if not text.strip():
        hint = "add text or delete the file"
        return [DocumentError(rel_path, "the file contains only whitespace", field="body", hint=hint)]
    parsed = _split_front_matter(text, rel_path)
    if isinstance(parsed, DocumentError):
        return [parsed]
    meta, body, body_line = parsed
    if not body.strip():
        return [
            DocumentError(
                rel_path,
                f"no text after the front matter (body starts on line {body_line})",
                field="body",
                hint="add the document text below the closing '---'",
            )
        ]
    suffix = Path(rel_path).suffix.lower()
    stem = Path(rel_path).stem
    title = _first_markdown_heading(body) if suffix in MARKDOWN_SUFFIXES else ""
    return _make_document(
        meta,
        body,
        library_id=library_id,
        source_path=rel_path,
        error_path=rel_path,
        default_doc_id=default_doc_id(rel_path),
        default_title=title or stem,
    )


def default_doc_id(rel_path: str) -> str:
    """``reports/Q1 Note.md`` → ``reports-q1-note`` (path without suffix, lowercased)."""
    without_suffix = rel_path[: -len(Path(rel_path).suffix)] if Path(rel_path).suffix else rel_path
    return re.sub(r"[\s/]+", "-", without_suffix.lower()).strip("-")


def detect_language(text: str) -> str:
    """``zh`` when at least 30% of the word characters are CJK ideographs, else ``en``."""
    words = cjk = 0
    for ch in text:
        if ch.isalnum():
            words += 1
            code = ord(ch)
            if any(lo <= code <= hi for lo, hi in _CJK_RANGES):
                cjk += 1
    return "zh" if words and cjk / words >= CJK_LANGUAGE_THRESHOLD else "en"


def content_hash(body: str, metadata: dict[str, str], extra: tuple[tuple[str, str], ...]) -> str:
    """sha256 hex over canonical JSON of the body, the metadata fields and the extras."""
    payload = {
        "body": body,
        "metadata": {name: metadata.get(name, "") for name in METADATA_FIELDS},
        "extra": [list(pair) for pair in extra],
    }
    encoded = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- files


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _library_files(root: Path) -> list[tuple[str, Path]]:
    """``(relative POSIX path, path)`` of every non-hidden regular file, sorted by path."""
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
        for name in filenames:
            path = Path(dirpath) / name
            if _hidden(name) or not path.is_file():
                continue
            found.append((path.relative_to(root).as_posix(), path))
    return sorted(found, key=lambda item: item[0])


def _read(path: Path, rel: str) -> bytes | DocumentError:
    try:
        return path.read_bytes()
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or exc})"
        return DocumentError(rel, problem, field="content", hint="check the file's permissions")


def _binary_error(data: bytes, rel: str, hint: str) -> DocumentError | None:
    """A NUL byte in the first ``BINARY_SNIFF_BYTES`` marks a binary file."""
    nul = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul < 0:
        return None
    return DocumentError(rel, f"looks like a binary file (NUL byte at offset {nul})", field="content", hint=hint)


def _check_bytes(data: bytes, rel: str) -> DocumentError | None:
    """Empty, binary or invalid UTF-8 → the error; else ``None``."""
    if not data:
        return DocumentError(rel, "the file is empty (0 bytes)", field="body", hint="add text or delete the file")
    binary = _binary_error(data, rel, "convert it to UTF-8 text (.md, .txt or .jsonl) or move it out of the library")
    if binary is not None:
        return binary
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return DocumentError(
            rel,
            f"is not valid UTF-8: byte {data[exc.start:exc.start + 1]!r} at byte offset {exc.start} ({exc.reason})",
            field="encoding",
            hint="re-save the file as UTF-8",
        )
    return None


def _parse_document_file(path: Path, rel: str, library_id: str) -> Iterator[SourceDocument | DocumentError]:
    data = _read(path, rel)
    if isinstance(data, DocumentError):
        yield data
        return
    result = parse_document(data, rel, library_id)
    if isinstance(result, SourceDocument):
        yield result
    else:
        yield from result


def _parse_jsonl_file(path: Path, rel: str, library_id: str) -> Iterator[SourceDocument | DocumentError]:
    data = _read(path, rel)
    if isinstance(data, DocumentError):
        yield data
        return
    if not data.strip():
        yield DocumentError(rel, "the file is empty", field="body", hint="add one JSON object per line or delete it")
        return
    binary = _binary_error(data, rel, "a .jsonl library file must be UTF-8 text with one JSON object per line")
    if binary is not None:
        yield binary
        return
    offset = 0
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line_offset, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        result = _parse_jsonl_line(raw, rel, lineno, line_offset, library_id)
        if isinstance(result, SourceDocument):
            yield result
        else:
            yield from result


def _parse_jsonl_line(
    raw: bytes, rel: str, lineno: int, line_offset: int, library_id: str
) -> SourceDocument | list[DocumentError]:
    where = f"{rel}#L{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = (
            f"line {lineno} is not valid UTF-8: byte {raw[exc.start:exc.start + 1]!r} at byte offset "
            f"{line_offset + exc.start} of the file ({exc.reason})"
        )
        return [DocumentError(where, problem, field="encoding", hint="re-save the file as UTF-8")]
    if lineno == 1:
        line = line.removeprefix(_BOM)
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        problem = f"line {lineno} is not valid JSON: {exc.msg} at column {exc.colno}"
        return [DocumentError(where, problem, field="json", hint="write one complete JSON object per line")]
    if not isinstance(obj, dict):
        problem = f"line {lineno} is a JSON {type(obj).__name__}, not an object"
        hint = 'write one {"doc_id": ..., "text": ...} object per line'
        return [DocumentError(where, problem, field="json", hint=hint)]
    problems: list[DocumentError] = []
    for key in ("doc_id", "text"):
        if key not in obj:
            hint = f"add a string {key!r} to the object"
            problems.append(DocumentError(where, f"line {lineno} has no {key!r}", field=key, hint=hint))
    meta: dict[str, str] = {}
    for key, value in obj.items():
        if not isinstance(value, str):
            problems.append(
                DocumentError(
                    where,
                    f"line {lineno}: {key!r} is a JSON {type(value).__name__} ({_preview(value)}), not a string",
                    field=key,
                    hint="metadata values must be strings; quote the value or drop the key",
                )
            )
        elif key != "text":
            meta[key] = value.strip()
    if problems:
        return problems
    body = obj["text"].replace("\r\n", "\n")
    if not body.strip():
        problem = f"line {lineno} has an empty 'text'"
        return [DocumentError(where, problem, field="text", hint="add the document text")]
    if not meta.get("doc_id"):
        problem = f"line {lineno} has an empty 'doc_id'"
        return [DocumentError(where, problem, field="doc_id", hint="give it a unique doc_id")]
    return _make_document(
        meta,
        body,
        library_id=library_id,
        source_path=where,
        error_path=where,
        default_doc_id="",
        default_title=meta["doc_id"],
    )


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- front matter


def _split_front_matter(text: str, rel: str) -> tuple[dict[str, str], str, int] | DocumentError:
    """``(metadata, body, line number where the body starts)`` or the first structural error."""
    lines = text.split("\n")
    if lines[0] != FRONT_MATTER_FENCE:
        return {}, text, 1
    try:
        close = lines.index(FRONT_MATTER_FENCE, 1)
    except ValueError:
        return DocumentError(
            rel,
            "front matter opened on line 1 is never closed",
            field="front_matter",
            hint=f"add a line containing only '---' after the last 'key: value' line ({_FIX_FRONT_MATTER})",
        )
    meta: dict[str, str] = {}
    seen_on: dict[str, int] = {}
    for index in range(1, close):
        lineno = index + 1
        line = lines[index]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon:
            return DocumentError(
                rel, f"front matter line {lineno} has no ':' ({_preview(stripped)})", field="front_matter",
                hint=f"write it as 'key: value'; {_FIX_FRONT_MATTER}",
            )
        if not key:
            return DocumentError(
                rel, f"front matter line {lineno} has an empty key ({_preview(stripped)})", field="front_matter",
                hint="put the field name before the ':'",
            )
        if any(ch.isspace() for ch in key):
            return DocumentError(
                rel, f"front matter line {lineno}: key {key!r} contains whitespace", field="front_matter",
                hint="keys are single words such as valid_as_of; is the closing '---' missing?",
            )
        if key in seen_on:
            return DocumentError(
                rel, f"front matter key {key!r} appears on line {seen_on[key]} and again on line {lineno}",
                field=key, hint="keep one of the two lines",
            )
        seen_on[key] = lineno
        meta[key] = _unquote(value.strip())
    return meta, "\n".join(lines[close + 1 :]), close + 2


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _first_markdown_heading(body: str) -> str:
    """The first markdown heading outside code fences (the same rule the layout chunker uses)."""
    return next((section.heading for section in find_sections(body, markdown_heading) if section.heading), "")


# --------------------------------------------------------------------------- metadata


def _make_document(
    meta: dict[str, str],
    body: str,
    *,
    library_id: str,
    source_path: str,
    error_path: str,
    default_doc_id: str,
    default_title: str,
) -> SourceDocument | list[DocumentError]:
    """Validate metadata strings, apply defaults, build the document (or list every problem)."""
    problems: list[DocumentError] = []
    fields_: dict[str, str] = {name: meta.get(name, "").strip() for name in METADATA_FIELDS}
    extra = {k: v for k, v in meta.items() if k not in METADATA_FIELDS}

    doc_id = fields_["doc_id"] or default_doc_id
    if not doc_id:
        problem = "no doc_id and none can be derived from the path"
        problems.append(DocumentError(error_path, problem, field="doc_id", hint="add 'doc_id: <id>'"))

    sensitivity = fields_["sensitivity"].upper() or DEFAULT_SENSITIVITY
    if sensitivity not in SENSITIVITIES:
        problems.append(
            DocumentError(
                error_path,
                f"unknown sensitivity {fields_['sensitivity']!r}",
                field="sensitivity",
                hint=f"use one of {', '.join(SENSITIVITIES)} (case-insensitive), or omit it for {DEFAULT_SENSITIVITY}",
            )
        )

    valid_as_of = fields_["valid_as_of"]
    if valid_as_of and not _is_iso_date(valid_as_of):
        problems.append(
            DocumentError(
                error_path,
                f"valid_as_of {valid_as_of!r} is not a calendar date in YYYY-MM-DD form",
                field="valid_as_of",
                hint="write it like 2024-03-31, or leave it empty",
            )
        )
    if problems:
        return problems
    return SourceDocument.create(
        library_id=library_id,
        doc_id=doc_id,
        body=body,
        source_path=source_path,
        title=fields_["title"] or default_title,
        source_locator=fields_["source_locator"] or source_path,
        entity=fields_["entity"],
        topic=fields_["topic"],
        geography=fields_["geography"],
        period=fields_["period"],
        language=fields_["language"],
        sensitivity=sensitivity,
        valid_as_of=valid_as_of,
        extra=extra,
    )


def _is_iso_date(value: str) -> bool:
    if not _DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


__all__ = [
    "ANALYZERS",
    "BINARY_SNIFF_BYTES",
    "CJK_LANGUAGE_THRESHOLD",
    "DOCUMENT_SUFFIXES",
    "LIBRARY_CONFIG_FILE",
    "LIBRARY_CONFIG_KEYS",
    "SUPPORTED_SUFFIXES",
    "LibraryConfig",
    "ParseResult",
    "SourceDocument",
    "content_hash",
    "default_doc_id",
    "detect_language",
    "load_library_config",
    "parse_document",
    "parse_library",
]
