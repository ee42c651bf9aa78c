"""PDF → text, one region per page (``page=N``), with pypdf (BSD, pure Python), and
pdfminer.six (MIT, pure Python) as the second engine.

Chosen over pdfminer.six and pypdfium2 on the same files (``ragspine_tools/bench/bench_convert.py
--compare-pdf``; docs/formats.md): pypdf keeps the reading order and the lines of the
generated reports, is a pure-Python wheel with no native code to audit, and was the
faster of the two pure-Python engines. PyMuPDF is AGPL and not used.

pdfminer.six reads what pypdf cannot: a damaged file pypdf does not open (its page tree
broken; pdfminer finds the pages by scanning), and each page whose pypdf text looks
garbled (:func:`garbled_share`: private-use, replacement, control or unassigned
characters; :func:`mixed_scripts`: letters spread over unrelated scripts, what a wrong
CJK font map gives) when pdfminer's text of that page is cleaner. The ``converter`` field of the
document says which pages it read and why (:attr:`Converted.engine_note`).

A PDF encrypted with an empty user password (the common "no copying" protection) is
opened with that empty password; one that needs a real password is an error. A page with
no text in either engine but images (a scanned page) is read by OCR (:mod:`.ocr`,
Tesseract) when it is installed, and the ``converter`` field names the pages; without it
a PDF with no text at all is an error that says OCR is not available. JavaScript, forms and links
in a PDF are never run or followed: only the text operators are read.
A page whose content stream draws rules (rectangles, lines) is read by pdfplumber (MIT, on
pdfminer.six) for ruled tables when it is installed: each table of at least 2 rows and 2
columns is written as a Markdown table (its first row the header, in groups of whole rows
that repeat it, as DOCX/XLSX tables are), the page's other text by pdfplumber around it in
reading order from the top, so two side-by-side tables are never interleaved; the
``converter`` field names those pages. Tables without rules are left as text lines.
The info dictionary (any value type), the XMP metadata packet and the page annotations
(rubber stamps, comments, form field values) are read for a sensitivity marking.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from io import BytesIO
from typing import Any

from ragspine_core.text.normalize import normalize_extracted

from ragspine_index.converters import ocr
from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, clean_line

VERSION = "7"  # 4: second engine, OCR, running lines out, normalised text (issue 38); 5: + markings in XMP and annotations (issue 37); 6: ruled tables as Markdown tables (pdfplumber, issue 38); 7: a document made only of repeated lines keeps them, the XMP <?xpacket?> wrapper ignored, pages OCR read nothing in rendered and OCR read with orientation detection
EXTRA_MODULE = "pypdf"
#: The info-dictionary keys read as properties (custom keys are read too).
_INFO_KEYS = ("/Title", "/Subject", "/Keywords", "/Author", "/Creator")
#: Values PDF writers fill in when the author gave none: not metadata.
_PLACEHOLDERS = frozenset({"untitled", "(untitled)", "anonymous", "(anonymous)", "unspecified", "(unspecified)"})
#: A page whose pypdf text has at least this share of garbled characters (and at least
#: ``_GARBLE_MIN_CHARS`` of them) is read again with pdfminer.six.
GARBLE_SHARE = 0.1
_GARBLE_MIN_CHARS = 5
_READ_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError,
                ZeroDivisionError, AssertionError)


def garbled_share(text: str) -> float:
    """The share of non-space characters that are private-use, U+FFFD, controls (but
    tab/newline), unassigned or surrogates: what a wrong font map produces."""
    seen = bad = 0
    for ch in text:
        if ch.isspace():
            continue
        seen += 1
        if ch == "\ufffd" or unicodedata.category(ch) in ("Co", "Cc", "Cn", "Cs"):
            bad += 1
    return bad / seen if seen else 0.0


#: Script families that one language's text mixes (Japanese: kanji + kana; Korean).
_FAMILY = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "CJK": "CJK", "IDEOGRAPHIC": "CJK",
           "FULLWIDTH": "LATIN", "HALFWIDTH": "CJK"}
#: A page is in unexpected scripts when its letters spread over 3 or more script families
#: of at least 3 % each and the largest holds under this share (a font map gone wrong
#: turns Japanese into Oriya, Greek, Syriac… at once; real text has one or two families).
MIXED_SCRIPT_TOP_SHARE = 0.6


def mixed_scripts(text: str) -> float:
    """How far the letters of ``text`` spread over script families: 0 for one or two
    families, else the share outside the largest family."""
    counts: Counter[str] = Counter()
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            word = name.split(" ", 1)[0]
            counts[_FAMILY.get(word, word)] += 1
    total = sum(counts.values())
    if total < 20:
        return 0.0
    families = [n for n in counts.values() if n / total >= 0.03]
    if len(families) < 3:
        return 0.0
    top = max(counts.values()) / total
    return 1.0 - top if top < MIXED_SCRIPT_TOP_SHARE else 0.0


def _badness(text: str) -> float:
    share = garbled_share(text)
    return max(share if share * len(text) >= _GARBLE_MIN_CHARS else 0.0, mixed_scripts(text))


def _garbled(text: str) -> bool:
    return _badness(text) >= GARBLE_SHARE


def convert_pdf(data: bytes, limits: ConversionLimits) -> Converted:
    import pypdf
    from pypdf.errors import PdfReadError

    deadline = Deadline(limits.seconds)
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings would repeat the file's text
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ConversionError("is not a PDF file (no %PDF header)", "re-export it as PDF or remove it")
    try:
        reader = pypdf.PdfReader(BytesIO(data), strict=False)
        if reader.is_encrypted and not _open_with_empty_password(reader):
            raise ConversionError("is encrypted (a password is needed to open it)",
                                  "save an unprotected copy; encrypted PDFs are not indexed", field="encrypted")
        pages = reader.pages
        n_pages = len(pages)
    except ConversionError:
        raise
    except (PdfReadError, *_READ_ERRORS) as exc:
        problem = f"cannot be read as a PDF ({type(exc).__name__}; truncated or damaged?)"
        return _by_pdfminer(data, limits, problem, reason=f"pypdf could not read it: {type(exc).__name__}")
    if n_pages == 0:  # a broken page tree: pypdf finds no page, pdfminer scans for them
        return _by_pdfminer(data, limits, "has no pages that can be read (a damaged page tree?)",
                            reason="pypdf found no pages")
    if n_pages > limits.max_pages:
        raise ConversionError(f"has {n_pages:,} pages (limit {limits.max_pages:,})", "split it", field="limits")
    out = TextBuilder(limits)
    marks: list[tuple[str, str]] = []
    second = _SecondEngine(data)
    tables = _Tables(data)
    ocred: list[int] = []
    #: Pages OCR of their images read nothing on (""), then, rendered: what Tesseract found
    #: there, or why nothing can be said.
    unread: dict[int, ocr.Reading | str] = {}
    texts: list[str] = []
    for number in range(1, n_pages + 1):
        deadline.check(f"page {number}")
        try:
            marks += _annotation_lines(pages[number - 1], number)
            raw = pages[number - 1].extract_text() or ""
        except (PdfReadError, *_READ_ERRORS) as exc:
            fallback = second.page(number)
            if fallback is None:
                raise ConversionError(f"page {number} cannot be read ({type(exc).__name__}; truncated or damaged?)",
                                      "re-export it from its source application") from exc
            raw = fallback
            second.note(number, "unreadable in pypdf")
        else:
            if _garbled(raw):
                other = second.page(number)
                if other is not None and other.strip() and _badness(other) < _badness(raw) / 2:
                    raw = other
                    second.note(number, "garbled in pypdf")
        if raw.strip() and _ruled(pages[number - 1]):
            with_tables = tables.page(number, deadline)
            if with_tables:
                raw = with_tables
        if not raw.strip():
            other = second.page(number)
            if other and other.strip():
                raw = other
                second.note(number, "no text in pypdf")
            elif ocr.available():
                raw = _ocr_page(pages[number - 1], number, deadline, data)
                if raw.strip():
                    ocred.append(number)
                else:
                    unread[number] = ""
        texts.append(_page_text(raw))
    if unread and not any(t.strip() for t in texts):
        # No text anywhere: what each page draws (outlined text, a chart), rendered and read. Only
        # then, so a report's diagram pages do not each cost a render and an OCR call.
        for number in sorted(unread):
            raw, unread[number] = _ocr_rendered(pages[number - 1], number, deadline, data)
            if raw.strip():
                ocred.append(number)
                texts[number - 1] = _page_text(raw)
        ocred.sort()
    texts, running = strip_running_lines(texts)
    for number, page_text in enumerate(texts, start=1):
        out.add(page_text, f"page={number}")
    text = out.text()
    if not text.strip() and ocr.available():
        raise _no_text_error(n_pages, unread)
    if not text.strip():
        raise ConversionError(
            f"has no extractable text on any of its {n_pages} page(s): a scanned or image-only PDF; "
            "OCR is not available (no tesseract program)",
            f"install it ({ocr.INSTALL_HINT}), or index a copy with a text layer", field="ocr")
    properties = _properties(reader) + _xmp_properties(reader)
    title = next((v for k, v in properties if k == "Title"), "")
    tables.close()
    notes = [second.summary(), tables.summary()] + ([f"OCR by {ocr.lineage()}: {_pages_words(ocred, n_pages)}"] if ocred else [])
    return Converted(text=text, regions=tuple(out.regions), properties=properties, header_lines=running,
                     title=title, engine_note="; ".join(n for n in notes if n), marking_lines=tuple(marks))


def _pages_words(numbers: list[int], n_pages: int) -> str:
    if len(numbers) == n_pages:
        return "every page"
    return f"page{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"


def _ocr_page(page, number: int, deadline: Deadline, data: bytes = b"") -> str:
    """The OCR text of the images on a page with no text layer (a scanned page). An image
    pypdf cannot decode (JBIG2, a damaged stream) is read from the page rendered by PDFium
    (pypdfium2, which pdfplumber brings) when it is installed."""
    try:
        images = list(page.images)
        texts = []
        for i, image in enumerate(images, start=1):
            deadline.check(f"page {number}, image {i}")
            pil = image.image
            if pil is None or min(pil.size) < 16:  # a rule, a bullet: nothing to read
                continue
            texts.append(ocr.ocr_image(ocr.png_of(pil), deadline, f"page {number}"))
        return "\n\n".join(t.strip() for t in texts if t.strip())
    except ConversionError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged image stream may raise anything in pypdf/Pillow
        rendered = _rendered_page(data, number) if data else None
        if rendered is None:
            raise ConversionError(f"page {number}: its images cannot be decoded for OCR ({type(exc).__name__})",
                                  "re-scan or re-export the page") from exc
        return ocr.ocr_image(ocr.png_of(rendered), deadline, f"page {number}").strip()


_RENDER_DPI = 300


def _ocr_rendered(page, number: int, deadline: Deadline, data: bytes) -> tuple[str, ocr.Reading | str]:
    """The OCR text of page ``number`` rendered by PDFium (text drawn as outlines, or in
    images OCR of the images alone missed), and what Tesseract's layout analysis found on
    it; instead of that reading, why the page cannot be judged: a content stream that does
    not decode (a damaged file, which would render blank), or no renderer."""
    damaged = _undecodable_contents(page)
    if damaged:
        return "", f"page {number}: {damaged}"
    deadline.check(f"page {number}, rendered")
    rendered = _rendered_page(data, number)
    if rendered is None:
        return "", f"page {number} cannot be rendered (pypdfium2 missing, or PDFium cannot draw it)"
    reading = ocr.read_layout(ocr.png_of(rendered), deadline, f"page {number}")
    return (reading.text if reading.words else ""), reading


def _undecodable_contents(page) -> str:
    """Why the page's content streams do not decode ("" when they do): one whose stored
    bytes decode to nothing, or raise (pypdf logs a damaged Flate stream and returns empty)."""
    from pypdf.generic import ArrayObject, IndirectObject

    try:
        contents = page.get("/Contents")
        if isinstance(contents, IndirectObject):
            contents = contents.get_object()
        streams = list(contents) if isinstance(contents, ArrayObject) else [contents] if contents is not None else []
        for item in streams:
            stream: Any = item.get_object() if isinstance(item, IndirectObject) else item
            stored = getattr(stream, "_data", b"") or b""
            if stored.strip() and not stream.get_data():
                return "its content stream does not decode (damaged)"
    except Exception as exc:  # noqa: BLE001 - a damaged stream may raise anything in pypdf
        return f"its content stream does not decode ({type(exc).__name__}; damaged)"
    return ""


#: The start of the problem of a PDF or image proven to hold pictures without text (the
#: bench counts these apart, with the evidence the problem gives).
NO_TEXT = "holds pictures without text"


def _no_text_error(n_pages: int, unread: dict[int, ocr.Reading | str]) -> ConversionError:
    """The error of a PDF no engine and no OCR read a character in: ``field="body"`` (nothing
    to publish) with OCR's evidence when every page was rendered and read and Tesseract's
    layout analysis found no text region, or regions without a character; else an OCR
    failure that names the first page that could not be judged."""
    readings = [r for r in unread.values() if isinstance(r, ocr.Reading)]
    unjudged = [r for r in unread.values() if isinstance(r, str) and r]
    if len(readings) == n_pages:
        empty = sum(1 for r in readings if r.regions == 0)
        found = sum(r.regions for r in readings)
        evidence = (f"no text region on {empty} of them" if empty == n_pages else
                    f"no text region on {empty} of them, and {found} region(s) without a character on the other "
                    f"{n_pages - empty}" if empty else f"{found} region(s), none holding a character")
        return ConversionError(
            f"{NO_TEXT}: none of its {n_pages} page(s) has a text layer, and OCR of each page rendered at "
            f"{_RENDER_DPI} dpi read no character (Tesseract's layout analysis found {evidence})",
            "nothing to index: remove it, or add a text description beside it", field="body")
    why = f" ({unjudged[0]})" if unjudged else ""
    return ConversionError(f"has no extractable text on any of its {n_pages} page(s), and OCR read none{why}",
                           "check the scan (blank pages?), or index a copy with a text layer", field="ocr")


def _rendered_page(data: bytes, number: int):
    """Page ``number`` rendered by PDFium at 300 dpi (fewer when that would pass the OCR
    pixel limit), ``None`` when pypdfium2 is not installed or cannot render it."""
    try:
        import pypdfium2
    except ImportError:
        return None
    try:
        document = pypdfium2.PdfDocument(data, password="")
        try:
            page = document[number - 1]
            width, height = page.get_size()
            scale = min(_RENDER_DPI / 72, (ocr.MAX_PIXELS / max(1.0, width * height)) ** 0.5)
            return page.render(scale=scale).to_pil()
        finally:
            document.close()
    except Exception:  # noqa: BLE001 - PDFium cannot render it either: the caller's error stands
        return None


_RULE_OPS = re.compile(rb"[\d.]\s+(?:re|l)\s")
_MIN_RULES = 6
_MAX_CONTENT_BYTES = 8 * 1024 * 1024


def _ruled(page) -> bool:
    """Whether the page's content stream draws at least a few rectangles or lines (a table's
    rules): cheap, so pdfplumber runs only where a ruled table can be."""
    try:
        contents = page.get_contents()
        raw = contents.get_data() if contents is not None else b""
    except (*_READ_ERRORS, Exception):  # noqa: BLE001 - a damaged stream: no tables, the text stays
        return False
    return len(raw) <= _MAX_CONTENT_BYTES and len(_RULE_OPS.findall(raw)) >= _MIN_RULES


class _Tables:
    """pdfplumber, opened only when a page has rules; the pages it wrote tables for."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pdf: Any = None
        self._failed = False
        self.numbers: list[int] = []

    def page(self, number: int, deadline: Deadline) -> str | None:
        """The page's text with its ruled tables as Markdown tables, ``None`` when it has
        none (or pdfplumber is not installed, or cannot read the page)."""
        if self._failed:
            return None
        try:
            if self._pdf is None:
                import pdfplumber

                self._pdf = pdfplumber.open(BytesIO(self._data), password="")
            text = _page_with_tables(self._pdf.pages[number - 1], deadline)
        except ImportError:
            self._failed = True
            return None
        except ConversionError:
            raise
        except Exception:  # noqa: BLE001 - pdfplumber cannot read this page: its pypdf text stays
            return None
        if text is not None:
            self.numbers.append(number)
        return text

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()

    def summary(self) -> str:
        if not self.numbers:
            return ""
        from importlib.metadata import version

        pages = ", ".join(map(str, self.numbers))
        return f"pdfplumber {version('pdfplumber')}: tables on page{'s' if len(self.numbers) > 1 else ''} {pages}"


