"""Legacy binary Office files (Word/Excel/PowerPoint 97-2003: ``.doc``, ``.xls``, ``.ppt``),
each an OLE compound file read with olefile (BSD, pure Python) for its properties.

* ``.doc``: the body by antiword (GPL-2 program, Debian's ``antiword``; tables come out as
  rows, written here as Markdown tables under their first row); the whole text stream by
  catdoc (Debian's ``catdoc``), whose lines that are not in the body (page headers and
  footers, footnotes, comments, text boxes) are read for a sensitivity marking and not
  indexed. A file antiword cannot read (Word 6/95, fast-saved) is read by catdoc alone and
  says so in its ``converter`` field. Headings (the chapter and section titles of
  antiword's DocBook output, ``-x db``: Word's Heading styles) are written as Markdown
  headings and cut the body into ``anchor=<slug>`` sections, as a .docx's are; cited by
  that section and character range.
* ``.xls``: xlrd (BSD, pure Python) on the ``Workbook`` stream olefile reads (Excel 5/95
  ``Book`` streams and Excel 2-4's bare BIFF files too), values only, like an XLSX: one ``## Sheet: <name>``
  section per sheet, one region per row (``sheet=<name>&cells=A5:F5``); print headers and
  footers (BIFF ``HEADER``/``FOOTER`` records) are read for a marking.
* ``.ppt``: the records of the ``PowerPoint Document`` stream ([MS-PPT]): each slide's text
  (its outline text in ``SlideListWithText``, in presentation order, and the text boxes
  of its ``Slide`` container) is a ``## Slide N`` section citing ``slide=N``, its speaker
  notes (the ``Notes`` container whose ``NotesAtom`` names the slide's id) after them as
  ``Notes: …``, as a .pptx slide's are; master, notes and header/footer text are read for
  a marking. catppt reads only the outline text (nothing from a LibreOffice-written file),
  so it is not used.
* Damaged files read anyway, each saying so in its ``converter`` field: a stream whose
  directory entry is marked a storage (POI's fuzzed decks) is read from its sector chain;
  an .xls shared-string table xlrd cannot read is left out when no cell refers to it.

Every one reads the OLE ``SummaryInformation`` (title, subject, keywords, comments) and
``DocumentSummaryInformation`` (category, company, manager, and the user-defined
properties where Microsoft Purview writes ``MSIP_Label_<id>_Name``) as the file's
properties, checked for a sensitivity like an Office Open XML file's. A password-protected
file is an ``encrypted`` error; a property set olefile cannot parse is an error for the
file (its marking could not be read), never skipped.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from io import BytesIO

from ragspine_index.converters.converted import (
    OLE_MAGIC, TABLE_GROUP_CHARS, CellBudget, LabelProperties, ConversionError, ConversionLimits, Converted, Deadline,
    TextBuilder, cell_text, clean_line, markdown_table,
)
from ragspine_index.converters.regions import region_fragment

VERSION = "2"  # 2 (issue 38): .doc headings (anchor= sections); .ppt speaker notes indexed under their slide; an .xls damaged shared-string table no cell uses left out; a stream entry marked a storage read
EXTRA_MODULE = "olefile"
XLS_MODULE = "xlrd"
#: What to run to install the .doc engines (docs/formats.md).
DOC_INSTALL_HINT = "apt-get install antiword catdoc"
_SUMMARY = ("title", "subject", "keywords", "comments")
_DOC_SUMMARY = ("category", "company", "manager")
_DOC_ENCRYPTED = 0x0100  # FibBase.fEncrypted


def doc_engine_available() -> bool:
    return shutil.which("antiword") is not None and shutil.which("catdoc") is not None


def _open(data: bytes, kind: str, stream: str):
    import olefile

    if not data.startswith(OLE_MAGIC):
        raise ConversionError(f"is not a legacy {kind} file (not an OLE compound file)",
                              f"give it the suffix of its real format, or re-save it from the application as {kind}")
    try:
        ole = olefile.OleFileIO(BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - olefile raises several types for a damaged container
        raise ConversionError(f"cannot be read as an OLE compound file ({type(exc).__name__}; damaged?)",
                              f"re-save it from the application as {kind}") from exc
    if ole.exists("EncryptedPackage") or ole.exists("EncryptedSummary"):
        raise ConversionError(f"is an encrypted {kind} file (password-protected)",
                              "save an unprotected copy; encrypted files are not indexed", field="encrypted")
    if not ole.exists(stream):
        raise ConversionError(f"is an OLE compound file with no {stream} stream, so not the format its suffix says",
                              "give it the suffix of its real format")
    return ole


def _decode(value: object, codepage: int | None) -> str:
    if isinstance(value, bytes):
        if len(value) >= 2 and len(value) % 2 == 0 and value[1::2].count(0) * 2 > len(value) // 2:
            codepage = 1200  # a UTF-16 string olefile left as bytes (a user-defined VT_LPWSTR)
        codec = {1200: "utf-16-le", 65001: "utf-8", None: "cp1252"}.get(codepage, f"cp{codepage}")
        try:
            return clean_line(value.decode(codec, "replace").rstrip("\x00"))
        except LookupError:
            return clean_line(value.decode("cp1252", "replace").rstrip("\x00"))
    return clean_line(str(value)) if isinstance(value, str) else ""


def read_stream(ole, name: str) -> tuple[bytes, str]:
    """The stream ``name`` and a note ("" unless it was repaired): a directory entry that holds a
    stream's sectors and size but is marked a storage (a damaged type byte; POI's fuzzed
    decks) is read as the stream it holds, as olefile reads any stream, from its sector chain."""
    try:
        return ole.openstream(name).read(), ""
    except OSError:
        import olefile

        sid = ole._find(name)  # olefile's own lookup and reader (its API has no way past the type check)
        entry = ole.direntries[sid]
        if entry.entry_type != olefile.STGTY_STORAGE or entry.size <= 0 or entry.kids:
            raise
        data = ole._open(entry.isectStart, entry.size).read()
        return data, f"its {name} directory entry is marked a storage (damaged): read as the stream it holds"


def ole_properties(ole) -> tuple[tuple[str, str], ...]:
    """``(name, value)`` of the summary, document-summary and user-defined properties that
    hold text; an enabled sensitivity label without its name adds
    :data:`~.converted.UNNAMED_LABEL_PROPERTY` (restricted unless a sidecar decides)."""
    out: list[tuple[str, str]] = []
    try:
        meta = ole.get_metadata()
        user = (ole.get_userdefined_properties("\x05DocumentSummaryInformation")
                if ole.exists("\x05DocumentSummaryInformation") else [])
    except Exception as exc:  # noqa: BLE001 - a damaged property set: its marking could not be read
        raise ConversionError(f"its OLE property sets cannot be read ({type(exc).__name__}), so a sensitivity "
                              "marking in them could not be checked", "re-save it from the application",
                              field="sensitivity") from exc
    for name in (*_SUMMARY, *_DOC_SUMMARY):
        value = _decode(getattr(meta, name, None), getattr(meta, "codepage_doc" if name in _DOC_SUMMARY
                                                            else "codepage", None))
        if value:
            out.append((name, value))
    labels = LabelProperties()
    for prop in user:
        name = _decode(prop.get("property_name"), 1200 if isinstance(prop.get("property_name"), bytes) else None)
        raw = prop.get("value")
        value = ("true" if raw else "false") if isinstance(raw, bool) else _decode(raw, None) if isinstance(
            raw, (bytes, str)) else str(raw) if isinstance(raw, (int, float)) else ""
        labels.add(name, value)
    return (*out, *labels.pairs, *labels.unnamed())


def _has(data: bytes, stream: str) -> bool:
    """Whether the directory of the OLE file ``data`` names ``stream`` (a cheap look before opening)."""
    return stream.encode("utf-16-le") in data


def _title(props: tuple[tuple[str, str], ...]) -> str:
    return next((v for k, v in props if k == "title"), "")


# --- .doc -----------------------------------------------------------------------------

def _run(args: list[str], path: str, deadline: Deadline, what: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([*args, path], capture_output=True, timeout=max(1.0, deadline.left()),
                              env={**os.environ, "LC_ALL": "C.UTF-8"}, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ConversionError(f"{what} took longer than the conversion time limit", "split the file",
                              field="limits") from exc


def _antiword_text(text: str) -> str:
    """antiword's output with its ``|cell   |cell   |`` table rows as Markdown tables."""
    blocks: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if rows:
            blocks.append(markdown_table(rows, group_chars=TABLE_GROUP_CHARS))
            rows.clear()

    paragraph: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if len(stripped) > 1 and stripped.startswith("|") and stripped.endswith("|"):
            if paragraph:
                blocks.append("\n".join(paragraph))
                paragraph = []
            rows.append([cell_text(c) for c in stripped[1:-1].split("|")])
            continue
        flush()
        if stripped:
            paragraph.append(line.rstrip())
        elif paragraph:
            blocks.append("\n".join(paragraph))
            paragraph = []
    flush()
    if paragraph:
        blocks.append("\n".join(paragraph))
    return "\n\n".join(blocks)


