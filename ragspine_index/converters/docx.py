"""DOCX → Markdown-shaped text with python-docx (MIT): headings as ``#``, list items as
``- ``, tables as Markdown tables; one region per heading section (``anchor=<slug>``).

A table inside a table cell (which python-docx's cell text leaves out) is written as a
table of its own after the table that holds it; the text of a text box (``w:txbxContent``,
read once: Word stores a VML copy in ``mc:Fallback``) is a paragraph after the paragraph
that anchors it.

Page headers and footers (every variant, with their tables and text boxes), watermarks,
text boxes, content controls and tracked changes are read for a sensitivity marking
(:mod:`.markings`). Macros (``.docm``) are never run: python-docx reads XML parts only, and a
macro-enabled package is refused by its content type.
"""

from __future__ import annotations

from io import BytesIO

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, check_zip, clean_line, markdown_table, slug, TABLE_GROUP_CHARS
from ragspine_index.converters.markings import docx_marking_lines
from ragspine_index.converters.ooxml import package_properties
from ragspine_index.converters.regions import region_fragment

VERSION = "5"  # 2: tables in whole-row groups under their header (issue 36); 3/4: + normalised text, outline headings, merged cells once; 5: nested tables and text boxes indexed (issue 38)
EXTRA_MODULE = "docx"


def convert_docx(data: bytes, limits: ConversionLimits) -> Converted:
    import docx
    from docx.table import Table

    check_zip(data, limits, "DOCX")
    deadline = Deadline(limits.seconds)
    try:
        document = docx.Document(BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - python-docx raises many types for a damaged package
        raise ConversionError(f"cannot be read as DOCX ({type(exc).__name__}; damaged, or not a Word document?)",
                              "re-save it from Word as .docx") from exc
    out = TextBuilder(limits)
    section: list[str] = []  # the blocks of the current heading section
    anchor = ""
    seen: dict[str, int] = {}
    in_list = False

    def flush() -> None:
        if section:
            out.add("\n\n".join(section), region_fragment("anchor", anchor) if anchor else "")
            section.clear()

    # style id -> name once: python-docx's paragraph.style scans every style per call
    style_names = {style.style_id: style.name or "" for style in document.styles}
    style_outline = _style_outline_levels(document)
    title = ""
    for n, block in enumerate(document.iter_inner_content()):
        if n % 200 == 0:
            deadline.check(f"block {n + 1}")
        if isinstance(block, Table):
            for rows in _tables_in(block):
                table = markdown_table(rows, group_chars=TABLE_GROUP_CHARS)
                if table:
                    section.append(table)
            in_list = False
            continue
        text = clean_line(block.text)
        boxes = _text_boxes(block._p)
        if not text:
            if boxes:
                section.extend(boxes)
                in_list = False
            continue
        style = _style_name(block, style_names)
        level = _heading_level(style) or _outline_level(block, style_outline)
        if level:
            flush()
            anchor = _unique(slug(text), seen)
            title = title or text
            section.append(f"{'#' * level} {text}")
            in_list = False
        elif _is_list_item(block, style):
            if in_list:
                section[-1] += f"\n- {text}"
            else:
                section.append(f"- {text}")
            in_list = True
        else:
            section.append(text)
            in_list = False
        if boxes:
            section.extend(boxes)
            in_list = False
    flush()
    props = package_properties(data)
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     marking_lines=docx_marking_lines(data),
                     title=next((v for k, v in props if k == "title"), "") or title)


def _style_name(paragraph, names: dict[str, str]) -> str:
    ppr = paragraph._p.pPr
    style_id = ppr.pStyle.val if ppr is not None and ppr.pStyle is not None else None
    return names.get(style_id, "") if style_id else ""


def _heading_level(name: str) -> int:
    if name == "Title":
        return 1
    if name.startswith("Heading"):
        digits = name[len("Heading"):].strip()
        return min(int(digits), 6) if digits.isdigit() and int(digits) > 0 else 1
    return 0