def _page_with_tables(page, deadline: Deadline) -> str | None:
    from ragspine_index.converters.converted import TABLE_GROUP_CHARS, markdown_table

    found = []
    for table in page.find_tables():
        rows = [[clean_line(c or "") for c in row] for row in table.extract()]
        rows = [row for row in rows if any(row)]
        if len(rows) >= 2 and max(len(r) for r in rows) >= 2 and sum(1 for r in rows if sum(map(bool, r)) >= 2) >= 2:
            found.append((table.bbox, rows))
    deadline.check(f"tables on page {page.page_number}")
    if not found:
        return None
    boxes = [bbox for bbox, _ in found]

    def outside(obj) -> bool:
        x = (obj["x0"] + obj["x1"]) / 2
        y = (obj["top"] + obj["bottom"]) / 2
        return not any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)

    placed: list[tuple[float, float, str]] = []
    for line in page.filter(outside).extract_text_lines():
        placed.append((line["top"], line["x0"], line["text"]))
    for (x0, top, _, _), rows in found:
        placed.append((top, x0, "\n" + markdown_table(rows, group_chars=TABLE_GROUP_CHARS) + "\n"))
    placed.sort(key=lambda item: (round(item[0]), item[1]))
    return "\n".join(text for _, _, text in placed)


def _open_with_empty_password(reader) -> bool:
    """Whether an encrypted PDF opens with the empty user password (then it is decrypted)."""
    from pypdf.errors import DependencyError, PdfReadError

    try:
        return bool(reader.decrypt(""))
    except DependencyError as exc:  # AES needs the 'cryptography' package (pypdf[crypto])
        raise ConversionError("is encrypted with AES and 'cryptography' is not installed",
                              "pip install 'ragspine[formats]' (it installs pypdf[crypto])",
                              field="encrypted") from exc
    except (PdfReadError, *_READ_ERRORS):
        return False


