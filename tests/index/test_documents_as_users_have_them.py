"""Documents as users have them (issue 38): normalised index text, identity and signals,
encodings and encryption. Every file is generated here."""

from __future__ import annotations

import io
import os
import unicodedata
from pathlib import Path

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_core.lexical.bm25 import BM25Index  # noqa: E402
from ragspine_core.lexical.bm25_build import build_bm25_arrays  # noqa: E402
from ragspine_core.text.normalize import normalize_extracted, unnormalized_count  # noqa: E402
from ragspine_core.text.tokenize import tokenize  # noqa: E402
from ragspine_index.chunking import build_chunks, make_chunker  # noqa: E402
from ragspine_index.converters import convert_bytes, writers  # noqa: E402
from ragspine_index.source_documents.parse_library import parse_library


def ligature_pdf(lines_by_page: list[list[str]]) -> bytes:
    """A PDF in Bitstream Vera (shipped with reportlab), whose ``ﬁ``/``ﬂ`` glyphs extract as
    U+FB01/U+FB02, as in PDFs typeset with ligatures."""
    import reportlab
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("Vera", os.path.join(os.path.dirname(reportlab.__file__), "fonts", "Vera.ttf")))
    out = io.BytesIO()
    pdf = canvas.Canvas(out)
    for lines in lines_by_page:
        pdf.setFont("Vera", 12)
        for i, line in enumerate(lines):
            pdf.drawString(72, 720 - 16 * i, line)
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def chunks_of(root: Path):
    result = parse_library(root)
    chunker = make_chunker("layout", max_chars=400, overlap_chars=0)
    return result, [c for d in result.documents for c in build_chunks(d, chunker)]


# -- normalised index text -------------------------------------------------------------

def test_normalize_extracted_folds_ligatures_radicals_controls_and_joins_hyphens():
    raw = "e\ufb03cient \ufb02ow 分\u2f26式 di\x00cult ＡＢＣ１ 注：（一） effi-\nciency well-\nKnown soft\u00adhyphen\x0cnext"
    out = normalize_extracted(raw, join_hyphens=True)
    assert out == "efficient flow 分子式 dicult ABC1 注：（一） efficiency well-\nKnown softhyphen\nnext"
    assert unnormalized_count(out) == 0 and unnormalized_count(raw) == 10
    assert normalize_extracted(out, join_hyphens=True) == out  # idempotent
    assert normalize_extracted("effi-\nciency") == "effi-\nciency"  # joining is asked for (PDF, OCR)


def test_a_word_printed_only_with_a_ligature_in_a_pdf_is_found_by_search(tmp_path):
    (tmp_path / "lig.pdf").write_bytes(ligature_pdf([
        ["The re\ufb01nery ran at full capacity.", "Crude \ufb02ow was steady all quarter."],
        ["Page two talks about harbour cranes and straddle carriers only."]]))
    (tmp_path / "other.md").write_text("# Other\n\nA note about refineries in general and crude oil.\n")
    import pypdf

    raw = pypdf.PdfReader(tmp_path / "lig.pdf").pages[0].extract_text()
    assert "\ufb01" in raw and "refinery" not in raw  # the PDF's text layer holds only the ligature
    result, chunks = chunks_of(tmp_path)
    assert not result.errors
    index = BM25Index(build_bm25_arrays([tokenize(c.text) for c in chunks]))
    rows, _ = index.search(tokenize("refinery flow"), k=3)
    top = chunks[int(rows[0])]
    assert top.doc_id == "lig" and top.location["page"] == "1" and top.locator.startswith("lig.pdf#page=1")
    assert "refinery" in top.text and "flow" in top.text
    body = next(d for d in result.documents if d.doc_id == "lig").body
    assert body[top.start:top.end] == top.text  # the citation indexes the stored (normalised) text


