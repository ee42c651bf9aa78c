"""Parsing a raw library: metadata, defaults, and located errors that lose nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_index.library_config import LIBRARY_CONFIG_KEYS, LibraryConfig, load_library_config
from ragspine_index.source_documents.metadata import default_doc_id
from ragspine_index.source_documents.model import SourceDocument, content_hash, detect_language
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_core.errors import ConfigError, DocumentError

GOOD = "---\ndoc_id: good\ntitle: A good document\n---\nGood body text.\n"


def _library(tmp_path: Path, files: dict[str, str | bytes], name: str = "lib") -> Path:
    root = tmp_path / name
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _only_error(result, path_part: str) -> DocumentError:
    matching = [e for e in result.errors if path_part in e.path]
    assert len(matching) == 1, result.errors
    return matching[0]


# --------------------------------------------------------------------------- happy path


def test_front_matter_fields_body_and_extras(tmp_path):
    root = _library(
        tmp_path,
        {
            "reports/acme.md": (
                "---\n"
                "doc_id: acme-q1\n"
                "title: 'Acme: Q1 update'\n"
                "entity: ACME\n"
                "topic: earnings\n"
                "geography: US\n"
                "period: 2024Q1\n"
                "sensitivity: public\n"
                "valid_as_of: 2024-04-25\n"
                "source_locator: https://example.com/acme.pdf\n"
                "# a comment line\n"
                "\n"
                'author: "Investor Relations"\n'
                "---\n"
                "# Heading\n\n  Body keeps its  spacing.  \n"
            )
        },
    )
    result = parse_library(root)
    assert result.errors == () and result.skipped == ()
    [doc] = result.documents
    assert doc.library_id == "lib" and result.library_id == "lib"
    assert (doc.doc_id, doc.title, doc.entity, doc.topic, doc.geography, doc.period) == (
        "acme-q1", "Acme: Q1 update", "ACME", "earnings", "US", "2024Q1",
    )
    assert (doc.sensitivity, doc.valid_as_of, doc.language) == ("PUBLIC", "2024-04-25", "en")
    assert doc.source_locator == "https://example.com/acme.pdf"
    assert doc.source_path == "reports/acme.md"
    assert doc.body == "# Heading\n\n  Body keeps its  spacing.  \n"
    assert doc.extra == (("author", "Investor Relations"),)
    assert len(doc.content_hash) == 64


def test_defaults_without_front_matter(tmp_path):
    root = _library(
        tmp_path,
        {
            "Notes/Q1 Review.md": "Intro line.\n\n## 第一季度回顾\n\n营收增长，利润下降，市场份额稳定。",
            "plain.txt": "# not a title for txt\njust text",
        },
    )
    result = parse_library(root, library_id="custom")
    assert result.errors == ()
    by_id = {d.doc_id: d for d in result.documents}
    assert sorted(by_id) == ["notes-q1-review", "plain"]
    md = by_id["notes-q1-review"]
    assert md.title == "第一季度回顾"
    assert md.source_locator == md.source_path == "Notes/Q1 Review.md"
    assert md.sensitivity == "INTERNAL" and md.language == "zh" and md.library_id == "custom"
    assert md.valid_as_of == "" and md.extra == ()
    txt = by_id["plain"]
    assert txt.title == "plain" and txt.language == "en"


def test_documents_are_sorted_by_doc_id_and_the_walk_is_deterministic(tmp_path):
    files = {
        f"d{i}/f{j}.md": f"---\ndoc_id: z{(i * 7 + j) % 10}\n---\ntext {i}{j}\n" for i in range(2) for j in range(5)
    }
    root = _library(tmp_path, files)
    first = parse_library(root)
    assert [d.doc_id for d in first.documents] == sorted(d.doc_id for d in first.documents)
    second = parse_library(root)
    assert first.documents == second.documents
    assert [str(e) for e in first.errors] == [str(e) for e in second.errors]
    assert first.errors  # the colliding doc_ids are reported, identically each run


def test_crlf_is_normalised_and_the_rest_is_byte_identical(tmp_path):
    raw = "---\r\ndoc_id: crlf\r\ntitle: Windows\r\n---\r\nLine one.\r\n\r\nLine two with trailing space \r\n"
    root = _library(tmp_path, {"win.txt": raw.encode("utf-8")})
    [doc] = parse_library(root).documents
    assert doc.title == "Windows"
    assert doc.body == "Line one.\n\nLine two with trailing space \n"


def test_utf8_bom_is_not_part_of_the_body(tmp_path):
    root = _library(tmp_path, {"bom.md": b"\xef\xbb\xbf---\ndoc_id: bom\n---\nText."})
    [doc] = parse_library(root).documents
    assert (doc.doc_id, doc.body) == ("bom", "Text.")


def test_hidden_and_underscore_paths_are_ignored_other_extensions_skipped(tmp_path):
    root = _library(
        tmp_path,
        {
            "keep.md": GOOD,
            ".hidden.md": "ignored",
            "_draft.md": "ignored",
            "_private/a.md": "ignored",
            ".git/b.md": "ignored",
            "_library.toml": 'chunker = "layout"\n',
            "scan.tiff": b"II*\x00\x01",
            "sub/data.parquet": "PAR1",
            "UPPER.MD": "---\ndoc_id: upper\n---\nUpper-case suffix.",
        },
    )
    result = parse_library(root)
    assert result.errors == ()
    assert [d.doc_id for d in result.documents] == ["good", "upper"]
    assert result.skipped == ("scan.tiff", "sub/data.parquet")


def test_jsonl_one_document_per_line(tmp_path):
    lines = [
        {"doc_id": "j1", "title": "First", "text": "第一条记录的正文。", "entity": "ACME", "author": "x"},
        {"doc_id": "j2", "text": "Second\r\nbody", "sensitivity": "restricted", "source_locator": "db://j2"},
    ]
    content = json.dumps(lines[0], ensure_ascii=False) + "\n\n   \n" + json.dumps(lines[1]) + "\n"
    root = _library(tmp_path, {"feed.jsonl": content})
    result = parse_library(root)
    assert result.errors == ()
    j1, j2 = result.documents
    assert (j1.doc_id, j1.title, j1.entity, j1.language, j1.extra) == ("j1", "First", "ACME", "zh", (("author", "x"),))
    assert j1.source_path == j1.source_locator == "feed.jsonl#L1"
    assert (j2.title, j2.sensitivity, j2.body, j2.source_path, j2.source_locator) == (
        "j2", "RESTRICTED", "Second\nbody", "feed.jsonl#L4", "db://j2",
    )


def test_content_hash_changes_with_metadata_only_edits(tmp_path):
    a = SourceDocument.create(library_id="l", doc_id="d", body="same", topic="x")
    b = SourceDocument.create(library_id="l", doc_id="d", body="same", topic="y")
    c = SourceDocument.create(library_id="l", doc_id="d", body="same", topic="x", extra={"k": "v"})
    assert len({a.content_hash, b.content_hash, c.content_hash}) == 3
    assert a.content_hash == SourceDocument.create(library_id="l", doc_id="d", body="same", topic="x").content_hash
    assert a.content_hash == content_hash("same", a.metadata(), ())


def test_language_detection_threshold():
    assert detect_language("营收 revenue growth rate") == "en"  # 2 of 19 word chars are CJK
    assert detect_language("营收增长 revenue") == "zh"  # 4 of 11
    assert detect_language("!!! ...") == "en"


def test_default_doc_id_rule():
    assert default_doc_id("reports/Q1 Note.md") == "reports-q1-note"
    assert default_doc_id("a.b.txt") == "a.b"


# --------------------------------------------------------------------------- bad input


BAD_FILES: dict[str, tuple[str | bytes, str, str]] = {
    # name: (content, expected field, a phrase of the problem)
    "invalid-utf8.md": (b"---\ndoc_id: bad\n---\nok \xff\xfe broken", "encoding", "byte offset 23"),
    "binary.txt": (b"text\x00\x01\x02 more", "content", "binary"),
    "empty.md": (b"", "body", "empty"),
    "blank.txt": ("   \n\n", "body", "whitespace"),
    "no-body.md": ("---\ndoc_id: nobody\n---\n\n  \n", "body", "no text after the front matter"),
    "unclosed.md": ("---\ndoc_id: x\ntitle: never closed\n\nBody", "front_matter", "never closed"),
    "no-colon.md": ("---\ndoc_id: x\nthis line has no colon\n---\nBody", "front_matter", "line 3"),
    "empty-key.md": ("---\ndoc_id: x\n: value\n---\nBody", "front_matter", "empty key"),
    "dup-key.md": ("---\ntitle: a\ntitle: b\n---\nBody", "title", "line 2 and again on line 3"),
    "sensitivity.md": ("---\nsensitivity: secret\n---\nBody", "sensitivity", "'secret'"),
    "bad-date.md": ("---\nvalid_as_of: 2024-02-30\n---\nBody", "valid_as_of", "2024-02-30"),
    "bad-date-form.md": ("---\nvalid_as_of: 20240101\n---\nBody", "valid_as_of", "YYYY-MM-DD"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_is_reported_by_file_and_field_and_the_rest_still_parses(tmp_path, name):
    content, field, phrase = BAD_FILES[name]
    root = _library(tmp_path, {name: content, "a-good.md": GOOD, "z-good.txt": "---\ndoc_id: z\n---\nAlso fine."})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good", "z"]
    error = _only_error(result, name)
    assert error.path == name
    assert error.field == field
    assert phrase in str(error)
    assert name in str(error)


def test_unknown_sensitivity_lists_the_allowed_values(tmp_path):
    root = _library(tmp_path, {"s.md": "---\nsensitivity: TopSecret\n---\nBody"})
    message = str(_only_error(parse_library(root), "s.md"))
    assert "PUBLIC, INTERNAL, RESTRICTED" in message


def test_several_problems_in_one_document_are_all_reported(tmp_path):
    root = _library(tmp_path, {"two.md": "---\nsensitivity: nope\nvalid_as_of: soon\n---\nBody"})
    result = parse_library(root)
    assert sorted(e.field for e in result.errors) == ["sensitivity", "valid_as_of"]
    assert result.documents == ()


def test_duplicate_doc_id_keeps_the_first_by_path_and_names_both_files(tmp_path):
    root = _library(
        tmp_path,
        {
            "b/second.md": "---\ndoc_id: same\n---\nSecond.",
            "a/first.md": "---\ndoc_id: same\n---\nFirst.",
            "c.jsonl": json.dumps({"doc_id": "same", "text": "Third."}) + "\n",
            "other.md": "Other.",
        },
    )
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["other", "same"]
    assert result.documents[1].body == "First."
    assert [(e.path, e.field) for e in result.errors] == [("b/second.md", "doc_id"), ("c.jsonl#L1", "doc_id")]
    assert "a/first.md" in str(result.errors[0]) and "b/second.md" in str(result.errors[0])


def test_bad_jsonl_lines_are_reported_per_line_and_good_lines_survive(tmp_path):
    lines = [
        json.dumps({"doc_id": "ok1", "text": "fine"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"doc_id": "no-text"}),
        json.dumps({"text": "no id"}),
        json.dumps({"doc_id": "num", "text": "x", "period": 2024}),
        json.dumps({"doc_id": "sens", "text": "x", "sensitivity": "top"}),
        json.dumps({"doc_id": "ok2", "text": "also fine"}),
    ]
    raw = ("\n".join(lines) + "\n").encode("utf-8") + b'{"doc_id": "u", "text": "\xff"}\n'
    root = _library(tmp_path, {"feed.jsonl": raw, "good.md": GOOD})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good", "ok1", "ok2"]
    got = [(e.path, e.field) for e in result.errors]
    assert got == [
        ("feed.jsonl#L2", "json"),
        ("feed.jsonl#L3", "json"),
        ("feed.jsonl#L4", "text"),
        ("feed.jsonl#L5", "doc_id"),
        ("feed.jsonl#L6", "period"),
        ("feed.jsonl#L7", "sensitivity"),
        ("feed.jsonl#L9", "encoding"),
    ]
    # the JSON type is named; the value itself is never quoted (issue 9: no content in errors)
    assert "JSON number" in str(result.errors[4]) and "2024" not in str(result.errors[4])


def test_binary_or_empty_jsonl_is_one_file_error(tmp_path):
    root = _library(tmp_path, {"bin.jsonl": b'{"a":\x00}', "empty.jsonl": b"\n\n", "good.md": GOOD})
    result = parse_library(root)
    assert [d.doc_id for d in result.documents] == ["good"]
    assert [(e.path, e.field) for e in result.errors] == [("bin.jsonl", "content"), ("empty.jsonl", "body")]


def test_missing_library_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        parse_library(tmp_path / "nope")


# --------------------------------------------------------------------------- library config


def test_library_config_defaults_when_absent(tmp_path):
    assert load_library_config(_library(tmp_path, {"a.md": GOOD})) == LibraryConfig()
    config = LibraryConfig()
    assert (config.chunker, config.max_chars, config.overlap_chars) == ("paragraph", 480, 80)
    assert (config.analyzer, config.embedding, config.contextual) == ("auto", "auto", True)
    assert config.make_chunker().name == "paragraph"


def test_library_config_reads_every_key(tmp_path):
    toml = (
        'chunker = "Laws"\nmax_chars = 300\noverlap_chars = 40\nanalyzer = "english"\n'
        'embedding = "deterministic"\ncontextual = false\n'
    )
    config = load_library_config(_library(tmp_path, {"_library.toml": toml}))
    assert config == LibraryConfig("laws", 300, 40, "english", "deterministic", False)
    chunker = config.make_chunker()
    assert (chunker.name, chunker.max_chars, chunker.overlap_chars) == ("laws", 300, 40)


@pytest.mark.parametrize(
    ("toml", "phrase"),
    [
        ('chunkr = "layout"\n', "allowed keys: " + ", ".join(LIBRARY_CONFIG_KEYS)),
        ('chunker = "topical"\n', "allowed: paragraph"),
        ('analyzer = "porter"\n', "auto, spec, english"),
        ("max_chars = 0\n", "max_chars"),
        ("max_chars = 100\noverlap_chars = 100\n", "overlap_chars"),
        ('max_chars = "480"\n', "integer"),
        ('contextual = "yes"\n', "true or false"),
        ("chunker = [\n", "TOML"),
    ],
)
def test_invalid_library_config_names_the_file_and_allowed_values(tmp_path, toml, phrase):
    root = _library(tmp_path, {"_library.toml": toml})
    with pytest.raises(ConfigError) as info:
        load_library_config(root)
    assert phrase in str(info.value)
    assert "_library.toml" in str(info.value)