def _pdfminer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pdfminer.six {version('pdfminer.six')}"
    except PackageNotFoundError:  # pragma: no cover
        return "pdfminer.six"


def _pdfium_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pypdfium2 {version('pypdfium2')} (PDFium)"
    except PackageNotFoundError:  # pragma: no cover
        return "PDFium"


class _SecondEngine:
    """pdfminer.six, opened only when a page needs it; remembers which pages it read."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pages: list[str] | None = None
        self._notes: dict[str, list[int]] = {}

    def page(self, number: int) -> str | None:
        """The text pdfminer reads on page ``number`` (1-based), ``None`` when it cannot."""
        if self._pages is None:
            try:
                self._pages = _pdfminer_pages(self._data)
            except ConversionError:
                self._pages = []
        return self._pages[number - 1] if number <= len(self._pages) else None

    def note(self, number: int, why: str) -> None:
        self._notes.setdefault(why, []).append(number)

    def summary(self) -> str:
        if not self._notes:
            return ""
        parts = [f"page{'s' if len(n) > 1 else ''} {', '.join(map(str, n))} ({why})" for why, n in self._notes.items()]
        return f"{_pdfminer_version()}: " + "; ".join(parts)


def _pdfminer_pages(data: bytes, deadline: Deadline | None = None, max_pages: int | None = None) -> list[str]:
    """Every page's text by pdfminer.six (with the empty password), or ConversionError."""
    try:
        from pdfminer.high_level import extract_pages
        from pdfminer.layout import LAParams, LTFigure, LTTextContainer
    except ImportError as exc:
        raise ConversionError("needs pdfminer.six, which is not installed",
                              "pip install 'ragspine[formats]'", field="content") from exc
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    pages: list[str] = []
    try:
        for layout in extract_pages(BytesIO(data), password="", laparams=LAParams(all_texts=True)):
            if deadline is not None:
                deadline.check(f"page {len(pages) + 1}")
            if max_pages is not None and len(pages) >= max_pages:
                raise ConversionError(f"has more than {max_pages:,} pages (limit {max_pages:,})", "split it",
                                      field="limits")
            pages.append("".join(_pdfminer_texts(layout, LTTextContainer, LTFigure)))
    except ConversionError:
        raise
    except Exception as exc:  # noqa: BLE001 - pdfminer raises many types for a damaged file
        raise ConversionError(f"cannot be read as a PDF by pdfminer.six either ({type(exc).__name__})",
                              "re-export it from its source application") from exc
    return pages


