"""PDF → text, one region per page (``page=N``), with pypdf (BSD, pure Python).

Chosen over pdfminer.six and pypdfium2 on the same files (``ragspine_tools/bench/bench_convert.py
--compare-pdf``; docs/formats.md): pypdf keeps the reading order and the lines of the
generated reports, is a pure-Python wheel with no native code to audit, and was the
faster of the two pure-Python engines. PyMuPDF is AGPL and not used.

Encrypted PDFs (even with an empty user password), PDFs that do not parse and PDFs
with no extractable text (scanned images: no OCR here) are errors. JavaScript, forms
and links in a PDF are never run or followed: only the text operators are read.
"""

from __future__ import annotations

import logging
from io import BytesIO

from ragspine_core.text.normalize import normalize_extracted

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, clean_line

VERSION = "2"
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
    for number in range(1, n_pages + 1):
        deadline.check(f"page {number}")
        try:
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
    properties = _properties(reader)
    title = next((v for k, v in properties if k == "Title"), "")
    return Converted(text=text, regions=tuple(out.regions), properties=properties,
                     title=title)


def _page_text(raw: str) -> str:
    """Lines right-stripped, runs of blank lines squeezed to one (paragraphs stay), in the
    index form with line-end hyphenation joined (:func:`normalize_extracted`)."""
    raw = normalize_extracted(raw.replace("\r\n", "\n").replace("\r", "\n"), join_hyphens=True)
    lines = [line.rstrip() for line in raw.split("\n")]
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
        if not isinstance(value, str) or not value.strip() or value.strip().casefold() in _PLACEHOLDERS:
            continue
        if key in _INFO_KEYS or key not in ("/Producer", "/CreationDate", "/ModDate", "/Trapped"):
            out.append((key.lstrip("/"), clean_line(value)))
    return tuple(out)
