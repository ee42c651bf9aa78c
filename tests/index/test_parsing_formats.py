"""PDF, DOCX, PPTX, XLSX, HTML and CSV files in a library (issue 25): converted text,
citations into the original file, fail-closed sensitivity, one located error per bad file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_index.chunking import build_chunks, make_chunker  # noqa: E402
from ragspine_index.steps.chunks import update_chunk_store  # noqa: E402
from ragspine_index.converters import writers  # noqa: E402
from ragspine_index.steps.documents import load_documents  # noqa: E402
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.pipeline import CODE_VERSIONS  # noqa: E402
from ragspine_core.records import Hit, to_snippet  # noqa: E402
from ragspine_index.converters import ConversionError, ConversionLimits  # noqa: E402
from ragspine_index.converters.isolation import ConverterProcess  # noqa: E402
from tests.formats.library import PAGE_TWO_FACT, REPORT, slow_pdf, write_broken, write_library  # noqa: E402


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("formats") / "northwind"
    return root, write_library(root)


def by_id(result):
    return {d.doc_id: d for d in result.documents}


def test_every_format_becomes_a_document_with_structure(library):
    root, ids = library
    result = parse_library(root)
    assert not result.errors and not result.skipped
    docs = by_id(result)
    assert set(docs) == set(ids)
    assert docs["northwind-q3"].sensitivity == "PUBLIC" and docs["northwind-q3"].entity == "NORTHWIND"
    memo = docs["reports-northwind-memo"].body
    assert "# Northwind Board Memo" in memo and "## Drivers" in memo and "- Strong demand" in memo
    assert "| Benelux | 120 | 4% |" in memo  # a Word table as a Markdown table
    assert "## Slide 2: Harbour cranes" in docs["northwind-deck"].body
    figures = docs["northwind-figures"].body
    assert "## Sheet: Revenue" in figures and "## Sheet: Headcount" in figures and "| Rotterdam | 410 |" in figures
    assert "## Drivers" in docs["northwind-site"].body and "never run" not in docs["northwind-site"].body
    assert docs["northwind-q3"].title == "Northwind Q3 Review"
    for doc in docs.values():
        assert dict(doc.extra)["converter"].split("@")[0] in {"pdf", "docx", "pptx", "xlsx", "html", "csv"}
        assert doc.sensitivity == "INTERNAL" or doc.doc_id == "northwind-q3"  # the library default


def test_chunks_cite_the_page_slide_sheet_and_heading(library):
    root, _ = library
    docs = by_id(parse_library(root))
    chunker = make_chunker("layout", max_chars=400, overlap_chars=0)
    chunks = {d: build_chunks(doc, chunker) for d, doc in docs.items()}
    for doc_id, doc_chunks in chunks.items():
        for chunk in doc_chunks:
            assert docs[doc_id].body[chunk.start:chunk.end] == chunk.text
            assert chunk.locator.endswith(f"&chars={chunk.start}-{chunk.end}"), chunk.locator
    fact = next(c for c in chunks["northwind-q3"] if PAGE_TWO_FACT[:40] in c.text)
    page = int(fact.location["page"])
    assert fact.locator.startswith(f"reports/northwind-q3.pdf#page={page}")
    import pypdf

    reader = pypdf.PdfReader(root / "reports/northwind-q3.pdf")
    last = int(fact.location.get("end_page", page))
    reextracted = "\n\n".join(reader.pages[p - 1].extract_text() for p in range(page, last + 1))
    assert PAGE_TWO_FACT[:40] in reextracted and page >= 2
    assert chunks["northwind-deck"][-1].location == {"slide": "2"}
    revenue = next(c for c in chunks["northwind-figures"] if "Benelux" in c.text)
    assert revenue.location["sheet"] == "Revenue" and revenue.location["cells"].startswith("A")
    drivers = next(c for c in chunks["northwind-site"] if "harbour cranes" in c.text)
    assert drivers.location == {"anchor": "drivers"}
    snippet = to_snippet(Hit(fact, 1.0))
    assert snippet["page"] == page and snippet["location"]["page"] == str(page)
    md_like = next(iter(chunks["ports"]))
    assert "cells" in md_like.location


def test_markdown_locators_are_unchanged(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nplain text\n")
    chunk = build_chunks(parse_library(tmp_path).documents[0], make_chunker("paragraph"))[0]
    assert chunk.locator == "a.md#chars=0-15" and chunk.location == {}
    assert "page" not in to_snippet(Hit(chunk, 1.0)) and "location" not in to_snippet(Hit(chunk, 1.0))


def test_each_malformed_file_is_one_located_error_and_the_rest_publishes(tmp_path):
    ids = write_library(tmp_path)
    broken = write_broken(tmp_path)
    result = parse_library(tmp_path)
    assert set(by_id(result)) == set(ids)
    paths = [str(e.path) for e in result.errors]
    assert sorted(paths) == sorted(broken), paths  # exactly one error per broken file
    for error in result.errors:
        assert broken[str(error.path)].lower() in str(error).lower(), str(error)
        assert error.hint


def test_without_the_formats_extra_files_are_skipped_with_the_install_command(tmp_path, monkeypatch):
    ids = write_library(tmp_path)
    for module in ("pypdf", "docx", "pptx", "openpyxl"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: import fails
    result = parse_library(tmp_path)
    assert not result.errors
    assert set(by_id(result)) == {"northwind-site", "ports"}  # HTML and CSV need no extra
    assert sorted(result.skipped) == sorted(p for d, p in ids.items() if d not in ("northwind-site", "ports"))
    assert result.notes and all("pip install 'ragspine[formats]'" in n for n in result.notes)
    assert {n.split()[0] for n in result.notes} == {"PDF", "DOCX", "PPTX", "XLSX"}
    docs = load_documents(tmp_path)
    assert docs.notes == result.notes


# --------------------------------------------------------------------------- sensitivity


def one(root: Path):
    result = parse_library(root)
    return result.documents, result.errors


def test_sidecar_sets_restricted(tmp_path):
    (tmp_path / "a.pdf").write_bytes(writers.write_pdf(REPORT))
    (tmp_path / "a.pdf.meta.toml").write_text('sensitivity = "restricted"\ntitle = "Secret plan"\n')
    docs, errors = one(tmp_path)
    assert not errors and docs[0].sensitivity == "RESTRICTED"


@pytest.mark.parametrize("value", ["SECRET", "RESTRICTED!", "ＲＥＳＴＲＩＣＴＥＤ", ""])
def test_a_sidecar_sensitivity_that_is_not_exact_is_an_error(tmp_path, value):
    (tmp_path / "a.html").write_bytes(writers.write_html(REPORT))
    (tmp_path / "a.html.meta.toml").write_text(f'sensitivity = "{value}"\n', encoding="utf-8")
    docs, errors = one(tmp_path)
    assert not docs and len(errors) == 1 and errors[0].field == "sensitivity"
    assert errors[0].path == "a.html.meta.toml"


@pytest.mark.parametrize("sidecar", ['classification = "PUBLIC"\n', 'Sensitivity = "PUBLIC"\n',
                                     'sensitivity = PUBLIC\n', '# confidential\n', 'sensitivity = 1\n'])
def test_a_sidecar_that_tries_to_mark_without_exact_syntax_fails_closed(tmp_path, sidecar):
    (tmp_path / "a.html").write_bytes(writers.write_html(REPORT))
    (tmp_path / "a.html.meta.toml").write_text(sidecar)
    docs, errors = one(tmp_path)
    # an error, or (a restricted-type word in a comment) RESTRICTED; never the default
    assert (not docs and errors) or (not errors and docs[0].sensitivity == "RESTRICTED")


@pytest.mark.parametrize(("custom", "expected"), [
    ({"Classification": "Confidential"}, "RESTRICTED"),
    ({"MSIP_Label_1234_Name": "Highly Confidential"}, "RESTRICTED"),
    ({"Sensitivity": "Public"}, "PUBLIC"),
    ({"Classification": "General"}, None),  # cannot be read exactly: an error
])
def test_docx_properties_mark_the_document(tmp_path, custom, expected):
    (tmp_path / "a.docx").write_bytes(writers.write_docx(REPORT, custom=custom))
    docs, errors = one(tmp_path)
    if expected is None:
        assert not docs and len(errors) == 1 and errors[0].field == "sensitivity"
    else:
        assert not errors and docs[0].sensitivity == expected


def test_a_public_sidecar_against_a_confidential_label_is_an_error(tmp_path):
    (tmp_path / "a.docx").write_bytes(writers.write_docx(REPORT, custom={"MSIP_Label_9_Name": "Highly Confidential"}))
    (tmp_path / "a.docx.meta.toml").write_text('sensitivity = "PUBLIC"\n')
    docs, errors = one(tmp_path)
    assert not docs and errors and errors[0].field == "sensitivity"


@pytest.mark.parametrize("banner", ["RESTRICTED", "STRICTLY CONFIDENTIAL", "Classification: Restricted"])
@pytest.mark.parametrize("fmt", ["pdf", "html", "docx"])
def test_a_first_page_banner_makes_it_restricted(tmp_path, fmt, banner):
    write = {"pdf": writers.write_pdf, "html": writers.write_html, "docx": writers.write_docx}[fmt]
    (tmp_path / f"a.{fmt}").write_bytes(write(REPORT, banner=banner))
    docs, errors = one(tmp_path)
    assert not errors and docs[0].sensitivity == "RESTRICTED"


def test_a_docx_page_header_marking_counts(tmp_path):
    (tmp_path / "a.docx").write_bytes(writers.write_docx(REPORT, header="CONFIDENTIAL"))
    docs, errors = one(tmp_path)
    assert not errors and docs[0].sensitivity == "RESTRICTED"


@pytest.mark.parametrize("banner", ["Classification: Internal", "Sensitivity: PUBLIC"])
def test_a_banner_that_is_not_restricted_is_an_error_not_a_level(tmp_path, banner):
    (tmp_path / "a.html").write_bytes(writers.write_html(REPORT, banner=banner))
    docs, errors = one(tmp_path)
    assert not docs and errors[0].field == "sensitivity" and "sidecar" in errors[0].hint


def test_a_public_sidecar_with_a_restricted_banner_is_an_error(tmp_path):
    (tmp_path / "a.pdf").write_bytes(writers.write_pdf(REPORT, banner="CONFIDENTIAL"))
    (tmp_path / "a.pdf.meta.toml").write_text('sensitivity = "PUBLIC"\n')
    docs, errors = one(tmp_path)
    assert not docs and errors[0].field == "sensitivity" and "Northwind" not in str(errors[0])


def test_pdf_info_dictionary_marks_it(tmp_path):
    (tmp_path / "a.pdf").write_bytes(writers.write_pdf(REPORT, info={"Classification": "Restricted"}))
    docs, errors = one(tmp_path)
    assert not errors and docs[0].sensitivity == "RESTRICTED"


def test_folder_defaults_apply_nearest_first_and_fail_closed(tmp_path):
    (tmp_path / "_library.toml").write_text('[defaults]\nsensitivity = "PUBLIC"\nentity = "NORTHWIND"\n')
    (tmp_path / "hr").mkdir()
    (tmp_path / "hr" / "_library.toml").write_text('[defaults]\nsensitivity = "RESTRICTED"\n')
    (tmp_path / "web.html").write_bytes(writers.write_html(REPORT))
    (tmp_path / "hr" / "staff.html").write_bytes(writers.write_html(REPORT))
    docs, errors = one(tmp_path)
    assert not errors
    assert load_documents(tmp_path).config.chunker == "paragraph"  # [defaults] is not a build setting
    got = {d.doc_id: (d.sensitivity, d.entity) for d in docs}
    assert got == {"web": ("PUBLIC", "NORTHWIND"), "hr-staff": ("RESTRICTED", "NORTHWIND")}
    (tmp_path / "hr" / "_library.toml").write_text('[defaults]\nsensitivity = "top secret"\n')
    docs, errors = one(tmp_path)
    assert [d.doc_id for d in docs] == ["web"]
    assert [e.path for e in errors] == ["hr/_library.toml"] and errors[0].field == "sensitivity"


def test_no_classification_gets_internal_never_public(tmp_path):
    (tmp_path / "a.csv").write_text("a,b\n1,2\n")
    docs, errors = one(tmp_path)
    assert not errors and docs[0].sensitivity == "INTERNAL"


def test_an_orphan_sidecar_is_an_error(tmp_path):
    (tmp_path / "gone.pdf.meta.toml").write_text('sensitivity = "RESTRICTED"\n')
    (tmp_path / "a.md").write_text("text\n")
    docs, errors = one(tmp_path)
    assert [d.doc_id for d in docs] == ["a"] and [e.path for e in errors] == ["gone.pdf.meta.toml"]


# --------------------------------------------------------------------------- incremental


def test_a_converted_file_is_rechunked_only_when_its_text_changes(tmp_path):
    raw = tmp_path / "raw"
    write_library(raw)
    store = tmp_path / "chunks.sqlite"
    first = update_chunk_store(load_documents(raw), store)
    assert len(first.added) == 6
    (raw / "northwind-deck.pptx").write_bytes((raw / "northwind-deck.pptx").read_bytes())  # touched, same bytes
    second = update_chunk_store(load_documents(raw), store)
    assert second.unchanged == 6 and not second.changed
    (raw / "ports.csv").write_text("port,teu\nRotterdam,15000\n")
    third = update_chunk_store(load_documents(raw), store)
    assert third.changed == ("ports",) and third.unchanged == 5


def test_converter_versions_are_part_of_the_code_versions():
    from ragspine_index.converters import CONVERTER_VERSIONS

    for step in ("documents", "chunks"):
        assert all(f"{name}@{v}" in CODE_VERSIONS[step] for name, v in CONVERTER_VERSIONS.items())
    pytest.importorskip("dagster")
    from ragspine_assets.assets import chunks, documents

    # what Dagster compares to show an asset unsynced: a converter version change changes both
    assert "pdf@7" in next(iter(documents.code_versions_by_key.values()))
    assert "pdf@7" in next(iter(chunks.code_versions_by_key.values()))


def test_a_failing_converted_file_withdraws_its_previous_chunks(tmp_path):
    raw = tmp_path / "raw"
    write_library(raw)
    store = tmp_path / "chunks.sqlite"
    update_chunk_store(load_documents(raw), store)
    data = (raw / "northwind-deck.pptx").read_bytes()
    (raw / "northwind-deck.pptx").write_bytes(data[: len(data) // 2])
    docs = load_documents(raw)
    assert "northwind-deck.pptx" in docs.withdraw_paths
    update = update_chunk_store(docs, store)
    assert update.withdrawn_on_error == ("northwind-deck",)
    # a file that merely fails to convert does not put its sensitivity in doubt: the serving
    # snapshot keeps serving the library until the run publishes without it
    assert docs.doubt_paths == () and update.in_doubt == ()


def test_a_conversion_past_the_hard_limit_is_stopped_and_the_next_file_converts():
    # one page of 400,000 text operations: seconds of work inside one pypdf call, which
    # the per-page time check cannot interrupt; the child process is killed instead
    slow = ConverterProcess(ConversionLimits(hard_seconds=0.5))
    with pytest.raises(ConversionError, match="did not finish within 0.5 s") as info:
        slow.convert(slow_pdf(400_000), ".pdf")
    assert info.value.field == "limits" and slow._proc is None  # the child is gone
    fresh = ConverterProcess(ConversionLimits())
    try:
        assert "Northwind revenue" in " ".join(fresh.convert(writers.write_pdf(REPORT), ".pdf").text.split())
        with pytest.raises(ConversionError, match="encrypted"):  # errors come back as errors
            from tests.formats.library import encrypted_pdf

            fresh.convert(encrypted_pdf(), ".pdf")
    finally:
        fresh.close()


def test_a_converter_child_that_runs_out_of_memory_is_one_error():
    # 16 MiB of address space is less than the interpreter already maps: the child fails at
    # its first import (64 MiB stopped being enough to fail once the build side stopped
    # importing the whole query library)
    process = ConverterProcess(ConversionLimits(memory_bytes=16 * 1024 * 1024, hard_seconds=60))
    try:
        with pytest.raises(ConversionError) as info:
            process.convert(writers.write_pdf(REPORT), ".pdf")
        assert info.value.field == "limits"
        # the message goes into the manifest (and so the snapshot id): nothing in it may depend
        # on timing, such as an exit code read before or after the child is reaped
        again = ConverterProcess(ConversionLimits(memory_bytes=16 * 1024 * 1024, hard_seconds=60))
        try:
            with pytest.raises(ConversionError) as second:
                again.convert(writers.write_pdf(REPORT), ".pdf")
        finally:
            again.close()
        assert str(second.value) == str(info.value) and "exit code" not in str(info.value)
    finally:
        process.close()


def test_the_ingest_summary_prints_the_install_command_for_skipped_formats():
    pytest.importorskip("dagster")
    from ragspine_assets.ingest import IngestSummary

    note = "PDF files are skipped: reading them needs the 'formats' extra (pip install 'ragspine[formats]')"
    summary = IngestSummary("lib", "run", "snap", "/tmp/snap", True, {}, notes=(note,))
    assert note in summary.describe()


def test_fragment_for_spans_that_run_over_regions(tmp_path):
    from ragspine_index.converters.regions import fragment_for, region_fragment

    pages = ((0, 10, "page=1"), (12, 20, "page=2"), (22, 30, "page=3"))
    assert fragment_for(pages, 2, 8) == "page=1"
    assert fragment_for(pages, 5, 15) == "page=1&end_page=2"
    assert fragment_for(pages, 11, 12) == ""  # the blank line between two pages
    sheet = region_fragment("sheet", "Q3 & Q4")
    rows = ((0, 5, f"{sheet}&cells=A1:C1"), (6, 11, f"{sheet}&cells=A2:C2"), (12, 17, "sheet=Other&cells=A1:B1"))
    assert fragment_for(rows, 1, 16) == "sheet=Q3%20%26%20Q4&cells=A1:C2"  # the first sheet's rows only
    assert fragment_for(((0, 9, "anchor=intro"), (10, 20, "anchor=outlook")), 3, 15) == "anchor=intro"
    (tmp_path / "q.csv").write_text("a,b\n1,2\n")
    chunk = build_chunks(parse_library(tmp_path).documents[0], make_chunker("paragraph"))[0]
    assert chunk.location == {"cells": "A1:B2"} and chunk.locator == "q.csv#cells=A1:B2&chars=0-29"
