"""Converters: PDF, DOCX, PPTX, XLSX, HTML, CSV, OpenDocument, RTF, EPUB, e-mail (EML,
MSG) and image (OCR) files into document text.

``parse_library`` hands every file whose suffix is in :data:`CONVERTED_SUFFIXES` to
:class:`ConvertedFiles`, which converts it (one module per format), reads its metadata
(sidecar ``<file>.meta.toml``, folder defaults in ``_library.toml``, the file's own
properties, sensitivity markings; :mod:`.metadata`) and returns a
:class:`~ragspine_index.source_documents.model.SourceDocument` whose ``regions`` let every
chunk cite the page, slide, sheet and cell range or heading it came from.

PDF, DOCX, PPTX, XLSX, RTF, MSG and images need the ``formats`` extra (pypdf, pdfminer.six,
python-docx, python-pptx, openpyxl, striprtf, olefile, pillow), images and scanned PDF
pages also the ``tesseract`` program; without them those files are listed as skipped with
the command to install what is missing. HTML, CSV, OpenDocument, EPUB and EML use the
standard library only. Every converter's text is in one normal form (NFKC, no control
characters: :func:`ragspine_core.text.normalize.normalize_extracted`). docs/formats.md has the details. The format registry and :func:`convert_bytes` are in
:mod:`.registry`; this package ``__init__`` only re-exports.
"""

from __future__ import annotations

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted
from ragspine_index.converters.files import ConvertedFiles
from ragspine_index.converters.converter_registry import (
    CONVERTED_SUFFIXES,
    CONVERTER_VERSIONS,
    FORMAT_BY_SUFFIX,
    FORMATS,
    FORMATS_EXTRA,
    SIDECAR_SUFFIX,
    Format,
    convert_bytes,
    converted_file,
)

__all__ = [
    "CONVERTED_SUFFIXES",
    "CONVERTER_VERSIONS",
    "FORMATS",
    "FORMATS_EXTRA",
    "FORMAT_BY_SUFFIX",
    "SIDECAR_SUFFIX",
    "ConversionError",
    "ConversionLimits",
    "Converted",
    "ConvertedFiles",
    "Format",
    "convert_bytes",
    "converted_file",
]
