"""The real-document set's last failures (issue 38), each reduced to a small file written here:
a PDF whose only text repeats on every page (py-pdf's ``habibi-rotated.pdf``), an XMP packet
whose ``<?xpacket begin=...?>`` byte-order mark is damaged (pdfminer's ``AcroForm_TEST.pdf``),
and an XMP packet with a bare ``<!DOCTYPE>``: all published, their markings still read; an XMP
packet that declares an entity or is not XML stays one located error (fail closed)."""

from __future__ import annotations

import importlib.util
import io
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_index.source_documents.parse_library import parse_library  # noqa: E402
from tests.formats import marked  # noqa: E402


def _parse(root: Path, files: dict[str, bytes]):
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    result = parse_library(root)
    return {d.doc_id: d for d in result.documents}, result.errors


def _same_page(pages: int, line: str, rotate: int = 0) -> bytes:
    import pypdf
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out)
    for _ in range(pages):
        pdf.setFont("Helvetica", 12)
        pdf.drawString(72, 700, line)
        pdf.showPage()
    pdf.save()
    if not rotate:
        return out.getvalue()
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(out.getvalue()))
    for page in writer.pages:
        page.rotate(rotate)
    rotated = io.BytesIO()
    writer.write(rotated)
    return rotated.getvalue()


def test_a_pdf_whose_only_text_repeats_on_every_page_is_published(tmp_path):
    """Running-line removal took the one line of each page as a header and left nothing."""
    docs, errors = _parse(tmp_path / "lib", {"habibi.pdf": _same_page(4, "habibi beloved greeting", rotate=90)})
    assert not errors, [str(e) for e in errors]
    assert docs["habibi"].body.count("habibi beloved greeting") == 4


def test_running_lines_are_kept_only_when_they_are_all_the_text():
    from ragspine_index.converters.pdf import strip_running_lines

    same = ["Quarterly note", "Quarterly note", "Quarterly note"]
    assert strip_running_lines(same) == (same, ())
    pages = ["Quarterly note\nbody one", "Quarterly note\nbody two", "Quarterly note"]
    assert strip_running_lines(pages) == (["body one", "body two", ""], ("Quarterly note",))


def _xmp_raw(raw: bytes) -> bytes:
    def edit(writer) -> None:
        marked._xmp('<rdf:Description rdf:about=""/>')(writer)
        writer._root_object["/Metadata"].get_object().set_data(raw)
    return marked._pdf_edit(edit)


_DESCRIPTION = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
                b'<rdf:Description rdf:about="" xmlns:pdfx="http://ns.adobe.com/pdfx/1.3/" '
                b'xmlns:dc="http://purl.org/dc/elements/1.1/"><pdfx:Classification>%s</pdfx:Classification>'
                b'<dc:creator><rdf:Bag><rdf:li>LUCIFER</rdf:li></rdf:Bag></dc:creator>'
                b'</rdf:Description></rdf:RDF></x:xmpmeta>')
#: The wrapper of AcroForm_TEST.pdf: the BOM's last byte written as "?" (not UTF-8).
_BAD_BOM = b'<?xpacket begin="\xef\xbb?" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'


def test_an_xmp_packet_with_a_damaged_xpacket_bom_is_read_and_its_marking_checked(tmp_path):
    files = {"plain.pdf": _xmp_raw(_BAD_BOM + _DESCRIPTION % b"Public" + b'\n<?xpacket end="w"?>'),
             "marked.pdf": _xmp_raw(_BAD_BOM + _DESCRIPTION % b"Restricted" + b'\n<?xpacket end="w"?>')}
    docs, errors = _parse(tmp_path / "lib", files)
    assert not errors, [str(e) for e in errors]
    assert docs["plain"].sensitivity == "PUBLIC" and docs["marked"].sensitivity == "RESTRICTED"