_SECTIONS = {"chapter": 1, "sect1": 2, "sect2": 3, "sect3": 4, "sect4": 5, "sect5": 6}


def _doc_headings(path: str, deadline: Deadline) -> list[tuple[int, str]]:
    """The document's headings in order, ``(level, text)``: the titles of the chapters and
    sections of antiword's DocBook output (``-x db``: a paragraph in a Heading style opens
    one), read with defusedxml (its DOCTYPE names a DTD, never fetched). ``[]`` when antiword
    writes none or no XML; the body is then one section, as before."""
    from defusedxml.ElementTree import fromstring

    proc = _run(["antiword", "-x", "db", "-m", "UTF-8.txt", "-w", "0"], path, deadline, "antiword")
    try:
        root = fromstring(proc.stdout) if proc.returncode == 0 else None
    except Exception:  # noqa: BLE001 - no headings rather than no document
        return []
    out: list[tuple[int, str]] = []
    for element in root.iter() if root is not None else ():
        level = _SECTIONS.get(element.tag if isinstance(element.tag, str) else "")
        title = element.find("title") if level else None
        text = clean_line("".join(title.itertext())) if title is not None else ""
        if level and text:
            out.append((level, text))
    return out


def _sections(text: str, headings: list[tuple[int, str]]) -> list[tuple[str, str]]:
    """``text`` (antiword's body, blocks apart by blank lines) cut at its headings, each
    written ``#``-prefixed at its level, as ``(section, anchor)``; a heading is matched to
    the next block whose text it is, in order (a few may be skipped: one antiword titled but
    wrote differently)."""
    from ragspine_index.converters.converted import slug

    out: list[tuple[str, str]] = []
    blocks: list[str] = []
    anchor, at = "", 0
    seen: dict[str, int] = {}
    for block in text.split("\n\n"):
        line = clean_line(block) if "\n" not in block.strip() else ""
        ahead = [i for i in range(at, min(at + 3, len(headings))) if headings[i][1] == line] if line else []
        if ahead:
            if blocks:
                out.append(("\n\n".join(blocks), anchor))
                blocks = []
            level, title = headings[ahead[0]]
            at = ahead[0] + 1
            base = slug(title)
            seen[base] = seen.get(base, 0) + 1
            anchor = base if seen[base] == 1 else f"{base}-{seen[base] - 1}"
            blocks.append(f"{'#' * level} {title}")
        else:
            blocks.append(block)
    if blocks:
        out.append(("\n\n".join(blocks), anchor))
    return out