def _pdfminer_texts(layout, text_type, figure_type) -> list[str]:
    """The text boxes of a pdfminer page layout, those inside figures (Form XObjects: text a
    page draws through one, which ``all_texts`` lays out) included, in order."""
    out: list[str] = []
    stack = [iter(layout)]
    while stack and len(stack) <= 64:
        element = next(stack[-1], None)
        if element is None:
            stack.pop()
        elif isinstance(element, text_type):
            out.append(element.get_text())
        elif isinstance(element, figure_type):
            stack.append(iter(element))
    return out


def _by_pdfminer(data: bytes, limits: ConversionLimits, problem: str, *, reason: str) -> Converted:
    """The whole file by pdfminer.six (pypdf could not open it), else by PDFium (pypdfium2,
    which pdfplumber brings: a third engine, e.g. for Form XObjects that draw each other in
    a loop, pdfminer's ``issue-1113-evil-xobjects.pdf``); ``problem`` when none can."""
    deadline = Deadline(limits.seconds)
    properties = _pdfminer_properties(data, problem)
    engine = f"{_pdfminer_version()}: every page ({reason})"
    try:
        pages: list[str] | None = _pdfminer_pages(data, deadline, limits.max_pages)
        failed = "no text"
    except ConversionError as exc:
        if exc.field == "limits":
            raise
        pages, failed = None, type(exc.__cause__ or exc).__name__
    if pages is None or not any(page.strip() for page in pages):
        pages = _pdfium_pages(data, deadline, limits.max_pages)
        engine = f"{_pdfium_version()}: every page ({reason}; pdfminer.six: {failed})"
        if pages is None:
            raise ConversionError(problem, "re-export it from its source application")
    out = TextBuilder(limits)
    texts, running = strip_running_lines([_page_text(raw) for raw in pages])
    for number, page_text in enumerate(texts, start=1):
        out.add(page_text, f"page={number}")
    if not out.text().strip():
        raise ConversionError(problem, "re-export it from its source application")
    title = next((v for k, v in properties if k == "Title"), "")
    return Converted(text=out.text(), regions=tuple(out.regions), header_lines=running, engine_note=engine,
                     properties=properties, title=title)


