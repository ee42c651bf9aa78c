"""Item 5 of issue 28: "withdraw on parse error" sees a marking in any encoding.

A file that fails to parse keeps its previous chunks unless it may have become
RESTRICTED; then they are withdrawn. A file re-saved as UTF-16 or UTF-32 with the new
marking (the parser calls it binary), or a JSONL line spelling ``"\\u0052ESTRICTED"``
next to another error, used to keep its old PUBLIC chunks.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.steps.documents import load_documents
from ragspine_index.marking_scan import mentions_restricted
from ragspine_index.pipeline import build_library
from ragspine_query.library import open_library

BODY = "Supplier Quillfeather delivered the widget lots late; penalties apply.\n"
MD = "---\ndoc_id: qf\nsensitivity: {sens}\n{extra}---\n# Supplier review\n\n" + BODY

ENCODINGS = {
    "utf-8-sig": lambda t: codecs.BOM_UTF8 + t.encode("utf-8"),
    "utf-16": lambda t: t.encode("utf-16"),  # with BOM
    "utf-16-le": lambda t: t.encode("utf-16-le"),
    "utf-16-be": lambda t: t.encode("utf-16-be"),
    "utf-32": lambda t: t.encode("utf-32"),
    "utf-32-le": lambda t: t.encode("utf-32-le"),
    "utf-32-be": lambda t: t.encode("utf-32-be"),
}


def _served(paths: LibraryPaths, cache: Path) -> set[str]:
    res = build_library(paths, cache_path=cache)
    with open_library(Path(res.snapshot_dir)) as lib:
        return {r[0] for r in lib.execute_read("SELECT DISTINCT doc_id FROM narrative_chunk")}


def _lib(tmp_path: Path):
    raw = tmp_path / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "other.md").write_text("---\nsensitivity: PUBLIC\n---\n# Other\n\nAn open note about the canteen.\n",
                                  encoding="utf-8")
    return raw, LibraryPaths("lib", raw, tmp_path / "art" / "lib"), tmp_path / "cache" / "e.sqlite"


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_a_file_resaved_in_another_encoding_with_the_marking_is_withdrawn(tmp_path, encoding):
    raw, paths, cache = _lib(tmp_path)
    (raw / "qf.md").write_text(MD.format(sens="PUBLIC", extra=""), encoding="utf-8")
    assert "qf" in _served(paths, cache)
    (raw / "qf.md").write_bytes(ENCODINGS[encoding](MD.format(sens="RESTRICTED", extra="valid_as_of: nope\n")))
    docs = load_documents(raw, "lib")
    assert "qf.md" in docs.error_paths, "the re-saved file does not parse (it is the fail-closed path under test)"
    assert "qf.md" in docs.withdraw_paths
    assert "qf" not in _served(paths, cache)


@pytest.mark.parametrize("spelling", ["\\u0052ESTRICTED", "\\u0072\\u0065stricted", "RES\\u200bTRICTED",
                                      "RES\\nTRICTED", "R&#69;STRICTED"])
def test_a_jsonl_line_with_an_escaped_marking_and_another_error_is_withdrawn(tmp_path, spelling):
    raw, paths, cache = _lib(tmp_path)
    (raw / "feed.jsonl").write_text(json.dumps({"doc_id": "qf", "sensitivity": "PUBLIC", "text": BODY}) + "\n",
                                    encoding="utf-8")
    assert "qf" in _served(paths, cache)
    # the escaped marking, plus another error (a list where text belongs)
    line = '{"doc_id": "qf", "sensitivity": "' + spelling + '", "text": ["' + BODY.strip() + '"]}'
    (raw / "feed.jsonl").write_text(line + "\n", encoding="utf-8")
    docs = load_documents(raw, "lib")
    assert "feed.jsonl" in docs.withdraw_paths
    assert "qf" not in _served(paths, cache)


def test_a_broken_file_without_a_marking_keeps_serving_in_any_encoding(tmp_path):
    for name, encode in ENCODINGS.items():
        assert not mentions_restricted(encode(MD.format(sens="PUBLIC", extra="valid_as_of: nope\n"))), name
    assert mentions_restricted(b"\x00\x01\x02\xff\xfe\x00\x03" * 40), "unreadable bytes fail closed"
