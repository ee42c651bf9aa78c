"""Converted files in a library walk: sidecars, folder defaults, properties, sensitivity.

Metadata of a converted file, later sources winning key by key:

1. ``[defaults]`` of the ``_library.toml`` in the library folder, then of each
   ``_library.toml`` in the folders down to the file (a sub-folder's file holds only a
   ``[defaults]`` table): any metadata field but ``doc_id``, ``title`` and
   ``source_locator``, plus extra fields;
2. the file's own properties: its title (PDF info ``/Title``, Office core ``title``,
   HTML ``<title>``, else the first heading) and author;
3. the sidecar ``<file>.meta.toml`` (``reports/q3.pdf.meta.toml``): ``key = "value"``
   lines, the same keys as front matter.

Sensitivity fails closed, with the front-matter rules of :mod:`..source_documents.keys` and
:mod:`..source_documents.sensitivity`:

* set in the sidecar: exactly ``PUBLIC``/``INTERNAL``/``RESTRICTED`` or an error;
* else a document property that names a sensitivity (``classification``,
  ``sensitivity``, a Microsoft Purview label ``MSIP_Label_<id>_Name``…): its value
  exactly a level → that level; a restricted-type word (``Confidential``, ``Highly
  Confidential``, ``Secret``…) → ``RESTRICTED``; anything else → an error; a label
  enabled without its name (``docMetadata/LabelInfo.xml``) → ``RESTRICTED``;
* else a marking in the sidecar's lines, the properties, the page headers/footers, the
  other places outside the body a converter reads (:mod:`.markings`: watermarks, text
  boxes, content controls, tracked changes, slide masters and layouts, print headers,
  PDF XMP and annotations, the HTML ``<title>``) or the first 20 lines of the extracted
  text: one that names ``RESTRICTED``/
  ``CONFIDENTIAL``/``SECRET`` (a first-page banner) → ``RESTRICTED``; any other →
  an error;
* else the folder default (never ``PUBLIC`` unless a ``_library.toml`` says so), else
  ``INTERNAL``.

A level that is set (sidecar or property) must not meet a restricted-type marking in
the rest, nor be more open than the folder default (the folder is a floor for every file
in it, Markdown, text and JSONL too): either conflict is an error. Every error names the file (the sidecar or the
``_library.toml`` when the fault is there) and never quotes document text.
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from ragspine_core.errors import ConfigError, DocumentError, MissingExtraError
from ragspine_core.records import METADATA_FIELDS, RESTRICTED_SENSITIVITY, SENSITIVITIES

from ragspine_index.library_config_guard import read_config_bytes
from ragspine_index.source_documents.folding import norm_key
from ragspine_index.source_documents.keys import check_key  # the front-matter key rules, shared
from ragspine_index.source_documents.metadata import make_document, default_doc_id
from ragspine_index.source_documents.model import SourceDocument
from ragspine_index.source_documents.sensitivity import first_body_lines, first_marking, sensitivity_like
from ragspine_index.sources.paths import printable_path
from ragspine_index.converters.converted import UNNAMED_LABEL_PROPERTY, ConversionError, ConversionLimits
from ragspine_index.converters.converter_registry import CONVERTED_SUFFIXES, FORMAT_BY_SUFFIX, SIDECAR_SUFFIX, convert_bytes

#: The extra field that records which converter (and library version) made a document's
#: text: lineage on every chunk row, and part of the content hash.
CONVERTER_FIELD = "converter"
DEFAULTS_TABLE = "defaults"
_PER_FILE_FIELDS = ("doc_id", "title", "source_locator")
_LABEL_PROPERTY = re.compile(r"msip_label_.*_name", re.I)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_. -]{0,63}")


@dataclass
class ConvertedFiles:
    """Converts the convertible files of one library walk (see the module docstring).

    ``read(rel)`` returns a walked file's bytes or its :class:`DocumentError` (the walk's
    safe reader: no link followed out of the library); ``files`` are the walked paths.
    """

    root: Path
    library_id: str
    files: frozenset[str]
    read: Callable[[str], "bytes | DocumentError"]
    limits: ConversionLimits = field(default_factory=ConversionLimits)
    #: What the build should tell the user (a missing extra), once each.
    notes: list[str] = field(default_factory=list)
    #: The default ``doc_id`` by path (``default_doc_ids``: files sharing a stem get their
    #: suffix); a path not in it gets :func:`default_doc_id`.
    default_ids: dict[str, str] = field(default_factory=dict)
    _defaults: dict[str, Any] = field(default_factory=dict)
    _process: Any = None

    def _convert(self, data: bytes, suffix: str):
        """In a child process with hard limits (:mod:`.isolation`) when one can start."""
        from ragspine_index.converters.isolation import ConverterProcess

        if self._process is None:
            self._process = ConverterProcess(self.limits) if ConverterProcess.available() else False
        if self._process is False:
            return convert_bytes(data, suffix, self.limits)
        return self._process.convert(data, suffix)

    def close(self) -> None:
        """Stop the converter process (also done when this object is collected)."""
        if self._process:
            self._process.close()

    def handles(self, rel: str) -> bool:
        return rel.lower().endswith(SIDECAR_SUFFIX) or PurePosixPath(rel).suffix.lower() in CONVERTED_SUFFIXES

    def parse(self, rel: str, shown: str) -> list | None:
        """The documents/errors of one walked file; ``None`` when it is skipped (its format's
        extra is missing), ``[]`` for a sidecar (read with its file)."""
        if rel.lower().endswith(SIDECAR_SUFFIX):
            target = rel[: -len(SIDECAR_SUFFIX)]
            if rel.endswith(SIDECAR_SUFFIX) and target in self.files and \
                    PurePosixPath(target).suffix.lower() in CONVERTED_SUFFIXES:
                return []  # exactly paired (same letter case): read with its file
            return [DocumentError(shown, "is a metadata sidecar, but there is no convertible file "
                                  f"{PurePosixPath(target).name!r} next to it", field="sidecar",
                                  hint="rename it to <file>.meta.toml of a converted file (PDF, DOCX, HTML…: docs/formats.md), or "
                                  "delete it (Markdown and text files carry front matter instead)")]
        fmt = FORMAT_BY_SUFFIX[PurePosixPath(rel).suffix.lower()]
        missing = fmt.missing()
        if missing:
            note = f"{fmt.name.upper()} files are skipped: reading them needs {missing}"
            if note not in self.notes:
                self.notes.append(note)
            return None
        data = self.read(rel)
        if isinstance(data, DocumentError):
            return [data]
        try:
            converted = self._convert(data, PurePosixPath(rel).suffix.lower())
        except MissingExtraError:  # pragma: no cover - checked above
            return None
        except ConversionError as exc:
            return [DocumentError(shown, exc.problem, field=exc.field, hint=exc.hint)]
        sidecar = None
        sidecar_rel = rel + SIDECAR_SUFFIX
        if sidecar_rel in self.files:
            raw = self.read(sidecar_rel)
            if isinstance(raw, DocumentError):
                return [raw]
            sidecar = raw
        common: dict[str, Any] = dict(rel=rel, shown=shown, library_id=self.library_id, sidecar=sidecar,
                                      sidecar_shown=printable_path(sidecar_rel), defaults=self._folder_defaults(rel))
        items = _document(converted, lineage=_lineage(fmt, converted),
                          default_id=self.default_ids.get(rel) or default_doc_id(rel), **common)
        if not converted.parts or not all(isinstance(item, SourceDocument) for item in items):
            return items
        return _with_parts(items[0], converted, fmt, common)

    # -- folder defaults ---------------------------------------------------------------
    def folder_sensitivity(self, rel: str) -> tuple[str | None, list[DocumentError]]:
        """The ``[defaults]`` sensitivity for ``rel``'s folder (any format: Markdown, text and
        JSONL files too), and the errors of those ``_library.toml`` files (a file under a
        broken one cannot know its floor: the caller withdraws it)."""
        values, errors, _ = self._folder_defaults(rel)
        level = values.get("sensitivity")
        return (level.upper() if level else None), errors

    def _folder_defaults(self, rel: str) -> tuple[dict[str, str], list[DocumentError], list[tuple[str, str, str]]]:
        """Merged ``[defaults]`` for ``rel``'s folder: values, errors, marking lines."""
        merged: dict[str, str] = {}
        errors: list[DocumentError] = []
        lines: list[tuple[str, str, str]] = []
        parts = PurePosixPath(rel).parent.parts
        for depth in range(len(parts) + 1):
            folder = "/".join(parts[:depth])
            values, errs, marks = self._defaults_of(folder)
            merged.update(values)
            errors.extend(errs)
            lines.extend(marks)
        return merged, errors, lines

    def _defaults_of(self, folder: str):
        if folder in self._defaults:
            return self._defaults[folder]
        config_rel = f"{folder}/_library.toml" if folder else "_library.toml"
        path = self.root / config_rel
        result: tuple[dict[str, str], list[DocumentError], list[tuple[str, str, str]]] = ({}, [], [])
        try:
            raw = read_config_bytes(path)  # never through a link, size-capped
        except ConfigError:
            raw = None
            result = ({}, [DocumentError(config_rel, "cannot be read (a symbolic link, not a regular file, too large "
                                         "or unreadable)", field="defaults",
                                         hint="make it a plain TOML file in the folder")], [])
        if raw is not None:
            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                result = ({}, [DocumentError(config_rel, f"cannot be read as TOML ({type(exc).__name__})",
                                             field="defaults", hint="fix the TOML syntax")], [])
            else:
                table = data.get(DEFAULTS_TABLE, {})
                errors: list[DocumentError] = []
                if folder and set(data) - {DEFAULTS_TABLE}:
                    errors.append(DocumentError(config_rel, "a sub-folder's _library.toml may hold only a "
                                                f"[{DEFAULTS_TABLE}] table", field="defaults",
                                                hint="move build settings to the library folder's _library.toml"))
                if not isinstance(table, dict):
                    errors.append(DocumentError(config_rel, f"'{DEFAULTS_TABLE}' must be a table",
                                                field="defaults", hint=f"write it as [{DEFAULTS_TABLE}]"))
                    table = {}
                values, errs = _string_table(table, config_rel, per_file=False)
                lines = [(f"{config_rel} [{DEFAULTS_TABLE}] {k!r}" if _PLAIN_NAME.fullmatch(k) else
                          f"{config_rel} [{DEFAULTS_TABLE}]", f"{k}: {v}", "field" if k in METADATA_FIELDS else "meta")
                         for k, v in values.items() if k != "sensitivity"]
                result = (values, errors + errs, lines)
        self._defaults[folder] = result
        return result