def _pdfminer_properties(data: bytes, problem: str) -> tuple[tuple[str, str], ...]:
    """The info dictionary and XMP packet of a PDF pypdf cannot open, read by pdfminer.six, as
    :func:`_properties` and :func:`_xmp_properties` read them: a file whose metadata cannot be
    read is an error (``problem`` when pdfminer cannot open it), never published unchecked."""
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import PDFStream, resolve1
    from pdfminer.utils import decode_text

    def strings(value, depth: int = 0) -> list[str]:
        value = resolve1(value)
        if depth > 8:
            return []
        if isinstance(value, bytes):
            return [decode_text(value)] if value.strip() else []
        if isinstance(value, (list, tuple)):
            return [t for item in value for t in strings(item, depth + 1)]
        if isinstance(value, dict):
            return [t for item in value.values() for t in strings(item, depth + 1)]
        if isinstance(value, (int, float)):
            return [str(value)]
        name = getattr(value, "name", None)  # a PSLiteral: a name
        return [str(name)] if name else []

    try:
        document = PDFDocument(PDFParser(BytesIO(data)), password="")
        info = [(str(k), resolve1(v)) for d in document.info for k, v in resolve1(d).items()]
        metadata = resolve1(document.catalog.get("Metadata"))
        raw = metadata.get_data() if isinstance(metadata, PDFStream) else None
    except Exception as exc:  # noqa: BLE001 - pdfminer raises many types for a damaged file
        raise ConversionError(problem, "re-export it from its source application") from exc
    out = []
    for key, value in info:
        if key in ("Producer", "CreationDate", "ModDate", "Trapped"):
            continue
        text = clean_line(" ".join(strings(value)))
        if isinstance(value, bytes) and (not text or text.casefold() in _PLACEHOLDERS):
            continue
        out.append((key, text))  # a non-text value with no text is kept empty: the check refuses it
    return tuple(out) + (_xmp_parse(raw) if raw else ())


