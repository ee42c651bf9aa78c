"""Validate a document's metadata strings, apply the defaults, build the document.

Defaults when a field is absent or empty:

* ``doc_id`` — the relative path without its extension, lowercased, with ``/`` and
  whitespace runs replaced by ``-`` and other control or invisible formatting
  characters dropped (``reports/Q1 Note.md`` → ``reports-q1-note``). When several files
  would get the same default (``x.docx``, ``x.pdf`` and ``x.pptx`` in one folder), each of
  them gets its suffix appended (``x-docx``, ``x-pdf``, ``x-pptx``: :func:`default_doc_ids`).
  ``.jsonl`` lines must carry their own ``doc_id``.
* ``title`` — the first markdown heading (``.md``/``.markdown``), else the file stem
  (``.txt``); the ``doc_id`` for ``.jsonl``.
* ``source_locator`` — the source path (``notes/a.md``, or ``file.jsonl#L<line>``).
* ``sensitivity`` — ``INTERNAL``, only when nothing tries to mark the document
  (:mod:`.sensitivity`); ``language`` — detected (``zh``/``en``).

Control and invisible formatting characters in a file name (Unicode categories Cc, Cf,
Zl, Zp, and undecodable bytes) are percent-encoded as UTF-8 in the ``source_path``, the
default ``source_locator``, the default title and error paths (a newline shows as
``%0A``), so every one stays on one printable line. A ``doc_id`` or ``source_locator``
value containing such a character is an error.

Error messages never quote document text: a ``doc_id`` only when it is a plain
identifier, a sensitivity only when it is a short word and a date only when it is made of
digits and ``-``/``.``/``/``.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Iterable

from ragspine_core.errors import DocumentError
from ragspine_core.records import DEFAULT_SENSITIVITY, METADATA_FIELDS, RESTRICTED_SENSITIVITY, SENSITIVITIES

from ragspine_index.sources.paths import unprintable
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.source_documents.sensitivity import first_marking

#: Size limits per field: a metadata value (front matter or JSONL key) and a document's
#: text (the digits of a JSON number: :data:`.jsonl.MAX_JSON_NUMBER_CHARS`).
MAX_METADATA_VALUE_CHARS = 16_384
MAX_BODY_CHARS = 32_000_000
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_FIX_SENSITIVITY = (
    f"use one of {', '.join(SENSITIVITIES)} (case-insensitive), or omit the key for {DEFAULT_SENSITIVITY}"
)
#: The values/identifiers that are safe to quote in an error message.
_RANK = {"PUBLIC": 0, "INTERNAL": 1, RESTRICTED_SENSITIVITY: 2}
_QUOTABLE_SENSITIVITY = re.compile(r"[A-Za-z_-]{1,20}")
_QUOTABLE_DATE = re.compile(r"[0-9./-]{1,12}")
_QUOTABLE_DOC_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")


def default_doc_id(rel_path: str) -> str:
    """``reports/Q1 Note.md`` → ``reports-q1-note`` (path without suffix, lowercased).

    ``/`` and whitespace runs become ``-``; other control or invisible formatting
    characters are dropped.
    """
    without_suffix = rel_path[: -len(Path(rel_path).suffix)] if Path(rel_path).suffix else rel_path
    dashed = re.sub(r"[\s/]+", "-", without_suffix.lower())
    return "".join(ch for ch in dashed if not unprintable(ch)).strip("-")


def default_doc_ids(rel_paths: Iterable[str]) -> dict[str, str]:
    """The default ``doc_id`` of each path; paths that would share one (``x.docx``,
    ``x.pdf`` in one folder) each get their suffix appended (``x-docx``, ``x-pdf``), so the
    default never depends on which of them sorts first."""
    rels = list(rel_paths)
    plain = {rel: default_doc_id(rel) for rel in rels}
    shared = {doc_id for doc_id, n in Counter(plain.values()).items() if n > 1}
    return {rel: f"{doc_id}-{Path(rel).suffix.lstrip('.').lower()}" if doc_id in shared and Path(rel).suffix else doc_id
            for rel, doc_id in plain.items()}


def make_document(
    meta: dict[str, str],
    body: str,
    *,
    library_id: str,
    source_path: str,
    error_path: str,
    default_doc_id: str,
    default_title: str,
    marking_lines: list[tuple[str, str, str]],
    sensitivity_fix: str,
    folder_sensitivity: str | None = None,
) -> SourceDocument | list[DocumentError]:
    """Validate metadata strings, apply defaults, build the document (or list every problem).

    ``folder_sensitivity`` is the ``[defaults]`` sensitivity of the ``_library.toml`` files
    of the document's folder (any format): the document's sensitivity when it sets none
    (a ``RESTRICTED`` folder needs no marking check then); a sensitivity the document sets
    that is more open than it is an error (the folder is a floor, never lowered by a file).
    """
    problems: list[DocumentError] = []
    for key, value in meta.items():  # size limits per field (module docstring)
        if len(value) > MAX_METADATA_VALUE_CHARS:
            problems.append(DocumentError(
                error_path, f"the {key!r} value has {len(value):,} characters, more than the limit of "
                f"{MAX_METADATA_VALUE_CHARS:,}", field=key, hint="shorten it; long text belongs in the body"))
    if len(body) > MAX_BODY_CHARS:
        problems.append(DocumentError(
            error_path, f"the text has {len(body):,} characters, more than the limit of {MAX_BODY_CHARS:,}",
            field="text" if "#L" in error_path else "body", hint="split the document into several files"))
    if problems:
        return problems
    fields_: dict[str, str] = {name: meta.get(name, "").strip() for name in METADATA_FIELDS}
    extra = {k: v for k, v in meta.items() if k not in METADATA_FIELDS}

    doc_id = fields_["doc_id"] or default_doc_id
    if not doc_id:
        problem = "no doc_id and none can be derived from the path"
        problems.append(DocumentError(error_path, problem, field="doc_id", hint="add 'doc_id: <id>'"))
    for name in ("doc_id", "source_locator"):
        bad = next(((pos, ch) for pos, ch in enumerate(fields_[name], 1) if unprintable(ch)), None)
        if bad is not None:
            pos, ch = bad
            problems.append(
                DocumentError(
                    error_path,
                    f"{name} contains a control or invisible character (U+{ord(ch):04X}) at position {pos}",
                    field=name,
                    hint="remove it; identifiers and locators must be printable on one line",
                )
            )

    if "sensitivity" in meta:
        raw = fields_["sensitivity"]
        sensitivity = raw.upper() if raw.isascii() else ""
        if not raw:
            problems.append(
                DocumentError(
                    error_path, "sensitivity is set but empty", field="sensitivity",
                    hint=f"{_FIX_SENSITIVITY}; an empty value is never read as the default",
                )
            )
        elif sensitivity not in SENSITIVITIES:
            shown = repr(raw) if _QUOTABLE_SENSITIVITY.fullmatch(raw) else f"of {len(raw)} characters"
            problems.append(
                DocumentError(
                    error_path, f"unknown sensitivity {shown}", field="sensitivity",
                    hint=f"{_FIX_SENSITIVITY}; nothing else (quotes aside) may follow the value",
                )
            )
        elif folder_sensitivity is not None and _RANK[sensitivity] < _RANK[folder_sensitivity]:
            problems.append(
                DocumentError(
                    error_path,
                    f"sets sensitivity {sensitivity}, more open than the {folder_sensitivity} its folder's "
                    "_library.toml [defaults] gives every file in it",
                    field="sensitivity",
                    hint=f"remove the file's sensitivity (it is then {folder_sensitivity}), or move the file to "
                    "another folder if the folder default is wrong for it",
                )
            )
        elif sensitivity != RESTRICTED_SENSITIVITY:
            where = first_marking(marking_lines, restricted_only=True)
            if where is not None:
                problems.append(
                    DocumentError(
                        error_path,
                        f"{where} looks like a restricted/confidential marking, but the document's "
                        f"sensitivity is {sensitivity}",
                        field="sensitivity",
                        hint=f"set the sensitivity to {RESTRICTED_SENSITIVITY} if that is what the marking means, "
                        "or reword the line",
                    )
                )
    else:
        sensitivity = folder_sensitivity or DEFAULT_SENSITIVITY
        where = None if sensitivity == RESTRICTED_SENSITIVITY else first_marking(marking_lines)
        if where is not None:
            problems.append(
                DocumentError(
                    error_path,
                    f"{where} looks like a sensitivity marking, but the document sets no 'sensitivity', "
                    f"so it would be indexed as {sensitivity}",
                    field="sensitivity",
                    hint=sensitivity_fix,
                )
            )

    valid_as_of = fields_["valid_as_of"]
    if valid_as_of and not _is_iso_date(valid_as_of):
        shown = repr(valid_as_of) if _QUOTABLE_DATE.fullmatch(valid_as_of) else f"of {len(valid_as_of)} characters"
        problems.append(
            DocumentError(
                error_path,
                f"valid_as_of {shown} is not a calendar date in YYYY-MM-DD form",
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


def doc_id_words(doc_id: str) -> str:
    """``doc_id 'x'`` for a plain identifier, else ``this doc_id`` (never quote other text)."""
    return f"doc_id {doc_id!r}" if _QUOTABLE_DOC_ID.fullmatch(doc_id) else "this doc_id"


def _is_iso_date(value: str) -> bool:
    if not _DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True
