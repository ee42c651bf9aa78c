"""Crafted Office, PDF and HTML files that carry a sensitivity marking somewhere other than
their body text (issue 37): generated here from the writers of
:mod:`ragspine_index.converters.writers` plus raw XML edits, never committed as binaries.

Each maker returns the file's bytes; :data:`MARKED` lists ``(name, suffix, maker)`` for
every place a marking can be, each meant to come out RESTRICTED.
"""

from __future__ import annotations

import re
import zipfile
from io import BytesIO
from typing import Callable

from ragspine_index.converters import writers

BODY = """# Harbour crane tender

The Vandermolen tender covers six electric harbour cranes for the Maasvlakte terminal.

## Terms

- Delivery in the second quarter.
- Payment in three instalments.
"""
MARKING = "CONFIDENTIAL"
_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_CT_LABELINFO = b'<Override PartName="/docMetadata/LabelInfo.xml" ContentType="application/vnd.ms-office.classificationlabels+xml"/>'


def patch_zip(data: bytes, edits: dict[str, Callable[[bytes], bytes]] | None = None,
              add: dict[str, bytes] | None = None) -> bytes:
    """``data`` (a zip package) with members rewritten by ``edits`` and members ``add``ed."""
    source = zipfile.ZipFile(BytesIO(data))
    out = BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if edits and item.filename in edits:
                content = edits[item.filename](content)
            target.writestr(item, content)
        for name, content in (add or {}).items():
            target.writestr(name, content)
    return out.getvalue()


def _docx(**kwargs) -> bytes:
    return writers.write_docx(BODY, **kwargs)


def _first_in_body(xml: bytes) -> Callable[[bytes], bytes]:
    """An edit putting ``xml`` as the first block of the document body."""
    return lambda content: re.sub(rb"(<w:body[^>]*>)", lambda m: m.group(1) + xml, content, count=1)


def _header_with(xml: bytes) -> bytes:
    """A DOCX whose default page header holds ``xml`` (a paragraph or table)."""
    data = _docx(header="Harbour tender")
    name = next(n for n in zipfile.ZipFile(BytesIO(data)).namelist() if re.fullmatch(r"word/header\d*\.xml", n))
    return patch_zip(data, {name: lambda c: re.sub(rb"(<w:hdr[^>]*>)", lambda m: m.group(1) + xml, c, count=1)})


def docx_watermark() -> bytes:
    """Word's "CONFIDENTIAL" watermark: WordArt (VML) in the page header, no text run."""
    pict = (b'<w:p><w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml" id="PowerPlusWaterMarkObject" '
            b'type="#_x0000_t136" style="position:absolute;rotation:315"><v:textpath style="font-family:&quot;Calibri'
            b'&quot;" string="' + MARKING.encode() + b'"/></v:shape></w:pict></w:r></w:p>')
    return _header_with(pict)


def docx_header_table() -> bytes:
    return _header_with(b'<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Tender file</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r>'
                        b'<w:t>' + MARKING.encode() + b'</w:t></w:r></w:p></w:tc></w:tr></w:tbl>')


def docx_even_page_header() -> bytes:
    import docx

    document = docx.Document(BytesIO(_docx()))
    document.settings.odd_and_even_pages_header_footer = True
    document.sections[0].even_page_header.paragraphs[0].text = MARKING
    out = BytesIO()
    document.save(out)
    return out.getvalue()


def docx_first_page_footer() -> bytes:
    import docx

    document = docx.Document(BytesIO(_docx()))
    document.sections[0].different_first_page_header_footer = True
    document.sections[0].first_page_footer.add_table(1, 1, document.sections[0].page_width).cell(0, 0).text = MARKING
    out = BytesIO()
    document.save(out)
    return out.getvalue()


def docx_text_box() -> bytes:
    box = (b'<w:p><w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml" style="width:200pt;height:30pt">'
           b'<v:textbox><w:txbxContent><w:p><w:r><w:t>' + MARKING.encode() + b'</w:t></w:r></w:p></w:txbxContent>'
           b'</v:textbox></v:shape></w:pict></w:r></w:p>')
    return patch_zip(_docx(), {"word/document.xml": _first_in_body(box)})


def docx_content_control() -> bytes:
    sdt = (b'<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Cover Pages"/></w:docPartObj></w:sdtPr>'
           b'<w:sdtContent><w:p><w:r><w:t>' + MARKING.encode() + b'</w:t></w:r></w:p></w:sdtContent></w:sdt>')
    return patch_zip(_docx(), {"word/document.xml": _first_in_body(sdt)})


