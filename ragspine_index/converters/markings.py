"""Where an Office file carries a sensitivity marking outside its body text.

The converters turn the body of a file into text; a marking is often somewhere else. This
module reads those places from the package's XML parts (with defusedxml: a part it
refuses, e.g. one that declares an entity, is a :class:`ConversionError` for the whole
file, never a silently dropped marking) and returns ``(where, line)`` pairs that
:mod:`..files` checks with the body's marking rules:

* **DOCX**: every header and footer part (first, even and default pages; their tables,
  text boxes and content controls), the VML watermark (``<v:textpath string=...>``), text
  boxes (``w:txbxContent``) and tracked insertions/deletions anywhere in the body, and
  the first lines of block content controls (``w:sdt``: a cover page), which the body
  text does not hold;
* **PPTX**: the text of slide masters, slide layouts and notes/handout masters;
* **XLSX**: print headers and footers of every sheet (``&C CONFIDENTIAL``, the ``&``
  codes removed, one line per left/centre/right section) and text in drawings
  (shapes and text boxes);
* **all three**: ``docMetadata/LabelInfo.xml``, the Microsoft Purview label that current
  Office writes without its name (see :func:`label_ids`).
"""

from __future__ import annotations

import re
import zipfile
from io import BytesIO
from typing import Iterable

from ragspine_index.converters.converted import ConversionError, clean_line

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_V = "{urn:schemas-microsoft-com:vml}"
_PARAGRAPHS = frozenset({_W + "p", _A + "p"})
_TEXTS = frozenset({_W + "t", _W + "delText", _A + "t"})
_TABS = frozenset({_W + "tab", _W + "br", _W + "cr", _A + "br"})
#: Lines of a block content control read (the body rule reads the first 20 lines too).
SDT_LINES = 20
#: The name :mod:`.pdf` gives its XMP packet (not a package part).
XMP_PACKET = "XMP metadata"
_PLAIN_PART = re.compile(r"[A-Za-z0-9_./\-\[\]]{1,120}")
_DOCX_HEADER = re.compile(r"word/(header|footer)[^/]*\.xml", re.I)
_PPTX_MASTERS = re.compile(r"ppt/(slideMasters|slideLayouts|notesMasters|handoutMasters)/[^/]+\.xml", re.I)
_XLSX_SHEET = re.compile(r"xl/(worksheets|chartsheets|dialogsheets)/[^/]+\.xml", re.I)
_XLSX_DRAWING = re.compile(r"xl/drawings/[^/]+\.xml", re.I)
_HEADER_FOOTER = frozenset({"oddHeader", "oddFooter", "evenHeader", "evenFooter", "firstHeader", "firstFooter"})


def parse_part(raw: bytes, name: str):
    """A package part as an ElementTree root, refused (an error) when defusedxml refuses it."""
    try:
        from defusedxml.ElementTree import fromstring
    except ImportError:  # pragma: no cover - defusedxml ships with the formats extra
        from xml.etree.ElementTree import fromstring
    try:
        return fromstring(raw)
    except Exception as exc:  # noqa: BLE001 - a hostile or damaged part: the file cannot be classified
        raise refused(name, exc) from exc


def refused(name: str, exc: BaseException) -> ConversionError:
    """The error for a part the safe parser refuses (names the part and why, never its text).
    defusedxml allows a bare ``<!DOCTYPE>``; it refuses entity declarations and external
    references, which are named as such; anything else is XML that is not well-formed."""
    shown = ("the package part " + (name if _PLAIN_PART.fullmatch(name) else "a part")
             if name != XMP_PACKET else "the XMP metadata packet")
    kind = type(exc).__name__
    if kind in ("EntitiesForbidden", "DTDForbidden", "ExternalReferenceForbidden", "NotSupportedError"):
        why = "it declares an entity or refers to an external DTD, which are never expanded or fetched"
    else:
        why = "it is not well-formed XML: damaged"
    return ConversionError(
        f"{shown} cannot be read safely ({kind}: {why}), so a sensitivity marking in it "
        "could not be checked",
        "re-save the file from its application (Office never writes entity declarations)", field="sensitivity")


def _paragraph_lines(root, *, inside: frozenset[str] = frozenset()) -> list[str]:
    """The text of each paragraph under ``root`` (nested paragraphs, e.g. a text box in a
    paragraph, are lines of their own); with ``inside``, only paragraphs that have an
    ancestor of one of those tags. VML text paths (WordArt watermarks) are lines too."""
    lines: list[str] = []
    # (element, index of the paragraph buffer it writes to or -1, inside a wanted ancestor)
    buffers: list[list[str]] = []
    stack = [(root, -1, not inside)]
    while stack:
        el, buf, wanted = stack.pop()
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag == _V + "textpath" and el.get("string"):
            lines.append(clean_line(el.get("string") or ""))
        if tag in inside:
            wanted = True
        if tag in _PARAGRAPHS:
            buffers.append([])
            buf = len(buffers) - 1 if wanted else -1
        elif buf >= 0 and tag in _TEXTS and el.text:
            buffers[buf].append(el.text)
        elif buf >= 0 and tag in _TABS:
            buffers[buf].append(" ")
        for child in reversed(list(el)):
            stack.append((child, buf, wanted))
    lines.extend(clean_line("".join(b)) for b in buffers)
    return [line for line in lines if line]


