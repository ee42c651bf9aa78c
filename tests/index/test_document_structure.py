"""Structure (issue 38): a ruled PDF table is written as a Markdown table under its
header row, side-by-side tables are never interleaved, the page citation stays; a DOCX table
nested in a cell and a text box are indexed, once each."""

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


def _docx_with_nested_table_and_text_box() -> bytes:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Harbour report", level=1)
    outer = document.add_table(rows=2, cols=2)
    outer.cell(0, 0).text, outer.cell(0, 1).text, outer.cell(1, 0).text = "Site", "Cranes", "Rotterdam"
    inner = outer.cell(1, 1).add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Type", (0, 1): "Count", (1, 0): "Gantry", (1, 1): "12"}.items():
        inner.cell(r, c).text = text
    anchor = document.add_paragraph("The survey follows.")
    box = ('<w:p><w:r><w:t>Dredging starts in May.</w:t></w:r></w:p><w:p><w:r><w:t>Buoys are relit.</w:t></w:r></w:p>')
    # Word's shape: the DrawingML text box, and its VML copy for old readers in mc:Fallback
    anchor._p.append(parse_xml(
        '<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" xmlns:v="urn:schemas-microsoft-com:vml">'
        f'<mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent>{box}</w:txbxContent></w:drawing>'
        f'</mc:Choice><mc:Fallback><w:pict><v:rect><v:textbox><w:txbxContent>{box}</w:txbxContent></v:textbox>'
        '</v:rect></w:pict></mc:Fallback></mc:AlternateContent></w:r>'))
    out = BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_nested_tables_and_text_boxes_are_indexed_once(tmp_path):
    pytest.importorskip("docx", reason="the 'formats' extra")
    (tmp_path / "report.docx").write_bytes(_docx_with_nested_table_and_text_box())
    result, docs, chunks = ingest(tmp_path)
    assert not result.errors
    assert docs["report"].body == ("# Harbour report\n\n| Site | Cranes |\n|---|---|\n| Rotterdam |  |\n\n"
                                   "| Type | Count |\n|---|---|\n| Gantry | 12 |\n\nThe survey follows.\n\n"
                                   "Dredging starts in May.\nBuoys are relit.")
    assert chunk_with(chunks["report"], "Dredging").locator.startswith("report.docx#anchor=harbour-report")
