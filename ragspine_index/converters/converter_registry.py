"""The format registry: which suffixes a converter reads (:data:`FORMATS`), its version
and the module it needs, and :func:`convert_bytes`, which converts one file by its suffix."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath
from importlib import import_module
from typing import Callable

from ragspine_index.converters import csv, docx, eml, epub, html, image, legacy, msg, ocr, odf, pdf, pptx, rtf, xlsx
from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted

FORMATS_EXTRA = "formats"


@dataclass(frozen=True, slots=True)
class Format:
    """One convertible format: its suffixes, converter, version and the module it needs."""

    name: str
    suffixes: tuple[str, ...]
    version: str
    module: str  # "" = the standard library
    convert: Callable[[bytes, ConversionLimits], Converted]
    #: A program it needs besides the module (OCR: ``tesseract``), and how to install it.
    engine: Callable[[], bool] | None = None
    engine_hint: str = ""

    def available(self) -> bool:
        """Whether the module it needs imports (the ``formats`` extra is installed) and the
        program it needs is there."""
        return not self.missing()

    def module_available(self) -> bool:
        """Whether the module it needs imports (the ``formats`` extra is installed)."""
        if not self.module:
            return True
        try:
            import_module(self.module)
        except ImportError:
            return False
        return True

    def missing(self) -> str:
        """What the user must install to read this format (``""`` when nothing)."""
        if not self.module_available():
            return f"the '{FORMATS_EXTRA}' extra (pip install 'ragspine[{FORMATS_EXTRA}]')"
        if self.engine is not None and not self.engine():
            return self.engine_hint
        return ""

    def lineage(self) -> str:
        """``pdf@4 pypdf 7.1.1``: the converter version and the library version that ran."""
        if not self.module:
            return f"{self.name}@{self.version}"
        from importlib.metadata import PackageNotFoundError, version

        dist = _DISTRIBUTIONS.get(self.module, self.module)
        try:
            return f"{self.name}@{self.version} {dist} {version(dist)}"
        except PackageNotFoundError:
            return f"{self.name}@{self.version} {dist}"


_DISTRIBUTIONS = {"docx": "python-docx", "pptx": "python-pptx", "PIL": "pillow"}


def read_attachment(name: str, payload: bytes, number: int, limits: ConversionLimits) -> Converted | None:
    """An attachment's text when its suffix is one a converter reads (``.txt``/``.md`` as
    text; not a nested message), ``None`` when it is not read; a damaged one raises
    ConversionError naming it by number and suffix (never by name: it may be RESTRICTED)."""
    suffix = PurePosixPath(name).suffix.lower()
    readable = suffix in (".txt", ".md") or (suffix in FORMAT_BY_SUFFIX and suffix not in (".eml", ".msg")
                                             and FORMAT_BY_SUFFIX[suffix].available())
    if not readable or not payload:
        return None
    try:
        return eml.text_part(payload, limits) if suffix in (".txt", ".md") else convert_bytes(payload, suffix, limits)
    except ConversionError as exc:
        raise ConversionError(f"attachment {number - 1} ({suffix or 'no suffix'}, part {number}) {exc.problem}",
                              exc.hint, field=exc.field) from exc


FORMATS: tuple[Format, ...] = (
    Format("pdf", (".pdf",), pdf.VERSION, pdf.EXTRA_MODULE, pdf.convert_pdf),
    Format("docx", (".docx",), docx.VERSION, docx.EXTRA_MODULE, docx.convert_docx),
    Format("pptx", (".pptx",), pptx.VERSION, pptx.EXTRA_MODULE, pptx.convert_pptx),
    Format("xlsx", (".xlsx",), xlsx.VERSION, xlsx.EXTRA_MODULE, xlsx.convert_xlsx),
    Format("html", (".html", ".htm"), html.VERSION, html.EXTRA_MODULE, html.convert_html),
    Format("csv", (".csv",), csv.VERSION, csv.EXTRA_MODULE, csv.convert_csv),
    Format("odt", (".odt",), odf.VERSION, odf.EXTRA_MODULE, odf.convert_odt),
    Format("ods", (".ods",), odf.VERSION, odf.EXTRA_MODULE, odf.convert_ods),
    Format("odp", (".odp",), odf.VERSION, odf.EXTRA_MODULE, odf.convert_odp),
    Format("rtf", (".rtf",), rtf.VERSION, rtf.EXTRA_MODULE, rtf.convert_rtf),
    Format("eml", (".eml",), eml.VERSION, eml.EXTRA_MODULE, partial(eml.convert_eml, read_attachment=read_attachment)),
    Format("msg", (".msg",), msg.VERSION, msg.EXTRA_MODULE, partial(msg.convert_msg, read_attachment=read_attachment)),
    Format("epub", (".epub",), epub.VERSION, epub.EXTRA_MODULE, epub.convert_epub),
    Format("image", (".png", ".jpg", ".jpeg"), image.VERSION, image.EXTRA_MODULE, image.convert_image,
           engine=ocr.available, engine_hint=f"OCR, the tesseract program ({ocr.INSTALL_HINT})"),
    Format("doc", (".doc",), legacy.VERSION, legacy.EXTRA_MODULE, legacy.convert_doc,
           engine=legacy.doc_engine_available, engine_hint=f"the antiword and catdoc programs ({legacy.DOC_INSTALL_HINT})"),
    Format("xls", (".xls",), legacy.VERSION, legacy.XLS_MODULE, legacy.convert_xls),
    Format("ppt", (".ppt",), legacy.VERSION, legacy.EXTRA_MODULE, legacy.convert_ppt),
)
FORMAT_BY_SUFFIX = {suffix: fmt for fmt in FORMATS for suffix in fmt.suffixes}
CONVERTED_SUFFIXES = tuple(FORMAT_BY_SUFFIX)
#: Part of the ``documents`` and ``chunks`` code versions: a converter change shows as
#: unsynced in Dagster and backfills like a chunker change.
CONVERTER_VERSIONS = {fmt.name: fmt.version for fmt in FORMATS}
SIDECAR_SUFFIX = ".meta.toml"


def converted_file(rel: str) -> bool:
    """Whether ``rel`` (a library path) is a file a converter reads, or its sidecar."""
    lower = rel.lower()
    return lower.endswith(SIDECAR_SUFFIX) or any(lower.endswith(suffix) for suffix in CONVERTED_SUFFIXES)


def convert_bytes(data: bytes, suffix: str, limits: ConversionLimits | None = None) -> Converted:
    """Convert the bytes of one file by its suffix.

    Raises:
        ConversionError: the file cannot be converted (damaged, encrypted, image-only,
            past a limit); the message never quotes the file's text.
        MissingExtraError: the format needs the ``formats`` extra.
        KeyError: ``suffix`` is not convertible.
    """
    fmt = FORMAT_BY_SUFFIX[suffix.lower()]
    limits = limits or ConversionLimits()
    if not fmt.module_available():
        from ragspine_core.errors import MissingExtraError

        raise MissingExtraError(f"reading {fmt.name.upper()} files", FORMATS_EXTRA, fmt.module)
    if len(data) > limits.max_file_bytes:
        raise ConversionError(f"is {len(data):,} bytes (limit {limits.max_file_bytes:,})", "split it",
                              field="limits")
    if not data:
        raise ConversionError("is empty (0 bytes)", "add content or delete the file", field="body")
    try:
        converted = fmt.convert(data, limits)
    except ConversionError:
        raise
    except MemoryError as exc:
        raise ConversionError("ran out of memory while converting", "split the file", field="limits") from exc
    except RecursionError as exc:
        raise ConversionError("is nested too deeply to convert", "re-export it", field="content") from exc
    except Exception as exc:  # noqa: BLE001 - a damaged file may raise anything inside a parser library
        raise ConversionError(f"cannot be converted ({type(exc).__name__}; damaged or truncated?)",
                              f"re-export it as {fmt.name.upper()} from its source application") from exc
    if not converted.text.strip():  # an empty DOCX, a deck of blank slides: say so, never publish nothing silently
        raise ConversionError(f"has no text (an empty {fmt.name.upper()} document)",
                              "add content, or remove it from the library", field="body")
    return converted
