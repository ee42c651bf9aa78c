"""Markings outside the body text of converted files (issue 37): every crafted file of
:mod:`tests.formats.marked` comes out RESTRICTED, or one located error when the part holding
its marking is refused by the safe XML parser; none is served at the default."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_index.converters.markings import header_footer_sections  # noqa: E402
from ragspine_index.source_documents.parse_library import parse_library
from tests.formats import marked  # noqa: E402


def _parse(root: Path, name: str, data: bytes):
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(data)
    result = parse_library(root)
    return result.documents, result.errors


@pytest.mark.parametrize(("name", "suffix", "make"), marked.MARKED, ids=[m[0] for m in marked.MARKED])
def test_a_marking_outside_the_body_makes_the_file_restricted(tmp_path, name, suffix, make):
    docs, errors = _parse(tmp_path / "lib", f"{name}.{suffix}", make())
    assert not errors, [str(e) for e in errors]
    assert [d.sensitivity for d in docs] == ["RESTRICTED"]


@pytest.mark.parametrize(("name", "suffix", "make"), marked.REFUSED, ids=[m[0] for m in marked.REFUSED])
def test_a_part_the_safe_parser_refuses_is_an_error_not_silence(tmp_path, name, suffix, make):
    docs, errors = _parse(tmp_path / "lib", f"{name}.{suffix}", make())
    assert not docs and len(errors) == 1 and errors[0].field == "sensitivity"
    assert "Confidential" not in str(errors[0])  # the refused part's text is never quoted


def test_the_same_files_without_their_marking_stay_at_the_default(tmp_path):
    """The control: what makes the crafted files RESTRICTED is the marking, not the edits."""
    plain = {
        "plain-docx.docx": marked._docx(header="Harbour tender"),
        "plain-xlsx.xlsx": marked.writers.write_xlsx({"Tender": [["Item", "Amount"], ["Cranes", 6]]}),
        "plain-pptx.pptx": marked._pptx(),
        "plain-pdf.pdf": marked._pdf(),
        "plain-html.html": marked.writers.write_html(marked.BODY, title="Harbour crane tender"),
        "removed-label.docx": marked.labelinfo_removed(),
    }
    for name, data in plain.items():
        (tmp_path / name).write_bytes(data)
    result = parse_library(tmp_path)
    assert not result.errors, [str(e) for e in result.errors]
    assert {d.sensitivity for d in result.documents} == {"INTERNAL"} and len(result.documents) == len(plain)


def test_a_sidecar_decides_a_label_whose_name_the_file_does_not_hold(tmp_path):
    (tmp_path / "a.docx").write_bytes(marked.labelinfo_only())
    (tmp_path / "a.docx.meta.toml").write_text('sensitivity = "INTERNAL"\n')
    result = parse_library(tmp_path)
    assert not result.errors and [d.sensitivity for d in result.documents] == ["INTERNAL"]


@pytest.mark.parametrize(("code", "sections"), [
    ("&CCONFIDENTIAL", ["CONFIDENTIAL"]),
    ('&L&D&C&"Arial,Bold"CONFIDENTIAL&R&P', ["CONFIDENTIAL"]),
    ("&CCONFI&12DENTIAL", ["CONFIDENTIAL"]),
    ("&LR&&D only&RPage &P of &N", ["R&D only", "Page of"]),
    ("&K00FF00Secret", ["Secret"]),
])
def test_excel_header_codes_are_removed(code, sections):
    assert header_footer_sections(code) == sections
