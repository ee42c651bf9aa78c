"""Parse one ``.jsonl`` file: one document per line, a JSON object whose values are all
strings, with the key rules of front matter (``text`` holds the body). A large file's
lines are parsed by worker processes, in order (:mod:`..workers`)."""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Sequence

from ragspine_core.errors import DocumentError
from ragspine_core.records import METADATA_FIELDS

from ragspine_index.sources.paths import printable_path
from ragspine_index.workers import batches, ordered_map
from ragspine_index.source_documents.encoding import BOM, binary_error
from ragspine_index.source_documents.folding import norm_key
from ragspine_index.source_documents.keys import check_key
from ragspine_index.source_documents.metadata import make_document
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.source_documents.sensitivity import first_body_lines, sensitivity_like

JSONL_SUFFIX = ".jsonl"
#: The digits of a JSON number (a larger one is a located error for its line, not an
#: abort of the library: Python refuses integers of more than 4,300 digits).
MAX_JSON_NUMBER_CHARS = 100


def parse_jsonl(data: bytes, rel_path: str, library_id: str,
                folder_sensitivity: str | None = None) -> list[SourceDocument | DocumentError]:
    """Parse the bytes of one ``.jsonl`` file: one document (or errors) per non-blank line
    (``folder_sensitivity``: the ``[defaults]`` sensitivity of its folder, see
    :func:`.metadata.make_document`)."""
    shown = printable_path(rel_path)
    if not data.strip():
        hint = "add one JSON object per line or delete it"
        return [DocumentError(shown, "the file is empty", field="body", hint=hint)]
    binary = binary_error(data, shown, "a .jsonl library file must be UTF-8 text with one JSON object per line")
    if binary is not None:
        return [binary]
    lines: list[tuple[bytes, int, int]] = []
    offset = 0
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line_offset, offset = offset, offset + len(raw) + 1
        if raw.strip():
            lines.append((raw, lineno, line_offset))
    # a large file's lines are parsed by worker processes, in order (workers.py)
    jobs = [(part, shown, library_id, folder_sensitivity) for part in batches(lines, JSONL_LINES_PER_TASK)]
    return list(chain.from_iterable(ordered_map(_parse_jsonl_lines, jobs, min_items=JSONL_MIN_TASKS_IN_WORKERS)))


#: Lines per worker task, and the tasks a file needs before it is parsed in workers
#: (smaller files parse in-process: starting the pool costs more than it saves).
JSONL_LINES_PER_TASK = 1000
JSONL_MIN_TASKS_IN_WORKERS = 8


def _parse_jsonl_lines(
    job: tuple[Sequence[tuple[bytes, int, int]], str, str, str | None],
) -> list[SourceDocument | DocumentError]:
    lines, shown, library_id, folder_sensitivity = job
    out: list[SourceDocument | DocumentError] = []
    for raw, lineno, line_offset in lines:
        result = _parse_jsonl_line(raw, shown, lineno, line_offset, library_id, folder_sensitivity)
        if isinstance(result, SourceDocument):
            out.append(result)
        else:
            out.extend(result)
    return out


class _JsonObject(list):
    """A JSON object as its ``(key, value)`` pairs, in order, duplicates kept."""


def _json_type(value: Any) -> str:
    if isinstance(value, _JsonObject):
        return "object"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {list: "array", str: "string", type(None): "null"}.get(type(value), type(value).__name__)


def _json_number(text: str) -> float:
    """A JSON number (never a valid metadata value: those are strings) read without
    Python's integer conversion, which refuses more than 4,300 digits."""
    if len(text) > MAX_JSON_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text):,} characters (the limit is {MAX_JSON_NUMBER_CHARS})")
    return float(text)