_MAX_NESTING = 8


def _tables_in(table, depth: int = 0) -> list[list[list[str]]]:
    """The table's rows, then the rows of each table nested in its cells (depth first)."""
    out = [_table_rows(table)]
    if depth >= _MAX_NESTING:
        return out
    seen: set[int] = set()
    alive = []
    for row in table.rows:
        for cell in row.cells:
            alive.append(cell._tc)
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            for inner in cell.tables:
                out += _tables_in(inner, depth + 1)
    return out


_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def _text_boxes(paragraph) -> list[str]:
    """The text of each text box anchored in ``paragraph`` (outermost boxes, not the VML
    copy in ``mc:Fallback``), one block per box, its paragraphs on lines."""
    out = []
    for box in paragraph.iter(f"{_W}txbxContent"):
        parent, skip = box.getparent(), False
        while parent is not None and parent is not paragraph:
            if parent.tag in (_MC_FALLBACK, f"{_W}txbxContent"):
                skip = True
                break
            parent = parent.getparent()
        if skip:
            continue
        lines = [clean_line("".join(t.text or "" for t in p.iter(f"{_W}t"))) for p in box.iter(f"{_W}p")]
        text = "\n".join(line for line in lines if line)
        if text:
            out.append(text)
    return out


def _table_rows(table) -> list[list[str]]:
    """Cell texts row by row, a merged cell's text once: python-docx repeats a cell that
    spans columns (``gridSpan``) or rows (``vMerge``) in every grid position it covers."""
    seen: set[int] = set()
    alive = []  # lxml keeps one proxy per element while it is referenced: ids stay unique
    rows = []
    for row in table.rows:
        texts = []
        for cell in row.cells:
            alive.append(cell._tc)
            key = id(cell._tc)
            texts.append("" if key in seen else cell.text)
            seen.add(key)
        rows.append(texts)
    return rows


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _style_outline_levels(document) -> dict[str, int]:
    """style id → heading level (1–6) from the style's own outline level (``w:outlineLvl``,
    following ``basedOn``): custom heading styles (``标题 1``, a standard's ``Chapter``)."""
    own: dict[str, int] = {}
    based: dict[str, str] = {}
    for style in document.styles.element.iter(f"{_W}style"):
        sid = style.get(f"{_W}styleId") or ""
        lvl = style.find(f"{_W}pPr/{_W}outlineLvl")
        if lvl is not None and (lvl.get(f"{_W}val") or "").isdigit() and int(lvl.get(f"{_W}val")) < 9:
            own[sid] = int(lvl.get(f"{_W}val")) + 1
        parent = style.find(f"{_W}basedOn")
        if parent is not None:
            based[sid] = parent.get(f"{_W}val") or ""
    out = {}
    for sid in set(own) | set(based):
        cur, hops = sid, 0
        while cur not in own and cur in based and hops < 10:
            cur, hops = based[cur], hops + 1
        if cur in own:
            out[sid] = min(own[cur], 6)
    return out


def _outline_level(paragraph, style_levels: dict[str, int]) -> int:
    """A paragraph's heading level from its own ``w:outlineLvl`` or its style's (0 = body)."""
    ppr = paragraph._p.pPr
    if ppr is not None:
        lvl = ppr.find(f"{_W}outlineLvl")
        if lvl is not None:
            val = lvl.get(f"{_W}val") or ""
            return min(int(val) + 1, 6) if val.isdigit() and int(val) < 9 else 0
        if ppr.pStyle is not None:
            return style_levels.get(ppr.pStyle.val, 0)
    return 0


def _is_list_item(paragraph, style: str) -> bool:
    if "List" in style:
        return True
    ppr = paragraph._p.pPr
    return ppr is not None and ppr.numPr is not None


def _unique(anchor: str, seen: dict[str, int]) -> str:
    count = seen.get(anchor, 0)
    seen[anchor] = count + 1
    return anchor if count == 0 else f"{anchor}-{count}"