def docx_tracked_insertion() -> bytes:
    ins = (b'<w:p><w:ins w:id="91" w:author="Legal" w:date="2026-01-05T10:00:00Z"><w:r><w:t>' + MARKING.encode()
           + b'</w:t></w:r></w:ins></w:p>')
    return patch_zip(_docx(), {"word/document.xml": _first_in_body(ins)})


LABEL_ID = "5a8b6c1e-2d3f-4a5b-9c8d-7e6f5a4b3c2d"


def labelinfo_only(make: Callable[[], bytes] = _docx) -> bytes:
    """A Purview label written the current way: docMetadata/LabelInfo.xml only (no name)."""
    label = ('<?xml version="1.0" encoding="utf-8" standalone="yes"?><clbl:labelList '
             'xmlns:clbl="http://schemas.microsoft.com/office/2020/mipLabelMetadata">'
             f'<clbl:label id="{{{LABEL_ID}}}" enabled="1" method="Privileged" siteId="{{00000000-1111-2222-3333-'
             '444444444444}" removed="0"/></clbl:labelList>').encode()
    return patch_zip(make(), {"[Content_Types].xml": lambda c: c.replace(b"</Types>", _CT_LABELINFO + b"</Types>")},
                     add={"docMetadata/LabelInfo.xml": label})


def labelinfo_removed() -> bytes:
    """A label that was removed: no marking from it."""
    return patch_zip(labelinfo_only(), {"docMetadata/LabelInfo.xml": lambda c: c.replace(b'removed="0"',
                                                                                       b'removed="1"')})


def docx_label_and_header() -> bytes:
    return _docx(header=MARKING, custom={f"MSIP_Label_{LABEL_ID}_Enabled": "true",
                                         f"MSIP_Label_{LABEL_ID}_Name": "Highly Confidential"})


def docx_custom_with_entity() -> bytes:
    """custom.xml that declares an entity: the safe parser refuses it (the label inside is unread)."""
    data = _docx(custom={"MSIP_Label_1_Name": "Highly Confidential"})
    return patch_zip(data, {"docProps/custom.xml": lambda c: c.replace(
        b"<Properties", b'<!DOCTYPE Properties [<!ENTITY lbl "Highly Confidential">]><Properties', 1)})


def xlsx_print_header() -> bytes:
    data = writers.write_xlsx({"Tender": [["Item", "Amount"], ["Cranes", 6]]})
    header = b'<headerFooter><oddHeader>&amp;L&amp;D&amp;C&amp;"Arial,Bold"' + MARKING.encode() + \
        b'&amp;R&amp;P</oddHeader></headerFooter>'
    return patch_zip(data, {"xl/worksheets/sheet1.xml": lambda c: c.replace(b"</worksheet>", header + b"</worksheet>")})


def xlsx_print_footer_split() -> bytes:
    """``&C`` then the marking split by a font-size code (``CONFI&12DENTIAL`` prints as one word)."""
    data = writers.write_xlsx({"Tender": [["Item", "Amount"], ["Cranes", 6]]})
    footer = b'<headerFooter differentFirst="1"><firstFooter>&amp;CCONFI&amp;12DENTIAL</firstFooter></headerFooter>'
    return patch_zip(data, {"xl/worksheets/sheet1.xml": lambda c: c.replace(b"</worksheet>", footer + b"</worksheet>")})


def _pptx() -> bytes:
    return writers.write_pptx([("Harbour cranes", ["Six electric cranes", "Delivery in Q2"])])


def _pptx_part_text(pattern: str) -> bytes:
    """A PPTX whose first part matching ``pattern`` (a master or layout) holds the marking
    in the text of one of its shapes."""
    data = _pptx()
    name = sorted(n for n in zipfile.ZipFile(BytesIO(data)).namelist() if re.fullmatch(pattern, n))[0]

    def edit(content: bytes) -> bytes:
        return re.sub(rb"(<a:t>)[^<]*(</a:t>)", lambda m: m.group(1) + MARKING.encode() + m.group(2), content,
                      count=1)
    return patch_zip(data, {name: edit})


def pptx_master() -> bytes:
    return _pptx_part_text(r"ppt/slideMasters/slideMaster\d+\.xml")


def pptx_layout() -> bytes:
    return _pptx_part_text(r"ppt/slideLayouts/slideLayout2\.xml")


def _pdf(**kwargs) -> bytes:
    return writers.write_pdf(BODY, **kwargs)


