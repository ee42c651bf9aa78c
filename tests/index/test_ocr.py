"""OCR of scanned PDFs and image files (issue 38), on Debian's tesseract-ocr (installed by
.ci/run). The pages are rendered here from known text; recall is measured on words."""

from __future__ import annotations

import io
import os
import re
import shutil

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("PIL", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="the test font ships with reportlab (the 'dev' extra)")

from ragspine_index.chunking import build_chunks, make_chunker  # noqa: E402
from ragspine_index.converters import convert_bytes, ocr  # noqa: E402
from ragspine_index.source_documents.parse_library import parse_library

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="OCR needs tesseract (apt-get install tesseract-ocr tesseract-ocr-eng)")

PAGES = [
    ["The Rotterdam terminal handled fourteen thousand", "containers in March, and the new cranes cut",
     "waiting times by a third. Vandermolen Logistics", "signed the warehouse automation contract."],
    ["Second page: the Gdansk depot doubled its storage", "capacity, while freight costs in the Baltic fell",
     "for the fourth quarter in a row."],
]


def render(lines: list[str]):
    from PIL import Image, ImageDraw, ImageFont
    import reportlab

    font = ImageFont.truetype(os.path.join(os.path.dirname(reportlab.__file__), "fonts", "Vera.ttf"), 34)
    image = Image.new("L", (1700, 700), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((60, 60 + 76 * i), line, fill=0, font=font)
    return image


def png(lines: list[str]) -> bytes:
    out = io.BytesIO()
    render(lines).save(out, "PNG")
    return out.getvalue()


def scanned_pdf(pages: list[list[str]]) -> bytes:
    """An image-only PDF: each page one bitmap, no text layer (as a scanner writes it)."""
    images = [render(lines) for lines in pages]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=200, save_all=True, append_images=images[1:])
    return out.getvalue()


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def recall(expected: list[str], got: str) -> float:
    found = set(words(got))
    want = words(" ".join(expected))
    return sum(w in found for w in want) / len(want)


@needs_tesseract
def test_a_scanned_pdf_and_a_scanned_png_publish_with_page_citations(tmp_path):
    import pypdf

    pdf = scanned_pdf(PAGES)
    assert not "".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(pdf)).pages).strip()  # no text layer
    (tmp_path / "scan.pdf").write_bytes(pdf)
    (tmp_path / "photo.png").write_bytes(png(PAGES[0]))
    (tmp_path / "photo2.jpg").write_bytes(_jpeg(PAGES[1]))
    result = parse_library(tmp_path)
    assert not result.errors and not result.skipped
    docs = {d.doc_id: d for d in result.documents}
    assert set(docs) == {"scan", "photo", "photo2"}
    chunker = make_chunker("layout", max_chars=300, overlap_chars=0)
    scan_chunks = build_chunks(docs["scan"], chunker)
    for chunk in scan_chunks:
        assert docs["scan"].body[chunk.start:chunk.end] == chunk.text
        assert re.match(r"scan\.pdf#page=[12]&", chunk.locator), chunk.locator
    assert any("Gdansk" in c.text and "page=2" in c.locator for c in scan_chunks)
    page_text = {int(frag.split("=")[1]): docs["scan"].body[s:e] for s, e, frag in docs["scan"].regions}
    for number, lines in enumerate(PAGES, start=1):
        assert recall(lines, page_text[number]) >= 0.9, (number, page_text[number])
    assert recall(PAGES[0], docs["photo"].body) >= 0.9 and recall(PAGES[1], docs["photo2"].body) >= 0.9
    photo = build_chunks(docs["photo"], chunker)[0]
    assert photo.locator.startswith("photo.png#page=1&chars=")
    for doc in docs.values():  # the OCR'd chunks say so: the converter field is on every chunk row
        assert "OCR by tesseract" in dict(doc.extra)["converter"]
    assert dict(docs["scan"].extra)["converter"].endswith(": every page")


@needs_tesseract
def test_only_the_scanned_page_of_a_mixed_pdf_is_ocred():
    from pypdf import PdfReader, PdfWriter

    from ragspine_index.converters import writers

    text_page = PdfReader(io.BytesIO(writers.write_pdf("# Typed\n\nA typed page about harbour cranes.\n"))).pages[0]
    writer = PdfWriter()
    writer.add_page(text_page)
    writer.add_page(PdfReader(io.BytesIO(scanned_pdf([PAGES[1]]))).pages[0])
    out = io.BytesIO()
    writer.write(out)
    converted = convert_bytes(out.getvalue(), ".pdf")
    assert converted.text.startswith("Typed\nA typed page about harbour cranes.")
    second = next(r for r in converted.regions if r[2] == "page=2")
    assert recall(PAGES[1], converted.text[second[0]:second[1]]) >= 0.9
    assert converted.engine_note.endswith(": page 2") and "OCR by tesseract" in converted.engine_note


def test_without_the_engine_images_are_skipped_and_scans_say_ocr_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    ocr.engine.cache_clear()
    try:
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "photo.png").write_bytes(png(["Some text"]))
        (tmp_path / "lib" / "ok.md").write_text("# OK\n\ntext\n")
        result = parse_library(tmp_path / "lib")
        assert result.skipped == ("photo.png",) and [d.doc_id for d in result.documents] == ["ok"]
        assert any("IMAGE files are skipped: reading them needs OCR, the tesseract program (apt-get install "
                   "tesseract-ocr" in note for note in result.notes), result.notes
        from ragspine_index.converters import ConversionError

        with pytest.raises(ConversionError, match="OCR is not available") as info:  # in this process: no engine
            convert_bytes(scanned_pdf([PAGES[0]]), ".pdf")
        assert "apt-get install tesseract-ocr" in info.value.hint
    finally:
        ocr.engine.cache_clear()


def _jpeg(lines: list[str]) -> bytes:
    out = io.BytesIO()
    render(lines).save(out, "JPEG", quality=90)
    return out.getvalue()