def _pdfium_pages(data: bytes, deadline: Deadline, max_pages: int) -> list[str] | None:
    """Every page's text by PDFium (pypdfium2), ``None`` when it is not installed or cannot
    open the file (a page it cannot read is empty). PDFium is native code: it runs, as every
    converter does, in the isolated converter process with its memory and time limits."""
    try:
        import pypdfium2
    except ImportError:
        return None
    try:
        document = pypdfium2.PdfDocument(data, password="")
    except Exception:  # noqa: BLE001 - PDFium cannot open it either
        return None
    try:
        if len(document) > max_pages:
            raise ConversionError(f"has {len(document):,} pages (limit {max_pages:,})", "split it", field="limits")
        pages: list[str] = []
        for number in range(1, len(document) + 1):
            deadline.check(f"page {number}")
            try:
                page = document[number - 1]
                text = page.get_textpage().get_text_range()
            except Exception:  # noqa: BLE001 - one damaged page: empty, the others still read
                text = ""
            pages.append(text.replace("\r\n", "\n").replace("\r", "\n"))
        return pages
    finally:
        document.close()


#: A line is a running header/footer when it is among the first or last ``_EDGE_LINES``
#: lines of at least half the pages with text, and of at least ``_RUNNING_MIN_PAGES``.
_EDGE_LINES = 2
_RUNNING_MIN_PAGES = 3
_DIGITS = re.compile(r"\d+")


