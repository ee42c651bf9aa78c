"""A small library of real PDF, DOCX, PPTX, XLSX, HTML and CSV files (and broken ones),
written by :mod:`ragspine_index.converters.writers`."""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import Path

from ragspine_index.converters import writers

#: A sentence that only the PDF's second page holds (the query test looks for it).
PAGE_TWO_FACT = "The Rotterdam warehouse automation contract was signed with Vandermolen Logistics in August."

REPORT = """# Northwind Quarterly Review

Northwind revenue for the quarter was EUR 212 million, up 3% year on year.

## Drivers

- Strong demand for harbour cranes in the Netherlands.
- Lower freight costs in the Baltic.

## Figures

| Region | Revenue | Growth |
|---|---|---|
| Benelux | 120 | 4% |
| Nordics | 92 | 2% |

## Outlook

The company expects a stable fourth quarter.
"""

FILLER = " ".join(["Northwind keeps investing in electric straddle carriers for its terminals."] * 40)


def pdf_markdown() -> str:
    """Two pages at least: the report, filler, then the page-two fact."""
    return REPORT + "\n\n" + "\n\n".join([FILLER] * 4) + "\n\n## Contracts\n\n" + PAGE_TWO_FACT + "\n"


def write_library(root: Path) -> dict[str, str]:
    """Write one file of each format under ``root``; returns doc_id → relative path."""
    (root / "reports").mkdir(parents=True, exist_ok=True)
    files = {
        "reports/northwind-q3.pdf": writers.write_pdf(pdf_markdown(), title="Northwind Q3 Review"),
        "reports/northwind-memo.docx": writers.write_docx(REPORT.replace("Quarterly Review", "Board Memo"),
                                                          title="Northwind Board Memo"),
        "northwind-deck.pptx": writers.write_pptx(
            [("Northwind strategy", ["Electric straddle carriers", "Baltic freight lanes"]),
             ("Harbour cranes", ["Demand up in the Netherlands"])], title="Northwind Deck"),
        "northwind-figures.xlsx": writers.write_xlsx(
            {"Revenue": [["Region", "Revenue"], ["Benelux", 120], ["Nordics", 92]],
             "Headcount": [["Site", "Staff"], ["Rotterdam", 410]]}, title="Northwind Figures"),
        "northwind-site.html": writers.write_html(REPORT.replace("Quarterly Review", "Web Page"),
                                                  title="Northwind Web Page"),
        "ports.csv": "port,teu\nRotterdam,14000\nGdansk,2100\n".encode(),
    }
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    (root / "reports" / "northwind-q3.pdf.meta.toml").write_text(
        'doc_id = "northwind-q3"\nentity = "NORTHWIND"\nperiod = "2024Q3"\nsensitivity = "PUBLIC"\n')
    return {"northwind-q3": "reports/northwind-q3.pdf", "reports-northwind-memo": "reports/northwind-memo.docx",
            "northwind-deck": "northwind-deck.pptx", "northwind-figures": "northwind-figures.xlsx",
            "northwind-site": "northwind-site.html", "ports": "ports.csv"}


def zip_bomb(member: str = "word/document.xml") -> bytes:
    """A small Office-looking package whose one part inflates to 60 MB of zeros."""
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open(member, "w", force_zip64=True) as handle:
            chunk = b"\0" * (1 << 20)
            for _ in range(60):
                handle.write(chunk)
    return out.getvalue()