def _parse_jsonl_line(
    raw: bytes, rel: str, lineno: int, line_offset: int, library_id: str, folder_sensitivity: str | None = None
) -> SourceDocument | list[DocumentError]:
    where = f"{rel}#L{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = (
            f"line {lineno} is not valid UTF-8 at byte offset {line_offset + exc.start} of the file ({exc.reason})"
        )
        return [DocumentError(where, problem, field="encoding", hint="re-save the file as UTF-8")]
    if lineno == 1:
        line = line.removeprefix(BOM)
    try:
        obj = json.loads(line, object_pairs_hook=_JsonObject, parse_int=_json_number, parse_float=_json_number)
    except json.JSONDecodeError as exc:
        problem = f"line {lineno} is not valid JSON: {exc.msg} at column {exc.colno}"
        return [DocumentError(where, problem, field="json", hint="write one complete JSON object per line")]
    except ValueError as exc:  # a number beyond MAX_JSON_NUMBER_CHARS, or any other value json refuses
        problem = f"line {lineno} holds a value that cannot be read ({' '.join(str(exc).split())[:200]})"
        return [DocumentError(where, problem, field="json", hint="metadata values must be strings; quote the value")]
    except RecursionError:
        problem = f"line {lineno} is nested too deeply to parse"
        return [DocumentError(where, problem, field="json", hint="write one flat JSON object per line")]
    if not isinstance(obj, _JsonObject):
        problem = f"line {lineno} is a JSON {_json_type(obj)}, not an object"
        hint = 'write one {"doc_id": ..., "text": ...} object per line'
        return [DocumentError(where, problem, field="json", hint=hint)]
    problems: list[DocumentError] = []
    known = (*METADATA_FIELDS, "text")
    seen: dict[str, str] = {}
    values: dict[str, str] = {}
    for key, value in obj:
        key_problem = check_key(key, known)
        if key_problem is not None:
            field, problem, hint = key_problem
            problems.append(DocumentError(where, f"line {lineno}: {problem}", field=field or "json", hint=hint))
            continue
        norm = norm_key(key)
        if norm in seen:
            first = seen[norm]
            what = f"key {key!r} appears twice" if first == key else f"keys {first!r} and {key!r} name the same field"
            field = "sensitivity" if sensitivity_like(norm) else key
            problems.append(
                DocumentError(where, f"line {lineno}: {what}", field=field, hint="keep exactly one of them")
            )
            continue
        seen[norm] = key
        if not isinstance(value, str):
            problems.append(
                DocumentError(
                    where,
                    f"line {lineno}: {key!r} is a JSON {_json_type(value)}, not a string",
                    field=key,
                    hint="metadata values must be strings; quote the value or drop the key",
                )
            )
            continue
        if _has_surrogate(value):
            problems.append(
                DocumentError(
                    where,
                    f"line {lineno}: {key!r} contains an unpaired surrogate escape (\\uD800-\\uDFFF)",
                    field=key,
                    hint="escape characters outside the BMP as a surrogate pair, or write them as UTF-8",
                )
            )
            continue
        values[key] = value
    for key in ("doc_id", "text"):
        if norm_key(key) not in seen:
            hint = f"add a string {key!r} to the object"
            problems.append(DocumentError(where, f"line {lineno} has no {key!r}", field=key, hint=hint))
    if problems:
        return problems
    body = values.pop("text").replace("\r\n", "\n")
    meta = {key: value.strip() for key, value in values.items()}
    if not body.strip():
        problem = f"line {lineno} has an empty 'text'"
        return [DocumentError(where, problem, field="text", hint="add the document text")]
    if not meta.get("doc_id"):
        problem = f"line {lineno} has an empty 'doc_id'"
        return [DocumentError(where, problem, field="doc_id", hint="give it a unique doc_id")]
    marking_lines = [
        (f"line {lineno}: the {key!r} value", f"{key}: {value}", "field" if key in METADATA_FIELDS else "meta")
        for key, value in meta.items()
    ] + first_body_lines(body, lambda n: f"line {lineno}: line {n + 1} of 'text'")
    return make_document(
        meta,
        body,
        library_id=library_id,
        source_path=where,
        error_path=where,
        default_doc_id="",
        default_title=meta["doc_id"],
        marking_lines=marking_lines,
        folder_sensitivity=folder_sensitivity,
        sensitivity_fix=(
            'add "sensitivity": "RESTRICTED" (or PUBLIC/INTERNAL) to the object; '
            "an explicit sensitivity turns this check off"
        ),
    )


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:  # strict UTF-8 refuses exactly the lone surrogates (U+D800-U+DFFF), in C
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