def sidecar_claims(rels: list[str], readable: frozenset[str]) -> dict[str, str]:
    """Each walked file that a sidecar *could* belong to without being its exact pair,
    mapped to that sidecar's path: fail closed on pairing.

    A sidecar is any walked name ending in ``.meta.toml`` in any letter case. Its exact pair
    is ``<file>.meta.toml`` of a convertible file in the same letter case, both readable. Any
    other sidecar (another letter case, ``S.CSV`` against ``s.csv.meta.toml``, a stem
    sidecar ``s.meta.toml``, a sidecar of a Markdown/text/JSONL file, or one the walk cannot
    read: a link leaving the library, a dangling link, an unreadable file) claims every file
    of its folder whose name matches its target ignoring letter case, or whose stem does;
    those files are withdrawn with a located error instead of served at a default.
    """
    by_folder: dict[str, list[str]] = {}
    for rel in rels:
        by_folder.setdefault(str(PurePosixPath(rel).parent), []).append(rel)
    claims: dict[str, str] = {}
    for rel in rels:
        if not rel.lower().endswith(SIDECAR_SUFFIX):
            continue
        target = rel[: -len(SIDECAR_SUFFIX)]
        if (rel.endswith(SIDECAR_SUFFIX) and rel in readable and target in readable
                and PurePosixPath(target).suffix.lower() in CONVERTED_SUFFIXES):
            continue
        name = PurePosixPath(target).name.lower()
        for other in by_folder.get(str(PurePosixPath(rel).parent), []):
            if other == rel or other.lower().endswith(SIDECAR_SUFFIX):
                continue
            path = PurePosixPath(other)
            if path.name.lower() == name or path.stem.lower() == name:
                claims.setdefault(other, rel)
    return claims


