"""Write Markdown-shaped text as real PDF, DOCX, PPTX, XLSX and HTML files.

Used by ``scripts/make_sample_formats.py`` (the sample library's real files), the
conversion benchmark and the tests. Headings (``#``), ``- `` items, Markdown tables
and paragraphs are written with each format's own structure. PDF needs reportlab (the
``dev`` extra), DOCX/PPTX/XLSX the ``formats`` extra. Latin text only for PDF (the
standard Helvetica font).
"""

from __future__ import annotations

import html as _html
import re
import zipfile
from io import BytesIO
from typing import Any

_TABLE_SEP = re.compile(r"^\|?\s*:?-{3,}")


def blocks(markdown: str) -> list[tuple[str, Any]]:
    """``("heading", (level, text))``, ``("item", text)``, ``("table", rows)``, ``("para", text)``."""
    out: list[tuple[str, Any]] = []
    para: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if para:
            out.append(("para", " ".join(para)))
            para.clear()
        if table:
            out.append(("table", [row[:] for row in table]))
            table.clear()

    for raw in markdown.split("\n"):
        line = raw.strip()
        if line.startswith("|"):
            if para:
                out.append(("para", " ".join(para)))
                para.clear()
            if not _TABLE_SEP.match(line):
                table.append([c.strip() for c in line.strip("|").split("|")])
            continue
        if table:
            out.append(("table", [row[:] for row in table]))
            table.clear()
        if not line:
            flush()
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", line)
        if heading:
            flush()
            out.append(("heading", (len(heading.group(1)), heading.group(2).strip())))
        elif re.match(r"^([-*+]|\d+[.)])\s+", line):
            flush()
            out.append(("item", re.sub(r"^([-*+]|\d+[.)])\s+", "", line)))
        else:
            para.append(line)
    flush()
    return out


def _plain(text: str) -> str:
    return re.sub(r"\*\*|__|`", "", text)