def test_index_text_of_every_converted_format_has_no_ligature_or_control(tmp_path):
    odd = "The \ufb01rst e\ufb00ort: 分\u2f26式 bell\x07 ＡＢＣ"
    xml_odd = odd.replace("\x07", "")  # XML cannot hold a control character
    files = {
        "a.pdf": ligature_pdf([["The \ufb01rst \ufb02ow", "of a hyphen-", "ated word"]]),
        "b.docx": writers.write_docx(f"# Title\n\n{xml_odd}\n\n| k | v |\n|---|---|\n| {xml_odd} | x\uff5cy |\n"),
        "c.html": writers.write_html(f"# Title\n\n{odd}\n"),
        "d.csv": f"k,v\n{odd},1\n".encode(),
        "e.xlsx": writers.write_xlsx({"S": [["k", "v"], [xml_odd, 1]]}),
        "f.pptx": writers.write_pptx([("Slide", [xml_odd])]),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    result, chunks = chunks_of(tmp_path)
    assert not result.errors and len(result.documents) == len(files)
    for doc in result.documents:
        assert unnormalized_count(doc.body) == 0, doc.source_path
        assert "\ufb01" not in doc.body and not any(unicodedata.category(ch) == "Cc" and ch != "\n" for ch in doc.body)
    by_id = {d.doc_id: d.body for d in result.documents}
    assert "hyphenated word" in by_id["a"] and "The first flow" in by_id["a"]
    for doc_id in "bcdef":
        assert "The first effort: 分子式 bell ABC" in by_id[doc_id], doc_id
    assert "x\uff5cy" in by_id["b"]  # full-width punctuation is kept: the table stays one cell
    for chunk in chunks:
        assert unnormalized_count(chunk.text) == 0


def test_markdown_is_indexed_as_written():
    from ragspine_index.source_documents.text_files import parse_document

    doc = parse_document("# T\n\nThe \ufb01rst 注：（一）\n".encode(), "t.md", "lib")
    assert "\ufb01rst 注：（一）" in doc.body  # citations are offsets into the file itself


# -- identity and signals ----------------------------------------------------------------

def test_files_sharing_a_stem_get_distinct_doc_ids_and_each_cites_its_own_file(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "x.docx").write_bytes(writers.write_docx("# Memo\n\nThe memo text about cranes.\n"))
    (tmp_path / "reports" / "x.pdf").write_bytes(writers.write_pdf("# Report\n\nThe report text about ships.\n"))
    (tmp_path / "reports" / "x.pptx").write_bytes(writers.write_pptx([("Deck", ["The deck text about ports"])]))
    (tmp_path / "reports" / "y.pdf").write_bytes(writers.write_pdf("# Alone\n\nA file with its own stem.\n"))
    (tmp_path / "reports" / "z.md").write_text("# Z\n\nmarkdown\n")
    (tmp_path / "reports" / "z.txt").write_text("text\n")
    result, chunks = chunks_of(tmp_path)
    assert not result.errors
    ids = {d.doc_id: d.source_path for d in result.documents}
    assert ids == {"reports-x-docx": "reports/x.docx", "reports-x-pdf": "reports/x.pdf",
                   "reports-x-pptx": "reports/x.pptx", "reports-y": "reports/y.pdf",
                   "reports-z-md": "reports/z.md", "reports-z-txt": "reports/z.txt"}
    for chunk in chunks:
        assert chunk.locator.startswith(ids[chunk.doc_id] + "#"), chunk.locator


def test_an_explicit_doc_id_still_collides_as_a_located_error(tmp_path):
    (tmp_path / "a.md").write_text("---\ndoc_id: same\n---\n# A\n\ntext\n")
    (tmp_path / "b.html").write_bytes(writers.write_html("# B\n\ntext\n"))
    (tmp_path / "b.html.meta.toml").write_text('doc_id = "same"\n')
    result = parse_library(tmp_path)
    assert [d.source_path for d in result.documents] == ["a.md"]
    assert len(result.errors) == 1 and result.errors[0].path == "b.html" and "already used" in str(result.errors[0])


def test_an_empty_document_is_a_located_error(tmp_path):
    import docx

    buf = io.BytesIO()
    docx.Document().save(buf)
    (tmp_path / "empty.docx").write_bytes(buf.getvalue())
    import openpyxl

    buf = io.BytesIO()
    openpyxl.Workbook().save(buf)
    (tmp_path / "blank.xlsx").write_bytes(buf.getvalue())
    (tmp_path / "ok.md").write_text("# OK\n\ntext\n")
    result = parse_library(tmp_path)
    assert [d.doc_id for d in result.documents] == ["ok"]
    errors = {e.path: str(e) for e in result.errors}
    assert set(errors) == {"empty.docx", "blank.xlsx"}
    assert "has no text (an empty DOCX document)" in errors["empty.docx"] and "field 'body'" in errors["empty.docx"]
    assert "has no values" in errors["blank.xlsx"]


# -- encodings and encryption ------------------------------------------------------------

def test_utf16_files_with_a_byte_order_mark_are_read(tmp_path):
    (tmp_path / "le.txt").write_bytes("\ufeffCafé crème in UTF-16 LE, 营收下滑.\r\n".encode("utf-16-le"))
    (tmp_path / "be.md").write_bytes("\ufeff# Titre\n\nRésumé in UTF-16 BE.\n".encode("utf-16-be"))
    (tmp_path / "sheet.csv").write_bytes("\ufeffregion\trevenue\nBenelux\t120\nNordics\t92\n".encode("utf-16-le"))
    (tmp_path / "u32.txt").write_bytes("\ufeffUTF-32 text.\n".encode("utf-32-le"))
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe" + "ok".encode("utf-16-le") + b"\x00\xd8")  # lone surrogate
    result, chunks = chunks_of(tmp_path)
    bodies = {d.doc_id: d.body for d in result.documents}
    assert bodies["le"] == "Café crème in UTF-16 LE, 营收下滑.\n"
    assert "Résumé in UTF-16 BE." in bodies["be"] and result.documents[0].title == "Titre"
    assert "| Benelux | 120 |" in bodies["sheet"]
    assert bodies["u32"] == "UTF-32 text.\n"
    (error,) = result.errors
    assert error.path == "bad.txt" and "not valid UTF-16" in str(error) and "byte-order mark" in str(error)
    sheet = next(c for c in chunks if c.doc_id == "sheet" and "Benelux" in c.text)
    assert sheet.locator.startswith("sheet.csv#cells=A")


def test_html_is_read_in_its_declared_encoding(tmp_path):
    page = ("<html><head><meta charset=\"windows-1252\"><title>Caf\xe9</title></head>"
            "<body><h1>R\xe9sum\xe9</h1><p>Na\xefve \x93quotes\x94 \x80 5</p></body></html>")
    (tmp_path / "cp1252.html").write_bytes(page.encode("latin-1"))
    legacy = ("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=iso-8859-1\"></head>"
              "<body><p>Gr\xfc\xdfe \x96 dash</p></body></html>")
    (tmp_path / "latin1.html").write_bytes(legacy.encode("latin-1"))
    (tmp_path / "gb.html").write_bytes('<meta charset="gb2312"><p>营收下滑</p>'.encode("gb18030"))
    (tmp_path / "utf16.html").write_bytes("\ufeff<p>wide page</p>".encode("utf-16-le"))
    (tmp_path / "unknown.html").write_bytes(b'<meta charset="klingon-8"><p>x</p>')
    (tmp_path / "lying.html").write_bytes(b'<meta charset="utf-8"><p>caf\xe9</p>')
    result = parse_library(tmp_path)
    bodies = {d.doc_id: d.body for d in result.documents}
    assert "# Résumé" in bodies["cp1252"] and "Naïve \u201cquotes\u201d \u20ac 5" in bodies["cp1252"]
    assert next(d.title for d in result.documents if d.doc_id == "cp1252") == "Café"
    assert "Grüße \u2013 dash" in bodies["latin1"]  # iso-8859-1 is read as windows-1252 (the HTML standard)
    assert "营收下滑" in bodies["gb"] and "wide page" in bodies["utf16"]
    errors = {e.path: str(e) for e in result.errors}
    assert set(errors) == {"unknown.html", "lying.html"}
    # the charset is described, not quoted: errors of converted files never echo their values (#37)
    assert "declares the charset <a name of 9 characters>, which is not a known encoding" in errors["unknown.html"]
    assert "is not valid utf-8 at byte offset" in errors["lying.html"].lower()


def _encrypted(data: bytes, user: str, algorithm: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(data))
    writer.encrypt(user_password=user, owner_password="owner-secret", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_pdfs_with_an_empty_password_open_and_damaged_ones_fall_back_to_pdfminer(tmp_path):
    plain = writers.write_pdf("# Harbour\n\nThe harbour crane order was signed in May.\n")
    (tmp_path / "rc4.pdf").write_bytes(_encrypted(plain, "", "RC4-128"))
    (tmp_path / "aes.pdf").write_bytes(_encrypted(plain, "", "AES-128"))
    (tmp_path / "locked.pdf").write_bytes(_encrypted(plain, "user-secret", "AES-128"))
    damaged = plain.replace(b"/Type /Pages", b"/Type /Pagez")  # a broken page tree: pypdf finds no page
    import pypdf

    assert len(pypdf.PdfReader(io.BytesIO(damaged)).pages) == 0
    (tmp_path / "damaged.pdf").write_bytes(damaged)
    (tmp_path / "hopeless.pdf").write_bytes(plain[:200])
    result, chunks = chunks_of(tmp_path)
    docs = {d.doc_id: d for d in result.documents}
    assert set(docs) == {"rc4", "aes", "damaged"}
    for doc_id in docs:
        assert "harbour crane order was signed in May" in docs[doc_id].body
        assert any(c.doc_id == doc_id and c.locator.startswith(f"{doc_id}.pdf#page=1") for c in chunks)
    assert dict(docs["damaged"].extra)["converter"].startswith("pdf@7 pypdf ")
    assert "; pdfminer.six " in dict(docs["damaged"].extra)["converter"]
    assert "every page (pypdf found no pages)" in dict(docs["damaged"].extra)["converter"]
    assert "pdfminer" not in dict(docs["rc4"].extra)["converter"]
    errors = {e.path: e for e in result.errors}
    assert set(errors) == {"locked.pdf", "hopeless.pdf"}
    assert errors["locked.pdf"].field == "encrypted" and "password is needed" in str(errors["locked.pdf"])
    assert "cannot be read as a PDF" in str(errors["hopeless.pdf"])


def test_a_page_garbled_in_pypdf_is_read_by_pdfminer(monkeypatch):
    """pypdf's text of page 2 is replaced by what a wrong font map gives (private-use and
    NUL characters); the converter must notice and take pdfminer.six's text of that page."""
    import pypdf

    from ragspine_index.converters.pdf import garbled_share

    data = ligature_pdf([["First page text."], ["The second page names the Kobe terminal."]])
    real = pypdf.PageObject.extract_text

    def garbling(page, *args, **kwargs):
        text = real(page, *args, **kwargs)
        return "".join("\ue012" if ch.isalpha() else ch for ch in text) if "Kobe" in text else text

    monkeypatch.setattr(pypdf.PageObject, "extract_text", garbling)
    converted = convert_bytes(data, ".pdf")
    assert "Kobe terminal" in converted.text and "\ue012" not in converted.text
    page = next(r for r in converted.regions if "Kobe" in converted.text[r[0]:r[1]])
    assert page[2] == "page=2" and converted.text.startswith("First page text.")
    assert converted.engine_note.startswith("pdfminer.six ") and converted.engine_note.endswith(": page 2 (garbled in pypdf)")
    assert garbled_share("\ue012\ue012 ok") == 0.5 and garbled_share("plain 文字") == 0.0


def test_password_protected_office_files_say_encrypted(tmp_path):
    msoffcrypto = pytest.importorskip("msoffcrypto", reason="writing an encrypted Office file needs msoffcrypto-tool")
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = {"memo.docx": writers.write_docx("# Memo\n\nSecret plans.\n"),
             "book.xlsx": writers.write_xlsx({"S": [["k", "v"], ["a", 1]]}),
             "deck.pptx": writers.write_pptx([("Deck", ["point"])])}
    for name, data in plain.items():
        out = io.BytesIO()
        OOXMLFile(io.BytesIO(data)).encrypt("pass-1234", out)
        assert out.getvalue().startswith(b"\xd0\xcf\x11\xe0")  # an OLE container, as Office writes it
        (tmp_path / name).write_bytes(out.getvalue())
    (tmp_path / "legacy.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + b"WordDocument")
    result = parse_library(tmp_path)
    assert not result.documents and msoffcrypto
    errors = {e.path: e for e in result.errors}
    assert set(errors) == {"memo.docx", "book.xlsx", "deck.pptx", "legacy.docx"}
    for name, kind in (("memo.docx", "DOCX"), ("book.xlsx", "XLSX"), ("deck.pptx", "PPTX")):
        assert errors[name].field == "encrypted" and f"is an encrypted {kind} file (password-protected)" in str(errors[name])
    assert "legacy binary Office file" in str(errors["legacy.docx"])


# -- structure ---------------------------------------------------------------------------

def test_html_navigation_page_header_footer_and_asides_are_not_indexed_but_marked(tmp_path):
    page = ("<html><body><header><a href='/'>Home</a> | <a href='/news'>News</a></header>"
            "<nav><ul><li>Products</li><li>Careers</li></ul></nav>"
            "<main><article><header><h1>Harbour report</h1></header><p>Cranes sold well in Q3.</p>"
            "<footer>Filed under: ports</footer></article></main>"
            "<aside>Subscribe to our newsletter</aside><footer>© 2024 Northwind · Privacy</footer></body></html>")
    (tmp_path / "page.html").write_bytes(page.encode())
    secret = "<html><body><header>STRICTLY CONFIDENTIAL</header><main><p>Merger talks.</p></main></body></html>"
    (tmp_path / "secret.html").write_bytes(secret.encode())
    result = parse_library(tmp_path)
    docs = {d.doc_id: d for d in result.documents}
    assert docs["page"].body == "# Harbour report\n\nCranes sold well in Q3.\n\nFiled under: ports"
    for boiler in ("Home", "Products", "Careers", "Subscribe", "Privacy"):
        assert boiler not in docs["page"].body
    assert docs["secret"].sensitivity == "RESTRICTED" and "CONFIDENTIAL" not in docs["secret"].body


def test_docx_headings_from_outline_levels_and_merged_cells_once(tmp_path):
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    def outline(ppr, level: int) -> None:
        el = OxmlElement("w:outlineLvl")
        el.set(qn("w:val"), str(level))
        ppr.append(el)

    document = docx.Document()
    chapter = document.styles.add_style("Chapter Title", WD_STYLE_TYPE.PARAGRAPH)  # a standard's own style
    outline(chapter.element.get_or_add_pPr(), 0)
    sub = document.styles.add_style("Clause", WD_STYLE_TYPE.PARAGRAPH)
    sub.base_style = document.styles["Normal"]
    outline(sub.element.get_or_add_pPr(), 1)
    document.add_paragraph("范围", style="Chapter Title")
    document.add_paragraph("本标准规定了港口起重机的要求。")
    document.add_paragraph("术语", style="Clause")
    direct = document.add_paragraph("Direct outline heading")
    outline(direct._p.get_or_add_pPr(), 2)
    document.add_paragraph("Body under the direct heading.")
    table = document.add_table(rows=3, cols=4)
    for r in range(3):
        for c in range(4):
            table.cell(r, c).text = f"r{r}c{c}"
    table.cell(1, 0).merge(table.cell(1, 2)).text = "wide merged cell"
    table.cell(0, 3).merge(table.cell(2, 3)).text = "tall"
    buf = io.BytesIO()
    document.save(buf)
    (tmp_path / "std.docx").write_bytes(buf.getvalue())
    result, chunks = chunks_of(tmp_path)
    body = result.documents[0].body
    assert body.startswith("# 范围\n\n本标准规定了港口起重机的要求。\n\n## 术语\n\n### Direct outline heading\n\nBody under")
    assert body.count("wide merged cell") == 1 and body.count("tall") == 1
    assert next(c for c in chunks if "Body under" in c.text).location == {"anchor": "direct-outline-heading"}
    assert next(c for c in chunks if "本标准" in c.text).location == {"anchor": "范围"}


def test_running_pdf_headers_and_footers_stay_out_of_the_index_text(tmp_path):
    from reportlab.pdfgen import canvas

    def report(header: str) -> bytes:
        out = io.BytesIO()
        pdf = canvas.Canvas(out)
        facts = ["Cranes sold well in the Netherlands.", "Gdansk doubled its storage.", "Baltic freight fell again.",
                 "Rotterdam signed the automation contract."]
        for number, fact in enumerate(facts, start=1):
            pdf.setFont("Helvetica", 9)
            pdf.drawString(72, 800, header)
            pdf.setFont("Helvetica", 12)
            pdf.drawString(72, 700, f"Section {number}")
            pdf.drawString(72, 680, fact)
            pdf.setFont("Helvetica", 9)
            pdf.drawString(72, 40, f"Page {number} of {len(facts)}")
            pdf.showPage()
        pdf.save()
        return out.getvalue()

    (tmp_path / "review.pdf").write_bytes(report("Northwind Quarterly Review 2024"))
    (tmp_path / "secret.pdf").write_bytes(report("STRICTLY CONFIDENTIAL"))
    result, chunks = chunks_of(tmp_path)
    docs = {d.doc_id: d for d in result.documents}
    body = docs["review"].body
    assert "Northwind Quarterly Review" not in body and "Page 1 of 4" not in body and "of 4" not in body
    assert "Section 1\nCranes sold well in the Netherlands." in body and "Rotterdam signed" in body
    rotterdam = next(c for c in chunks if c.doc_id == "review" and "Rotterdam" in c.text)
    assert rotterdam.location["page"] == "4" or rotterdam.location.get("end_page") == "4"
    assert docs["secret"].sensitivity == "RESTRICTED" and "CONFIDENTIAL" not in docs["secret"].body
    from ragspine_index.converters.pdf import strip_running_lines

    assert strip_running_lines(["a\nbody one", "a\nbody two"]) == (["a\nbody one", "a\nbody two"], ())  # < 3 pages


def test_a_page_in_unexpected_scripts_is_read_by_pdfminer(monkeypatch):
    """A wrong CJK font map makes pypdf print Japanese as Oriya, Greek, Armenian and Syriac
    letters at once (measured on a real Japanese gazette, recall 0.01 → 1.0 with this)."""
    import pypdf

    from ragspine_index.converters.pdf import mixed_scripts

    data = ligature_pdf([["First page text."], ["The second page names the Kobe terminal and its cranes."]])
    real = pypdf.PageObject.extract_text
    wrong = "\u0b08\u0ccb\u0394\u0531\u0710\u0b30\u03b6\u0564\u0723"

    def garbling(page, *args, **kwargs):
        text = real(page, *args, **kwargs)
        return "".join(wrong[i % len(wrong)] if ch.isalpha() else ch for i, ch in enumerate(text)) if "Kobe" in text else text

    monkeypatch.setattr(pypdf.PageObject, "extract_text", garbling)
    converted = convert_bytes(data, ".pdf")
    assert "Kobe terminal" in converted.text and converted.engine_note.endswith(": page 2 (garbled in pypdf)")
    assert mixed_scripts("Latin text with 营收下滑 and a little αβγ, as a real page has it: no alarm.") == 0.0