def _string_table(table: dict, where: str, *, per_file: bool) -> tuple[dict[str, str], list[DocumentError]]:
    """Validate a TOML table of metadata: keys as in front matter, values strings (a TOML
    date is read as ``YYYY-MM-DD``), ``sensitivity`` exactly a level."""
    values: dict[str, str] = {}
    errors: list[DocumentError] = []
    seen: dict[str, str] = {}
    for key, value in table.items():
        problem = check_key(key, METADATA_FIELDS)
        if problem is not None:
            fld, text, hint = problem
            errors.append(DocumentError(where, text, field=fld or "metadata", hint=hint))
            continue
        norm = norm_key(key)
        if norm in seen:
            errors.append(DocumentError(where, f"keys {seen[norm]!r} and {key!r} name the same field", field=key,
                                        hint="keep one of them"))
            continue
        seen[norm] = key
        if key == CONVERTER_FIELD:
            errors.append(DocumentError(where, f"{key!r} is set by the converter (lineage)", field=key,
                                        hint="remove it"))
            continue
        if not per_file and key in _PER_FILE_FIELDS:
            errors.append(DocumentError(where, f"{key!r} cannot be a folder default (it names one file)", field=key,
                                        hint="set it in the file's <file>.meta.toml sidecar"))
            continue
        if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
            value = value.isoformat()
        if not isinstance(value, str):
            errors.append(DocumentError(where, f"{key!r} is a TOML {type(value).__name__}, not a string",
                                        field=key, hint=f'quote the value: {key} = "..."'))
            continue
        if key == "sensitivity" and value.strip().upper() not in SENSITIVITIES or key == "sensitivity" and not value.isascii():
            errors.append(DocumentError(where, "sensitivity is not exactly one of " + ", ".join(SENSITIVITIES),
                                        field="sensitivity",
                                        hint=f"use one of {', '.join(SENSITIVITIES)} (case-insensitive); "
                                        "no default is assumed while it is there"))
            continue
        values[key] = value.strip()
    return values, errors