def test_an_xmp_packet_with_a_doctype_is_read_its_dtd_never_fetched_and_its_marking_checked(tmp_path):
    """A bare DOCTYPE, and one naming an external DTD on a loopback server that counts requests."""
    import http.server
    import threading

    asked: list[str] = []

    class Counting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'<!ENTITY c "Public">')

        def log_message(self, *args) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Counting)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/xmp.dtd".encode()
        files = {"bare.pdf": _xmp_raw(b"<!DOCTYPE x:xmpmeta>" + _DESCRIPTION % b"Restricted"),
                 "system.pdf": _xmp_raw(b'<!DOCTYPE x:xmpmeta SYSTEM "' + url + b'">' + _DESCRIPTION % b"Restricted")}
        docs, errors = _parse(tmp_path / "lib", files)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert not errors, [str(e) for e in errors]
    assert docs["bare"].sensitivity == "RESTRICTED" and docs["system"].sensitivity == "RESTRICTED"
    assert asked == []


@pytest.mark.parametrize(("raw", "says"), [
    (b'<!DOCTYPE x [<!ENTITY c "Confidential">]>' + _DESCRIPTION % b"&c;", "declares an entity"),
    (b'<!DOCTYPE x [<!ENTITY c SYSTEM "file:///etc/hostname">]>' + _DESCRIPTION % b"&c;", "declares an entity"),
    ((_DESCRIPTION % b"Confidential")[:-20], "not well-formed"),
    (b'<!DOCTYPE x SYSTEM "x.dtd">' + _DESCRIPTION % b"&c;", "not well-formed"),  # undefined: never looked up
], ids=["entity", "external-entity", "truncated", "undefined-entity"])
def test_an_xmp_packet_the_safe_parser_refuses_fails_closed_saying_why(tmp_path, raw, says):
    docs, errors = _parse(tmp_path / "lib", {"x.pdf": _xmp_raw(raw)})
    assert not docs and len(errors) == 1 and errors[0].field == "sensitivity"
    assert "XMP metadata" in str(errors[0]) and says in str(errors[0]), str(errors[0])
    assert "Confidential" not in str(errors[0])