def write_pdf(markdown: str, *, title: str = "", banner: str = "", info: dict[str, str] | None = None) -> bytes:
    """A text PDF (reportlab): ``banner`` first on page 1, ``info`` added to the info dictionary."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import ListFlowable, ListItem, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    story = []
    if banner:
        story += [Paragraph(_html.escape(banner), styles["Heading2"]), Spacer(1, 6)]
    for kind, value in blocks(markdown):
        if kind == "heading":
            level, text = value
            story.append(Paragraph(_html.escape(_plain(text)), styles[f"Heading{min(level, 4)}"]))
        elif kind == "item":
            story.append(ListFlowable([ListItem(Paragraph(_html.escape(_plain(value)), styles["BodyText"]))],
                                      bulletType="bullet"))
        elif kind == "table":
            table = Table([[Paragraph(_html.escape(_plain(c)), styles["BodyText"]) for c in row] for row in value])
            table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.25, colors.grey)]))
            story += [table, Spacer(1, 6)]
        else:
            story.append(Paragraph(_html.escape(_plain(value)), styles["BodyText"]))
    buffer = BytesIO()
    doc = SimpleDocTemplate(buffer, pagesize=A4, title=title, invariant=1)
    doc.build(story)
    data = buffer.getvalue()
    if info:
        import pypdf

        reader = pypdf.PdfReader(BytesIO(data))
        writer = pypdf.PdfWriter(clone_from=reader)
        writer.add_metadata({f"/{k}": v for k, v in info.items()})
        out = BytesIO()
        writer.write(out)
        data = out.getvalue()
    return data


def write_docx(markdown: str, *, title: str = "", banner: str = "", header: str = "",
               core: dict[str, str] | None = None, custom: dict[str, str] | None = None) -> bytes:
    """A DOCX (python-docx) with real heading/list styles and tables; ``header`` in the page
    header, ``core`` core properties, ``custom`` custom properties (docProps/custom.xml)."""
    import docx

    document = docx.Document()
    if banner:
        document.add_paragraph(banner)
    for kind, value in blocks(markdown):
        if kind == "heading":
            level, text = value
            document.add_heading(_plain(text), level=min(level, 9))
        elif kind == "item":
            document.add_paragraph(_plain(value), style="List Bullet")
        elif kind == "table":
            width = max(len(r) for r in value)
            table = document.add_table(rows=len(value), cols=width)
            for r, row in enumerate(value):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = _plain(cell)
        else:
            document.add_paragraph(_plain(value))
    if header:
        document.sections[0].header.paragraphs[0].text = header
    props = document.core_properties
    props.title = title
    for key, val in (core or {}).items():
        setattr(props, key, val)
    buffer = BytesIO()
    document.save(buffer)
    return _with_custom_properties(buffer.getvalue(), custom) if custom else buffer.getvalue()


def write_pptx(slides: list[tuple[str, list[str]]], *, title: str = "") -> bytes:
    """A PPTX (python-pptx): one title-and-content slide per ``(title, bullets)``."""
    import pptx

    presentation = pptx.Presentation()
    layout = presentation.slide_layouts[1]
    for slide_title, bullets in slides:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = slide_title
        body = slide.placeholders[1].text_frame
        for i, bullet in enumerate(bullets):
            paragraph = body.paragraphs[0] if i == 0 else body.add_paragraph()
            paragraph.text = bullet
    presentation.core_properties.title = title
    buffer = BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def write_xlsx(sheets: dict[str, list[list[object]]], *, title: str = "") -> bytes:
    """An XLSX (openpyxl): one sheet per name, rows from A1."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    workbook.properties.title = title
    buffer = BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def write_html(markdown: str, *, title: str = "", banner: str = "", meta: dict[str, str] | None = None) -> bytes:
    """An HTML page with headings (ids), lists, tables and ``<meta>`` properties."""
    parts = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">", f"<title>{_html.escape(title)}</title>"]
    for name, content in (meta or {}).items():
        parts.append(f'<meta name="{_html.escape(name)}" content="{_html.escape(content)}">')
    parts.append("<script>document.title = 'never run';</script></head><body>")
    if banner:
        parts.append(f"<p>{_html.escape(banner)}</p>")
    in_list = False
    for kind, value in blocks(markdown):
        if kind != "item" and in_list:
            parts.append("</ul>")
            in_list = False
        if kind == "heading":
            level, text = value
            parts.append(f"<h{level}>{_html.escape(_plain(text))}</h{level}>")
        elif kind == "item":
            if not in_list:
                parts.append("<ul>")
                in_list = True
            parts.append(f"<li>{_html.escape(_plain(value))}</li>")
        elif kind == "table":
            rows = "".join("<tr>" + "".join(f"<td>{_html.escape(_plain(c))}</td>" for c in row) + "</tr>" for row in value)
            parts.append(f"<table>{rows}</table>")
        else:
            parts.append(f"<p>{_html.escape(_plain(value))}</p>")
    if in_list:
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts).encode("utf-8")


_CUSTOM_NS = "http://schemas.openxmlformats.org/officeDocument/2006/custom-properties"
_VT_NS = "http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes"


def _with_custom_properties(data: bytes, custom: dict[str, str]) -> bytes:
    """Add ``docProps/custom.xml`` (string properties) to an Office package."""
    props = "".join(
        f'<property fmtid="{{D5CDD505-2E9C-101B-9397-08002B2CF9AE}}" pid="{i}" name="{_html.escape(k)}">'
        f"<vt:lpwstr>{_html.escape(v)}</vt:lpwstr></property>" for i, (k, v) in enumerate(custom.items(), start=2))
    xml = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Properties xmlns="{_CUSTOM_NS}" xmlns:vt="{_VT_NS}">{props}</Properties>'
    source = zipfile.ZipFile(BytesIO(data))
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename == "[Content_Types].xml":
                content = content.replace(b"</Types>", b'<Override PartName="/docProps/custom.xml" ContentType='
                                          b'"application/vnd.openxmlformats-officedocument.custom-properties+xml"/></Types>')
            elif item.filename == "_rels/.rels":
                content = content.replace(b"</Relationships>", b'<Relationship Id="rIdCustom1" Type="http://schemas.'
                                          b'openxmlformats.org/officeDocument/2006/relationships/custom-properties" '
                                          b'Target="docProps/custom.xml"/></Relationships>')
            target.writestr(item, content)
        target.writestr("docProps/custom.xml", xml)
    return out.getvalue()