def _runs_of(root, tags: frozenset[str]) -> list[str]:
    """The text inside each element of ``tags`` (a tracked insertion or deletion), one line each."""
    out = []
    for el in root.iter():
        if el.tag in tags:
            text = "".join(t.text or "" for t in el.iter() if t.tag in _TEXTS)
            if text.strip():
                out.append(clean_line(text))
    return out


def _parts(archive: zipfile.ZipFile, pattern: re.Pattern) -> list[str]:
    return sorted(n for n in archive.namelist() if pattern.fullmatch(n))


def docx_marking_lines(data: bytes) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        for name in _parts(archive, _DOCX_HEADER):
            kind = "page header" if "header" in name.lower() else "page footer"
            out += [(f"{kind} line", line) for line in _paragraph_lines(parse_part(archive.read(name), name))]
        if "word/document.xml" in archive.namelist():
            root = parse_part(archive.read("word/document.xml"), "word/document.xml")
            out += [("watermark or text box line", line)
                    for line in _paragraph_lines(root, inside=frozenset({_W + "txbxContent"}))]
            out += [("tracked change", line) for line in _runs_of(root, frozenset({_W + "ins", _W + "del"}))]
            sdt = _paragraph_lines(root, inside=frozenset({_W + "sdtContent"}))
            out += [("content control line", line) for line in sdt[:SDT_LINES]]
            # a watermark placed in the body rather than the header
            out += [("watermark", clean_line(el.get("string") or "")) for el in root.iter(_V + "textpath")
                    if (el.get("string") or "").strip()]
    return tuple(_dedupe(out))


def pptx_marking_lines(data: bytes) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        for name in _parts(archive, _PPTX_MASTERS):
            kind = "slide master" if "master" in name.lower() else "slide layout"
            out += [(f"{kind} line", line) for line in _paragraph_lines(parse_part(archive.read(name), name))]
    return tuple(_dedupe(out))


def xlsx_marking_lines(data: bytes) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        for name in _parts(archive, _XLSX_SHEET):
            raw = archive.read(name)
            if b"Header" not in raw and b"Footer" not in raw:
                continue  # no print header or footer: not parsed twice
            for code in _header_footer_codes(raw, name):
                out += [("print header/footer", line) for line in header_footer_sections(code)]
        for name in _parts(archive, _XLSX_DRAWING):
            out += [("shape or text box line", line)
                    for line in _paragraph_lines(parse_part(archive.read(name), name))]
    return tuple(_dedupe(out))


def _header_footer_codes(raw: bytes, name: str) -> list[str]:
    try:
        from defusedxml.ElementTree import iterparse
    except ImportError:  # pragma: no cover - defusedxml ships with the formats extra
        from xml.etree.ElementTree import iterparse
    codes: list[str] = []
    try:
        for _, el in iterparse(BytesIO(raw), events=("end",)):
            local = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
            if local in _HEADER_FOOTER and el.text:
                codes.append(el.text)
            elif local in ("c", "row"):
                el.clear()
    except Exception as exc:  # noqa: BLE001 - see parse_part
        raise refused(name, exc) from exc
    return codes


_HF_CODE = re.compile(r'&(?:"[^"]*"|\d+|K[0-9A-Fa-f]{6}|K\d\d[+-]\d{3}|[LCR]|.)', re.S)


def header_footer_sections(code: str) -> list[str]:
    """An Excel print header/footer string as the text of its left/centre/right sections:
    ``&L``/``&C``/``&R`` start a section, ``&&`` is ``&``, other ``&`` codes (page number,
    date, font, size, colour, picture) are removed."""
    sections: list[str] = [""]
    pos = 0
    for match in _HF_CODE.finditer(code):
        sections[-1] += code[pos:match.start()]
        token = match.group(0)
        if token == "&&":
            sections[-1] += "&"
        elif token in ("&L", "&C", "&R"):
            sections.append("")
        pos = match.end()
    sections[-1] += code[pos:]
    return [line for line in (clean_line(s) for s in sections) if line]


def label_ids(archive: zipfile.ZipFile) -> list[str]:
    """The ids of the enabled, not removed sensitivity labels of ``docMetadata/LabelInfo.xml``
    (lower case, no braces). The file holds no label *name*: the caller treats a label whose
    name no ``MSIP_Label_<id>_Name`` property gives as restricted (fail closed)."""
    name = next((n for n in archive.namelist() if n.lower() == "docmetadata/labelinfo.xml"), None)
    if name is None:
        return []
    root = parse_part(archive.read(name), name)
    out = []
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.rsplit("}", 1)[-1] == "label":
            if el.get("removed", "0") in ("1", "true") or el.get("enabled", "1") in ("0", "false"):
                continue
            out.append((el.get("id") or "").strip("{}").lower())
    return out


def _dedupe(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for pair in pairs:
        if pair[1] and pair not in seen:
            seen.add(pair)
            out.append(pair)
    return out


__all__ = ["docx_marking_lines", "header_footer_sections", "label_ids", "parse_part", "pptx_marking_lines",
           "refused", "xlsx_marking_lines"]
