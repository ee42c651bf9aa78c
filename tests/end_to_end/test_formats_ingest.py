"""``ragspine ingest`` on a folder of PDF, DOCX, PPTX, XLSX, HTML and CSV files, broken
ones among them, then a query whose citation names a PDF page that holds the quoted
text when that page is extracted again (issue 25)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, python_env

pytestmark = pytest.mark.slow
pytest.importorskip("dagster", reason="ingest needs the 'pipeline' extra")
pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from tests.formats.library import PAGE_TWO_FACT, write_broken, write_library  # noqa: E402


def ragspine(*args, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "ragspine_tools.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout,
                          env=python_env(DAGSTER_HOME=str(cwd / "dagster_home")))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats_ingest")
    raw = root / "data" / "raw" / "northwind"
    ids = write_library(raw)
    broken = write_broken(raw)
    proc = ragspine("ingest", raw, "--embedding", "none", cwd=root)
    assert proc.returncode == 1, proc.stderr[-3000:]  # published; broken files listed (exit 1)
    return {"root": root, "raw": raw, "ids": ids, "broken": broken, "out": proc.stdout + proc.stderr,
            "art": root / "data" / "artifacts" / "northwind"}


def test_every_file_publishes_and_each_broken_one_is_one_located_error(ingested):
    manifest = json.loads((ingested["art"] / "current" / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(manifest["documents"]) == sorted(ingested["ids"])
    errors = manifest["errors"]
    for rel in ingested["broken"]:
        assert sum(1 for e in errors if e.startswith(rel + " ")) == 1, rel
        assert rel in ingested["out"]  # the ingest summary names every failed file
    assert len(errors) == len(ingested["broken"])


def test_a_query_cites_the_pdf_page_that_holds_the_quoted_text(ingested):
    proc = ragspine("query", ingested["art"], "Rotterdam warehouse automation contract Vandermolen", "--json",
                    "--top-k", "3", cwd=ingested["root"])
    assert proc.returncode == 0, proc.stderr
    top = json.loads(proc.stdout)[0]
    assert top["doc_id"] == "northwind-q3" and PAGE_TWO_FACT[:40] in " ".join(top["text"].split())
    page = top["page"]
    end_page = int(top["location"].get("end_page", page))
    assert top["locator"].startswith(f"reports/northwind-q3.pdf#page={page}")
    assert top["locator"].endswith(f"chars={top['span'][0]}-{top['span'][1]}")
    import pypdf

    reader = pypdf.PdfReader(ingested["raw"] / "reports" / "northwind-q3.pdf")
    pages = " ".join(" ".join((reader.pages[p - 1].extract_text() or "").split()) for p in range(page, end_page + 1))
    assert " ".join(top["text"].split()) in pages
    text = ragspine("query", ingested["art"], "Rotterdam warehouse automation contract", "--top-k", "1",
                    cwd=ingested["root"])
    assert f"northwind-q3.pdf#page={page}" in text.stdout


def test_slides_sheets_and_headings_are_cited(ingested):
    proc = ragspine("query", ingested["art"], "harbour cranes Netherlands Benelux revenue", "--json", "--top-k", "20",
                    cwd=ingested["root"])
    assert proc.returncode == 0, proc.stderr
    kinds = {s["doc_id"]: s.get("location", {}) for s in json.loads(proc.stdout)}
    assert "slide" in kinds.get("northwind-deck", {})
    assert kinds.get("northwind-figures", {}).get("sheet") in {"Revenue", "Headcount"}
    assert "anchor" in kinds.get("northwind-site", {}) and "anchor" in kinds.get("reports-northwind-memo", {})