def _looping_xobjects(text: bytes, *, info: bytes = b"", xmp: bytes = b"") -> bytes:
    """Two Form XObjects that draw each other, no xref table (pdfminer's
    issue-1113-evil-xobjects.pdf, with our own text): pypdf refuses the file, pdfminer.six
    reads no text, PDFium reads it."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 500 300] /Contents 4 0 R "
        b"/Resources << /XObject << /X1 5 0 R >> >> >>",
        b"<< /Length 24 >>\nstream\n1 0 0 1 25 25 cm /X1 Do\nendstream",
        b"<< /Subtype /Form /BBox [0 0 1000 1000] /Resources << /Font << /F1 7 0 R >> /XObject << /X0 6 0 R >> >> "
        b"/Length %d >>\nstream\n" % (len(text) + 50) + b"BT /F1 12 Tf (" + text + b") Tj ET\n0.5 0 0 0.5 25 25 cm /X0 Do\n"
        b"endstream",
        b"<< /Subtype /Form /BBox [0 0 1000 1000] /Resources << /Font << /F1 7 0 R >> /XObject << /X1 5 0 R >> >> "
        b"/Length %d >>\nstream\n" % (len(text) + 50) + b"BT /F1 12 Tf (" + text + b") Tj ET\n0.5 0 0 0.5 25 25 cm /X1 Do\n"
        b"endstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    trailer = b""
    if info:
        objects.append(info)
        trailer = b" /Info %d 0 R" % len(objects)
    if xmp:
        objects.append(b"<< /Type /Metadata /Subtype /XML /Length %d >>\nstream\n" % len(xmp) + xmp + b"\nendstream")
        objects[0] = b"<< /Type /Catalog /Pages 2 0 R /Metadata %d 0 R >>" % len(objects)
    out = b"%PDF-1.4\n" + b"".join(b"%d 0 obj\n" % n + body + b"\nendobj\n" for n, body in enumerate(objects, 1))
    return out + b"trailer\n<< /Size %d /Root 1 0 R%s >>\n%%%%EOF\n" % (len(objects) + 1, trailer)


def test_a_pdf_pypdf_cannot_open_has_the_text_of_its_form_xobjects_read_by_pdfminer(tmp_path):
    """pdfminer.six was asked for the page's top-level text boxes only: text drawn through a
    Form XObject (inside an ``LTFigure``) was lost, so the file read as empty."""
    import pypdf

    data = _looping_xobjects(b"Gdansk crane tender")
    with pytest.raises(pypdf.errors.PdfReadError):
        pypdf.PdfReader(io.BytesIO(data), strict=False)
    docs, errors = _parse(tmp_path / "lib", {"loop.pdf": data})
    assert not errors, [str(e) for e in errors]
    assert "Gdansk crane tender" in docs["loop"].body
    assert "pdfminer.six" in dict(docs["loop"].extra)["converter"]


def test_pdfium_reads_a_pdf_when_pdfminer_cannot(monkeypatch):
    """The third engine: pdfminer.six made to fail on a file pypdf cannot open either."""
    pytest.importorskip("pypdfium2", reason="PDFium comes with pdfplumber (the 'formats' extra)")
    from ragspine_index.converters import ConversionError, ConversionLimits, convert_bytes
    from ragspine_index.converters import pdf

    def fails(*args, **kwargs):
        raise ConversionError("cannot be read as a PDF by pdfminer.six either (PSSyntaxError)", "")

    monkeypatch.setattr(pdf, "_pdfminer_pages", fails)
    converted = convert_bytes(_looping_xobjects(b"Gdansk crane tender"), ".pdf", ConversionLimits())
    assert "Gdansk crane tender" in converted.text and converted.regions[0][2] == "page=1"
    assert "(PDFium): every page (pypdf could not read it: PdfReadError; pdfminer.six: " in converted.engine_note


def test_a_pdf_no_engine_reads_stays_one_located_error(tmp_path):
    data = b"%PDF-1.4\n" + bytes(range(256)) * 8
    docs, errors = _parse(tmp_path / "lib", {"noise.pdf": data})
    assert not docs and len(errors) == 1 and "noise.pdf" in str(errors[0]) and "damaged" in str(errors[0])


needs_ocr = pytest.mark.skipif(shutil.which("tesseract") is None or importlib.util.find_spec("pypdfium2") is None,
                               reason="needs tesseract (apt-get install tesseract-ocr) and pypdfium2 (pdfplumber)")


def _drawing(pages: int = 1, *, words: str = "") -> bytes:
    """Pages of shapes only (a chart without labels); ``words``: also drawn as big letters."""
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=(300, 300))
    for _ in range(pages):
        pdf.setFillColorRGB(0.3, 0.5, 0.9)
        pdf.rect(40, 40, 80, 160, fill=1)
        pdf.circle(200, 120, 50, fill=1)
        pdf.line(20, 20, 280, 20)
        if words:
            pdf.setFont("Helvetica", 28)
            pdf.drawString(30, 240, words)
        pdf.showPage()
    pdf.save()
    return out.getvalue()


@needs_ocr
def test_a_pdf_of_pictures_without_text_is_nothing_to_publish_with_ocrs_evidence(tmp_path):
    from ragspine_index.converters.pdf import NO_TEXT

    docs, errors = _parse(tmp_path / "lib", {"chart.pdf": _drawing(2)})
    assert not docs and len(errors) == 1 and errors[0].field == "body", [str(e) for e in errors]
    problem = str(errors[0])
    assert NO_TEXT in problem and "none of its 2 page(s) has a text layer" in problem
    assert "rendered at 300 dpi read no character (Tesseract's layout analysis found " in problem


@needs_ocr
def test_a_damaged_content_stream_is_an_ocr_failure_not_a_picture_without_text(tmp_path):
    """A page whose content stream does not decode renders blank: OCR's empty reading of it
    is no evidence, so the file stays an OCR error that says the stream is damaged."""
    import pypdf
    from pypdf.generic import NameObject, StreamObject

    from ragspine_index.converters.pdf import NO_TEXT

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(_drawing(1, words="Harbour cranes sold")))
    stream = StreamObject()
    stream._data = b"x\x9c" + bytes(range(200, 256)) * 20  # a zlib header, then no deflate stream
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    writer.pages[0][NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    docs, errors = _parse(tmp_path / "lib", {"damaged.pdf": out.getvalue()})
    assert not docs and len(errors) == 1 and errors[0].field == "ocr", [str(e) for e in errors]
    assert NO_TEXT not in str(errors[0]) and "content stream does not decode" in str(errors[0])


def _outlined(words: str) -> bytes:
    """A page with ``words`` drawn as filled glyph outlines (text converted to curves, as
    design tools export it): no text operator, no image."""
    from fontTools.pens.basePen import BasePen
    from fontTools.pens.transformPen import TransformPen
    from fontTools.ttLib import TTFont
    from reportlab.pdfgen import canvas

    font = TTFont(str(Path(__import__("reportlab").__file__).parent / "fonts" / "Vera.ttf"))
    glyphs, cmap = font.getGlyphSet(), font.getBestCmap()
    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=(600, 200))
    path = pdf.beginPath()

    class Pen(BasePen):
        def _moveTo(self, pt) -> None:  # noqa: N802 - fontTools' names
            path.moveTo(*pt)

        def _lineTo(self, pt) -> None:  # noqa: N802
            path.lineTo(*pt)

        def _curveToOne(self, pt1, pt2, pt3) -> None:  # noqa: N802
            path.curveTo(*pt1, *pt2, *pt3)

        def _closePath(self) -> None:  # noqa: N802
            path.close()

    x, scale = 30.0, 36 / font["head"].unitsPerEm
    for ch in words:
        glyph = glyphs[cmap[ord(ch)]]
        glyph.draw(TransformPen(Pen(glyphs), (scale, 0, 0, scale, x, 90)))
        x += glyph.width * scale
    pdf.drawPath(path, fill=1, stroke=0)
    pdf.showPage()
    pdf.save()
    return out.getvalue()


@needs_ocr
def test_ocr_reads_the_rendered_page_when_the_pdf_has_no_text_layer_and_no_image():
    """Text converted to curves has no text layer and no image to OCR: the page rendered by
    PDFium is read (before, such a page was 'OCR read none')."""
    pytest.importorskip("fontTools", reason="drawing glyph outlines needs fontTools")
    import pypdf

    from ragspine_index.converters import ConversionLimits, convert_bytes

    data = _outlined("Gdansk harbour tender")
    page = pypdf.PdfReader(io.BytesIO(data)).pages[0]
    assert not page.extract_text().strip() and not page.images
    converted = convert_bytes(data, ".pdf", ConversionLimits())
    assert "gdansk harbour tender" in converted.text.casefold(), converted.text
    assert converted.engine_note.startswith("OCR by tesseract") and converted.regions[0][2] == "page=1"


@needs_ocr
def test_tesseracts_layout_reading_counts_regions_lines_and_words():
    from PIL import Image, ImageDraw, ImageFont

    from ragspine_index.converters.converted import Deadline
    from ragspine_index.converters.ocr import Reading, read_layout

    font = ImageFont.truetype(str(Path(__import__("reportlab").__file__).parent / "fonts" / "Vera.ttf"), 40)
    image = Image.new("L", (900, 300), 255)
    draw = ImageDraw.Draw(image)
    draw.text((20, 40), "Gdansk harbour tender", font=font, fill=0)
    draw.text((20, 160), "Rotterdam signed it", font=font, fill=0)
    png = io.BytesIO()
    image.save(png, "PNG")
    reading = read_layout(png.getvalue(), Deadline(60), "the test image")
    assert reading.regions >= 1 and reading.lines == 2 and reading.words == 6, reading
    assert reading.text.casefold().split("\n")[0] == "gdansk harbour tender", reading
    blank = io.BytesIO()
    Image.new("L", (400, 400), 255).save(blank, "PNG")
    assert read_layout(blank.getvalue(), Deadline(60), "a blank image") == Reading("", 0, 0, 0)


def _ledger_with_damaged_sst(*, cells_use_it: bool) -> bytes:
    """The test ledger's Workbook stream with its shared-string table declaring 60,000 strings
    it does not hold (what POI's 57456.xls does); unless ``cells_use_it``, every string cell
    (LABELSST) turned into a number cell (RK 7, the same size: sheet offsets stay right)."""
    pytest.importorskip("xlrd", reason="the 'formats' extra")
    import struct

    import olefile

    from tests.formats.cfb import write_cfb

    legacy = Path(__file__).parents[1] / "formats" / "legacy"
    with olefile.OleFileIO(str(legacy / "ledger.xls")) as ole:
        stream = bytearray(ole.openstream("Workbook").read())
    at = 0
    while at + 4 <= len(stream):
        kind, size = struct.unpack_from("<HH", stream, at)
        if kind == 0x00FC:
            struct.pack_into("<II", stream, at + 4, 60_000, 60_000)
        elif kind == 0x00FD and not cells_use_it:
            struct.pack_into("<HHHHHI", stream, at, 0x027E, 10, *struct.unpack_from("<HHH", stream, at + 4), 7 << 2 | 2)
        at += 4 + size
    return write_cfb({"Workbook": bytes(stream)})


def test_an_xls_whose_damaged_shared_strings_no_cell_uses_is_read_without_them():
    import xlrd

    from ragspine_index.converters import ConversionLimits, convert_bytes

    data = _ledger_with_damaged_sst(cells_use_it=False)
    with pytest.raises(Exception) as raised:  # noqa: PT011 - xlrd's own failure on the damaged table
        import olefile

        with olefile.OleFileIO(data) as ole:
            xlrd.open_workbook(file_contents=ole.openstream("Workbook").read(), ignore_workbook_corruption=True)
    assert not isinstance(raised.value, xlrd.XLRDError)
    converted = convert_bytes(data, ".xls", ConversionLimits())
    assert "| 7 |" in converted.text and converted.regions[0][2].startswith("sheet=")
    assert converted.engine_note == "its shared-string table is damaged and no cell refers to it: left out"


def test_an_xls_whose_cells_use_a_damaged_shared_string_table_stays_a_located_error(tmp_path):
    docs, errors = _parse(tmp_path / "lib", {"ledger.xls": _ledger_with_damaged_sst(cells_use_it=True)})
    assert not docs and len(errors) == 1 and "ledger.xls" in str(errors[0])
    assert "a damaged record" in str(errors[0])


def test_an_xlsx_xml_bomb_is_refused_as_one_and_never_expanded(tmp_path):
    """POI's poc-xmlbomb.xlsx: a billion-laughs entity in a part openpyxl reads (here the sheet)."""
    pytest.importorskip("openpyxl", reason="the 'formats' extra")
    from ragspine_index.converters import writers

    laughs = (b'<!DOCTYPE s [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
              b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>')

    def bomb(xml: bytes) -> bytes:
        assert b"<t>Cranes</t>" in xml and not xml.startswith(b"<?xml")
        return laughs + xml.replace(b"<t>Cranes</t>", b"<t>&c;</t>", 1)

    data = marked.patch_zip(writers.write_xlsx({"Tender": [["Item", "Amount"], ["Cranes", 6]]}),
                            {"xl/worksheets/sheet1.xml": bomb})
    docs, errors = _parse(tmp_path / "lib", {"bomb.xlsx": data})
    assert not docs and len(errors) == 1
    assert "declares XML entities in a part (EntitiesForbidden" in str(errors[0]) and "lol" not in str(errors[0])


def test_a_ppt_whose_document_stream_entry_is_marked_a_storage_is_read_as_the_stream(tmp_path):
    """POI's fuzzed deck: the 'PowerPoint Document' directory entry's type byte says storage
    (1), its sectors and size are the stream's; read as the stream, the deck converts as the
    intact one does, its notes still read for a marking."""
    pytest.importorskip("olefile", reason="the 'formats' extra")
    from ragspine_index.converters import ConversionLimits, convert_bytes

    intact = (Path(__file__).parents[1] / "formats" / "legacy" / "deck.ppt").read_bytes()
    damaged = bytearray(intact)
    at = damaged.find("PowerPoint Document".encode("utf-16-le"))
    assert at > 0 and at % 128 == 0 and damaged[at + 66] == 2  # the directory entry, its type: a stream
    damaged[at + 66] = 1
    good = convert_bytes(intact, ".ppt", ConversionLimits())
    got = convert_bytes(bytes(damaged), ".ppt", ConversionLimits())
    assert got.text == good.text and got.regions == good.regions and got.marking_lines == good.marking_lines
    assert got.engine_note == "its PowerPoint Document directory entry is marked a storage (damaged): read as the " \
                              "stream it holds"
    damaged[at + 66] = 5  # a second root: not a stream entry mislabelled, stays an error
    docs, errors = _parse(tmp_path / "lib", {"deck.ppt": bytes(damaged)})
    assert not docs and len(errors) == 1 and "deck.ppt" in str(errors[0])


@needs_ocr
@pytest.mark.parametrize("angle", [90, 180])
def test_a_page_scanned_sideways_or_upside_down_is_turned_before_ocr(tmp_path, angle):
    """With Tesseract's osd data (a dependency of Debian's tesseract-ocr) pages are read with
    orientation detection (--psm 1); --psm 3 read these as 'Aepo} Pes{UOD…'."""
    from PIL import Image, ImageDraw, ImageFont

    from ragspine_index.converters.ocr import orientation_detection

    if not orientation_detection():
        pytest.skip("Tesseract's osd data is not installed (apt-get install tesseract-ocr-osd)")
    font = ImageFont.truetype(str(Path(__import__("reportlab").__file__).parent / "fonts" / "Vera.ttf"), 36)
    image = Image.new("L", (1400, 560), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(["The harbour crane tender was signed in Gdansk.",
                              "Rotterdam doubled its storage capacity this year.",
                              "Baltic freight volumes fell again in the spring."]):
        draw.text((40, 60 + i * 140), line, font=font, fill=0)
    png = io.BytesIO()
    image.rotate(angle, expand=True).save(png, "PNG")
    docs, errors = _parse(tmp_path / "lib", {"scan.png": png.getvalue()})
    assert not errors, [str(e) for e in errors]
    body = docs["scan"].body.casefold()
    assert "harbour crane tender" in body and "rotterdam doubled" in body and "baltic freight" in body, body


def _with_notes(deck: bytes, notes: dict[int, str]) -> bytes:
    """``deck`` (a .ppt) with a Notes container (a NotesAtom naming the slide, a TextCharsAtom)
    appended to its PowerPoint Document stream for each ``{slide number: text}``."""
    import struct

    import olefile

    from ragspine_index.converters.legacy import _SLIDE_LIST, _SLIDE_PERSIST, _records
    from tests.formats.cfb import write_cfb

    with olefile.OleFileIO(deck) as ole:
        streams = {"/".join(p): ole.openstream(p).read() for p in ole.listdir()}
    stream = streams["PowerPoint Document"]
    ids: list[int] = []

    def walk(start: int, end: int, depth: int) -> None:
        for kind, instance, s, e, container in _records(stream, start, end, depth):
            if kind == _SLIDE_LIST and container and instance == 0:
                ids.extend(struct.unpack_from("<I", stream, s2 + 12)[0]
                           for k2, _, s2, _e2, _c in _records(stream, s, e, depth + 1) if k2 == _SLIDE_PERSIST)
            elif container:
                walk(s, e, depth + 1)

    walk(0, len(stream), 0)
    extra = b""
    for number, text in notes.items():
        atom = struct.pack("<HHI", 0x0001, 0x03F1, 8) + struct.pack("<IHH", ids[number - 1], 0, 0)
        chars = text.encode("utf-16-le")
        body = atom + struct.pack("<HHI", 0x0000, 0x0FA0, len(chars)) + chars
        extra += struct.pack("<HHI", 0x000F, 0x03F0, len(body)) + body
    streams["PowerPoint Document"] = stream + extra
    return write_cfb(streams)


def test_ppt_speaker_notes_are_indexed_under_their_slide(tmp_path):
    """As a .pptx slide's notes are (``Notes: …``); the notes master's placeholder text is not."""
    pytest.importorskip("olefile", reason="the 'formats' extra")
    from ragspine_index.converters import ConversionLimits, convert_bytes

    deck = (Path(__file__).parents[1] / "formats" / "legacy" / "deck.ppt").read_bytes()
    converted = convert_bytes(_with_notes(deck, {2: "Ask the harbour master about the second tug."}), ".ppt",
                              ConversionLimits())
    slides = converted.text.split("## Slide ")
    assert "Notes:" not in slides[1]
    assert slides[2].rstrip().endswith("300 metres.\n\nNotes: Ask the harbour master about the second tug.")
    start = converted.text.index("Notes: Ask")
    assert any(s <= start < e and f == "slide=2" for s, e, f in converted.regions)
    assert ("speaker notes", "Ask the harbour master about the second tug.") in converted.marking_lines


@needs_ocr
def test_ocr_reads_simplified_chinese_without_spaces_between_characters(tmp_path):
    """tests/formats/ocr/zh_scan.png (tests/formats/make_ocr_zh.py): Tesseract's chi_sim data
    reads it; the spaces it writes between Han characters (起 重 机) are not kept."""
    from ragspine_index.converters.ocr import engine, join_cjk
    from tests.formats.make_ocr_zh import LINES, OUT

    if "chi_sim" not in engine()[2]:  # type: ignore[index]
        pytest.skip("Tesseract's chi_sim data is not installed (apt-get install tesseract-ocr-chi-sim)")
    assert join_cjk("港口 起 重 机 the crane 。 A B") == "港口起重机 the crane 。 A B"
    docs, errors = _parse(tmp_path / "lib", {"scan.png": OUT.read_bytes()})
    assert not errors, [str(e) for e in errors]
    body = docs["scan"].body
    wanted = "".join(LINES)
    found = sum(1 for ch in set(wanted) if ch in body) / len(set(wanted))
    assert found >= 0.9 and "起重机" in body and "鹿特丹" in body, body
    assert not any(a.strip() == "" for a in body.split("\n")[0]), body  # no space left between characters


@pytest.mark.parametrize(("info", "xmp", "level"), [
    (b"<< /Title (Gdansk tender) /Classification (Restricted) >>", b"", "RESTRICTED"),
    (b"<< /Classification [ /Restricted ] >>", b"", "RESTRICTED"),
    (b"", _BAD_BOM + _DESCRIPTION % b"Restricted", "RESTRICTED"),
    (b"<< /Title (Gdansk tender) >>", _DESCRIPTION % b"Public", "PUBLIC"),
], ids=["info", "info-array", "xmp", "control"])
def test_the_metadata_of_a_pdf_pypdf_cannot_open_is_read_for_a_marking(tmp_path, info, xmp, level):
    """pdfminer.six reads the text of a file pypdf cannot open; its info dictionary and XMP
    packet are then read by pdfminer.six too (they were not read at all)."""
    docs, errors = _parse(tmp_path / "lib", {"loop.pdf": _looping_xobjects(b"Gdansk crane tender", info=info, xmp=xmp)})
    assert not errors, [str(e) for e in errors]
    assert docs["loop"].sensitivity == level and "pdfminer.six" in dict(docs["loop"].extra)["converter"]


def test_a_pdf_pypdf_cannot_open_whose_xmp_declares_an_entity_fails_closed(tmp_path):
    xmp = b'<!DOCTYPE x [<!ENTITY c "Confidential">]>' + _DESCRIPTION % b"&c;"
    docs, errors = _parse(tmp_path / "lib", {"loop.pdf": _looping_xobjects(b"Gdansk crane tender", xmp=xmp)})
    assert not docs and len(errors) == 1 and errors[0].field == "sensitivity" and "Confidential" not in str(errors[0])