def _pdf_edit(edit: Callable) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=BytesIO(_pdf()))
    edit(writer)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def _xmp(body: str) -> Callable:
    def edit(writer) -> None:
        from pypdf.generic import DecodedStreamObject, NameObject

        packet = ('<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">'
                  '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">' + body +
                  '</rdf:RDF></x:xmpmeta><?xpacket end="w"?>')
        stream = DecodedStreamObject()
        stream.set_data(packet.encode("utf-8"))
        stream[NameObject("/Type")] = NameObject("/Metadata")
        stream[NameObject("/Subtype")] = NameObject("/XML")
        writer._root_object[NameObject("/Metadata")] = writer._add_object(stream)
    return edit


def pdf_xmp_classification() -> bytes:
    return _pdf_edit(_xmp('<rdf:Description rdf:about="" xmlns:pdfx="http://ns.adobe.com/pdfx/1.3/">'
                          '<pdfx:Classification>Restricted</pdfx:Classification></rdf:Description>'))


def pdf_xmp_label() -> bytes:
    return _pdf_edit(_xmp(f'<rdf:Description rdf:about="" xmlns:pdfx="http://ns.adobe.com/pdfx/1.3/" '
                          f'pdfx:MSIP_Label_{LABEL_ID}_Name="Highly Confidential"/>'))


def pdf_xmp_entity() -> bytes:
    def edit(writer) -> None:
        _xmp('<rdf:Description rdf:about=""/>')(writer)
        stream = writer._root_object["/Metadata"].get_object()
        stream.set_data(b'<!DOCTYPE x [<!ENTITY c "Confidential">]>' + stream.get_data())
    return _pdf_edit(edit)


def pdf_stamp() -> bytes:
    def edit(writer) -> None:
        from pypdf.annotations import Text
        from pypdf.generic import NameObject

        annotation = Text(rect=(50, 700, 250, 750), text="")
        annotation[NameObject("/Subtype")] = NameObject("/Stamp")
        annotation[NameObject("/Name")] = NameObject("/SBConfidential")
        writer.add_annotation(page_number=0, annotation=annotation)
    return _pdf_edit(edit)


def pdf_comment() -> bytes:
    def edit(writer) -> None:
        from pypdf.annotations import FreeText

        writer.add_annotation(page_number=0, annotation=FreeText(text=MARKING, rect=(50, 700, 250, 750)))
    return _pdf_edit(edit)


def pdf_classification_array() -> bytes:
    def edit(writer) -> None:
        from pypdf.generic import ArrayObject, NameObject, TextStringObject

        writer._info.get_object()[NameObject("/Classification")] = ArrayObject([TextStringObject("Restricted")])
    return _pdf_edit(edit)


def html_title() -> bytes:
    return writers.write_html(BODY, title=f"{MARKING} – Harbour crane tender")


#: Every crafted file meant to come out RESTRICTED: (name, suffix, maker).
MARKED: list[tuple[str, str, Callable[[], bytes]]] = [
    ("docx-watermark", "docx", docx_watermark),
    ("docx-header-table", "docx", docx_header_table),
    ("docx-even-page-header", "docx", docx_even_page_header),
    ("docx-first-page-footer-table", "docx", docx_first_page_footer),
    ("docx-text-box", "docx", docx_text_box),
    ("docx-content-control", "docx", docx_content_control),
    ("docx-tracked-insertion", "docx", docx_tracked_insertion),
    ("docx-labelinfo", "docx", labelinfo_only),
    ("docx-label-and-header", "docx", docx_label_and_header),
    ("xlsx-labelinfo", "xlsx", lambda: labelinfo_only(lambda: writers.write_xlsx({"S": [["a", 1]]}))),
    ("pptx-labelinfo", "pptx", lambda: labelinfo_only(_pptx)),
    ("xlsx-print-header", "xlsx", xlsx_print_header),
    ("xlsx-print-footer-split", "xlsx", xlsx_print_footer_split),
    ("pptx-master", "pptx", pptx_master),
    ("pptx-layout", "pptx", pptx_layout),
    ("pdf-xmp-classification", "pdf", pdf_xmp_classification),
    ("pdf-xmp-label", "pdf", pdf_xmp_label),
    ("pdf-stamp", "pdf", pdf_stamp),
    ("pdf-comment", "pdf", pdf_comment),
    ("pdf-classification-array", "pdf", pdf_classification_array),
    ("html-title", "html", html_title),
]
#: Crafted files whose marking sits in a part the safe parser refuses: an error each.
REFUSED: list[tuple[str, str, Callable[[], bytes]]] = [
    ("docx-custom-entity", "docx", docx_custom_with_entity),
    ("pdf-xmp-entity", "pdf", pdf_xmp_entity),
]