def convert_doc(data: bytes, limits: ConversionLimits) -> Converted:
    ole = _open(data, "Word 97-2003 (.doc)", "WordDocument")
    fib = read_stream(ole, "WordDocument")[0][:12]
    props = ole_properties(ole)
    ole.close()
    if len(fib) >= 12 and struct.unpack_from("<H", fib, 10)[0] & _DOC_ENCRYPTED:
        raise ConversionError("is an encrypted Word file (password-protected)",
                              "save an unprotected copy; encrypted files are not indexed", field="encrypted")
    if not doc_engine_available():
        raise ConversionError("needs antiword and catdoc to be read, and they are not installed",
                              DOC_INSTALL_HINT, field="engine")
    deadline = Deadline(limits.seconds)
    with tempfile.NamedTemporaryFile(suffix=".doc") as handle:
        handle.write(data)
        handle.flush()
        whole = _run(["catdoc", "-d", "utf-8", "-w"], handle.name, deadline, "catdoc")
        body = _run(["antiword", "-m", "UTF-8.txt", "-w", "0"], handle.name, deadline, "antiword")
        headings = _doc_headings(handle.name, deadline) if body.returncode == 0 else []
    everything = whole.stdout.decode("utf-8", "replace") if whole.returncode == 0 else ""
    note = "antiword (body), catdoc (headers, footers, notes)"
    out = TextBuilder(limits)
    if body.returncode == 0 and body.stdout.strip():
        for section, anchor in _sections(_antiword_text(body.stdout.decode("utf-8", "replace")), headings):
            out.add(section, region_fragment("anchor", anchor) if anchor else "")
    elif everything.strip():
        note = "catdoc (antiword could not read it)"
        out.add(everything)
    else:
        raise ConversionError("cannot be read as a Word 97-2003 file by antiword or catdoc (damaged?)",
                              "re-save it from Word as .docx")
    body_lines = {" ".join(cell_text(c) for c in line.strip("|").split("|")).strip()
                  for line in out.text().split("\n")}
    body_words = " ".join(body_lines)
    outside = []
    for line in everything.split("\n"):
        shown = clean_line(line.replace("\t", " "))
        if shown and shown not in body_lines and shown not in body_words:
            outside.append(("header/footer/note/comment text", shown))
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props, marking_lines=tuple(outside),
                     title=_title(props), engine_note=note)


