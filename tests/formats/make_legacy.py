"""Writes the legacy binary Office fixtures (``tests/formats/legacy/*.doc|.xls|.ppt``) the
legacy-format tests read: each is generated here as DOCX/XLSX/PPTX (python-docx, openpyxl,
python-pptx) and saved in the Office 97-2003 format by LibreOffice (``soffice --headless
--convert-to``), the only writer of those formats on the registries we use. The outputs are
committed (a few KB each) so CI needs only the readers (antiword, catdoc, xlrd), not
LibreOffice's several hundred MB.

    python tests/formats/make_legacy.py   # needs LibreOffice (apt-get install libreoffice-writer-nogui
                                           # libreoffice-calc-nogui libreoffice-impress-nogui)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).parent / "legacy"


def memo_docx(path: Path, *, restricted: bool) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Harbour crane memo" if not restricted else "Board minutes"
    document.core_properties.subject = "Rotterdam terminal"
    document.core_properties.keywords = "cranes, harbour" if not restricted else "RESTRICTED"
    document.add_heading("Harbour crane memo" if not restricted else "Board minutes", level=1)
    document.add_paragraph("The gantry crane order for the Rotterdam terminal was signed in March.")
    document.add_heading("Risks", level=2)
    document.add_paragraph("Steel prices and port strikes could delay the delivery by six weeks.")
    table = document.add_table(rows=3, cols=2)
    for r, (site, staff) in enumerate((("Site", "Staff"), ("Rotterdam", "41"), ("Gdansk", "17"))):
        table.cell(r, 0).text, table.cell(r, 1).text = site, staff
    document.add_paragraph("The tugboat contract is renewed every autumn with the pilots' union.")
    if restricted:
        document.sections[0].header.paragraphs[0].text = "STRICTLY CONFIDENTIAL - board only"
    document.save(path)


def header_marked_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    for _ in range(6):  # antiword refuses a text stream this short ("too small to handle")
        document.add_paragraph("Quarterly dredging plan for the outer channel and the berth pockets, "
                               "with the survey vessel booked for two weeks in each quarter.")
    document.sections[0].header.paragraphs[0].text = "Sensitivity: RESTRICTED"
    document.save(path)


def short_note_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("Buoy 14 relit on Tuesday.")
    document.save(path)


def ledger_xlsx(path: Path, *, restricted: bool) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Q3"
    for row in (("Region", "Revenue", "Margin"), ("Rotterdam", 1250, "12%"), ("Gdansk", 830, "9%"),
                ("Hamburg", 1475, "14%")):
        sheet.append(row)
    book.create_sheet("Notes").append(("The dredging budget moved to the fourth quarter.",))
    book.properties.title = "Harbour ledger"
    if restricted:
        book.properties.keywords = "RESTRICTED"
    book.save(path)


def deck_pptx(path: Path, *, restricted: bool) -> None:
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Harbour deck"
    if restricted:
        deck.core_properties.keywords = "RESTRICTED"
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Terminal expansion"
    first.placeholders[1].text = "Two new berths open in the spring for container feeders."
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Pilotage"
    second.placeholders[1].text = "Night pilotage needs a second tugboat above 300 metres."
    deck.save(path)


def without_thumbnail(data: bytes) -> bytes:
    """The compound file again without the preview picture LibreOffice puts in a .ppt's
    SummaryInformation (600 KB): that stream rewritten with the same property set, its
    thumbnail property (``PIDSI_THUMBNAIL``, 0x11) left out; every other stream as it was."""
    import io
    import struct

    import olefile

    from tests.formats.cfb import write_cfb

    ole = olefile.OleFileIO(io.BytesIO(data))
    streams = {"/".join(e): ole.openstream(e).read() for e in ole.listdir()}
    raw = streams["\x05SummaryInformation"]
    fmtid, offset = raw[28:44], struct.unpack_from("<I", raw, 44)[0]
    count = struct.unpack_from("<I", raw, offset + 4)[0]
    pairs = [struct.unpack_from("<II", raw, offset + 8 + 8 * i) for i in range(count)]
    ends = sorted(o for _, o in pairs) + [struct.unpack_from("<I", raw, offset)[0]]
    kept = [(pid, raw[offset + o:offset + ends[ends.index(o) + 1]]) for pid, o in pairs if pid != 0x11]
    body, table, at = b"", b"", 8 + 8 * len(kept)
    for pid, value in kept:
        table += struct.pack("<II", pid, at + len(body))
        body += value
    section = struct.pack("<II", 8 + len(table) + len(body), len(kept)) + table + body
    streams["\x05SummaryInformation"] = raw[:28] + fmtid + struct.pack("<I", 48) + section
    return write_cfb(streams)


_NO_THUMBNAIL = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="GenerateThumbnail" oor:op="fuse">
<value>false</value></prop></item>
</oor:items>
"""


def main() -> int:
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    if soffice is None:
        print("LibreOffice (soffice) is not installed; see this file's docstring", file=sys.stderr)
        return 1
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # no thumbnail in the files' SummaryInformation (it makes a .ppt 600 KB)
        (work / "profile" / "user").mkdir(parents=True)
        (work / "profile" / "user" / "registrymodifications.xcu").write_text(_NO_THUMBNAIL)
        memo_docx(work / "memo.docx", restricted=False)
        memo_docx(work / "minutes.docx", restricted=True)
        header_marked_docx(work / "dredging.docx")
        short_note_docx(work / "buoy.docx")
        ledger_xlsx(work / "ledger.xlsx", restricted=False)
        ledger_xlsx(work / "secret_ledger.xlsx", restricted=True)
        deck_pptx(work / "deck.pptx", restricted=False)
        deck_pptx(work / "secret_deck.pptx", restricted=True)
        for source, target in (("memo.docx", "doc"), ("minutes.docx", "doc"), ("dredging.docx", "doc"), ("buoy.docx", "doc"),
                               ("ledger.xlsx", "xls"), ("secret_ledger.xlsx", "xls"),
                               ("deck.pptx", "ppt"), ("secret_deck.pptx", "ppt")):
            subprocess.run([soffice, f"-env:UserInstallation=file://{work}/profile", "--headless",
                            "--convert-to", target, "--outdir", str(OUT), str(work / source)],
                           check=True, timeout=300, capture_output=True)
    for path in sorted(OUT.glob("*.ppt")):
        path.write_bytes(without_thumbnail(path.read_bytes()))
    for path in sorted(OUT.iterdir()):
        print(path.name, path.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
