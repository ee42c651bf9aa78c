"""Formats users have (issue 38): OpenDocument text/spreadsheet/presentation, mail,
e-books and rich text, each ingested end to end with a citation check. Every file is
generated here."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ragspine_index.chunking import build_chunks, make_chunker
from ragspine_index.source_documents.parse_library import parse_library

_OFFICE_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
              'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
              'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
              'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
              'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
              'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
              'xmlns:dc="http://purl.org/dc/elements/1.1/"')
_MIME = {"odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
         "odp": "application/vnd.oasis.opendocument.presentation"}


def odf(kind: str, body: str, *, title: str = "", user: dict[str, str] | None = None) -> bytes:
    """An OpenDocument package as LibreOffice writes one: ``mimetype`` stored first, the
    manifest, ``content.xml`` and ``meta.xml``."""
    root = {"odt": "text", "ods": "spreadsheet", "odp": "presentation"}[kind]
    content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_OFFICE_NS} office:version="1.3">'
               f"<office:body><office:{root}>{body}</office:{root}></office:body></office:document-content>")
    props = f"<dc:title>{title}</dc:title>" if title else ""
    props += "".join(f'<meta:user-defined meta:name="{k}">{v}</meta:user-defined>' for k, v in (user or {}).items())
    meta = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {_OFFICE_NS} office:version="1.3">'
            f"<office:meta>{props}</office:meta></office:document-meta>")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
                f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{_MIME[kind]}"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                '<manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>'
                "</manifest:manifest>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), _MIME[kind], compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)
        archive.writestr("meta.xml", meta)
    return out.getvalue()


def ingest(root: Path, max_chars: int = 300):
    result = parse_library(root)
    chunker = make_chunker("layout", max_chars=max_chars, overlap_chars=0)
    docs = {d.doc_id: d for d in result.documents}
    chunks = {d: build_chunks(doc, chunker) for d, doc in docs.items()}
    for doc_id, doc_chunks in chunks.items():
        for chunk in doc_chunks:
            assert docs[doc_id].body[chunk.start:chunk.end] == chunk.text
            assert chunk.locator.endswith(f"&chars={chunk.start}-{chunk.end}") or chunk.locator.endswith(
                f"#chars={chunk.start}-{chunk.end}"), chunk.locator
    return result, docs, chunks


def chunk_with(chunks, words: str):
    return next(c for c in chunks if words in c.text)


def test_opendocument_text_spreadsheet_and_presentation(tmp_path):
    (tmp_path / "memo.odt").write_bytes(odf("odt", (
        '<text:h text:outline-level="1">Harbour <text:span>Memo</text:span></text:h>'
        "<text:p>The crane order<text:s text:c=\"2\"/>was signed.</text:p>"
        '<text:h text:outline-level="2">Risks</text:h>'
        "<text:list><text:list-item><text:p>Steel prices</text:p></text:list-item>"
        "<text:list-item><text:p>Port strikes</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>Site</text:p></table:table-cell>"
        "<table:table-cell><text:p>Staff</text:p></table:table-cell></table:table-row>"
        '<table:table-row><table:table-cell table:number-columns-spanned="2"><text:p>Rotterdam merged</text:p>'
        "</table:table-cell><table:covered-table-cell/></table:table-row></table:table>"
        '<text:p><draw:frame><draw:text-box><text:p>A text box about Gdansk.</text:p></draw:text-box></draw:frame></text:p>'
    ), title="Harbour Memo"))
    (tmp_path / "book.ods").write_bytes(odf("ods", (
        '<table:table table:name="Q3 Revenue"><table:table-row><table:table-cell><text:p>Region</text:p></table:table-cell>'
        "<table:table-cell><text:p>Revenue</text:p></table:table-cell></table:table-row>"
        '<table:table-row table:number-rows-repeated="2"><table:table-cell/></table:table-row>'
        "<table:table-row><table:table-cell><text:p>Benelux</text:p></table:table-cell>"
        '<table:table-cell><text:p>120</text:p></table:table-cell><table:table-cell table:number-columns-repeated="1000"/>'
        '</table:table-row><table:table-row table:number-rows-repeated="1048570"><table:table-cell/></table:table-row>'
        "</table:table>"
    )))
    (tmp_path / "deck.odp").write_bytes(odf("odp", (
        '<draw:page draw:name="page1"><draw:frame><draw:text-box><text:p>Strategy</text:p></draw:text-box></draw:frame>'
        "<draw:frame><draw:text-box><text:p>Electric straddle carriers</text:p></draw:text-box></draw:frame>"
        "<presentation:notes><draw:frame><draw:text-box><text:p>Say it slowly.</text:p></draw:text-box></draw:frame>"
        "</presentation:notes></draw:page>"
        '<draw:page draw:name="page2"><draw:frame><draw:text-box><text:p>Cranes</text:p>'
        "<text:p>Demand up in the Netherlands</text:p></draw:text-box></draw:frame></draw:page>"
    )))
    result, docs, chunks = ingest(tmp_path)
    assert not result.errors and set(docs) == {"memo", "book", "deck"}
    memo = docs["memo"]
    assert memo.title == "Harbour Memo"
    assert memo.body.startswith("# Harbour Memo\n\nThe crane order was signed.\n\n## Risks\n\n- Steel prices\n- Port strikes")
    assert "| Rotterdam merged |  |" in memo.body and memo.body.count("Rotterdam merged") == 1  # merged once
    assert "A text box about Gdansk." in memo.body
    assert chunk_with(chunks["memo"], "Steel prices").location == {"anchor": "risks"}
    book = docs["book"]
    assert "## Sheet: Q3 Revenue" in book.body and "| Benelux | 120 |" in book.body
    benelux = chunk_with(chunks["book"], "Benelux")
    assert benelux.locator.startswith("book.ods#sheet=Q3%20Revenue&cells=A")
    assert benelux.location["sheet"] == "Q3 Revenue"
    assert benelux.location["cells"].endswith("B4")  # two repeated empty rows counted: Benelux is row 4
    deck = docs["deck"]
    assert deck.body.startswith("## Slide 1: Strategy\n- Electric straddle carriers\nNotes: Say it slowly.")
    assert chunk_with(chunks["deck"], "Netherlands").location == {"slide": "2"}


def test_an_opendocument_property_marks_it_restricted(tmp_path):
    (tmp_path / "secret.odt").write_bytes(odf("odt", "<text:p>Plans.</text:p>", user={"Classification": "Confidential"}))
    result = parse_library(tmp_path)
    assert [d.sensitivity for d in result.documents] == ["RESTRICTED"]


def test_a_damaged_opendocument_is_one_located_error(tmp_path):
    good = odf("odt", "<text:p>Plans.</text:p>")
    (tmp_path / "cut.odt").write_bytes(good[: len(good) // 2])
    (tmp_path / "wrong.ods").write_bytes(good)  # a text document named as a spreadsheet
    result = parse_library(tmp_path)
    errors = {e.path: str(e) for e in result.errors}
    assert set(errors) == {"cut.odt", "wrong.ods"} and not result.documents
    assert "not a valid ODT file" in errors["cut.odt"] and "is not ODS" in errors["wrong.ods"]



def mail(subject: str, body: str, attachments: list[tuple[str, bytes, str]], **headers: str) -> bytes:
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = "Anna Berg <anna@northwind.example>"
    message["To"] = "board@northwind.example"
    message["Date"] = "Tue, 01 Oct 2024 09:30:00 +0200"
    for key, value in headers.items():
        message[key.replace("_", "-")] = value
    message.set_content(body)
    for name, data, mime in attachments:
        maintype, subtype = mime.split("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message.as_bytes()


def test_an_email_and_its_attachments_are_documents_citing_their_part(tmp_path):
    pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")
    pytest.importorskip("docx", reason="the 'formats' extra")
    from ragspine_index.converters import writers

    pdf = writers.write_pdf("# Q3 Figures\n\nThe Gdansk depot doubled its storage capacity.\n")
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "q3.eml").write_bytes(mail(
        "Q3 figures for the board", "Dear board,\n\nthe Q3 figures are attached. Cranes sold well.\n\nAnna\n",
        [("figures.pdf", pdf, "application/pdf"), ("notes.txt", "Baltic freight fell again.\n".encode(), "text/plain"),
         ("archive.zip", b"PK\x05\x06" + bytes(18), "application/zip"),
         ("memo.docx", writers.write_docx("# Memo\n\nCONFIDENTIAL\n\nLayoff plans.\n"),
          "application/vnd.openxmlformats-officedocument.wordprocessingml.document")]))
    result, docs, chunks = ingest(tmp_path)
    assert not result.errors, result.errors
    assert set(docs) == {"inbox-q3", "inbox-q3-part2", "inbox-q3-part3", "inbox-q3-part5"}
    message = docs["inbox-q3"]
    assert message.title == "Q3 figures for the board" and message.sensitivity == "INTERNAL"
    assert message.body.startswith("Subject: Q3 figures for the board\nFrom: Anna Berg <anna@northwind.example>")
    assert "Cranes sold well." in message.body and "- archive.zip (part 4, not read)" in message.body
    assert chunk_with(chunks["inbox-q3"], "Cranes").locator.startswith("inbox/q3.eml#part=1&chars=")
    figures = docs["inbox-q3-part2"]
    assert figures.title == "figures.pdf" and figures.source_path == "inbox/q3.eml"
    gdansk = chunk_with(chunks["inbox-q3-part2"], "Gdansk")
    assert gdansk.locator.startswith("inbox/q3.eml#part=2&page=1&chars=") and gdansk.location["page"] == "1"
    assert chunk_with(chunks["inbox-q3-part3"], "Baltic").locator.startswith("inbox/q3.eml#part=3&chars=")
    assert docs["inbox-q3-part5"].sensitivity == "RESTRICTED"  # its own banner marks the attachment
    assert "part=2: figures.pdf" in dict(figures.extra)["converter"]


def test_a_confidential_email_makes_its_attachments_restricted_and_a_bad_one_fails_whole(tmp_path):
    (tmp_path / "secret.eml").write_bytes(mail("Merger", "Talks continue.\n",
                                               [("n.txt", b"Numbers inside.\n", "text/plain")],
                                               Sensitivity="Company-Confidential"))
    (tmp_path / "bad.eml").write_bytes(mail("Broken", "Body.\n", [("cut.pdf", b"%PDF-1.4\n1 0 obj", "application/pdf")]))
    (tmp_path / "not-mail.eml").write_bytes(b"just some words, no headers\n")
    result = parse_library(tmp_path)
    docs = {d.doc_id: d for d in result.documents}
    assert set(docs) == {"secret", "secret-part2"}
    assert {d.sensitivity for d in docs.values()} == {"RESTRICTED"}
    errors = {e.path: str(e) for e in result.errors}
    assert set(errors) == {"bad.eml", "not-mail.eml"}
    assert "attachment 1 (.pdf, part 2)" in errors["bad.eml"] and "not an e-mail message" in errors["not-mail.eml"]


def epub(chapters: list[str], *, title: str = "The Harbour Book", encrypted: bool = False) -> bytes:
    items = "".join(f'<item id="c{i}" href="text/ch{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(len(chapters)))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    opf = ('<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
           'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:identifier id="id">urn:uuid:1</dc:identifier><dc:title>{title}</dc:title>'
           f'<dc:creator>Anna Berg</dc:creator><dc:language>en</dc:language></metadata><manifest>{items}</manifest>'
           f"<spine>{spine}</spine></package>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" '
                         'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
                         'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        archive.writestr("OEBPS/content.opf", opf)
        for i, body in enumerate(chapters):
            archive.writestr(f"OEBPS/text/ch{i}.xhtml", '<?xml version="1.0" encoding="UTF-8"?><html '
                             f'xmlns="http://www.w3.org/1999/xhtml"><head><title>c{i}</title></head><body>{body}</body></html>')
        if encrypted:
            archive.writestr("META-INF/encryption.xml", '<encryption><EncryptedData><CipherData><CipherReference '
                             'URI="OEBPS/text/ch1.xhtml"/></CipherData></EncryptedData></encryption>')
    return out.getvalue()


def test_an_epub_reads_in_spine_order_and_cites_chapter_and_section(tmp_path):
    (tmp_path / "book.epub").write_bytes(epub([
        '<img src="cover.jpg" alt=""/>',
        "<h1>The Harbour</h1><p>Cranes line the quay at dawn.</p><h2>Night shift</h2><p>Lights over Gdansk.</p>",
        "<p>An epilogue without a heading, about the Baltic.</p>",
    ]))
    (tmp_path / "drm.epub").write_bytes(epub(["<p>a</p>", "<p>b</p>"], encrypted=True))
    result, docs, chunks = ingest(tmp_path, max_chars=60)
    assert [e.path for e in result.errors] == ["drm.epub"] and "encrypted (DRM)" in str(result.errors[0])
    book = docs["book"]
    assert book.title == "The Harbour Book" and book.body.startswith("# The Harbour\n\nCranes line the quay at dawn.")
    assert chunk_with(chunks["book"], "Gdansk").locator.startswith("book.epub#chapter=2&anchor=night-shift&chars=")
    assert chunk_with(chunks["book"], "Gdansk").location == {"chapter": "2", "anchor": "night-shift"}
    assert chunk_with(chunks["book"], "Baltic").location == {"chapter": "3"}


def test_rtf_text_with_its_code_page_and_a_header_marking(tmp_path):
    pytest.importorskip("striprtf", reason="the 'formats' extra")
    (tmp_path / "note.rtf").write_bytes(
        rb"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Arial;}}{\info{\title Harbour Note}{\author Anna Berg}}"
        rb"\pard\b Harbour\b0\par Caf\'e9 cr\'e8me costs \u8364? 5; \u33829?\u25910? fell.\par Cranes sold well.\par}")
    (tmp_path / "secret.rtf").write_bytes(
        rb"{\rtf1\ansi{\header\pard STRICTLY CONFIDENTIAL\par}\pard Merger talks.\par}")
    (tmp_path / "fake.rtf").write_bytes(b"plain words, not RTF")
    result, docs, chunks = ingest(tmp_path)
    note = docs["note"]
    assert note.title == "Harbour Note" and dict(note.extra).get("author", "Anna Berg") == "Anna Berg"
    assert note.body == "Harbour\nCafé crème costs € 5; 营收 fell.\nCranes sold well."
    assert chunk_with(chunks["note"], "Cranes").locator.startswith("note.rtf#chars=")
    assert docs["secret"].sensitivity == "RESTRICTED" and "CONFIDENTIAL" not in docs["secret"].body
    assert [e.path for e in result.errors] == ["fake.rtf"] and "not an RTF file" in str(result.errors[0])


def outlook_msg(subject: str, body: str, attachments: list[tuple[str, bytes]], *, sensitivity: int = 0) -> bytes:
    """An Outlook .msg as Outlook stores one: MAPI string properties as UTF-16 streams, the
    fixed-size ones (sensitivity, sent time) in ``__properties_version1.0``, one storage per
    attachment (long file name ``3707``, data ``3701``)."""
    import struct

    from tests.formats.cfb import write_cfb

    def utf16(text: str) -> bytes:
        return text.encode("utf-16-le")

    sent = (1_727_767_800 + 11_644_473_600) * 10_000_000  # 2024-10-01 07:30 UTC as a FILETIME
    fixed = bytes(32) + struct.pack("<IIQ", (0x0036 << 16) | 0x0003, 6, sensitivity)
    fixed += struct.pack("<IIQ", (0x0039 << 16) | 0x0040, 6, sent)
    streams = {"__substg1.0_0037001F": utf16(subject), "__substg1.0_0C1A001F": utf16("Anna Berg"),
               "__substg1.0_5D01001F": utf16("anna@northwind.example"),
               "__substg1.0_0E04001F": utf16("Board"), "__substg1.0_1000001F": utf16(body),
               "__substg1.0_001A001F": utf16("IPM.Note"), "__properties_version1.0": fixed}
    for i, (name, data) in enumerate(attachments):
        storage = f"__attach_version1.0_#{i:08X}"
        streams[f"{storage}/__substg1.0_3707001F"] = utf16(name)
        streams[f"{storage}/__substg1.0_37010102"] = data
    return write_cfb(streams)


def test_an_outlook_message_and_its_attachments_are_documents_citing_their_part(tmp_path):
    pytest.importorskip("olefile", reason="the 'formats' extra")
    pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")
    from ragspine_index.converters import writers

    pdf = writers.write_pdf("# Q3\n\nThe Gdansk depot doubled its storage capacity.\n")
    (tmp_path / "q3.msg").write_bytes(outlook_msg("Q3 figures", "Dear board,\r\nCranes sold well.\r\n",
                                                  [("figures.pdf", pdf), ("tool.exe", b"MZ" + bytes(100)),
                                                   ("notes.txt", "Baltic freight fell.".encode())]))
    (tmp_path / "merger.msg").write_bytes(outlook_msg("Merger", "Talks continue.", [("n.txt", b"Numbers.")],
                                                      sensitivity=3))
    (tmp_path / "fake.msg").write_bytes(b"not an OLE file")
    result, docs, chunks = ingest(tmp_path)
    assert [e.path for e in result.errors] == ["fake.msg"] and "not an Outlook message" in str(result.errors[0])
    assert set(docs) == {"q3", "q3-part2", "q3-part4", "merger", "merger-part2"}
    q3 = docs["q3"]
    assert q3.title == "Q3 figures"
    assert q3.body.startswith("Subject: Q3 figures\nFrom: Anna Berg <anna@northwind.example>\nTo: Board\n"
                              "Date: Tue, 01 Oct 2024 07:30:00 +0000\n\nDear board,\nCranes sold well.")
    assert "- tool.exe (part 3, not read)" in q3.body
    assert chunk_with(chunks["q3"], "Cranes").locator.startswith("q3.msg#part=1&chars=")
    gdansk = chunk_with(chunks["q3-part2"], "Gdansk")
    assert gdansk.locator.startswith("q3.msg#part=2&page=1&chars=") and docs["q3-part2"].title == "figures.pdf"
    assert chunk_with(chunks["q3-part4"], "Baltic").locator.startswith("q3.msg#part=4&chars=")
    assert docs["merger"].sensitivity == docs["merger-part2"].sensitivity == "RESTRICTED"
    assert q3.sensitivity == "INTERNAL"
