"""The compatibility surface of the old ``parsing`` module: it only re-exports.

Parsing a library folder into validated documents used to live here in one file; it is
now split by what each part holds (issue 24, the first step towards ``ragspine_index``):

* the folder walk and the symbolic-link policy: :mod:`.sources.walk`; printable file
  names: :mod:`.sources.paths`;
* the document model (:class:`SourceDocument`, :class:`ParseResult`, ``content_hash``):
  :mod:`.source_documents.model`;
* the parse of a library (:func:`parse_library`, with the rules in its module docstring):
  :mod:`.source_documents.library`; one ``.md``/``.txt`` file:
  :mod:`.source_documents.text_files` with the front-matter grammar in
  :mod:`.source_documents.front_matter`; ``.jsonl``: :mod:`.source_documents.jsonl`;
* the sensitivity check: :mod:`.source_documents.sensitivity` (key rules in
  :mod:`.source_documents.keys`, validation and defaults in :mod:`.source_documents.metadata`);
* the ``_library.toml`` schema (:class:`LibraryConfig`): :mod:`.library_config`.

Every name importable from here before still is, and is the same object. New code
imports from the modules above. Setting a module constant here (``JSONL_LINES_PER_TASK``,
a test's ``monkeypatch.setattr``) changes only this alias: set it on the module that
defines it.
"""

from __future__ import annotations

# A re-export module: every import is there to be imported from here (also the private
# helpers _check_key, _norm_key, _make_document, _first_body_lines, _first_marking and
# _sensitivity_like, which converters/ imported from here before the split).
# ruff: noqa: F401

from ragspine_index.library_config import ANALYZERS, LIBRARY_CONFIG_FILE, LIBRARY_CONFIG_KEYS, LibraryConfig, load_library_config
from ragspine_index.source_documents.encoding import BINARY_SNIFF_BYTES
from ragspine_index.source_documents.folding import _norm_key
from ragspine_index.source_documents.front_matter import FRONT_MATTER_FENCE
from ragspine_index.source_documents.jsonl import (
    JSONL_LINES_PER_TASK,
    JSONL_MIN_TASKS_IN_WORKERS,
    JSONL_SUFFIX,
    MAX_JSON_NUMBER_CHARS,
    parse_jsonl,
)
from ragspine_index.source_documents.keys import _check_key
from ragspine_index.source_documents.parse_library import SUPPORTED_SUFFIXES, parse_library
from ragspine_index.source_documents.metadata import MAX_BODY_CHARS, MAX_METADATA_VALUE_CHARS, _make_document, default_doc_id
from ragspine_index.source_documents.model import CJK_LANGUAGE_THRESHOLD, ParseResult, SourceDocument, content_hash, detect_language
from ragspine_index.source_documents.sensitivity import (
    SENSITIVITY_SNIFF_LINES,
    _first_body_lines,
    _first_marking,
    _sensitivity_like,
)
from ragspine_index.source_documents.text_files import DOCUMENT_SUFFIXES, MARKDOWN_SUFFIXES, parse_document
from ragspine_index.sources.paths import printable_path

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