def _lineage(fmt, converted) -> str:
    return fmt.lineage() + (f"; {converted.engine_note}" if converted.engine_note else "")


def _with_parts(main: SourceDocument, converted, fmt, common: dict[str, Any]) -> list:
    """The message and a document per attachment (``<doc_id>-part2``, cited
    ``mail.eml#part=2&…``), with the message's metadata; an attachment of a RESTRICTED
    message is RESTRICTED. Any attachment's error fails the whole file (fail closed)."""
    out: list = [main]
    for fragment, name, part in converted.parts:
        items = _document(part, lineage=f"{_lineage(fmt, converted)}; {fragment}: {name}"[:500],
                          default_id=f"{main.doc_id}-{fragment.replace('=', '')}", part=(fragment, name), **common)
        for item in items:
            if not isinstance(item, SourceDocument):
                return [item for item in items if not isinstance(item, SourceDocument)]
            if main.sensitivity == RESTRICTED_SENSITIVITY and item.sensitivity != RESTRICTED_SENSITIVITY:
                item = SourceDocument.create(
                    library_id=item.library_id, doc_id=item.doc_id, body=item.body, source_path=item.source_path,
                    title=item.title, source_locator=item.source_locator, entity=item.entity, topic=item.topic,
                    geography=item.geography, period=item.period, language=item.language,
                    sensitivity=RESTRICTED_SENSITIVITY, valid_as_of=item.valid_as_of, extra=item.extra,
                    regions=item.regions)
            out.append(item)
    return out


