"""HTML → Markdown-shaped text with the standard library's ``html.parser`` (no extra):
``<h1>``–``<h6>`` as ``#`` headings, ``<li>`` as ``- `` items, ``<table>`` as Markdown
tables, ``<pre>`` kept line by line; one region per heading section
(``anchor=<id>``: the heading's ``id`` when it has one, else a slug of its text).

``<script>``, ``<style>``, ``<template>``, ``<noscript>`` and ``<head>`` content (except
``<title>``) are dropped, never run; page boilerplate — ``<nav>``, ``<aside>``, and a
``<header>``/``<footer>`` that is not inside an ``<article>``, ``<main>`` or ``<section>``
— is kept out of the text and read only for a sensitivity marking (``header_lines``); links are kept as their text, never fetched.
``<meta name=... content=...>`` are the file's properties (a ``classification`` meta
marks it). The encoding is, first to answer: a byte-order mark (UTF-8/16/32), the
``<meta charset>`` / ``http-equiv`` content type / XML declaration in the first 4 KB
(with the HTML standard's aliases: ``iso-8859-1`` and ``us-ascii`` read as
``windows-1252``, ``gb2312``/``gbk`` as ``gb18030``), else UTF-8; bytes invalid in it
are a located error. The ``<title>`` is read for a marking like a first line.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, clean_line, markdown_table, slug, TABLE_GROUP_CHARS
from ragspine_index.converters.regions import region_fragment

VERSION = "4"  # 2: tables in whole-row groups under their header (issue 36); 3/4: + encodings, boilerplate out, normalised text (issue 38)
EXTRA_MODULE = ""  # the standard library

_SKIP = frozenset({"script", "style", "template", "noscript", "svg", "iframe", "object", "embed", "head"})
_BLOCK = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside", "nav", "blockquote",
                    "figure", "figcaption", "dd", "dt", "address", "form", "fieldset", "ul", "ol", "dl", "hr", "body"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_FRAMES = frozenset({"nav", "aside", "header", "footer"})
_CONTENT = frozenset({"article", "main", "section"})
_VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "param", "source",
                   "track", "wbr"})
_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9_:.-]+)", re.I)
_XML_ENCODING = re.compile(rb"^\s*<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9_:.-]+)", re.I)
#: The HTML standard's encoding aliases that differ from Python's codecs.
_WHATWG = {"iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
           "l1": "cp1252", "us-ascii": "cp1252", "ascii": "cp1252", "iso-8859-9": "cp1254", "gb2312": "gb18030",
           "gbk": "gb18030", "x-gbk": "gb18030", "tis-620": "cp874", "iso-8859-11": "cp874",
           "x-sjis": "shift_jis", "ks_c_5601-1987": "cp949", "euc-kr": "cp949"}


class _Converter(HTMLParser):
    def __init__(self, limits: ConversionLimits) -> None:
        super().__init__(convert_charrefs=True)
        self.limits = limits
        self.deadline = Deadline(limits.seconds)
        self.blocks: list[tuple[str, str]] = []  # (text, anchor of its section)
        self.buffer: list[str] = []
        self.skip = 0
        self.pre = 0
        self.heading = 0
        self.heading_id = ""
        self.anchor = ""
        self.anchors: dict[str, int] = {}
        self.list_item = False
        self.table: list[list[str]] | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.title_parts: list[str] = []
        self.in_title = False
        self.properties: list[tuple[str, str]] = []
        self.first_heading = ""
        self.n = 0
        # page boilerplate: <nav>, <aside>, and a <header>/<footer> outside <article>,
        # <main> and <section> (a page's, not an article's); kept out of the text, read for
        # a sensitivity marking (header_lines)
        self.frames: list[bool] = []  # one per open nav/aside/header/footer: is it boilerplate?
        self.content = 0  # open article/main/section elements
        self.boiler_lines: list[str] = []
        self.boiler_buffer: list[str] = []

    # -- helpers
    def _flush(self) -> None:
        raw = "".join(self.buffer)
        self.buffer.clear()
        if self.pre:
            text = raw.strip("\n")
            if text.strip():
                self.blocks.append(("\n".join(line.rstrip() for line in text.split("\n")), self.anchor))
            return
        text = clean_line(raw)
        if not text:
            return
        if self.heading:
            heading_anchor = self.heading_id or slug(text)
            count = self.anchors.get(heading_anchor, 0)
            self.anchors[heading_anchor] = count + 1
            self.anchor = heading_anchor if count == 0 else f"{heading_anchor}-{count}"
            self.first_heading = self.first_heading or text
            text = f"{'#' * self.heading} {text}"
        elif self.list_item:
            text = f"- {text}"
        self.blocks.append((text, self.anchor))

    def _boiler_break(self) -> None:
        line = clean_line("".join(self.boiler_buffer))
        self.boiler_buffer.clear()
        if line and len(self.boiler_lines) < 200:
            self.boiler_lines.append(line)

    # -- parser callbacks
    def handle_starttag(self, tag: str, attrs) -> None:
        self.n += 1
        if self.n % 2000 == 0:
            self.deadline.check(f"element {self.n}")
        attrs = dict(attrs)
        if tag == "meta":
            name = attrs.get("name") or attrs.get("property") or attrs.get("http-equiv") or ""
            if name and attrs.get("content"):
                self.properties.append((clean_line(name), clean_line(attrs["content"])))
            return
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip += 1
            return
        if self.skip or tag in _VOID and tag != "br":
            return
        if tag in _FRAMES:
            boiler = tag in ("nav", "aside") or self.content == 0
            if boiler and not any(self.frames):
                self._flush()
            self.frames.append(boiler)
            if boiler:
                return
        if any(self.frames):
            self._boiler_break()
            return
        if tag in _CONTENT:
            self.content += 1
        if tag == "br":
            self.buffer.append("\n" if self.pre else " ")
            if self.cell is None and not self.pre:
                self._flush()
            return
        if self.table is not None and tag in ("td", "th"):
            self.cell = []
            return
        if self.table is not None and tag == "tr":
            self.row = []
            return
        if tag == "table":
            self._flush()
            self.table = []
            return
        if tag in _HEADINGS:
            self._flush()
            self.heading = _HEADINGS[tag]
            self.heading_id = attrs.get("id") or ""
        elif tag == "li":
            self._flush()
            self.list_item = True
        elif tag == "pre":
            self._flush()
            self.pre += 1
        elif tag in _BLOCK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if tag in _SKIP and tag not in _VOID:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if tag in _FRAMES and self.frames:
            if self.frames.pop():
                self._boiler_break()
                return
        elif any(self.frames):
            self._boiler_break()
            return
        if tag in _CONTENT:
            self.content = max(0, self.content - 1)
        if self.table is not None and tag in ("td", "th"):
            if self.row is not None and self.cell is not None:
                self.row.append(clean_line("".join(self.cell)))
            self.cell = None
            return
        if self.table is not None and tag == "tr":
            if self.row:
                self.table.append(self.row)
            self.row = None
            return
        if tag == "table" and self.table is not None:
            table = markdown_table(self.table, group_chars=TABLE_GROUP_CHARS) if self.table else ""
            self.table = None
            if table:
                self.blocks.append((table, self.anchor))
            return
        if tag in _HEADINGS:
            self._flush()
            self.heading = 0
            self.heading_id = ""
        elif tag == "li":
            self._flush()
            self.list_item = False
        elif tag == "pre":
            self._flush()
            self.pre = max(0, self.pre - 1)
        elif tag in _BLOCK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
            return
        if self.skip:
            return
        if any(self.frames):
            self.boiler_buffer.append(data)
            return
        if self.cell is not None:
            self.cell.append(data)
        elif self.table is None:
            self.buffer.append(data)


def convert_html(data: bytes, limits: ConversionLimits) -> Converted:
    source = _decode(data)
    parser = _Converter(limits)
    parser.feed(source)
    parser.close()
    parser._flush()
    parser._boiler_break()
    out = TextBuilder(limits)
    # consecutive blocks of one section make one region; list items stay on adjacent lines
    current: list[str] = []
    anchor = None
    for text, block_anchor in parser.blocks:
        if anchor is not None and block_anchor != anchor:
            out.add(_join(current), region_fragment("anchor", anchor) if anchor else "")
            current = []
        anchor = block_anchor
        current.append(text)
    if current:
        out.add(_join(current), region_fragment("anchor", anchor) if anchor else "")
    if not out.text().strip():
        raise ConversionError("has no visible text", "add text, or remove it from the library", field="body")
    title = clean_line("".join(parser.title_parts)) or parser.first_heading
    shown_title = clean_line("".join(parser.title_parts))
    return Converted(text=out.text(), regions=tuple(out.regions), properties=tuple(parser.properties), title=title,
                     header_lines=tuple(parser.boiler_lines),
                     marking_lines=(("<title>", shown_title),) if shown_title else ())


def _decode(data: bytes) -> str:
    """The page's text in its declared encoding (module docstring)."""
    import codecs

    from ragspine_index.source_documents.encoding import bom_codec

    marked = bom_codec(data)
    if marked is not None:
        codec, name, skip = marked
        data = data[skip:]
    elif data.startswith(b"\xef\xbb\xbf"):
        codec, name, data = "utf-8", "UTF-8", data[3:]
    else:
        declared = _CHARSET.search(data[:4096]) or _XML_ENCODING.search(data[:4096])
        name = declared.group(1).decode("ascii") if declared else "UTF-8"
        wanted = _WHATWG.get(name.lower(), name.lower())
        try:
            codec = codecs.lookup(wanted).name
        except LookupError as exc:
            raise ConversionError(f"declares the charset {name[:40]!r}, which is not a known encoding",
                                  "fix the <meta charset>, or re-save it as UTF-8", field="encoding") from exc
        if codec in ("utf-16-le", "utf-16-be", "utf-16", "utf-32") :
            codec, name = "utf-8", "UTF-8"  # a page read as ASCII cannot really be UTF-16 (the HTML standard)
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        raise ConversionError(f"is not valid {name[:40]} at byte offset {exc.start} ({exc.reason})",
                              "re-save it in the encoding it declares (UTF-8 is best)", field="encoding") from exc


def _join(blocks: list[str]) -> str:
    out = ""
    for i, block in enumerate(blocks):
        if i:
            both_items = block.startswith("- ") and blocks[i - 1].startswith("- ")
            out += "\n" if both_items else "\n\n"
        out += block
    return out
