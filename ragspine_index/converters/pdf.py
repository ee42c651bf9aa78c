"""PDF → text, one region per page (``page=N``), with pypdf (BSD, pure Python).

Chosen over pdfminer.six and pypdfium2 on the same files (``ragspine_tools/bench/bench_convert.py
--compare-pdf``; docs/formats.md): pypdf keeps the reading order and the lines of the
generated reports, is a pure-Python wheel with no native code to audit, and was the
faster of the two pure-Python engines. PyMuPDF is AGPL and not used.

Encrypted PDFs (even with an empty user password), PDFs that do not parse and PDFs
with no extractable text (scanned images: no OCR here) are errors. JavaScript, forms
and links in a PDF are never run or followed: only the text operators are read. The info
dictionary (any value type), the XMP metadata packet and the page annotations (rubber
stamps, comments, form field values) are read for a sensitivity marking.
"""

from __future__ import annotations

import logging
import re
from io import BytesIO
from typing import Any

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, clean_line

VERSION = "1"
EXTRA_MODULE = "pypdf"
#: The info-dictionary keys read as properties (custom keys are read too).
_INFO_KEYS = ("/Title", "/Subject", "/Keywords", "/Author", "/Creator")
#: Values PDF writers fill in when the author gave none: not metadata.
_PLACEHOLDERS = frozenset({"untitled", "(untitled)", "anonymous", "(anonymous)", "unspecified", "(unspecified)"})


def convert_pdf(data: bytes, limits: ConversionLimits) -> Converted:
    import pypdf
    from pypdf.errors import PdfReadError

    deadline = Deadline(limits.seconds)
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings would repeat the file's text
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ConversionError("is not a PDF file (no %PDF header)", "re-export it as PDF or remove it")
    try:
        reader = pypdf.PdfReader(BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise ConversionError("is encrypted (password-protected)",
                                  "save an unprotected copy; encrypted PDFs are not indexed", field="encrypted")
        pages = reader.pages
        n_pages = len(pages)
    except ConversionError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as exc:
        raise ConversionError(f"cannot be read as a PDF ({type(exc).__name__}; truncated or damaged?)",
                              "re-export it from its source application") from exc
    if n_pages > limits.max_pages:
        raise ConversionError(f"has {n_pages:,} pages (limit {limits.max_pages:,})", "split it", field="limits")
    out = TextBuilder(limits)
    marks: list[tuple[str, str]] = []
    for number in range(1, n_pages + 1):
        deadline.check(f"page {number}")
        try:
            marks += _annotation_lines(pages[number - 1], number)
            raw = pages[number - 1].extract_text() or ""
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError,
                OSError, ZeroDivisionError) as exc:
            raise ConversionError(f"page {number} cannot be read ({type(exc).__name__}; truncated or damaged?)",
                                  "re-export it from its source application") from exc
        out.add(_page_text(raw), f"page={number}")
    text = out.text()
    if not text.strip():
        raise ConversionError(
            f"has no extractable text on any of its {n_pages} page(s): a scanned or image-only PDF; "
            "OCR is not available", "index a copy with a text layer (run OCR on it first)", field="ocr")
    properties = _properties(reader) + _xmp_properties(reader)
    title = next((v for k, v in properties if k == "Title"), "")
    return Converted(text=text, regions=tuple(out.regions), properties=properties,
                     title=title, marking_lines=tuple(marks))