def _document(converted, *, rel: str, shown: str, library_id: str, lineage: str, default_id: str, sidecar: bytes | None,
              sidecar_shown: str, defaults, part: tuple[str, str] | None = None) -> list:
    default_values, errors, default_lines = defaults
    errors = list(errors)
    meta: dict[str, str] = {k: v for k, v in default_values.items() if k != "sensitivity"}
    marking: list[tuple[str, str, str]] = list(default_lines)
    # the file's own properties
    explicit: str | None = None
    unnamed_label = False
    for name, value in converted.properties:
        if name == UNNAMED_LABEL_PROPERTY:  # LabelInfo.xml: a label, but not its name
            unnamed_label = True
            continue
        shown_name = repr(name) if _PLAIN_NAME.fullmatch(name) else "a property"
        where = f"document property {shown_name}"
        if _LABEL_PROPERTY.fullmatch(name) or sensitivity_like(norm_key(name)):
            level = _property_level(value)
            if level is None:
                errors.append(DocumentError(shown, f"{where} names a sensitivity that is not exactly one of "
                                            f"{', '.join(SENSITIVITIES)} nor a restricted/confidential label",
                                            field="sensitivity",
                                            hint=f"set 'sensitivity' in {PurePosixPath(sidecar_shown).name}; "
                                            "an explicit sensitivity there decides"))
                continue
            if explicit is None or level == RESTRICTED_SENSITIVITY:
                explicit = level
            marking.append((where, f"{name}: {value}", "meta"))
            continue
        if name.lower() == "author" and "author" not in meta:
            meta["author"] = value
        marking.append((where, f"{name}: {value}", "meta"))
    if converted.title:
        meta["title"] = converted.title
    # the sidecar
    sidecar_decides = False
    if sidecar is not None:
        try:
            table = tomllib.loads(sidecar.decode("utf-8"))
        except UnicodeDecodeError as exc:
            errors.append(DocumentError(sidecar_shown, f"is not valid UTF-8 at byte offset {exc.start}",
                                        field="sidecar", hint="re-save it as UTF-8"))
            table = {}
        except tomllib.TOMLDecodeError as exc:
            errors.append(DocumentError(sidecar_shown, f"is not valid TOML ({_toml_where(exc)})", field="sidecar",
                                        hint='write one key = "value" per line (the keys of front matter)'))
            table = {}
        values, errs = _string_table(table, sidecar_shown, per_file=True)
        errors.extend(errs)
        for n, line in enumerate(sidecar.decode("utf-8", "replace").split("\n"), start=1):
            if line.strip():
                key = line.partition("=")[0].strip()
                marking.append((f"{sidecar_shown} line {n}", line, "field" if key in METADATA_FIELDS else "meta"))
        if "sensitivity" in values:
            level = values.pop("sensitivity").upper()
            if explicit == RESTRICTED_SENSITIVITY and level != RESTRICTED_SENSITIVITY:
                errors.append(DocumentError(
                    shown, f"a document property labels it restricted/confidential, but {sidecar_shown} sets "
                    f"sensitivity {level}", field="sensitivity",
                    hint="set the sidecar's sensitivity to RESTRICTED, or remove the label from the file"))
            explicit = level
            sidecar_decides = True
        if part is not None:  # an attachment: the sidecar names the message, not it
            for key in _PER_FILE_FIELDS:
                values.pop(key, None)
        meta.update(values)
    if unnamed_label and not sidecar_decides:
        explicit = RESTRICTED_SENSITIVITY  # the label may be "Highly Confidential": fail closed
    if part is not None:
        meta["source_locator"] = f"{shown}#{part[0]}"
        meta["title"] = converted.title or part[1]
    if errors:
        return errors
    marking += [(f"page header/footer line {i}", line, "body") for i, line in enumerate(converted.header_lines, 1)]
    marking += [(f"{where} {i}", line, "body") for i, (where, line) in enumerate(converted.marking_lines, 1)]
    marking += first_body_lines(converted.text, _text_where(converted))
    if explicit is None and first_marking(marking) is not None:
        # a marking nobody set in metadata: a restricted-type one (a banner) makes it
        # RESTRICTED; any other one cannot be read exactly and is an error below
        if first_marking(marking, restricted_only=True) is not None:
            explicit = RESTRICTED_SENSITIVITY
    if explicit is not None:
        meta["sensitivity"] = explicit
    meta[CONVERTER_FIELD] = lineage
    name = PurePosixPath(shown).name
    result = make_document(
        meta, converted.text, library_id=library_id, source_path=shown, error_path=shown,
        default_doc_id=default_id, default_title=PurePosixPath(shown).stem,
        marking_lines=marking,
        folder_sensitivity=default_values["sensitivity"].upper() if "sensitivity" in default_values else None,
        sensitivity_fix=(f"set it in a sidecar {name}{SIDECAR_SUFFIX} (sensitivity = \"RESTRICTED\" or "
                         "PUBLIC/INTERNAL), or as a [defaults] sensitivity in _library.toml when that is what the "
                         "marking means; an explicit sensitivity in the sidecar decides"),
    )
    if not isinstance(result, SourceDocument):
        return list(result)
    sensitivity = result.sensitivity
    return [SourceDocument.create(
        library_id=result.library_id, doc_id=result.doc_id, body=result.body, source_path=result.source_path,
        title=result.title, source_locator=result.source_locator, entity=result.entity, topic=result.topic,
        geography=result.geography, period=result.period, language=result.language, sensitivity=sensitivity,
        valid_as_of=result.valid_as_of, extra=result.extra, regions=converted.regions)]


