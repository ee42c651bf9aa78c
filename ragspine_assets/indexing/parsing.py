"""Parse a raw library folder into validated :class:`SourceDocument` records.

A library is one folder under ``data/raw/<library>/``. Every ``.md``, ``.markdown``,
``.txt`` (one document per file, optional front matter) and ``.jsonl`` (one document per
line) file below it is parsed, in sorted relative-path order. Names starting with ``.`` or
``_`` are ignored at any depth (``_library.toml`` holds the library config). PDF, DOCX,
PPTX, XLSX, HTML and CSV files (with their ``<file>.meta.toml`` sidecars) are converted
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

Front matter is a first line that is exactly ``---`` (one leading UTF-8 byte-order mark
is dropped first), then ``key: value`` lines, then a line that is exactly ``---``.
Blank lines and lines starting with ``#`` are allowed. Every other line is
``key: value`` starting in column 1 (an indented line — YAML nesting or continuation —
is an error). Keys are ASCII names, ``[A-Za-z_][A-Za-z0-9_.-]*`` of at most 64
characters, or names written only in CJK scripts (``作者``; Han, kana, Hangul, digits,
``_``) (whitespace before the ``:`` is ignored), and each appears once. Values are
plain strings: surrounding whitespace and one pair of matching quotes are removed,
nothing else — no YAML (``|``, ``>``, ``[...]``) and no trailing ``# comments``; those
are part of the value. Control characters other than tab, and Unicode line or
paragraph separators, are errors anywhere in front matter. Keys that are not metadata
fields become ``extra`` fields. A ``.jsonl`` line is one JSON object whose values are
all strings, with the same key rules (``text`` holds the body).

Sensitivity fails closed: anything that tries to set it but is not parsed exactly is an
error for that file, never the default.

* ``sensitivity`` must be ``PUBLIC``, ``INTERNAL`` or ``RESTRICTED`` — ASCII,
  case-insensitive, surrounding whitespace ignored. Anything else (``RESTRICTED!``,
  ``PUBLIC # was RESTRICTED``, full-width letters, an empty value) is an error.
* A key that is not exactly a field name but matches one after Unicode NFKC, case
  folding, mapping look-alike letters to ASCII and dropping ``-``/``_``/``.``/spaces
  (``Sensitivity``, ``doc-id``), a key naming a sensitivity-like notion
  (``classification``, ``confidentiality``, ``security_level``, ``restricted``,
  ``密级``…) or misspelling one (``sensitivty``), and two keys that match each other
  after that normalisation are errors.
* Line 1 that looks like a fence without being exactly ``---`` (``--- ``, ``---yaml``,
  ``- --``, other dashes, a line of dashes only, ``+++``), such a line as the first
  non-blank line after leading blank lines, whitespace or a second byte-order mark, and
  a closing fence that is not exactly ``---`` are errors.
* A document that does not set ``sensitivity`` gets the default only if nothing tries
  to mark it. It is an error when

  - a front matter line (comments included) or another metadata value mentions a
    sensitivity notion or level: ``sensitiv…``, ``classifi…``, ``confidential``,
    ``restrict…``, the word ``secret``, ``top secret``, ``密级``/``机密``/``绝密``/
    ``秘密``/``保密``/``敏感`` (after NFKC, case folding, look-alike mapping, ignoring
    ``-``, ``_``, spaces), or spells ``sensitivity`` in a key, or ``restricted`` /
    ``confidential`` in a short value, with stray characters in between;
  - the first non-blank line after the closing fence is another fence or a metadata
    field's ``key:`` line (a doubled or early fence);
  - one of the first 20 non-blank body lines (or ``text`` lines) looks like a marking:
    it starts with a sensitivity-like key and ``:`` or ``=`` (markdown emphasis, list
    and quote markers ignored); it contains ``<sensitivity|classification|
    confidentiality|security level>: <PUBLIC|INTERNAL|RESTRICTED|CONFIDENTIAL|SECRET…>``
    (spaces ignored); it has ``RESTRICTED``, ``CONFIDENTIAL``, ``TOP SECRET``,
    ``STRICTLY CONFIDENTIAL``, ``机密``, ``绝密`` or ``秘密`` right after a ``:`` or
    ``=``; its value after the first or last ``:``/``=`` is exactly one of those words
    or ``SECRET``; it is a banner made of one of them (or an all-capitals line starting
    with one); or it is ``Sensitivity RESTRICTED`` without a separator. A line holding
    a carriage return or another line separator is read both joined and split.
* A document that sets ``PUBLIC`` or ``INTERNAL`` must not carry a marking (the body
  rules above, minus the "right after a ``:``" one; a metadata field's own value does
  not count) that names ``RESTRICTED``, ``CONFIDENTIAL`` or ``SECRET`` (or
  ``机密``/``绝密``/``秘密``): the conflict is an error. A document that sets
  ``RESTRICTED`` is never inspected.

Defaults when a field is absent or empty:

* ``doc_id`` — the relative path without its extension, lowercased, with ``/`` and
  whitespace runs replaced by ``-`` and other control or invisible formatting
  characters dropped (``reports/Q1 Note.md`` → ``reports-q1-note``). ``.jsonl`` lines
  must carry their own ``doc_id``.
* ``title`` — the first markdown heading (``.md``/``.markdown``), else the file stem
  (``.txt``); the ``doc_id`` for ``.jsonl``.
* ``source_locator`` — the source path (``notes/a.md``, or ``file.jsonl#L<line>``).
* ``sensitivity`` — ``INTERNAL`` (see above); ``language`` — detected (``zh``/``en``).

Control and invisible formatting characters in a file name (Unicode categories Cc, Cf,
Zl, Zp, and undecodable bytes) are percent-encoded as UTF-8 in the ``source_path``, the
default ``source_locator``, the default title and error paths (a newline shows as
``%0A``), so every one stays on one printable line. A ``doc_id`` or ``source_locator``
value containing such a character is an error.

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
import stat
import tomllib
import unicodedata
from dataclasses import dataclass, fields
from datetime import date
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragspine_query.errors import ConfigError, DocumentError
from ragspine_query.records import DEFAULT_SENSITIVITY, METADATA_FIELDS, RESTRICTED_SENSITIVITY, SENSITIVITIES, is_restricted

from .converters import ConvertedFiles
from .converters.files import DEFAULTS_TABLE
from .chunking import (
    CHUNKER_NAMES,
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    Chunker,
    find_sections,
    make_chunker,
    markdown_heading,
)
from .workers import batches, ordered_map

DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
JSONL_SUFFIX = ".jsonl"
SUPPORTED_SUFFIXES = (*DOCUMENT_SUFFIXES, JSONL_SUFFIX)
MARKDOWN_SUFFIXES = (".md", ".markdown")
LIBRARY_CONFIG_FILE = "_library.toml"
FRONT_MATTER_FENCE = "---"
#: Size limits per field: a metadata value (front matter or JSONL key), a document's
#: text, and the digits of a JSON number (a larger one is a located error for its line,
#: not an abort of the library: Python refuses integers of more than 4,300 digits).
MAX_METADATA_VALUE_CHARS = 16_384
MAX_BODY_CHARS = 32_000_000
MAX_JSON_NUMBER_CHARS = 100
#: How many leading bytes are searched for a NUL byte (the binary-file test).
BINARY_SNIFF_BYTES = 8192
#: Share of CJK ideographs among word characters from which a body is ``zh``.
CJK_LANGUAGE_THRESHOLD = 0.3
#: How many non-blank body lines are searched for a sensitivity marking when a document
#: sets no ``sensitivity`` (see the module docstring).
SENSITIVITY_SNIFF_LINES = 20
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
_FIX_KEY = ("keys are ASCII names (a letter or '_', then letters, digits, '_', '.' or '-') or names written "
            "only in CJK characters, at most 64 characters")
_FIX_SENSITIVITY = (
    f"use one of {', '.join(SENSITIVITIES)} (case-insensitive), or omit the key for {DEFAULT_SENSITIVITY}"
)
#: Key names, and the values/identifiers that are safe to quote in an error message.
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_QUOTABLE_SENSITIVITY = re.compile(r"[A-Za-z_-]{1,20}")
_QUOTABLE_DATE = re.compile(r"[0-9./-]{1,12}")
_QUOTABLE_DOC_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")
#: Control, format (invisible), line/paragraph separator and surrogate characters.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: Normalised key names (see :func:`_norm_key`) that try to set a sensitivity.
_SENSITIVITY_LIKE = frozenset(
    {
        "sensitivity", "sensitivitylevel", "sensitive", "datasensitivity",
        "classification", "classificationlevel", "dataclassification", "securityclassification",
        "confidentiality", "confidentialitylevel", "confidential",
        "securitylevel", "restricted", "restriction", "clearance", "accesslevel",
        "密级", "保密级别", "保密等级", "敏感级别", "敏感等级", "敏感度", "安全级别", "安全等级",
    }
)
#: Names whose near misses (edit distance, see :func:`_sensitivity_like`) count too.
_SENSITIVITY_FUZZY = (("sensitivity", 2), ("classification", 1), ("confidentiality", 1))
#: Values and banner lines that mark a document as sensitive.
_MARKING_WORDS = frozenset(
    {"restricted", "confidential", "strictlyconfidential", "secret", "topsecret", "机密", "绝密", "秘密"}
)
_LEVEL_WORDS = _MARKING_WORDS | {"public", "internal"}
#: A metadata line (front matter, comments included, or a JSONL value) of a document that
#: sets no sensitivity must not contain any of these (after :func:`_norm_key`).
_SENSITIVITY_STEMS = (
    "sensitiv", "classifi", "confidential", "restrict", "topsecret", "密级", "机密", "绝密", "秘密", "保密", "敏感",
)
_EMBEDDED_MARKING = re.compile(
    r"(?:sensitivity|classification|confidentiality|security[\s_-]*level)[\s*_\"'`]*[:=].{0,3}?"
    r"(?:public|internal|restricted|confidential|secret|top\s*secret|strictly\s*confidential)"
)
_FIELD_NORMS = frozenset(name.replace("_", "") for name in METADATA_FIELDS)
_AFTER_SEPARATOR_MARKING = re.compile(
    r"[:=][\s*_\"'`\[(]*(?:restricted|confidential|top\s*secret|strictly\s*confidential|机密|绝密|秘密)"
)
_LEADING_MARKUP = "#>*_-+|`'\"[(•·0123456789.)\t "
#: Lower-case letters from other scripts that look like ASCII ones (after NFKC + casefold).
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
        "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
        "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i",
        "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ı": "i",
        "ɩ": "i", "ɡ": "g", "ʏ": "y", "ꜱ": "s", "ᴄ": "c", "ᴏ": "o", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z",
        "∶": ":", "꞉": ":", "˸": ":", "։": ":", "׃": ":", "⁚": ":", "≔": ":",
    }
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
    #: Chunker-specific settings (unset: the chunker's default), validated against the
    #: chosen chunker by :func:`~.library_settings.check_chunker_options`.
    parent_max_chars: int | None = None
    window: int | None = None
    breakpoint_percentile: float | None = None
    embed_window: int | None = None
    boundary_embedder: str | None = None
    #: The summary tree's summarizer: ``extractive`` (offline), ``llm`` (the llm resource) or ``none`` (no tree).
    summarizer: str = "extractive"
    #: The summary tree is built only up to this many open chunks (0: no limit): the
    #: largest measured build (100k synthetic leaves: ~3 min, ~1 GB peak; docs/summary_tree.md);
    #: a larger library opts in.
    tree_max_leaves: int = 100_000
    #: The relation graph is built only up to this many open chunks (0: no limit); a larger
    #: library gets no graph (``--mode graph`` says so) until it raises this (docs/evaluation.md: build cost).
    graph_max_chunks: int = 200_000
    #: The relation graph's extra extractor: ``offline`` (the deterministic one only) or
    #: ``llm`` (also OpenIE triples from the ``llm`` resource, stamped model-derived/unverified).
    graph_extractor: str = "offline"
    #: The relation-extractor slot of the relation graph (docs/graph.md): ``none`` (the base
    #: graph only: entities, about/mentions, glossary relations, synonyms), ``cooccurrence``
    #: (also ``co_occurs`` edges between a chunk's most specific entities) or ``llm`` (also
    #: OpenIE triples from the ``llm`` resource, stamped model-derived/unverified, both
    #: endpoints screened by the competitor gate).
    relation_extractor: str = "cooccurrence"
    #: Build the ANN index (``ragspine_query.dense.ann``) once the library holds this many
    #: vectors (``0``: never); unset: the run-level ``RAGSPINE_ANN_MIN_VECTORS`` (200,000).
    ann_min_vectors: int | None = None
    #: BM25's ``k1`` and ``b`` for both lexical fields of this library (unset: ``b`` 0.75 and
    #: ``k1`` by language, :func:`~.library_settings.bm25_params_for`; docs/evaluation.md).
    bm25_k1: float | None = None
    bm25_b: float | None = None

    def __post_init__(self) -> None:
        for name in ("bm25_k1", "bm25_b"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        from ragspine_query.lexical.bm25 import BM25Params

        BM25Params(float(self.bm25_k1 or 0.0), float(self.bm25_b or 0.0))  # the ranges (k1 >= 0, 0 <= b <= 1)
        if self.ann_min_vectors is not None and (isinstance(self.ann_min_vectors, bool) or not isinstance(self.ann_min_vectors, int)
                                                 or self.ann_min_vectors < 0):
            raise ConfigError(f"ann_min_vectors must be an integer >= 0 (0: never build the ANN index), got {self.ann_min_vectors!r}")
        if self.summarizer not in ("extractive", "llm", "none"):
            raise ConfigError(f"unknown summarizer {self.summarizer!r}; allowed: extractive, llm, none")
        if isinstance(self.tree_max_leaves, bool) or not isinstance(self.tree_max_leaves, int) or self.tree_max_leaves < 0:
            raise ConfigError(f"tree_max_leaves must be an integer >= 0 (0: no limit), got {self.tree_max_leaves!r}")
        if isinstance(self.graph_max_chunks, bool) or not isinstance(self.graph_max_chunks, int) or self.graph_max_chunks < 0:
            raise ConfigError(f"graph_max_chunks must be an integer >= 0 (0: no limit), got {self.graph_max_chunks!r}")
        if self.graph_extractor not in ("offline", "llm"):
            raise ConfigError(f"unknown graph_extractor {self.graph_extractor!r}; allowed: offline, llm")
        if self.relation_extractor not in ("none", "cooccurrence", "llm"):
            raise ConfigError(f"unknown relation_extractor {self.relation_extractor!r}; allowed: none, cooccurrence, llm")
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
        from .library_settings import check_chunker_options  # imports this module's package

        check_chunker_options(self)

    def make_chunker(self) -> Chunker:
        """The configured chunker with this library's budget and chunker settings."""
        from .library_settings import chunker_kwargs

        return make_chunker(self.chunker, **chunker_kwargs(self))