def _page_text(raw: str) -> str:
    """Lines right-stripped, runs of blank lines squeezed to one (paragraphs stay)."""
    lines = [line.rstrip() for line in raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if not line.strip():
            if out and out[-1]:
                out.append("")
            continue
        out.append(line)
    return "\n".join(out).strip()


def _properties(reader) -> tuple[tuple[str, str], ...]:
    try:
        info = reader.metadata or {}
        items = [(str(k), info[k]) for k in info]
    except Exception:  # noqa: BLE001 - a damaged info dictionary is no metadata, not an error
        return ()
    out = []
    for key, value in items:
        if not isinstance(value, str):
            # an array, dictionary, number…: its strings (a classification key with no text
            # at all is then an empty value, which the sensitivity check refuses)
            value = " ".join(_strings(value))
            if key in ("/Producer", "/CreationDate", "/ModDate", "/Trapped"):
                continue
            out.append((key.lstrip("/"), clean_line(value)))
            continue
        if not value.strip() or value.strip().casefold() in _PLACEHOLDERS:
            continue
        if key in _INFO_KEYS or key not in ("/Producer", "/CreationDate", "/ModDate", "/Trapped"):
            out.append((key.lstrip("/"), clean_line(value)))
    return tuple(out)


def _strings(value, depth: int = 0) -> list[str]:
    """The text in a PDF object (strings, names, numbers; arrays and dictionaries walked
    to a bounded depth)."""
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

    if depth > 8:
        return []
    if isinstance(value, IndirectObject):
        try:
            value = value.get_object()
        except Exception:  # noqa: BLE001 - a dangling reference holds no text
            return []
    if isinstance(value, str):
        return [value.lstrip("/")] if value.strip() else []
    if isinstance(value, ArrayObject):
        return [s for item in value for s in _strings(item, depth + 1)]
    if isinstance(value, DictionaryObject):
        return [s for item in value.values() for s in _strings(item, depth + 1)]
    if isinstance(value, (int, float)):
        return [str(value)]
    return []


_STAMP_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _annotation_lines(page, number: int) -> list[tuple[str, str]]:
    """Text a reader sees in a page's annotations: a rubber stamp's name (``/Confidential``,
    Acrobat's ``/SBConfidential``: words split, ``SB`` dropped), the contents, subject and
    rich text of any annotation, and a form field's name with its value."""
    out: list[tuple[str, str]] = []
    annots = page.get("/Annots")
    for annot in _strings_or_objects(annots):
        subtype = str(annot.get("/Subtype", ""))
        where = f"page {number} {subtype.lstrip('/') or 'annotation'}"
        if subtype == "/Stamp" and annot.get("/Name"):
            name = str(annot.get("/Name")).lstrip("/").removeprefix("SB").removeprefix("#")
            out.append((where, " ".join(_STAMP_WORDS.findall(name)).upper()))
        for key in ("/Contents", "/Subj", "/TU"):
            text = " ".join(_strings(annot.get(key)))
            if text.strip():
                out.append((where, clean_line(text)))
        rich = " ".join(_strings(annot.get("/RC")))
        if rich.strip():
            out.append((where, clean_line(re.sub(r"<[^>]*>", " ", rich))))
        if annot.get("/FT") is not None or annot.get("/V") is not None:
            field_name = " ".join(_strings(annot.get("/T")))
            value = " ".join(_strings(annot.get("/V")))
            if value.strip():
                out.append((where, clean_line(f"{field_name}: {value}" if field_name else value)))
    return out


def _strings_or_objects(annots) -> list:
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

    if isinstance(annots, IndirectObject):
        annots = annots.get_object()
    if not isinstance(annots, ArrayObject):
        return []
    out = []
    for item in annots[:10_000]:
        obj = item.get_object() if isinstance(item, IndirectObject) else item
        if isinstance(obj, DictionaryObject):
            out.append(obj)
    return out


def _xmp_properties(reader) -> tuple[tuple[str, str], ...]:
    """The XMP metadata packet's properties as ``(local name, text)``: simple properties,
    attributes of ``rdf:Description`` and the items of ``rdf:Alt``/``Seq``/``Bag`` under the
    property that holds them (``dc:title``, ``pdf:Keywords``, ``xmp:Classification``,
    ``pdfx:MSIP_Label_<id>_Name``…). Read with defusedxml; a packet it refuses is an error."""
    from pypdf.generic import IndirectObject

    from ragspine_index.converters.markings import parse_part

    try:
        root_obj = reader.trailer["/Root"]
        catalog: Any = root_obj.get_object() if isinstance(root_obj, IndirectObject) else root_obj
        stream = catalog.get("/Metadata")
        if stream is None:
            return ()
        raw = stream.get_object().get_data()
    except Exception as exc:  # noqa: BLE001 - a damaged metadata stream cannot be checked
        raise ConversionError(f"its XMP metadata stream cannot be read ({type(exc).__name__})",
                              "re-export it from its source application", field="sensitivity") from exc
    root = parse_part(raw, "XMP metadata")
    out: list[tuple[str, str]] = []
    stack = [(root, "")]
    while stack:
        el, owner = stack.pop()
        if not isinstance(el.tag, str):
            continue
        ns, _, local = el.tag.rpartition("}")
        is_rdf = ns.endswith(_RDF) or local in ("xmpmeta", "xapmeta")
        if local == "Description" and is_rdf:
            for attr, value in el.attrib.items():
                attr_ns, _, attr_local = attr.rpartition("}")
                if not attr_ns.endswith(_RDF) and value.strip() and "xml" not in attr_ns:
                    out.append((attr_local, clean_line(value)))
        name = owner if is_rdf else local
        children = list(el)
        if not children and not is_rdf and (el.text or "").strip():
            out.append((local, clean_line(el.text or "")))
        elif local == "li" and is_rdf and (el.text or "").strip():
            out.append((owner, clean_line(el.text or "")))
        for child in reversed(children):
            stack.append((child, name))
    return tuple((k, v) for k, v in out if k and v and v.casefold() not in _PLACEHOLDERS)


_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
