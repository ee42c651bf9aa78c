"""Image files (``.png``, ``.jpg``, ``.jpeg``) → their text by OCR (:mod:`.ocr`,
Tesseract), one region ``page=1`` so a chunk cites ``scan.png#page=1&chars=…``.

The image is opened with Pillow first (its header only) to check that it is an image and
below :data:`~.ocr.MAX_PIXELS`; Tesseract then reads the file's own bytes. Without the
``tesseract`` program the files are listed as skipped with the command that installs it.
"""

from __future__ import annotations

from io import BytesIO

from ragspine_core.text.normalize import normalize_extracted

from ragspine_index.converters import ocr
from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder

VERSION = "2"  # 2: orientation detection before OCR (--psm 1 with osd data, issue 38)
EXTRA_MODULE = "PIL"


def convert_image(data: bytes, limits: ConversionLimits) -> Converted:
    from PIL import Image, UnidentifiedImageError

    deadline = Deadline(limits.seconds)
    try:
        with Image.open(BytesIO(data)) as image:
            width, height = image.size
            kind = image.format or "image"
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ConversionError(f"cannot be read as an image ({type(exc).__name__}; damaged, or not PNG/JPEG?)",
                              "re-export it as PNG") from exc
    if width * height > ocr.MAX_PIXELS:
        raise ConversionError(f"is {width}x{height} pixels (limit {ocr.MAX_PIXELS:,} pixels)",
                              "scale the scan down (300 dpi is plenty)", field="limits")
    text = normalize_extracted(ocr.ocr_image(data, deadline, f"the {kind} image"), join_hyphens=True)
    out = TextBuilder(limits)
    out.add("\n".join(line.rstrip() for line in text.strip().split("\n")), "page=1")
    if not out.text().strip():
        raise ConversionError("has no text that OCR can read", "check the image (a photo without text?)",
                              field="ocr")
    return Converted(text=out.text(), regions=tuple(out.regions), engine_note=f"OCR by {ocr.lineage()}: every page")