_RESTRICTED_LABELS = ("restricted", "confidential", "secret", "机密", "绝密", "秘密")


def _property_level(value: str) -> str | None:
    """A sensitivity property's value: exactly a level, or a restricted-type label → RESTRICTED."""
    if value.isascii() and value.strip().upper() in SENSITIVITIES:
        return value.strip().upper()
    norm = norm_key(value)
    if any(word in norm for word in _RESTRICTED_LABELS):
        return RESTRICTED_SENSITIVITY
    return None


def _toml_where(exc: tomllib.TOMLDecodeError) -> str:
    match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    return f"line {match.group(1)}, column {match.group(2)}" if match else "syntax error"


def _text_where(converted) -> Callable[[int], str]:
    """``line N of the extracted text (page P)`` for a body line index."""
    text, regions = converted.text, converted.regions
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
            if len(starts) > 400:  # only the first lines are ever asked for
                break
    region_starts = [r[0] for r in regions]

    def where(n: int) -> str:
        offset = starts[n] if n < len(starts) else 0
        i = bisect_right(region_starts, offset) - 1
        place = f" ({regions[i][2].split('&')[0].replace('=', ' ')})" if i >= 0 and regions[i][1] >= offset else ""
        if place.startswith(" (anchor") or place.startswith(" (sheet") or place.startswith(" (cells"):
            place = ""
        return f"line {n + 1} of the extracted text{place}"

    return where


__all__ = ["CONVERTER_FIELD", "DEFAULTS_TABLE", "ConvertedFiles", "sidecar_claims"]

