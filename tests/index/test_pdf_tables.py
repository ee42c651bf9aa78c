"""PDF tables as tables (issue 38): a ruled table is written as a Markdown table under its
header row, side-by-side tables are never interleaved, and the page citation stays."""

from __future__ import annotations

from io import BytesIO

import pytest

from ragspine_index.converters.converter_registry import convert_bytes
from tests.index.test_user_formats import chunk_with, ingest

pytest.importorskip("pdfplumber", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")


def _side_by_side() -> bytes:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

    def grid(rows):
        table = Table(rows)
        table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
        return table

    out = BytesIO()
    SimpleDocTemplate(out, pagesize=A4).build([
        Paragraph("Two tables side by side.", getSampleStyleSheet()["BodyText"]),
        Table([[grid([["Port", "Cranes"], ["Rotterdam", "41"], ["Gdansk", "17"]]),
                grid([["Month", "Ships"], ["March", "120"], ["April", "98"]])]])])
    return out.getvalue()


def test_side_by_side_ruled_tables_are_two_tables_not_interleaved_lines():
    converted = convert_bytes(_side_by_side(), ".pdf")
    assert converted.text == ("Two tables side by side.\n\n| Port | Cranes |\n|---|---|\n| Rotterdam | 41 |\n"
                              "| Gdansk | 17 |\n\n| Month | Ships |\n|---|---|\n| March | 120 |\n| April | 98 |")
    assert converted.engine_note.endswith("tables on page 1") and "pdfplumber" in converted.engine_note


def test_a_pdf_table_is_cited_by_page_with_its_rows_under_the_header(tmp_path):
    from ragspine_index.converters import writers

    rows = "\n".join(f"| Vessel {i} | {1000 + i} | Rotterdam |" for i in range(30))
    (tmp_path / "fleet.pdf").write_bytes(writers.write_pdf(
        "# Fleet\n\nThe harbour fleet grew this year.\n\n| Vessel | Tonnage | Port |\n|---|---|---|\n"
        f"{rows}\n\nAfter the table comes more text about pilots.\n"))
    result, docs, chunks = ingest(tmp_path, max_chars=400)
    assert not result.errors
    body = docs["fleet"].body
    assert "| Vessel | Tonnage | Port |\n|---|---|---|\n| Vessel 0 | 1000 | Rotterdam |" in body
    assert body.index("grew this year") < body.index("| Vessel 0 |") < body.index("more text about pilots")
    late = chunk_with(chunks["fleet"], "| Vessel 29 |")
    assert late.text.startswith("| Vessel | Tonnage | Port |")  # a later group repeats the header row
    assert late.location["page"] in ("1", "2")
