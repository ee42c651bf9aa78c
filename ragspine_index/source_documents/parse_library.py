"""Parse a raw library folder into validated :class:`SourceDocument` records.

A library is one folder under ``data/raw/<library>/``. Every ``.md``, ``.markdown``,
``.txt`` (one document per file, optional front matter) and ``.jsonl`` (one document per
line) file below it is parsed, in sorted relative-path order. Names starting with ``.`` or
``_`` are ignored at any depth (``_library.toml`` holds the library config). PDF, DOCX,
PPTX, XLSX, HTML, CSV, OpenDocument, RTF, EPUB, EML/MSG and PNG/JPEG files (with their
``<file>.meta.toml`` sidecars) are converted
by :mod:`.converters` (docs/formats.md); files with other extensions, and those whose
converter needs the missing ``formats`` extra (:attr:`ParseResult.notes` says so), are
listed in :attr:`ParseResult.skipped`.

Symbolic links: a link to a file is followed only when its target is a visible (no
``.``/``_`` part) regular file inside the library folder; a link that leads outside the
library, to a hidden path, or nowhere is an error for the link's own path (the target is
never named). Links to folders are never followed: one that stays inside the library is
listed in ``skipped`` (as ``name/``), one that leads outside is an error.

Bad input never aborts the library: each problem becomes a :class:`DocumentError` that
names the file (and line), the field and the fix, and every other document still parses.
Error messages never quote document text. They give the file, line, column, field name,
JSON type and length; a key is quoted only when it is a well-formed name (see below), a
``doc_id`` only when it is a plain identifier, a sensitivity only when it is a short
word and a date only when it is made of digits and ``-``/``.``/``/``.

The walk and link policy are in :mod:`..sources.walk`, the front-matter grammar in
:mod:`.front_matter`, ``.jsonl`` in :mod:`.jsonl`, the sensitivity check in
:mod:`.sensitivity`, the defaults in :mod:`.metadata`, the document model in
:mod:`.model`.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from ragspine_core.errors import ConfigError, DocumentError
from ragspine_core.records import METADATA_FIELDS, SENSITIVITIES, is_restricted

from ragspine_index.marking_scan import mentions_restricted
from ragspine_index.source_documents.folding import norm_key
from ragspine_index.source_documents.sensitivity import LEVEL_WORDS, sensitivity_like

from ragspine_index.converters import SIDECAR_SUFFIX, ConvertedFiles
from ragspine_index.converters.files import sidecar_claims
from ragspine_index.sources.paths import printable_path
from ragspine_index.sources.walk import library_files, read_entry
from ragspine_index.source_documents.jsonl import JSONL_SUFFIX, parse_jsonl
from ragspine_index.source_documents.metadata import doc_id_words, default_doc_ids
from ragspine_index.source_documents.model import ParseResult, SourceDocument
from ragspine_index.source_documents.text_files import DOCUMENT_SUFFIXES, parse_document

SUPPORTED_SUFFIXES = (*DOCUMENT_SUFFIXES, JSONL_SUFFIX)
#: Names an error may quote for a file that may be RESTRICTED: field names and levels.
_QUOTABLE = frozenset(METADATA_FIELDS) | frozenset(SENSITIVITIES) | frozenset(s.lower() for s in SENSITIVITIES)
_QUOTED = re.compile(r"'([^'\n]{1,200})'")
_FIELD_NORMS = frozenset(norm_key(f) for f in METADATA_FIELDS)
_DATE_LIKE = re.compile(r"[0-9./-]{1,12}")
_MARKING_WORD = re.compile(r"confidential|secret|机密|绝密|秘密|保密", re.I)


def _may_be_marked(data: bytes) -> bool:
    """Whether a text file may be RESTRICTED (its errors then quote no key of it)."""
    return mentions_restricted(data) or _MARKING_WORD.search(data.decode("utf-8", "ignore")) is not None


def _redacted(err: DocumentError) -> DocumentError:
    """``err`` quoting no name of the document but field names and levels: the keys, property
    and sheet names of a document that may be RESTRICTED are its text (``'project_nordvolt'``
    becomes ``<a name of 16 characters>``)."""
    def one(match: re.Match) -> str:
        name = match.group(1)
        norm = norm_key(name)
        quotable = (name in _QUOTABLE or norm in LEVEL_WORDS or norm in _FIELD_NORMS or sensitivity_like(norm)
                    or _DATE_LIKE.fullmatch(name) is not None)
        return match.group(0) if quotable else f"<a name of {len(name)} characters>"

    problem, hint = _QUOTED.sub(one, err.problem), _QUOTED.sub(one, err.hint)
    field = err.field if err.field is None or err.field in _QUOTABLE or err.field in _ERROR_FIELDS else "metadata"
    if (problem, hint, field) == (err.problem, err.hint, err.field):
        return err
    return DocumentError(err.path, problem, field=field, hint=hint)


#: ``field`` values of errors that name a kind of problem, not a key.
_ERROR_FIELDS = frozenset({"metadata", "body", "content", "path", "encoding", "limits", "encrypted", "ocr",
                           "sidecar", "defaults", "front_matter", "json", "key"})


def parse_library(raw_dir: Path | str, library_id: str | None = None) -> ParseResult:
    """Parse every supported file under ``raw_dir`` (see the module docstring).

    Parameters:
        raw_dir: the library folder.
        library_id: defaults to the folder name.

    Returns:
        Documents sorted by ``doc_id``; one error per problem found (file order); the
        relative paths of files skipped for an unsupported extension (and of folder
        links inside the library, which are not followed). When two sources share a
        ``doc_id`` the first by sorted source path wins and the others are errors.

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
    reported: set[tuple[str, str | None, str]] = set()
    entries = library_files(root)
    by_rel = {entry.rel: entry for entry in entries if entry.path is not None and not entry.problem}
    converted = ConvertedFiles(root, lib, frozenset(by_rel), lambda rel: read_entry(by_rel[rel], printable_path(rel)))
    claims = sidecar_claims([entry.rel for entry in entries], frozenset(by_rel))
    # files that would share a default doc_id (x.docx, x.pdf in one folder) get their suffix
    defaults = default_doc_ids(rel for rel in by_rel if Path(rel).suffix.lower() in DOCUMENT_SUFFIXES
                               or (converted.handles(rel) and not rel.lower().endswith(SIDECAR_SUFFIX)))
    converted.default_ids = defaults
    for entry in entries:
        shown = printable_path(entry.rel)
        if entry.problem:
            errors.append(DocumentError(shown, entry.problem, field="path", hint=entry.hint))
            continue
        if entry.rel in claims:  # a sidecar that may be its own is not its exact pair: fail closed
            sidecar = printable_path(claims[entry.rel])
            errors.append(DocumentError(
                shown, f"the metadata sidecar {sidecar} may belong to it but is not its exact pair, so its "
                "sensitivity cannot be known", field="sensitivity",
                hint=f"name the sidecar exactly {PurePosixPath(shown).name}.meta.toml (same letter case; PDF, DOCX, "
                "PPTX, XLSX, HTML and CSV files only), make it a readable plain file, or delete it"))
            continue
        if entry.path is None:  # a folder link that stays inside the library
            skipped.append(shown + "/")
            continue
        suffix = Path(entry.rel).suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:  # PDF, DOCX, HTML…: converters/, else skipped
            converted_items = converted.parse(entry.rel, shown) if converted.handles(entry.rel) else None
            if converted_items is None:
                skipped.append(shown)
                continue
            items: list[SourceDocument | DocumentError] = converted_items
            items = [_redacted(item) if isinstance(item, DocumentError) else item for item in items]
        else:
            floor, floor_errors = converted.folder_sensitivity(entry.rel)
            if floor_errors:  # the folder's default cannot be known: fail closed
                errors.extend(e for e in floor_errors if (e.path, e.field, str(e)) not in reported)
                reported.update((e.path, e.field, str(e)) for e in floor_errors)
                errors.append(DocumentError(shown, "its folder's _library.toml [defaults] cannot be read, so its "
                                            "sensitivity is unknown", field="sensitivity",
                                            hint="fix the _library.toml error reported for its folder"))
                continue
            data = read_entry(entry, shown)
            if isinstance(data, DocumentError):
                errors.append(data)
                continue
            if suffix == JSONL_SUFFIX:
                items = parse_jsonl(data, entry.rel, lib, floor)
            else:
                result = parse_document(data, entry.rel, lib, floor, doc_id_default=defaults.get(entry.rel))
                items = [result] if isinstance(result, SourceDocument) else list(result)
            if any(isinstance(item, DocumentError) for item in items) and _may_be_marked(data):
                items = [_redacted(item) if isinstance(item, DocumentError) else item for item in items]
        for item in items:
            if isinstance(item, DocumentError):
                errors.append(item)
                continue
            first = documents.get(item.doc_id)
            if first is not None:
                # never name a RESTRICTED document or its path, never drop it for an open one that
                # sorts first (a probe file): the open copy is the one not indexed
                loser, kept = item, first
                if is_restricted(item.sensitivity) and not is_restricted(first.sensitivity):
                    loser, kept = first, item
                    documents[item.doc_id] = item
                other = "another document" if is_restricted(kept.sensitivity) else kept.source_path
                errors.append(
                    DocumentError(
                        loser.source_path,
                        f"{doc_id_words(item.doc_id) if not is_restricted(loser.sensitivity) else 'its doc_id'} "
                        f"is already used by {other}; this copy is not indexed",
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
        notes=tuple(converted.notes),
    )