# --- .xls -----------------------------------------------------------------------------

_HEADER_FOOTER = {0x0014: "print header", 0x0015: "print footer"}


def _xls_header_footer(stream: bytes) -> list[tuple[str, str]]:
    """The BIFF8 ``HEADER``/``FOOTER`` records' strings (``&L``/``&C``/``&R`` codes kept:
    a marking is a word in them)."""
    out: list[tuple[str, str]] = []
    at = 0
    while at + 4 <= len(stream):
        kind, size = struct.unpack_from("<HH", stream, at)
        body = stream[at + 4:at + 4 + size]
        at += 4 + size
        if kind in _HEADER_FOOTER and len(body) >= 3:
            count, flags = struct.unpack_from("<HB", body, 0)
            raw = body[3:3 + count * (2 if flags & 1 else 1)]
            text = raw.decode("utf-16-le" if flags & 1 else "latin-1", "replace")
            if clean_line(text):
                out.append((_HEADER_FOOTER[kind], clean_line(text)))
    return out


def _xls_cell(cell, datemode: int) -> str:
    import xlrd

    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate.xldate_as_datetime(cell.value, datemode).isoformat(sep=" ").removesuffix(" 00:00:00")
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell_text(cell.value)
    if cell.ctype == xlrd.XL_CELL_NUMBER and float(cell.value).is_integer():
        return str(int(cell.value))
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return "TRUE" if cell.value else "FALSE"
    if cell.ctype in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    return cell_text(cell.value)


_BIFF_BOF = (b"\x09\x00", b"\x09\x02", b"\x09\x04", b"\x09\x08")  # BIFF2/3/4/5+ BOF records


def convert_xls(data: bytes, limits: ConversionLimits) -> Converted:
    import xlrd

    if data[:2] in _BIFF_BOF:  # Excel 2-4 saved a bare BIFF stream, not an OLE file
        props: tuple[tuple[str, str], ...] = ()
        stream, note = data, ""
    else:
        name = "Book" if _has(data, "Book") and not _has(data, "Workbook") else "Workbook"  # Book: Excel 5/95
        ole = _open(data, "Excel 97-2003 (.xls)", name)
        props = ole_properties(ole)
        stream, note = read_stream(ole, name)
        ole.close()
    deadline = Deadline(limits.seconds)
    try:  # the stream olefile read (it reads containers xlrd's own OLE reader refuses)
        book = _xlrd_book(stream)
    except xlrd.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise ConversionError("is an encrypted Excel file (password-protected)",
                                  "save an unprotected copy; encrypted files are not indexed",
                                  field="encrypted") from exc
        raise ConversionError("cannot be read as an Excel 97-2003 workbook (xlrd: damaged, or Excel 5/95?)",
                              "re-save it from Excel as .xlsx") from exc
    except (struct.error, IndexError, ValueError, AssertionError) as exc:  # xlrd on a damaged record
        unused = _without_unused_sst(stream)
        if unused is None:
            raise ConversionError(f"cannot be read as an Excel 97-2003 workbook (xlrd: {type(exc).__name__}; "
                                  "a damaged record)", "re-save it from Excel as .xlsx") from exc
        book = _xlrd_book(unused)  # what it raises now is the converter's located error
        sst = "its shared-string table is damaged and no cell refers to it: left out"
        note = f"{note}; {sst}" if note else sst
    out = TextBuilder(limits)
    budget = CellBudget(limits, "split the workbook, or export the part to index as CSV")
    try:
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            deadline.check(f"sheet {index + 1}")
            rows: list[tuple[int, list[str]]] = []
            for r in range(sheet.nrows):
                if r % 1000 == 999:
                    deadline.check(f"row {r + 1}")
                texts = budget.row([_xls_cell(c, book.datemode) for c in sheet.row(r)])
                if texts:
                    rows.append((r + 1, texts))
            if rows:
                out.add(f"## Sheet: {' '.join(sheet.name.split())}")
                out.add_table(rows, fragment=region_fragment("sheet", sheet.name), split_hint="split the workbook",
                              group_chars=TABLE_GROUP_CHARS)
            book.unload_sheet(index)
    finally:
        book.release_resources()
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     marking_lines=tuple(_xls_header_footer(stream)), title=_title(props), engine_note=note)


