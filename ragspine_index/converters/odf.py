"""OpenDocument (``.odt``, ``.ods``, ``.odp``: LibreOffice, OpenOffice) → Markdown-shaped
text, reading the package's ``content.xml`` with defusedxml (the standard library's
parser without it); no extra beyond the zip checks every Office file gets.

* text (``.odt``): ``text:h`` headings at their outline level (``#``…; one region per
  heading section, ``anchor=<slug>``), paragraphs, list items as ``- ``, tables as
  Markdown tables (a merged cell's text once), sections and frames (text boxes) in order;
* spreadsheet (``.ods``): ``## Sheet: <name>`` and its rows as a Markdown table, one
  region per row (``sheet=Q3&cells=A5:F5``; repeated rows and columns counted, trailing
  empty ones dropped);
* presentation (``.odp``): ``## Slide N: <name>`` and every paragraph of the slide, one
  region per slide (``slide=N``), speaker notes under ``Notes:``.

``meta.xml`` gives the title and properties (``dc:title``, ``meta:keyword``, user-defined
properties: a ``classification`` one marks the file like an Office custom property).
Macros, scripts and embedded objects are never run or opened.
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from typing import Any

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, cell_text, check_zip, clean_line, markdown_table, slug
from ragspine_index.converters.regions import region_fragment

VERSION = "1"
EXTRA_MODULE = ""  # the standard library (defusedxml when installed)

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_MIMETYPES = {"odt": "application/vnd.oasis.opendocument.text",
              "ods": "application/vnd.oasis.opendocument.spreadsheet",
              "odp": "application/vnd.oasis.opendocument.presentation"}
#: A repeat count past this (``number-rows-repeated="1048000"`` of an empty tail) is not expanded.
_MAX_REPEAT = 1000


def _q(prefix: str, name: str) -> str:
    return f"{{{_NS[prefix]}}}{name}"


def _parse(raw: bytes, kind: str):
    try:
        from defusedxml.ElementTree import fromstring
    except ImportError:  # pragma: no cover - defusedxml ships with the formats extra
        from xml.etree.ElementTree import fromstring
    try:
        return fromstring(raw)
    except Exception as exc:  # noqa: BLE001 - damaged or hostile XML
        raise ConversionError(f"cannot be read as {kind} (its content.xml: {type(exc).__name__})",
                              f"re-save it as .{kind.lower()}") from exc


def _open(data: bytes, limits: ConversionLimits, kind: str):
    check_zip(data, limits, kind)
    with zipfile.ZipFile(BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "content.xml" not in names:
            raise ConversionError("is not an OpenDocument file (no content.xml)", f"re-save it as .{kind.lower()}")
        mimetype = archive.read("mimetype").decode("ascii", "replace").strip() if "mimetype" in names else ""
        if mimetype and mimetype != _MIMETYPES[kind.lower()]:
            raise ConversionError(f"is not {kind} (its mimetype is {mimetype[:80]!r})",
                                  "give it the suffix of its type (.odt, .ods, .odp)")
        content = _parse(archive.read("content.xml"), kind)
        meta = _parse(archive.read("meta.xml"), kind) if "meta.xml" in names else None
    body = content.find(_q("office", "body"))
    if body is None:
        raise ConversionError(f"cannot be read as {kind} (no office:body)", f"re-save it as .{kind.lower()}")
    return body, _properties(meta)


def _properties(meta) -> tuple[tuple[str, str], ...]:
    if meta is None:
        return ()
    out: list[tuple[str, str]] = []
    root = meta.find(_q("office", "meta"))
    if root is None:
        return ()
    for el in root:
        local = el.tag.rsplit("}", 1)[-1]
        text = clean_line("".join(el.itertext()))
        if not text:
            continue
        if local in ("title", "subject", "description"):
            out.append((local, text))
        elif local == "keyword":
            out.append(("keywords", text))
        elif local == "user-defined":
            name = el.get(_q("meta", "name")) or ""
            if name:
                out.append((name, text))
    return tuple(out)


def inline_text(el) -> str:
    """The text of a paragraph-like element: spans, links, ``text:s`` spaces, tabs, breaks;
    notes and annotations left out."""
    parts: list[str] = [el.text or ""]
    for child in el:
        local = child.tag.rsplit("}", 1)[-1]
        if local == "s":
            parts.append(" " * min(int(child.get(_q("text", "c"), "1") or 1), 100))
        elif local in ("tab", "line-break"):
            parts.append(" ")
        elif local in ("note", "annotation", "bookmark-ref"):
            pass
        elif local == "frame":
            parts.append(" " + " ".join(inline_text(p) for p in child.iter() if p.tag in _PARAS))
        else:
            parts.append(inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


_PARAS = frozenset({_q("text", "p"), _q("text", "h")})


def _table_rows(table) -> list[tuple[int, list[str]]]:
    """``(row number, cell texts)`` of the non-empty rows; repeated rows and columns are
    counted (an empty run of a million rows costs nothing), a non-empty repeat expanded up
    to ``_MAX_REPEAT``; a covered (merged-away) cell is empty: its text is in the first."""
    rows: list[tuple[int, list[str]]] = []
    number = 0
    for row in table.iter(_q("table", "table-row")):
        cells: list[str] = []
        for cell in row:
            local = cell.tag.rsplit("}", 1)[-1]
            if local not in ("table-cell", "covered-table-cell"):
                continue
            text = "" if local == "covered-table-cell" else " ".join(inline_text(p) for p in cell.iter() if p.tag in _PARAS)
            repeat = int(cell.get(_q("table", "number-columns-repeated"), "1") or 1)
            cells.extend([text] * min(repeat, _MAX_REPEAT))
        while cells and not cells[-1].strip():
            cells.pop()
        repeat = max(1, int(row.get(_q("table", "number-rows-repeated"), "1") or 1))
        if cells:
            rows.extend((number + i + 1, cells) for i in range(min(repeat, _MAX_REPEAT)))
        number += repeat
    return rows


def convert_odt(data: bytes, limits: ConversionLimits) -> Converted:
    body, props = _open(data, limits, "ODT")
    root = body.find(_q("office", "text"))
    if root is None:
        raise ConversionError("is not a text document (no office:text)", "give it the suffix of its type")
    deadline = Deadline(limits.seconds)
    out = TextBuilder(limits)
    section: list[str] = []
    state: dict[str, Any] = {"anchor": "", "title": "", "n": 0}
    seen: dict[str, int] = {}

    def flush() -> None:
        if section:
            out.add("\n\n".join(section), region_fragment("anchor", state["anchor"]) if state["anchor"] else "")
            section.clear()

    def walk(el, in_list: bool = False) -> None:
        for child in el:
            state["n"] += 1
            if state["n"] % 500 == 0:
                deadline.check(f"element {state['n']}")
            tag = child.tag
            if tag == _q("text", "h"):
                text = clean_line(inline_text(child))
                if not text:
                    continue
                flush()
                level = min(max(int(child.get(_q("text", "outline-level"), "1") or 1), 1), 6)
                anchor = slug(text)
                count = seen.get(anchor, 0)
                seen[anchor] = count + 1
                state["anchor"] = anchor if count == 0 else f"{anchor}-{count}"
                state["title"] = state["title"] or text
                section.append(f"{'#' * level} {text}")
            elif tag == _q("text", "p"):
                text = clean_line(inline_text(child))
                if text:
                    if in_list and section and section[-1].startswith("- "):
                        section[-1] += f"\n- {text}"
                    else:
                        section.append(f"- {text}" if in_list else text)
            elif tag == _q("table", "table"):
                table = markdown_table([cells for _, cells in _table_rows(child)])
                if table:
                    section.append(table)
            elif tag in (_q("text", "list"), _q("text", "list-item"), _q("text", "list-header")):
                walk(child, in_list=True)
            elif tag in (_q("text", "section"), _q("draw", "frame"), _q("draw", "text-box"),
                         _q("text", "soft-page-break")):
                walk(child, in_list)

    walk(root)
    flush()
    title = next((v for k, v in props if k == "title"), "") or state["title"]
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props, title=title)


def convert_ods(data: bytes, limits: ConversionLimits) -> Converted:
    body, props = _open(data, limits, "ODS")
    root = body.find(_q("office", "spreadsheet"))
    if root is None:
        raise ConversionError("is not a spreadsheet (no office:spreadsheet)", "give it the suffix of its type")
    deadline = Deadline(limits.seconds)
    out = TextBuilder(limits)
    cells = 0
    for table in root.iter(_q("table", "table")):
        name = table.get(_q("table", "name"), "") or "Sheet"
        deadline.check(f"sheet {name[:40]!r}")
        rows = [(r, [cell_text(c) for c in row]) for r, row in _table_rows(table)]
        cells += sum(len(t) for _, t in rows)
        if cells > limits.max_cells:
            raise ConversionError(f"has more than {limits.max_cells:,} non-empty cells", "split the file",
                                  field="limits")
        if rows:
            out.add(f"## Sheet: {' '.join(name.split())}")
            out.add_table(rows, fragment=region_fragment("sheet", name), split_hint="split the spreadsheet")
    if not out.text().strip():
        raise ConversionError("has no values in any sheet", "add data, or remove it from the library", field="body")
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     title=next((v for k, v in props if k == "title"), ""))


def convert_odp(data: bytes, limits: ConversionLimits) -> Converted:
    body, props = _open(data, limits, "ODP")
    root = body.find(_q("office", "presentation"))
    if root is None:
        raise ConversionError("is not a presentation (no office:presentation)", "give it the suffix of its type")
    deadline = Deadline(limits.seconds)
    out = TextBuilder(limits)
    pages = root.findall(_q("draw", "page"))
    if len(pages) > limits.max_pages:
        raise ConversionError(f"has {len(pages):,} slides (limit {limits.max_pages:,})", "split it", field="limits")
    first = ""
    notes_tag = _q("presentation", "notes")
    for number, page in enumerate(pages, start=1):
        deadline.check(f"slide {number}")
        name = clean_line(page.get(_q("draw", "name"), ""))
        notes_el = page.find(notes_tag)
        in_notes = {id(x) for x in notes_el.iter()} if notes_el is not None else set()
        texts = []
        for el in page.iter():
            if el.tag in _PARAS and id(el) not in in_notes:
                text = clean_line(inline_text(el))
                if text:
                    texts.append(text)
        heading = texts[0] if texts else name
        first = first or heading
        blocks = [f"## Slide {number}: {heading}" if heading else f"## Slide {number}"]
        blocks += [f"- {t}" for t in texts[1:]]
        if notes_el is not None:
            notes = " ".join(clean_line(inline_text(p)) for p in notes_el.iter() if p.tag in _PARAS).strip()
            if notes:
                blocks.append(f"Notes: {notes}")
        out.add("\n".join(blocks), f"slide={number}")
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     title=next((v for k, v in props if k == "title"), "") or first)

