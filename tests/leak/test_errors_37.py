"""Errors speak about no hidden text (issue 37): a parse error of a document that may be
RESTRICTED quotes none of its keys, and a doc_id collision with a probe file that sorts
first neither names nor drops the RESTRICTED document."""

from __future__ import annotations

from ragspine_index.source_documents.parse_library import parse_library

SECRET_KEY = "nordvolt_inverter_price"


def test_a_restricted_front_matter_error_quotes_no_key(tmp_path):
    (tmp_path / "plan.md").write_text(
        f"---\nsensitivity: RESTRICTED\n{SECRET_KEY}: 12\n{SECRET_KEY}: 13\n---\n# Plan\n\nText.\n")
    result = parse_library(tmp_path)
    assert not result.documents and len(result.errors) == 1
    assert SECRET_KEY not in str(result.errors[0]) and "<a name of 23 characters>" in str(result.errors[0])


def test_a_restricted_jsonl_error_quotes_no_key_nor_uses_it_as_field(tmp_path):
    (tmp_path / "rows.jsonl").write_text(
        f'{{"doc_id": "r1", "sensitivity": "RESTRICTED", "{SECRET_KEY}": 12, "text": "Plan."}}\n')
    result = parse_library(tmp_path)
    assert not result.documents and result.errors
    for error in result.errors:
        assert SECRET_KEY not in str(error) and error.field != SECRET_KEY


def test_an_open_document_error_still_names_its_key(tmp_path):
    """Only documents that may be restricted lose the quotes: an open one keeps its help."""
    (tmp_path / "rows.jsonl").write_text('{"doc_id": "r1", "harbour_count": 12, "text": "Ports."}\n')
    result = parse_library(tmp_path)
    assert "'harbour_count'" in str(result.errors[0])


def test_a_probe_that_sorts_first_neither_names_nor_drops_the_restricted_document(tmp_path):
    (tmp_path / "a-probe.md").write_text("---\ndoc_id: board-plan\n---\nProbe.\n")
    (tmp_path / "z-board.md").write_text("---\ndoc_id: board-plan\nsensitivity: RESTRICTED\n---\nThe plan.\n")
    result = parse_library(tmp_path)
    assert [(d.doc_id, d.source_path, d.sensitivity) for d in result.documents] == [
        ("board-plan", "z-board.md", "RESTRICTED")]
    assert [e.path for e in result.errors] == ["a-probe.md"]
    assert "z-board" not in str(result.errors[0]) and "another document" in str(result.errors[0])


def test_two_open_copies_keep_the_first_by_path(tmp_path):
    (tmp_path / "a.md").write_text("---\ndoc_id: same\n---\nOne.\n")
    (tmp_path / "b.md").write_text("---\ndoc_id: same\n---\nTwo.\n")
    result = parse_library(tmp_path)
    assert [d.source_path for d in result.documents] == ["a.md"]
    assert [e.path for e in result.errors] == ["b.md"] and "a.md" in str(result.errors[0])


def test_a_remarking_with_another_word_next_to_an_unrelated_error_is_withdrawn(tmp_path):
    from tests.leak.test_withdraw_encodings import MD, _lib, _served

    from ragspine_index.steps.documents import load_documents

    raw, paths, cache = _lib(tmp_path)
    (raw / "qf.md").write_text(MD.format(sens="PUBLIC", extra=""), encoding="utf-8")
    assert "qf" in _served(paths, cache)
    for banner in ("CONFIDENTIAL", "SECRET", "机密"):
        # re-saved as UTF-16 (an encoding error, not a sensitivity one) with a new banner
        (raw / "qf.md").write_bytes(MD.format(sens="PUBLIC", extra="").replace(
            "# Supplier review", f"{banner}\n\n# Supplier review").encode("utf-16"))
        docs = load_documents(raw, "lib")
        assert "qf.md" in docs.error_paths and "qf.md" in docs.withdraw_paths, banner