def _xlrd_book(stream: bytes):
    import xlrd

    return xlrd.open_workbook(file_contents=stream, on_demand=True, logfile=open(os.devnull, "w"),
                              ignore_workbook_corruption=True)


_SST, _LABEL_SST, _CONTINUE, _UNKNOWN = 0x00FC, 0x00FD, 0x003C, 0x7FFF


def _without_unused_sst(stream: bytes) -> bytes | None:
    """The BIFF8 stream with its shared-string table (SST, and the CONTINUE records after it)
    turned into records xlrd skips, when no cell refers to it (no LABELSST record anywhere):
    leaving it out loses nothing. ``None`` when a cell refers to it or there is none (POI's
    ``57456.xls`` declares 1,761 strings and holds none; every cell is blank)."""
    out = bytearray(stream)
    at, found, in_sst = 0, False, False
    while at + 4 <= len(stream):
        kind, size = struct.unpack_from("<HH", stream, at)
        if kind == _LABEL_SST:
            return None
        if kind == _SST or (in_sst and kind == _CONTINUE):
            struct.pack_into("<H", out, at, _UNKNOWN)
            found = in_sst = True
        else:
            in_sst = False
        at += 4 + size
    return bytes(out) if found else None


# --- .ppt -----------------------------------------------------------------------------

_TEXT_CHARS, _TEXT_BYTES, _CSTRING = 0x0FA0, 0x0FA8, 0x0FBA
_SLIDE, _NOTES, _MAIN_MASTER, _SLIDE_LIST, _SLIDE_PERSIST = 0x03EE, 0x03F0, 0x03F8, 0x0FF0, 0x03F3
_HEADERS_FOOTERS = 0x0FD9
_NOTES_ATOM = 0x03F1  # NotesAtom: slideIdRef (4 bytes), the slide the notes belong to
_CRYPT_SESSION = 0x2F14  # CryptSession10Container: the deck is encrypted
_MAX_DEPTH = 32


def _atom_text(kind: int, body: bytes) -> str:
    text = body.decode("latin-1" if kind == _TEXT_BYTES else "utf-16-le", "replace")
    return text.replace("\r", "\n").replace("\x0b", "\n")


def _records(buf: bytes, start: int, end: int, depth: int = 0):
    """``(type, instance, body start, body end, is container)`` of the records in ``buf[start:end]``."""
    if depth > _MAX_DEPTH:
        raise ConversionError("its PowerPoint records are nested too deeply (damaged?)", "re-save it as .pptx")
    at = start
    while at + 8 <= end:
        ver_inst, kind, size = struct.unpack_from("<HHI", buf, at)
        body_end = min(at + 8 + size, end)
        yield kind, ver_inst >> 4, at + 8, body_end, (ver_inst & 0xF) == 0xF
        at = body_end


def _texts(buf: bytes, start: int, end: int, depth: int = 0, *, kinds: tuple[int, ...] = (_TEXT_CHARS, _TEXT_BYTES)
           ) -> list[str]:
    out = []
    for kind, _, s, e, container in _records(buf, start, end, depth):
        if container:
            out += _texts(buf, s, e, depth + 1, kinds=kinds)
        elif kind in kinds:
            out.append(_atom_text(kind, buf[s:e]))
    return out