def _running_key(line: str, *, masked: bool) -> str:
    """A line as compared across pages; ``masked``: its numbers too (``Page 3 of 10`` →
    ``page # of #``)."""
    key = " ".join(line.split()).casefold()
    return _DIGITS.sub("#", key) if masked else key


def strip_running_lines(pages: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Pages without their running headers and footers, and those lines (once each, first
    seen first): they repeat on every page, so indexed they would make about one chunk a
    page about nothing; they are still read for a sensitivity marking.

    A running line is one of the first or last ``_EDGE_LINES`` lines of at least half the
    pages with text (and of ``_RUNNING_MIN_PAGES``), the same text each time; the very
    first or last line may differ in its numbers (a page number: ``Page 3 of 10``). When
    they are all the text the document has (the same short page, repeated), none is removed."""
    with_text = [p for p in pages if p.strip()]
    if len(with_text) < _RUNNING_MIN_PAGES:
        return pages, ()
    exact: Counter[str] = Counter()
    masked: Counter[str] = Counter()
    for text in with_text:
        lines = [line for line in text.split("\n") if line.strip()]
        exact.update({_running_key(line, masked=False) for line in lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]})
        masked.update({_running_key(line, masked=True) for line in lines[:1] + lines[-1:]})
    need = max(_RUNNING_MIN_PAGES, -(-len(with_text) // 2))
    running = {key for key, n in exact.items() if n >= need and len(key) <= 300}
    numbered = {key for key, n in masked.items() if n >= need and len(key) <= 300 and "#" in key}
    if not running and not numbered:
        return pages, ()

    def is_running(line: str, outermost: bool) -> bool:
        if line.lstrip().startswith("|"):  # a table row (a header repeated on each page) is content
            return False
        return (_running_key(line, masked=False) in running
                or outermost and _running_key(line, masked=True) in numbered)

    out: list[str] = []
    removed: dict[str, None] = {}
    for text in pages:
        lines = [line for line in text.split("\n")]
        for i in range(_EDGE_LINES):  # from the top
            while lines and not lines[0].strip():
                lines.pop(0)
            if lines and is_running(lines[0], i == 0):
                removed.setdefault(" ".join(lines.pop(0).split()))
        for i in range(_EDGE_LINES):  # from the bottom
            while lines and not lines[-1].strip():
                lines.pop()
            if lines and is_running(lines[-1], i == 0):
                removed.setdefault(" ".join(lines.pop().split()))
        out.append("\n".join(lines).strip())
    if not any(text for text in out):  # the repeated lines are all the text there is: content, kept
        return pages, ()
    return out, tuple(list(removed)[:200])


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
    return _xmp_parse(raw)


def _xmp_parse(raw: bytes) -> tuple[tuple[str, str], ...]:
    """The properties of an XMP packet (:func:`_xmp_properties`)."""
    from ragspine_index.converters.markings import XMP_PACKET, parse_part

    # The <?xpacket?> wrapper holds no property; its begin="" is meant to hold a byte-order mark,
    # which some writers damage (AcroForm_TEST.pdf: EF BB 3F, not UTF-8), so it is dropped before
    # parsing. What is inside is parsed by defusedxml (entities refused), and fails closed.
    root = parse_part(_XPACKET.sub(b"", raw), XMP_PACKET)
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
_XPACKET = re.compile(rb"<\?xpacket\b[^>]{0,300}\?>")
