"""PPTX → text with python-pptx (MIT): one region per slide (``slide=N``), each slide
opening with ``## Slide N: <title>``, bullet paragraphs as ``- `` items (indented by
level), tables as Markdown tables, speaker notes under ``Notes:``.

Slide masters and layouts are read for a sensitivity marking (:mod:`.markings`).
Embedded objects, media, macros and links are never opened or followed.
"""

from __future__ import annotations

from io import BytesIO

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, check_zip, clean_line, markdown_table, TABLE_GROUP_CHARS
from ragspine_index.converters.markings import pptx_marking_lines
from ragspine_index.converters.ooxml import package_properties

VERSION = "3"  # 2: tables in whole-row groups under their header (issue 36); 3: + normalised text (issue 38)
EXTRA_MODULE = "pptx"


def convert_pptx(data: bytes, limits: ConversionLimits) -> Converted:
    import pptx

    check_zip(data, limits, "PPTX")
    deadline = Deadline(limits.seconds)
    try:
        presentation = pptx.Presentation(BytesIO(data))
        slides = list(presentation.slides)
    except Exception as exc:  # noqa: BLE001 - python-pptx raises many types for a damaged package
        raise ConversionError(f"cannot be read as PPTX ({type(exc).__name__}; damaged, or not a presentation?)",
                              "re-save it from PowerPoint as .pptx") from exc
    if len(slides) > limits.max_pages:
        raise ConversionError(f"has {len(slides):,} slides (limit {limits.max_pages:,})", "split it", field="limits")
    out = TextBuilder(limits)
    first_title = ""
    for number, slide in enumerate(slides, start=1):
        deadline.check(f"slide {number}")
        title_shape = slide.shapes.title
        title = clean_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
        first_title = first_title or title
        blocks = [f"## Slide {number}: {title}" if title else f"## Slide {number}"]
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            blocks.extend(_shape_blocks(shape))
        if slide.has_notes_slide:
            notes = clean_line(slide.notes_slide.notes_text_frame.text) if slide.notes_slide.notes_text_frame else ""
            if notes:
                blocks.append(f"Notes: {notes}")
        out.add("\n\n".join(b for b in blocks if b), f"slide={number}")
    props = package_properties(data)
    if not out.text().strip():
        raise ConversionError("has no text on any slide", "add text, or remove it from the library", field="body")
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     marking_lines=pptx_marking_lines(data),
                     title=next((v for k, v in props if k == "title"), "") or first_title)


def _shape_blocks(shape) -> list[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if getattr(shape, "has_table", False):
        return [markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows], group_chars=TABLE_GROUP_CHARS)]
    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        return [b for child in shape.shapes for b in _shape_blocks(child)]
    if not getattr(shape, "has_text_frame", False):
        return []
    paragraphs = shape.text_frame.paragraphs
    lines = []
    for paragraph in paragraphs:
        text = clean_line(paragraph.text)
        if not text:
            continue
        bullet = len(paragraphs) > 1 or paragraph.level > 0
        lines.append(("  " * paragraph.level + "- " + text) if bullet else text)
    return ["\n".join(lines)] if lines else []