def convert_ppt(data: bytes, limits: ConversionLimits) -> Converted:
    ole = _open(data, "PowerPoint 97-2003 (.ppt)", "PowerPoint Document")
    props = ole_properties(ole)
    stream, note = read_stream(ole, "PowerPoint Document")
    ole.close()
    deadline = Deadline(limits.seconds)
    outline: list[list[str]] = []  # SlideListWithText (instance 0: slides), per slide in order
    slide_ids: list[int] = []  # each of those slides' id (its SlidePersistAtom's slideId)
    notes: dict[int, list[str]] = {}  # speaker notes by the id of the slide they belong to
    containers: list[list[str]] = []  # each Slide container's own text atoms, in stream order
    elsewhere: list[tuple[str, str]] = []

    def walk(start: int, end: int, depth: int) -> None:
        for kind, instance, s, e, container in _records(stream, start, end, depth):
            deadline.check(f"record at byte {s}")
            if kind == _CRYPT_SESSION:
                raise ConversionError("is an encrypted PowerPoint file (password-protected)",
                                      "save an unprotected copy; encrypted files are not indexed", field="encrypted")
            if kind == _SLIDE_LIST and container:
                current: list[str] | None = None
                for k2, _, s2, e2, c2 in _records(stream, s, e, depth + 1):
                    if k2 == _SLIDE_PERSIST:
                        current = []
                        if instance == 0:
                            outline.append(current)
                            slide_ids.append(struct.unpack_from("<I", stream, s2 + 12)[0] if e2 - s2 >= 16 else -1)
                    elif k2 in (_TEXT_CHARS, _TEXT_BYTES) and current is not None:
                        text = _atom_text(k2, stream[s2:e2])
                        if instance == 0:
                            current.append(text)
                        else:
                            elsewhere.append(("master/notes outline text", text))
            elif kind == _SLIDE and container:
                containers.append([t for t in _texts(stream, s, e, depth + 1) if t.strip() not in ("", "*")])
                # names and tags (CString atoms: ``___PPT10``, a footer's text) are not body text
                elsewhere.extend(("slide string", t) for t in _texts(stream, s, e, depth + 1, kinds=(_CSTRING,)))
                if len(outline) + len(containers) > limits.max_pages * 2:
                    raise ConversionError(f"has more than {limits.max_pages:,} slides", "split the deck",
                                          field="limits")
            elif kind in (_NOTES, _MAIN_MASTER, _HEADERS_FOOTERS) and container:
                where = {_NOTES: "speaker notes", _MAIN_MASTER: "slide master"}.get(kind, "header/footer")
                elsewhere.extend((where, t) for t in _texts(stream, s, e, depth + 1,
                                                            kinds=(_TEXT_CHARS, _TEXT_BYTES, _CSTRING)))
                if kind == _NOTES:
                    atom = next(((s2, e2) for k2, _, s2, e2, _c in _records(stream, s, e, depth + 1)
                                 if k2 == _NOTES_ATOM and e2 - s2 >= 4), None)
                    if atom is not None:
                        said = [t for t in _texts(stream, s, e, depth + 1) if t.strip() not in ("", "*")]
                        notes.setdefault(struct.unpack_from("<I", stream, atom[0])[0], []).extend(said)
            elif container:
                walk(s, e, depth + 1)

    walk(0, len(stream), 0)
    out = TextBuilder(limits)
    for n in range(max(len(outline), len(containers))):
        texts = (outline[n] if n < len(outline) else []) + (containers[n] if n < len(containers) else [])
        block = "\n".join(t.strip() for t in texts if t.strip() and t.strip() != "*")
        said = notes.get(slide_ids[n], []) if n < len(slide_ids) and slide_ids[n] != 0 else []
        spoken = " ".join(clean_line(t) for t in said if clean_line(t))
        if spoken:  # as a .pptx slide's notes are written (pptx.py)
            block = f"{block}\n\nNotes: {spoken}" if block else f"Notes: {spoken}"
        if block:
            out.add(f"## Slide {n + 1}\n\n{block}", fragment=f"slide={n + 1}")
    lines = [(where, clean_line(line)) for where, text in elsewhere for line in text.split("\n") if clean_line(line)]
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props, marking_lines=tuple(lines),
                     title=_title(props) or _first_line(out.text()), engine_note=note)


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip() and not line.startswith("## Slide"):
            return clean_line(line)
    return ""
