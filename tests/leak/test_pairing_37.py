"""Fail closed on pairing and folder defaults (issue 37): a sidecar that could belong to a
file without being its exact pair withdraws that file with a located error, and a folder's
``[defaults] sensitivity`` applies to Markdown, text and JSONL files as to converted ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragspine_index.source_documents.parse_library import parse_library

RESTRICTED_SIDECAR = 'sensitivity = "RESTRICTED"\n'
CSV = "port,teu\nRotterdam,14000\n"


def _parse(root: Path):
    result = parse_library(root)
    return {d.source_path: d.sensitivity for d in result.documents}, result.errors


@pytest.mark.parametrize(("data_name", "sidecar_name"), [
    ("s.csv", "s.csv.META.toml"),  # another letter case of the suffix
    ("S.CSV", "s.csv.meta.toml"),  # another letter case of the file
    ("s.csv", "S.csv.meta.toml"),
    ("s.csv", "s.meta.toml"),  # a stem sidecar
    ("s.md", "s.md.meta.toml"),  # Markdown carries front matter, not a sidecar
    ("s.jsonl", "s.meta.toml"),
])
def test_an_unpaired_sidecar_withdraws_the_files_it_could_belong_to(tmp_path, data_name, sidecar_name):
    body = '{"doc_id": "s1", "text": "Rotterdam handled 14,000 TEU."}\n' if data_name.endswith(".jsonl") else CSV
    (tmp_path / data_name).write_text(body)
    (tmp_path / sidecar_name).write_text(RESTRICTED_SIDECAR)
    (tmp_path / "other.csv").write_text(CSV)  # not claimed: served as before
    docs, errors = _parse(tmp_path)
    assert docs == {"other.csv": "INTERNAL"}
    withdrawn = [e for e in errors if e.path == data_name]
    assert len(withdrawn) == 1 and withdrawn[0].field == "sensitivity" and sidecar_name in str(withdrawn[0])
    assert "Rotterdam" not in str(withdrawn[0])


@pytest.mark.parametrize("target", ["outside", "dangling", "hidden"])
def test_a_linked_sidecar_the_walk_cannot_read_withdraws_its_file(tmp_path, target):
    library = tmp_path / "lib"
    library.mkdir()
    (library / "s.csv").write_text(CSV)
    (tmp_path / "outside.toml").write_text(RESTRICTED_SIDECAR)
    (library / "_hidden.toml").write_text(RESTRICTED_SIDECAR)
    link_to = {"outside": tmp_path / "outside.toml", "dangling": tmp_path / "gone.toml",
               "hidden": library / "_hidden.toml"}[target]
    os.symlink(link_to, library / "s.csv.meta.toml")
    docs, errors = _parse(library)
    assert docs == {}
    assert {e.path for e in errors} == {"s.csv", "s.csv.meta.toml"}


def test_an_exact_pair_still_decides(tmp_path):
    (tmp_path / "s.csv").write_text(CSV)
    (tmp_path / "s.csv.meta.toml").write_text(RESTRICTED_SIDECAR)
    docs, errors = _parse(tmp_path)
    assert not errors and docs == {"s.csv": "RESTRICTED"}


def _restricted_folder(root: Path) -> Path:
    folder = root / "hr"
    folder.mkdir(parents=True)
    (folder / "_library.toml").write_text('[defaults]\nsensitivity = "RESTRICTED"\n')
    return folder


def test_a_restricted_folder_default_applies_to_every_format(tmp_path):
    folder = _restricted_folder(tmp_path)
    (folder / "note.md").write_text("# Salaries\n\nThe salary bands for 2026.\n")
    (folder / "plain.txt").write_text("Salary bands for 2026.\n")
    (folder / "rows.jsonl").write_text('{"doc_id": "row-1", "text": "Band C pays 80k."}\n')
    (folder / "bands.csv").write_text("band,pay\nC,80000\n")
    (tmp_path / "open.md").write_text("# Ports\n\nRotterdam is large.\n")
    docs, errors = _parse(tmp_path)
    assert not errors
    assert docs == {"hr/note.md": "RESTRICTED", "hr/plain.txt": "RESTRICTED", "hr/rows.jsonl#L1": "RESTRICTED",
                    "hr/bands.csv": "RESTRICTED", "open.md": "INTERNAL"}


@pytest.mark.parametrize(("name", "content"), [
    ("note.md", "---\nsensitivity: INTERNAL\n---\n# Salaries\n\nBands.\n"),
    ("rows.jsonl", '{"doc_id": "row-1", "sensitivity": "PUBLIC", "text": "Band C pays 80k."}\n'),
])
def test_a_file_more_open_than_its_folder_is_an_error(tmp_path, name, content):
    folder = _restricted_folder(tmp_path)
    (folder / name).write_text(content)
    docs, errors = _parse(tmp_path)
    assert docs == {} and len(errors) == 1 and errors[0].field == "sensitivity"


def test_a_converted_file_more_open_than_its_folder_is_an_error(tmp_path):
    folder = _restricted_folder(tmp_path)
    (folder / "bands.csv").write_text("band,pay\nC,80000\n")
    (folder / "bands.csv.meta.toml").write_text('sensitivity = "INTERNAL"\n')
    docs, errors = _parse(tmp_path)
    assert docs == {} and [e.field for e in errors] == ["sensitivity"]


def test_a_broken_folder_default_withdraws_the_text_files_under_it(tmp_path):
    folder = _restricted_folder(tmp_path)
    (folder / "_library.toml").write_text('[defaults]\nsensitivity = "top secret"\n')
    (folder / "note.md").write_text("# Salaries\n\nBands.\n")
    (folder / "more.md").write_text("# More\n\nBands.\n")
    docs, errors = _parse(tmp_path)
    assert docs == {}
    assert sorted(e.path for e in errors) == ["hr/_library.toml", "hr/more.md", "hr/note.md"]