LIBRARY_CONFIG_KEYS: tuple[str, ...] = tuple(f.name for f in fields(LibraryConfig))


# --------------------------------------------------------------------------- public API


def load_library_config(raw_dir: Path | str) -> LibraryConfig:
    """Read ``<raw_dir>/_library.toml``; defaults when the file is absent.

    Raises:
        ConfigError: unreadable or invalid TOML, an unknown key (the allowed keys are
            listed), or an invalid value; the message names the file.
    """
    from .library_config_guard import describe_keys, read_config_bytes, scrub_values

    path = Path(raw_dir) / LIBRARY_CONFIG_FILE
    raw = read_config_bytes(path)  # never through a link; None when absent
    if raw is None:
        return LibraryConfig()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the library config: {scrub_values(str(exc), raw)}; fix the TOML syntax") from exc
    data.pop(DEFAULTS_TABLE, None)  # metadata defaults of converted files (converters/files.py)
    unknown = sorted(set(data) - set(LIBRARY_CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {describe_keys(unknown)}; allowed keys: {', '.join(LIBRARY_CONFIG_KEYS)} "
            f"(and a [{DEFAULTS_TABLE}] table of metadata for converted files)"
        )
    try:
        return LibraryConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {scrub_values(str(exc), raw, data)}") from exc


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
    entries = _library_files(root)
    by_rel = {entry.rel: entry for entry in entries if entry.path is not None and not entry.problem}
    converted = ConvertedFiles(root, lib, frozenset(by_rel), lambda rel: _read(by_rel[rel], printable_path(rel)))
    for entry in entries:
        shown = printable_path(entry.rel)
        if entry.problem:
            errors.append(DocumentError(shown, entry.problem, field="path", hint=entry.hint))
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
        else:
            data = _read(entry, shown)
            if isinstance(data, DocumentError):
                errors.append(data)
                continue
            if suffix == JSONL_SUFFIX:
                items = parse_jsonl(data, entry.rel, lib)
            else:
                result = parse_document(data, entry.rel, lib)
                items = [result] if isinstance(result, SourceDocument) else list(result)
        for item in items:
            if isinstance(item, DocumentError):
                errors.append(item)
                continue
            first = documents.get(item.doc_id)
            if first is not None:
                # never name a RESTRICTED document or its path (an existence oracle for guessed ids)
                other = "another document" if is_restricted(first.sensitivity) else first.source_path
                errors.append(
                    DocumentError(
                        item.source_path,
                        f"{_doc_id_words(item.doc_id)} is already used by {other}; "
                        "this copy is not indexed",
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


def parse_document(data: bytes, rel_path: str, library_id: str) -> SourceDocument | list[DocumentError]:
    """Parse the bytes of one ``.md``/``.markdown``/``.txt`` file (``rel_path`` is POSIX)."""
    shown = printable_path(rel_path)
    problem = _check_bytes(data, shown)
    if problem is not None:
        return [problem]
    text = data.decode("utf-8").removeprefix(_BOM).replace("\r\n", "\n")
    if not text.strip():
        hint = "add text or delete the file"
        return [DocumentError(shown, "the file contains only whitespace", field="body", hint=hint)]
    parsed = _split_front_matter(text, shown)
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
        (f"front matter line {lineno}", line, _front_matter_kind(line)) for lineno, line in front_lines
    ] + _first_body_lines(body, lambda n: f"line {body_line + n}")
    return _make_document(
        meta,
        body,
        library_id=library_id,
        source_path=shown,
        error_path=shown,
        default_doc_id=default_doc_id(rel_path),
        default_title=title or Path(shown).stem,
        marking_lines=marking_lines,
        sensitivity_fix=(
            "set it explicitly in front matter at the top of the file ('---', 'sensitivity: RESTRICTED' "
            "or PUBLIC/INTERNAL, '---'); an explicit sensitivity turns this check off"
        ),
    )


def parse_jsonl(data: bytes, rel_path: str, library_id: str) -> list[SourceDocument | DocumentError]:
    """Parse the bytes of one ``.jsonl`` file: one document (or errors) per non-blank line."""
    shown = printable_path(rel_path)
    if not data.strip():
        hint = "add one JSON object per line or delete it"
        return [DocumentError(shown, "the file is empty", field="body", hint=hint)]
    binary = _binary_error(data, shown, "a .jsonl library file must be UTF-8 text with one JSON object per line")
    if binary is not None:
        return [binary]
    lines: list[tuple[bytes, int, int]] = []
    offset = 0
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line_offset, offset = offset, offset + len(raw) + 1
        if raw.strip():
            lines.append((raw, lineno, line_offset))
    # a large file's lines are parsed by worker processes, in order (workers.py)
    jobs = [(part, shown, library_id) for part in batches(lines, JSONL_LINES_PER_TASK)]
    return list(chain.from_iterable(ordered_map(_parse_jsonl_lines, jobs, min_items=JSONL_MIN_TASKS_IN_WORKERS)))


#: Lines per worker task, and the tasks a file needs before it is parsed in workers
#: (smaller files parse in-process: starting the pool costs more than it saves).
JSONL_LINES_PER_TASK = 1000
JSONL_MIN_TASKS_IN_WORKERS = 8


def _parse_jsonl_lines(job: tuple[Sequence[tuple[bytes, int, int]], str, str]) -> list[SourceDocument | DocumentError]:
    lines, shown, library_id = job
    out: list[SourceDocument | DocumentError] = []
    for raw, lineno, line_offset in lines:
        result = _parse_jsonl_line(raw, shown, lineno, line_offset, library_id)
        if isinstance(result, SourceDocument):
            out.append(result)
        else:
            out.extend(result)
    return out


def default_doc_id(rel_path: str) -> str:
    """``reports/Q1 Note.md`` → ``reports-q1-note`` (path without suffix, lowercased).

    ``/`` and whitespace runs become ``-``; other control or invisible formatting
    characters are dropped.
    """
    without_suffix = rel_path[: -len(Path(rel_path).suffix)] if Path(rel_path).suffix else rel_path
    dashed = re.sub(r"[\s/]+", "-", without_suffix.lower())
    return "".join(ch for ch in dashed if not _unprintable(ch)).strip("-")


def printable_path(rel_path: str) -> str:
    """``rel_path`` with control and invisible formatting characters percent-encoded.

    Each such character (Unicode category Cc, Cf, Zl, Zp, or an undecodable byte kept as
    a surrogate) becomes its UTF-8 bytes as ``%XX`` — ``"a\nb.md"`` → ``"a%0Ab.md"`` —
    so the path always prints on one line. Other characters are kept as they are.
    """
    if not any(_unprintable(ch) for ch in rel_path):
        return rel_path
    out = []
    for ch in rel_path:
        if not _unprintable(ch):
            out.append(ch)
            continue
        try:
            encoded = ch.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            encoded = ch.encode("utf-8", "surrogatepass")
        out.append("".join(f"%{byte:02X}" for byte in encoded))
    return "".join(out)


def detect_language(text: str) -> str:
    """``zh`` or ``en``: :func:`ragspine_query.text.language.detect_language` (the one detector)."""
    from ragspine_query.text.language import detect_language as _detect

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


# --------------------------------------------------------------------------- files


_LINK_LEAVES = (
    "is a symbolic link to a location outside the library; symlinks that leave the library are not followed"
)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One walked path: a file to read (``path``), a folder link (no ``path``) or a ``problem``."""

    rel: str
    path: Path | None = None
    #: ``(st_dev, st_ino)`` seen by the walk; the opened file must be the same one.
    identity: tuple[int, int] | None = None
    problem: str = ""
    hint: str = ""


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _library_files(root: Path) -> list[_Entry]:
    """Every non-hidden regular file and symbolic link under ``root``, sorted by path.

    Folder links are never descended into; file links are followed only to a visible
    regular file inside the library (see the module docstring).
    """
    real_root = Path(os.path.realpath(root))
    found: list[_Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        descend = []
        for name in sorted(dirnames):
            if _hidden(name):
                continue
            path = here / name
            if not path.is_symlink():
                descend.append(name)
                continue
            rel = path.relative_to(root).as_posix()
            if _inside(Path(os.path.realpath(path)), real_root) is None:
                found.append(_Entry(rel, problem=_LINK_LEAVES, hint="copy the folder into the library instead"))
            else:
                found.append(_Entry(rel))
        dirnames[:] = descend
        for name in filenames:
            if _hidden(name):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found.append(_link_entry(path, rel, real_root))
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue  # vanished during the walk
            if stat.S_ISREG(info.st_mode):
                found.append(_Entry(rel, path, (info.st_dev, info.st_ino)))
    return sorted(found, key=lambda entry: entry.rel)


def _inside(target: Path, real_root: Path) -> Path | None:
    """``target`` relative to ``real_root``, or ``None`` when it is not below it."""
    try:
        return target.relative_to(real_root)
    except ValueError:
        return None


def _link_entry(path: Path, rel: str, real_root: Path) -> _Entry:
    target = Path(os.path.realpath(path))
    inside = _inside(target, real_root)
    if inside is None:
        return _Entry(rel, problem=_LINK_LEAVES, hint="copy the file into the library instead")
    if any(_hidden(part) for part in inside.parts):
        problem = "is a symbolic link to a hidden ('.' or '_') path inside the library; such links are not followed"
        return _Entry(rel, problem=problem, hint="link to a visible file, or copy the file here")
    try:
        info = os.stat(target)
    except OSError:
        return _Entry(rel, problem="is a symbolic link whose target does not exist", hint="fix or delete the link")
    if not stat.S_ISREG(info.st_mode):
        return _Entry(rel, problem="is a symbolic link to something that is not a regular file", hint="delete the link")
    return _Entry(rel, target, (info.st_dev, info.st_ino))


def _read(entry: _Entry, shown: str) -> bytes | DocumentError:
    """The bytes of ``entry``, opened without following a link and checked to be the
    regular file the walk saw (a path swapped for a link meanwhile is refused)."""
    assert entry.path is not None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(entry.path, flags)
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror or type(exc).__name__})"
        return DocumentError(shown, problem, field="content", hint="check the file's permissions")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or (
            entry.identity is not None and (info.st_dev, info.st_ino) != entry.identity
        ):
            problem = "changed while the library was being read (it is no longer the same regular file)"
            return DocumentError(shown, problem, field="content", hint="run the build again")
        try:
            return handle.read()
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or type(exc).__name__})"
            return DocumentError(shown, problem, field="content", hint="check the file")


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
            f"is not valid UTF-8 at byte offset {exc.start} ({exc.reason})",
            field="encoding",
            hint="re-save the file as UTF-8",
        )
    return None


# --------------------------------------------------------------------------- jsonl


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
    raw: bytes, rel: str, lineno: int, line_offset: int, library_id: str
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
        line = line.removeprefix(_BOM)
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
        key_problem = _check_key(key, known)
        if key_problem is not None:
            field, problem, hint = key_problem
            problems.append(DocumentError(where, f"line {lineno}: {problem}", field=field or "json", hint=hint))
            continue
        norm = _norm_key(key)
        if norm in seen:
            first = seen[norm]
            what = f"key {key!r} appears twice" if first == key else f"keys {first!r} and {key!r} name the same field"
            field = "sensitivity" if _sensitivity_like(norm) else key
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
        if _norm_key(key) not in seen:
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
    ] + _first_body_lines(body, lambda n: f"line {lineno}: line {n + 1} of 'text'")
    return _make_document(
        meta,
        body,
        library_id=library_id,
        source_path=where,
        error_path=where,
        default_doc_id="",
        default_title=meta["doc_id"],
        marking_lines=marking_lines,
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


# --------------------------------------------------------------------------- front matter


def _split_front_matter(
    text: str, rel: str
) -> tuple[dict[str, str], str, int, list[tuple[int, str]]] | DocumentError:
    """``(metadata, body, body's first line number, front matter lines)`` or the first error."""
    lines = text.split("\n")
    if lines[0] != FRONT_MATTER_FENCE:
        misplaced = _misplaced_fence(lines)
        if misplaced is not None:
            return DocumentError(rel, misplaced, field="front_matter", hint=_FIX_FRONT_MATTER_START)
        return {}, text, 1, []
    close = next(
        (i for i in range(1, len(lines)) if lines[i] == FRONT_MATTER_FENCE or _fence_like(lines[i])), None
    )
    if close is None:
        return DocumentError(
            rel,
            "front matter opened on line 1 is never closed",
            field="front_matter",
            hint=f"add a line containing only '---' after the last 'key: value' line ({_FIX_FRONT_MATTER})",
        )
    if lines[close] != FRONT_MATTER_FENCE:
        return DocumentError(
            rel,
            f"front matter line {close + 1} looks like the closing fence but is not exactly '---' "
            f"({_extra_chars(lines[close])})",
            field="front_matter",
            hint="write the closing fence as three hyphens alone on the line, with no spaces",
        )
    meta: dict[str, str] = {}
    seen_on: dict[str, tuple[str, int]] = {}
    for index in range(1, close):
        lineno = index + 1
        line = lines[index]
        control = next(((col, ch) for col, ch in enumerate(line, 1) if _breaks_lines(ch)), None)
        if control is not None:
            col, ch = control
            return DocumentError(
                rel,
                f"front matter line {lineno} contains a control character (U+{ord(ch):04X}) at column {col}",
                field="front_matter",
                hint="front matter values are single-line text; remove the character",
            )
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[0].isspace():
            return DocumentError(
                rel,
                f"front matter line {lineno} is indented",
                field="front_matter",
                hint="nested or continued (YAML) values are not supported: write each 'key: value' on one line, "
                "starting in column 1",
            )
        key, colon, value = line.partition(":")
        key = key.rstrip()
        if not colon:
            return DocumentError(
                rel, f"front matter line {lineno} has no ':'", field="front_matter",
                hint=f"write it as 'key: value'; {_FIX_FRONT_MATTER}",
            )
        if not key:
            return DocumentError(
                rel, f"front matter line {lineno} has an empty key", field="front_matter",
                hint="put the field name before the ':'",
            )
        key_problem = _check_key(key, METADATA_FIELDS)
        if key_problem is not None:
            field, problem, hint = key_problem
            if field is None and any(ch.isspace() for ch in key):
                hint = "keys are single words such as valid_as_of; is the closing '---' missing?"
            problem = f"front matter line {lineno}: {problem}"
            return DocumentError(rel, problem, field=field or "front_matter", hint=hint)
        norm = _norm_key(key)
        if norm in seen_on:
            first, first_line = seen_on[norm]
            if first == key:
                problem = f"front matter key {key!r} appears on line {first_line} and again on line {lineno}"
            else:
                problem = (
                    f"front matter keys {first!r} (line {first_line}) and {key!r} (line {lineno}) name the same field"
                )
            return DocumentError(rel, problem, field=key, hint="keep one of the two lines")
        seen_on[norm] = (key, lineno)
        meta[key] = _unquote(value.strip())
    after = _front_matter_again(lines, close + 1) if "sensitivity" not in meta else None
    if after is not None:
        return DocumentError(
            rel,
            f"line {after} right after the front matter looks like front matter again (a fence or a "
            "metadata 'key: value' line), and no sensitivity is set",
            field="front_matter",
            hint="put every 'key: value' line between the two '---' lines and start the body with text, "
            "or set 'sensitivity' in the front matter",
        )
    front_lines = [(index + 1, lines[index]) for index in range(1, close)]
    return meta, "\n".join(lines[close + 1 :]), close + 2, front_lines


_FIX_FRONT_MATTER_START = (
    "front matter starts with a first line that is exactly '---' (no spaces, nothing before it); "
    "if this line is meant as text, put a line of text before it"
)


def _visible(line: str) -> str:
    """``line`` after NFKC without invisible formatting characters, stripped."""
    if line.isascii() and line.isprintable():  # NFKC is the identity on ASCII; nothing to drop
        return line.strip()
    return "".join(ch for ch in unicodedata.normalize("NFKC", line) if not _unprintable(ch) or ch.isspace()).strip()


def _fence_like(line: str) -> bool:
    """``---`` with stray characters (``--- ``, ``---yaml``, ``- --``, full-width ``－－－``, other
    dashes), a line of dashes only, or ``+++``."""
    visible = _visible(line)
    squeezed = "".join(visible.split())
    dashes_only = len(squeezed) >= 2 and all(unicodedata.category(ch) == "Pd" for ch in squeezed)
    return visible == "+++" or visible.startswith("---") or dashes_only


def _extra_chars(line: str) -> str:
    extra = len(line) - len(FRONT_MATTER_FENCE) if line.strip() == FRONT_MATTER_FENCE else None
    if extra is not None:
        return f"it has {extra} extra whitespace character(s)"
    return f"it is {len(line)} characters long"


def _front_matter_again(lines: list[str], start: int) -> int | None:
    """The line number of the first non-blank body line when it is a fence or a metadata
    field's ``key:`` line (a doubled or misplaced fence), else ``None``."""
    for index in range(start, len(lines)):
        line = lines[index]
        if not _visible(line):
            continue
        key, colon, _ = _fold(line).partition(":")
        if _fence_like(line) or (colon and _norm_key(key) in _FIELD_NORMS):
            return index + 1
        return None
    return None


def _misplaced_fence(lines: list[str]) -> str | None:
    """Why the first non-blank line looks like a fence that does not open front matter."""
    for lineno, line in enumerate(lines, start=1):
        if not _visible(line):
            continue
        if not _fence_like(line):
            return None
        if lineno == 1:
            return f"line 1 looks like a front-matter fence but is not exactly '---' ({_extra_chars(line)})"
        return (
            f"line {lineno} looks like a front-matter fence, but front matter must start on line 1 "
            "(the lines before it are blank or invisible)"
        )
    return None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _first_markdown_heading(body: str) -> str:
    """The first markdown heading outside code fences (the same rule the layout chunker uses)."""
    return next((section.heading for section in find_sections(body, markdown_heading) if section.heading), "")


# --------------------------------------------------------------------------- keys and markings


def _unprintable(ch: str) -> bool:
    return unicodedata.category(ch) in _UNPRINTABLE


def _breaks_lines(ch: str) -> bool:
    """A control character other than tab, a line/paragraph separator or a surrogate."""
    return ch != "\t" and unicodedata.category(ch) in {"Cc", "Zl", "Zp", "Cs"}


def _fold(text: str) -> str:
    """NFKC, case folding, look-alike letters mapped to ASCII, invisible characters dropped."""
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).casefold().translate(_CONFUSABLES)
    if folded.isascii():  # NFKC is the identity on ASCII, and no ASCII character is a format (Cf) one
        return folded
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def _norm_key(key: str) -> str:
    """``Sensitivity``/``SENSITIVITY``/``sensi-tivity``/``ｓｅｎｓｉｔｉｖｉｔｙ`` → ``sensitivity``."""
    return "".join(ch for ch in _fold(key) if ch.isalnum())


def _osa_distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def _sensitivity_like(norm: str) -> bool:
    """Whether a normalised name tries to name a sensitivity, misspells one, or hides
    ``sensitivity`` among stray letters (``sPUBLICensitivity``)."""
    if norm in _SENSITIVITY_LIKE:
        return True
    if len(norm) <= 2 * len("sensitivity") and _is_subsequence("sensitivity", norm):
        return True
    return any(
        abs(len(norm) - len(name)) <= limit and _osa_distance(norm, name) <= limit for name, limit in _SENSITIVITY_FUZZY
    )


def _is_subsequence(needle: str, haystack: str) -> bool:
    letters = iter(haystack)
    return all(ch in letters for ch in needle)


def _describe_key(key: str) -> str:
    """A key that is not a well-formed name, described without quoting it."""
    traits = []
    if any(ch.isspace() for ch in key):
        traits.append("containing whitespace")
    if not key.isascii():
        traits.append("with non-ASCII characters")
    if any(_unprintable(ch) for ch in key):
        traits.append("with control or invisible characters")
    if not traits:
        traits.append("that is not a plain name")
    return f"a key of {len(key)} character{'s' if len(key) != 1 else ''} " + " and ".join(traits)


def _check_key(key: str, known: tuple[str, ...]) -> tuple[str | None, str, str] | None:
    """``(field, problem, hint)`` for a key that is malformed or only almost a known field."""
    if key in known:
        return None
    norm = _norm_key(key)
    subject = f"key {key!r}" if _KEY.fullmatch(key) else _describe_key(key)
    for name in known:
        if norm == _norm_key(name):
            return name, f"{subject} is not written exactly as the field {name!r}", f"write the key exactly as '{name}'"
    if _sensitivity_like(norm):
        return (
            "sensitivity",
            f"{subject} looks like a sensitivity setting, but only a key written exactly 'sensitivity' is read",
            f"write it as 'sensitivity' with one of {', '.join(SENSITIVITIES)}; "
            "no default is assumed while it is there",
        )
    if not (_KEY.fullmatch(key) or _cjk_key(key)):
        return None, _describe_key(key), _FIX_KEY
    return None


def _cjk_key(key: str) -> bool:
    """A key written only in CJK scripts (Han, kana, Hangul; digits and ``_`` allowed),
    such as ``作者``: those scripts have no look-alikes of ASCII letters, so such a key can
    never pose as a field name. Sensitivity-like ones (``密级``…) were refused before."""
    if not 0 < len(key) <= 64 or not unicodedata.is_normalized("NFKC", key):
        return False
    return all(ch.isdigit() and ch.isascii() or ch == "_" or _CJK_KEY_SCRIPT.match(unicodedata.name(ch, "")) for ch in key) \
        and not key[0].isdigit()


_CJK_KEY_SCRIPT = re.compile(r"CJK UNIFIED IDEOGRAPH|HIRAGANA LETTER|KATAKANA LETTER|HANGUL SYLLABLE")


def _front_matter_kind(line: str) -> str:
    """``field`` for a metadata field's line, else ``meta`` (extra fields and comments)."""
    key = line.partition(":")[0].strip()
    return "field" if key in METADATA_FIELDS and not line.lstrip().startswith("#") else "meta"


def _first_body_lines(body: str, where: Any) -> list[tuple[str, str, str]]:
    """The first ``SENSITIVITY_SNIFF_LINES`` non-blank lines as ``(where(n), line, "body")``."""
    out: list[tuple[str, str, str]] = []
    for n, line in enumerate(body.split("\n")):
        pieces = line.splitlines()
        if len(pieces) > 1:  # a CR or other line separator inside: read it both ways
            out.append((where(n), "".join(pieces), "body"))
        for piece in pieces:
            if not _visible(piece):
                continue
            out.append((where(n), piece, "body"))
            if len(out) >= SENSITIVITY_SNIFF_LINES:
                return out
    return out


def _looks_like_marking(line: str, *, value_rule: bool = True, strict: bool = False) -> bool:
    """Whether one line looks like it marks a sensitivity (see the module docstring).

    ``strict`` (no sensitivity is set) also counts a restricted-type word right after
    any ``:`` or ``=`` (``Access: restricted to staff``).
    """
    folded = _fold(line)
    if _EMBEDDED_MARKING.search(folded) or _EMBEDDED_MARKING.search("".join(folded.split())):
        return True
    if strict and _AFTER_SEPARATOR_MARKING.search(folded):
        return True
    text = folded.strip().lstrip(_LEADING_MARKUP)
    separator = re.search(r"[:=]", text)
    if separator is not None and separator.start() <= 40:
        if _sensitivity_like(_norm_key(text[: separator.start()])):
            return True
        if value_rule and _norm_key(text[separator.end() :]) in _MARKING_WORDS:
            return True
    last = max(text.rfind(":"), text.rfind("="))
    if value_rule and last >= 0 and _norm_key(text[last + 1 :]) in _MARKING_WORDS:
        return True
    words = re.findall(r"[^\W_]+", text)
    if not words:
        return False
    if "".join(words) in _MARKING_WORDS:
        return True
    if _sensitivity_like(words[0]) and "".join(words[1:]) in _LEVEL_WORDS:
        return True
    shown = unicodedata.normalize("NFKC", line)
    banner = shown == shown.upper() and any(ch.isalpha() for ch in shown)
    return banner and (words[0] in _MARKING_WORDS or "".join(words[:2]) in _MARKING_WORDS)


def _mentions_sensitivity(line: str) -> bool:
    """Whether a metadata line mentions a sensitivity notion or level at all — also with
    stray characters mixed in: a key spelling ``sensitivity`` among other letters, or a
    short value spelling ``restricted``/``confidential`` among other letters."""
    letters = _norm_key(line)
    if any(stem in letters for stem in _SENSITIVITY_STEMS) or re.search(r"\bsecret\b", _fold(line)):
        return True
    key, colon, value = _fold(line).partition(":")
    if not colon:
        return False
    key_letters, value_letters = _norm_key(key), _norm_key(value)
    if len(key_letters) <= 64 and _is_subsequence("sensitivity", key_letters):
        return True
    return any(
        len(value_letters) <= 3 * len(word) and _is_subsequence(word, value_letters)
        for word in ("restricted", "confidential")
    )


def _first_marking(lines: Iterable[tuple[str, str, str]], *, restricted_only: bool = False) -> str | None:
    """Where the first marking is among ``(where, line, kind)``.

    Without ``restricted_only`` (no sensitivity is set): a metadata line (``meta`` or
    ``field``) that mentions a sensitivity notion at all, or a body line that looks like a
    marking. With it (``PUBLIC``/``INTERNAL`` is set): a line that looks like a marking and
    names a restricted-type word (``RESTRICTED``, ``CONFIDENTIAL``, ``SECRET``…); the value
    of a metadata field's own line does not count as a marking then.
    """
    for where, line, kind in lines:
        if restricted_only:
            if _looks_like_marking(line, value_rule=kind != "field") and any(
                word in _norm_key(line) for word in _MARKING_WORDS
            ):
                return where
        elif (kind != "body" and _mentions_sensitivity(line)) or _looks_like_marking(line, strict=True):
            return where
    return None


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
    marking_lines: list[tuple[str, str, str]],
    sensitivity_fix: str,
) -> SourceDocument | list[DocumentError]:
    """Validate metadata strings, apply defaults, build the document (or list every problem)."""
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
        bad = next(((pos, ch) for pos, ch in enumerate(fields_[name], 1) if _unprintable(ch)), None)
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
        elif sensitivity != RESTRICTED_SENSITIVITY:
            where = _first_marking(marking_lines, restricted_only=True)
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
        sensitivity = DEFAULT_SENSITIVITY
        where = _first_marking(marking_lines)
        if where is not None:
            problems.append(
                DocumentError(
                    error_path,
                    f"{where} looks like a sensitivity marking, but the document sets no 'sensitivity', "
                    f"so it would be indexed as {DEFAULT_SENSITIVITY}",
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


def _doc_id_words(doc_id: str) -> str:
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


__all__ = [
    "ANALYZERS",
    "BINARY_SNIFF_BYTES",
    "CJK_LANGUAGE_THRESHOLD",
    "DOCUMENT_SUFFIXES",
    "LIBRARY_CONFIG_FILE",
    "LIBRARY_CONFIG_KEYS",
    "SENSITIVITY_SNIFF_LINES",
    "SUPPORTED_SUFFIXES",
    "LibraryConfig",
    "ParseResult",
    "SourceDocument",
    "content_hash",
    "default_doc_id",
    "detect_language",
    "load_library_config",
    "parse_document",
    "parse_jsonl",
    "parse_library",
    "printable_path",
]
