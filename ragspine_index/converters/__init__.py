"""Converters: PDF, DOCX, PPTX, XLSX, HTML and CSV files into document text.

``parse_library`` hands every file whose suffix is in :data:`CONVERTED_SUFFIXES` to
:class:`ConvertedFiles`, which converts it (one module per format), reads its metadata
(sidecar ``<file>.meta.toml``, folder defaults in ``_library.toml``, the file's own
properties, sensitivity markings; :mod:`.metadata`) and returns a
:class:`~ragspine_index.source_documents.model.SourceDocument` whose ``regions`` let every
chunk cite the page, slide, sheet and cell range or heading it came from.

PDF, DOCX, PPTX and XLSX need the ``formats`` extra (pypdf, python-docx, python-pptx,
openpyxl); without it those files are listed as skipped with the command to install it.
HTML and CSV use the standard library only. docs/formats.md has the details. The format registry and :func:`convert_bytes` are in
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
