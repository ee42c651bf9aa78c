"""EPUB (2 and 3) e-books with the standard library: the package's reading order (the
OPF ``spine``) of XHTML chapters, each read like an HTML file (:mod:`.html`), one region
per heading section of each chapter (``chapter=3&anchor=the-harbour``; ``chapter=N``
counts the spine's XHTML items).

The title and author come from the OPF metadata (``dc:title``, ``dc:creator``). A book
whose chapters are encrypted (DRM: ``META-INF/encryption.xml`` naming a chapter) is an
error that says so; obfuscated fonts are ignored. Scripts in chapters are never run.
"""

from __future__ import annotations

import posixpath
import zipfile
from io import BytesIO
from urllib.parse import unquote

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, check_zip, clean_line

VERSION = "1"
EXTRA_MODULE = ""  # the standard library (defusedxml when installed)
_XHTML = ("application/xhtml+xml", "text/html")


def _xml(raw: bytes, what: str):
    try:
        from defusedxml.ElementTree import fromstring
    except ImportError:  # pragma: no cover - defusedxml ships with the formats extra
        from xml.etree.ElementTree import fromstring
    try:
        return fromstring(raw)
    except Exception as exc:  # noqa: BLE001 - damaged or hostile XML
        raise ConversionError(f"cannot be read as EPUB ({what}: {type(exc).__name__})", "re-export the e-book") from exc


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def convert_epub(data: bytes, limits: ConversionLimits) -> Converted:
    from ragspine_index.converters.html import convert_html

    check_zip(data, limits, "EPUB")
    deadline = Deadline(limits.seconds)
    with zipfile.ZipFile(BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "META-INF/container.xml" not in names:
            raise ConversionError("is not an EPUB (no META-INF/container.xml)", "re-export the e-book as EPUB")
        container = _xml(archive.read("META-INF/container.xml"), "container.xml")
        opf_path = next((el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile"), None)
        if not opf_path or opf_path not in names:
            raise ConversionError("is not an EPUB (its package document is missing)", "re-export the e-book as EPUB")
        opf = _xml(archive.read(opf_path), opf_path)
        base = posixpath.dirname(opf_path)
        manifest = {el.get("id"): (el.get("href") or "", el.get("media-type") or "")
                    for el in opf.iter() if _local(el.tag) == "item"}
        spine = [el.get("idref") for el in opf.iter() if _local(el.tag) == "itemref"]
        chapters = []
        for idref in spine:
            href, media = manifest.get(idref, ("", ""))
            if href and media in _XHTML:
                chapters.append(posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0]))))
        if "META-INF/encryption.xml" in names:
            encryption = archive.read("META-INF/encryption.xml").decode("utf-8", "replace")
            if any(f'URI="{c}"' in encryption or f'URI="{posixpath.relpath(c, "META-INF")}"' in encryption
                   or posixpath.basename(c) in encryption for c in chapters):
                raise ConversionError("is encrypted (DRM)", "index a DRM-free copy", field="encrypted")
        if len(chapters) > limits.max_pages:
            raise ConversionError(f"has {len(chapters):,} chapters (limit {limits.max_pages:,})", "split it",
                                  field="limits")
        out = TextBuilder(limits)
        for number, path in enumerate(chapters, start=1):
            deadline.check(f"chapter {number}")
            if path not in names:
                raise ConversionError(f"chapter {number} is missing from the package", "re-export the e-book")
            try:
                chapter = convert_html(archive.read(path), limits)
            except ConversionError as exc:
                if exc.field == "body":  # a cover or a blank page: no text
                    continue
                raise ConversionError(f"chapter {number}: {exc.problem}", exc.hint, field=exc.field) from exc
            _append(out, chapter, f"chapter={number}")
    if not out.text().strip():
        raise ConversionError("has no text in any chapter", "add text, or remove it from the library", field="body")
    properties = []
    for el in opf.iter():
        local = _local(el.tag)
        text = clean_line("".join(el.itertext()))
        if text and local in ("title", "creator", "subject", "description"):
            properties.append(("Author" if local == "creator" else local, text))
    title = next((v for k, v in properties if k == "title"), "")
    return Converted(text=out.text(), regions=tuple(out.regions), properties=tuple(properties), title=title)


def _append(out: TextBuilder, chapter: Converted, fragment: str) -> None:
    """A chapter's text, each of its regions under ``fragment`` (its text before any
    heading gets the chapter alone)."""
    text = chapter.text
    cuts = sorted({0, len(text), *[s for s, _, _ in chapter.regions], *[e for _, e, _ in chapter.regions]})
    by_start = {s: frag for s, _, frag in chapter.regions}
    for start, end in zip(cuts, cuts[1:]):
        piece = text[start:end].strip()
        if piece:
            own = by_start.get(start)
            out.add(piece, f"{fragment}&{own}" if own else fragment)