def encrypted_pdf() -> bytes:
    import pypdf

    reader = pypdf.PdfReader(BytesIO(writers.write_pdf(REPORT)))
    writer = pypdf.PdfWriter(clone_from=reader)
    writer.encrypt(user_password="user-secret", owner_password="owner", algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def image_only_pdf() -> bytes:
    """A PDF whose page holds only a drawn rectangle (no text layer)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    out = BytesIO()
    page = canvas.Canvas(out, pagesize=A4, invariant=1)
    page.rect(100, 100, 300, 300, fill=1)
    page.showPage()
    page.save()
    return out.getvalue()


def _renders_and_reads() -> bool:
    import importlib.util

    from ragspine_index.converters import ocr

    return ocr.available() and importlib.util.find_spec("pypdfium2") is not None


def write_broken(root: Path) -> dict[str, str]:
    """One malformed file per format; returns relative path → a word its error names."""
    good_pdf = writers.write_pdf(REPORT)
    docx = writers.write_docx(REPORT)
    broken = {
        "broken/truncated.pdf": (good_pdf[: len(good_pdf) // 3], "PDF"),
        "broken/encrypted.pdf": (encrypted_pdf(), "encrypted"),
        # a drawn rectangle: with OCR (and PDFium to render it) a picture without text, else no text layer
        "broken/scanned.pdf": (image_only_pdf(), "pictures without text" if _renders_and_reads() else "no extractable text"),
        "broken/bomb.docx": (zip_bomb(), "zip bomb"),
        "broken/truncated.docx": (docx[: len(docx) // 2], "DOCX"),
        "broken/not-a-deck.pptx": (b"this is not a zip package", "PPTX"),
        "broken/bomb.xlsx": (zip_bomb("xl/workbook.xml"), "zip bomb"),
        "broken/latin1.html": ("<html><body><p>caf\xe9</p></body></html>".encode("latin-1"), "UTF-8"),
        "broken/binary.csv": (b"a,b\n\x00\x01\x02", "binary"),
    }
    (root / "broken").mkdir(parents=True, exist_ok=True)
    for rel, (data, _) in broken.items():
        (root / rel).write_bytes(data)
    return {rel: word for rel, (_, word) in broken.items()}


#: RESTRICTED converted files for the leak suite: doc_id → (relative path, its marker).
RESTRICTED_FORMATS = {
    "restricted-pdf-sidecar": ("restricted/merger-terms.pdf", "RESTRICTED-MARKER-FOXTROT"),
    "restricted-docx-property": ("restricted/layoff-plan.docx", "RESTRICTED-MARKER-GOLF"),
    "restricted-html-banner": ("restricted/price-list.html", "RESTRICTED-MARKER-HOTEL"),
}


def write_restricted_formats(root: Path) -> dict[str, str]:
    """A RESTRICTED PDF (marked by its sidecar), DOCX (by a document property) and HTML
    (by a first-page banner), each carrying its marker in the title and the body."""
    (root / "restricted").mkdir(parents=True, exist_ok=True)
    texts = {}
    for doc_id, (rel, marker) in RESTRICTED_FORMATS.items():
        texts[doc_id] = (f"# {marker} confidential terms\n\nThe {marker} deal values Zephyr Holdings at EUR 4.1 billion; "
                         f"the board approved the {marker} plan on 3 March.\n\n- {marker} first tranche\n- second tranche\n")
    pdf_rel, _ = RESTRICTED_FORMATS["restricted-pdf-sidecar"]
    (root / pdf_rel).write_bytes(writers.write_pdf(texts["restricted-pdf-sidecar"]))
    (root / (pdf_rel + ".meta.toml")).write_text('doc_id = "restricted-pdf-sidecar"\nsensitivity = "RESTRICTED"\n')
    docx_rel, _ = RESTRICTED_FORMATS["restricted-docx-property"]
    (root / docx_rel).write_bytes(writers.write_docx(texts["restricted-docx-property"].replace(" confidential", ""),
                                                     custom={"MSIP_Label_7f1d_Name": "Highly Confidential"}))
    (root / (docx_rel + ".meta.toml")).write_text('doc_id = "restricted-docx-property"\n')
    html_rel, _ = RESTRICTED_FORMATS["restricted-html-banner"]
    (root / html_rel).write_bytes(writers.write_html(texts["restricted-html-banner"].replace(" confidential", ""),
                                                     banner="RESTRICTED", title="RESTRICTED-MARKER-HOTEL list"))
    (root / (html_rel + ".meta.toml")).write_text('doc_id = "restricted-html-banner"\n')
    return {doc_id: marker for doc_id, (_, marker) in RESTRICTED_FORMATS.items()}


def slow_pdf(operators: int = 200_000) -> bytes:
    """A valid one-page PDF whose page holds ``operators`` text-show operations: slow to
    extract in one piece (the per-page time check cannot interrupt it)."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(x) Tj 1 0 Td " * operators + b"ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
