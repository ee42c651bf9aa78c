"""``ragspine bench --documents DIR``: how the converters do on real files.

Every file under ``DIR`` (recursively; names starting with ``.`` or ``_`` skipped) is
converted as ``ragspine ingest`` converts it (in the isolated converter process, with the
default limits), and reported per format:

* files **published** (converted to text), **errored** (one located error: damaged,
  encrypted, no text…) and **skipped** (a type RAGSpine does not read, or whose extra or
  OCR engine is not installed);
* **word recall** against an independent extractor (:func:`reference_text`: pdfminer.six
  for PDF — the text layer, OCR'd pages apart —, the raw XML text runs of DOCX/PPTX/XLSX/
  ODF packages, every HTML text node, the raw CSV/text): the share of the reference's
  distinct words (NFKC, case-folded ``\\w+`` runs) found in the converted text; median and
  minimum per format;
* **pages/s** (PDF pages, slides, or one per file) over the conversion time;
* **ligature/garble** characters: ligatures, compatibility forms and controls left in the
  index text (:func:`~ragspine_core.text.normalize.unnormalized_count`: 0 is the bar), and
  the reference's own count (what normalisation removed).

``--json`` prints the per-file rows and the summary as JSON; the default is a Markdown
table. Nothing is written to the library or the artifacts.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import statistics
import sys
import time
import unicodedata
import zipfile
from dataclasses import asdict, dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Sequence

from ragspine_core.text.normalize import unnormalized_count
from ragspine_index.converters.pdf import NO_TEXT  # how a problem starts when OCR found pictures without text

_WORD = re.compile(r"\w+")
_TEXT_SUFFIXES = (".md", ".markdown", ".txt")


@dataclass
class FileResult:
    path: str
    format: str
    status: str  # published | errored | skipped
    seconds: float = 0.0
    pages: int = 0
    ocr: bool = False
    recall: float | None = None
    left_in_text: int = 0
    in_reference: int = 0
    problem: str = ""
    #: The error's field: ``body`` (nothing to publish: an empty file, or images OCR reads
    #: nothing in) and ``encrypted`` (needs a password) are counted apart in the bar.
    field: str = ""


#: Error fields that mean the file holds nothing to publish without its owner's help.
NOTHING_TO_PUBLISH = ("body", "encrypted")


@dataclass
class FormatSummary:
    format: str
    files: int = 0
    published: int = 0
    errored: int = 0
    skipped: int = 0
    recall_median: float | None = None
    recall_min: float | None = None
    recall_files: int = 0
    pages: int = 0
    seconds: float = 0.0
    pages_per_s: float | None = None
    left_in_text: int = 0
    in_reference: int = 0
    nothing_to_publish: int = 0
    #: Of those: PDFs OCR found pictures without text in (``pdf.NO_TEXT``), and encrypted files.
    pictures_without_text: int = 0
    need_password: int = 0
    problems: list[str] = field(default_factory=list)
    #: Every errored file that is not nothing-to-publish, one located line each.
    failed: list[str] = field(default_factory=list)


def words(text: str) -> set[str]:
    return set(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def recall(reference: str, got: str) -> float | None:
    want = words(reference)
    if len(want) < 5:  # too little to measure
        return None
    return len(want & words(got)) / len(want)


#: elements that end a word; inline ones (``<b>t</b>he``) do not
_HTML_BREAKS = frozenset({"p", "div", "br", "li", "td", "th", "tr", "table", "ul", "ol", "dl", "dt", "dd", "h1", "h2",
                          "h3", "h4", "h5", "h6", "section", "article", "title", "hr", "blockquote", "pre"})


class _AllText(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in ("script", "style", "head", "nav", "header", "footer", "aside"):
            self._skip += 1
        if tag in _HTML_BREAKS:
            self.parts.append(" ")

    def handle_endtag(self, tag) -> None:
        if tag in ("script", "style", "head", "nav", "header", "footer", "aside"):
            self._skip = max(0, self._skip - 1)
        if tag in _HTML_BREAKS:
            self.parts.append(" ")

    def handle_data(self, data) -> None:
        if not self._skip:
            self.parts.append(data)


def _xml_text(data: bytes, members: Sequence[str], tags: tuple[str, ...], *, skip_shared: bool = False,
              mixed: bool = False) -> str:
    """The text of the ``tags`` elements in the package's ``members``; ``skip_shared``: not the
    ``<v>`` of a shared-string cell (``t="s"``: its value is an index into the shared strings);
    ``mixed``: the elements hold mixed content (ODF's ``<text:p>``: text, ``<text:s/>``,
    ``<text:tab/>``, spans and the text after each), so all of it is taken, tails included."""
    from defusedxml.ElementTree import fromstring

    out: list[str] = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        for name in sorted(archive.namelist()):
            if any(re.fullmatch(m, name) for m in members):
                root = fromstring(archive.read(name))
                for el in root.iter():
                    if skip_shared and el.tag.rsplit("}", 1)[-1] == "c" and el.get("t") == "s":
                        continue
                    if skip_shared:
                        out.extend((v.text or "") + " " for v in el if v.tag.rsplit("}", 1)[-1] in tags) \
                            if el.tag.rsplit("}", 1)[-1] == "c" else []
                    elif el.tag.rsplit("}", 1)[-1] in tags:
                        out.append((_mixed_text(el) if mixed else (el.text or "")) + " ")
    return "".join(out)


def _html_text(markup: str) -> str:
    parser = _AllText()
    parser.feed(markup)
    return "".join(parser.parts)


def _eml_text(data: bytes) -> str:
    """Subject and body parts (not attachments) by the standard library's compat32 parser,
    each part decoded by its own charset — a path the converter (``email.policy.default``,
    ``get_content``) does not take."""
    import email
    import email.policy

    message = email.message_from_bytes(data, policy=email.policy.compat32)
    out = [str(message.get("Subject") or "")]
    for part in message.walk():
        if part.is_multipart() or (part.get("Content-Disposition") or "").lower().startswith("attachment"):
            continue
        payload = part.get_payload(decode=True)
        text = (payload if isinstance(payload, bytes) else b"").decode(part.get_content_charset() or "utf-8", "replace")
        if part.get_content_type() == "text/plain":
            out.append(text)
        elif part.get_content_type() == "text/html":
            out.append(_html_text(text))
    return " ".join(out)


def _msg_text(data: bytes) -> str | None:
    """Subject and body of an Outlook message read with olefile from the MAPI property
    streams at the root (``0037`` subject, ``1000`` body; ``001F`` UTF-16, ``001E`` 8-bit),
    not the converter's own compound-file reader."""
    import olefile

    ole = olefile.OleFileIO(BytesIO(data))
    try:
        out = []
        for prop in ("0037", "1000"):
            for kind, codec in (("001F", "utf-16-le"), ("001E", "cp1252")):
                name = f"__substg1.0_{prop}{kind}"
                if ole.exists(name):
                    out.append(ole.openstream(name).read().decode(codec, "replace"))
                    break
        return " ".join(out) or None
    finally:
        ole.close()


def _epub_text(data: bytes) -> str:
    """The text of every XHTML/HTML item of the EPUB's zip, in name order."""
    out = []
    with zipfile.ZipFile(BytesIO(data)) as archive:
        for name in sorted(archive.namelist()):
            if name.lower().endswith((".xhtml", ".html", ".htm")):
                out.append(_html_text(archive.read(name).decode("utf-8", "replace")))
    return " ".join(out)


#: ODF's empty elements that stand for white space (a run of spaces, a tab, a line break)
_ODF_SPACES = ("s", "tab", "line-break")


def _mixed_text(el) -> str:
    """All the text of a mixed-content element, its children's and their tails included, with
    ODF's space elements read as a space."""
    parts = [el.text or ""]
    for child in el:
        parts.append(" " if child.tag.rsplit("}", 1)[-1] in _ODF_SPACES else _mixed_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


_LEGACY_REFERENCE = {".doc": ["catdoc", "-d", "utf-8", "-w"], ".xls": ["xls2csv", "-d", "utf-8"],
                     ".ppt": ["catppt", "-d", "utf-8"]}


def _program_text(args: list[str], data: bytes, suffix: str) -> str | None:
    import os
    import shutil
    import subprocess
    import tempfile

    if shutil.which(args[0]) is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "document" + suffix)
        with open(path, "wb") as handle:
            handle.write(data)
        done = subprocess.run([*args, path], capture_output=True, timeout=60, check=False,
                              env={**os.environ, "LC_ALL": "C.UTF-8"})
    text = done.stdout.decode("utf-8", "replace").replace(path, " ")  # catppt may print the file's path
    return text if done.returncode == 0 and text.strip() else None


def reference_text(data: bytes, suffix: str) -> str | None:
    """The file's text by an extractor independent of the converter (``None``: none here)."""
    try:
        if suffix == ".pdf":
            from pdfminer.high_level import extract_text

            return extract_text(BytesIO(data))
        if suffix == ".docx":
            return _xml_text(data, [r"word/document\.xml"], ("t",))
        if suffix == ".pptx":
            return _xml_text(data, [r"ppt/slides/slide\d+\.xml", r"ppt/notesSlides/notesSlide\d+\.xml"], ("t",))
        if suffix == ".xlsx":  # shared strings, inline strings and the values of cells that are not one
            return (_xml_text(data, [r"xl/sharedStrings\.xml", r"xl/worksheets/sheet\d+\.xml"], ("t",))
                    + _xml_text(data, [r"xl/worksheets/sheet\d+\.xml"], ("v",), skip_shared=True))
        if suffix in (".odt", ".ods", ".odp"):
            return _xml_text(data, [r"content\.xml"], ("p", "h"), mixed=True)
        if suffix in (".html", ".htm"):
            return _html_text(data.decode("utf-8", "replace"))
        if suffix == ".eml":
            return _eml_text(data)
        if suffix == ".msg":
            return _msg_text(data)
        if suffix == ".epub":
            return _epub_text(data)
        if suffix == ".rtf":  # Debian's unrtf (not striprtf, which the converter uses), as HTML
            html_text = _program_text(["unrtf", "--html"], data, suffix)
            return _html_text(html_text) if html_text else None
        if suffix in (".csv", *_TEXT_SUFFIXES):
            return data.decode("utf-8", "replace")
        if suffix in _LEGACY_REFERENCE:  # catdoc's tools: .doc bodies are antiword's, .xls xlrd's, .ppt records'
            return _program_text(_LEGACY_REFERENCE[suffix], data, suffix)
    except Exception:  # noqa: BLE001 - a file the reference cannot read is measured without it
        return None
    return None


def run(root: Path, *, seconds: float | None = None) -> tuple[list[FileResult], list[FormatSummary]]:
    from ragspine_index.converters import FORMAT_BY_SUFFIX, ConversionError, ConversionLimits, convert_bytes
    from ragspine_index.converters.isolation import ConverterProcess
    from ragspine_index.source_documents.encoding import decode_text

    limits = ConversionLimits() if seconds is None else ConversionLimits(seconds=seconds, hard_seconds=seconds * 1.5)
    process = ConverterProcess(limits) if ConverterProcess.available() else None
    results: list[FileResult] = []
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if any(part.startswith((".", "_")) for part in Path(rel).parts) or rel.endswith(".meta.toml"):
                continue
            suffix = path.suffix.lower()
            fmt = FORMAT_BY_SUFFIX.get(suffix)
            name = fmt.name if fmt else (suffix.lstrip(".") or "(none)")
            if suffix in _TEXT_SUFFIXES:
                name = "text"
            data = path.read_bytes()
            if fmt is None and suffix not in _TEXT_SUFFIXES:
                results.append(FileResult(rel, name, "skipped", problem="a type RAGSpine does not read"))
                continue
            if fmt is not None and fmt.missing():
                results.append(FileResult(rel, name, "skipped", problem=f"needs {fmt.missing()}"))
                continue
            start = time.perf_counter()
            regions: tuple[tuple[int, int, str], ...] = ()
            try:
                if fmt is None:
                    decoded = decode_text(data, rel)
                    if not isinstance(decoded, str):
                        raise ConversionError(str(decoded), "")
                    text, note = decoded, ""
                else:
                    converted = process.convert(data, suffix) if process else convert_bytes(data, suffix, limits)
                    text, regions, note = converted.text, converted.regions, converted.engine_note
            except ConversionError as exc:
                results.append(FileResult(rel, name, "errored", time.perf_counter() - start, problem=exc.problem,
                                          field=exc.field))
                continue
            elapsed = time.perf_counter() - start
            pages = len({f.split("&")[0] for _, _, f in regions if f.startswith(("page=", "slide="))}) or 1
            ocr = "OCR by" in note
            ref = None if ocr else reference_text(data, suffix)
            results.append(FileResult(rel, name + (" (OCR)" if ocr else ""), "published", elapsed, pages, ocr,
                                      recall(ref, text) if ref is not None else None, unnormalized_count(text),
                                      unnormalized_count(ref) if ref else 0))
    finally:
        if process is not None:
            process.close()
    return results, summarize(results)


def summarize(results: list[FileResult]) -> list[FormatSummary]:
    by: dict[str, FormatSummary] = {}
    for r in results:
        s = by.setdefault(r.format, FormatSummary(r.format))
        s.files += 1
        setattr(s, r.status, getattr(s, r.status) + 1)
        s.pages += r.pages
        s.seconds += r.seconds
        s.left_in_text += r.left_in_text
        s.in_reference += r.in_reference
        s.nothing_to_publish += r.status == "errored" and r.field in NOTHING_TO_PUBLISH
        s.pictures_without_text += r.status == "errored" and r.field == "body" and r.problem.startswith(NO_TEXT)
        s.need_password += r.status == "errored" and r.field == "encrypted"
        if r.status == "errored" and r.field not in NOTHING_TO_PUBLISH:
            s.failed.append(f"{r.path}: {r.problem}")
        if r.problem and len(s.problems) < 5:
            s.problems.append(f"{r.path}: {r.problem}")
    for s in by.values():
        values = [r.recall for r in results if r.format == s.format and r.recall is not None]
        if values:
            s.recall_median, s.recall_min, s.recall_files = statistics.median(values), min(values), len(values)
        if s.seconds > 0 and s.published:
            s.pages_per_s = s.pages / s.seconds
    return [by[k] for k in sorted(by)]


def markdown(summary: list[FormatSummary], root: str) -> str:
    def num(value: float | None, fmt: str) -> str:
        return "–" if value is None else format(value, fmt)

    lines = [f"Documents under {root}: {sum(s.files for s in summary)} files", "",
             "| format | files | published | errored | skipped | word recall median (min, n) | pages/s "
             "| ligature/control chars left in text | in the reference |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        rec = (f"{num(s.recall_median, '.3f')} ({num(s.recall_min, '.3f')}, {s.recall_files})"
               if s.recall_files else "–")
        lines.append(f"| {s.format} | {s.files} | {s.published} | {s.errored} | {s.skipped} | {rec} "
                     f"| {num(s.pages_per_s, '.1f')} | {s.left_in_text} | {s.in_reference} |")
    total = sum(s.files - s.skipped for s in summary)
    published = sum(s.published for s in summary)
    if total:
        lines += ["", f"published {published} of {total} files of supported types ({published / total:.1%})"]
        nothing = sum(s.nothing_to_publish for s in summary)
        if nothing and total > nothing:
            pictures = sum(s.pictures_without_text for s in summary)
            encrypted = sum(s.need_password for s in summary)
            lines += [f"published {published} of {total - nothing} files with something to publish "
                      f"({published / (total - nothing):.1%}; {nothing} errored files hold nothing to publish: "
                      f"{nothing - pictures - encrypted} no text at all, {pictures} pictures without text "
                      f"(each with OCR's evidence in its problem), {encrypted} need a password)"]
    failed = [p for s in summary for p in s.failed]
    if failed:
        lines += ["", "not published, with something to publish:"] + [f"- {p}" for p in failed]
    problems = [p for s in summary for p in s.problems]
    if problems:
        lines += ["", "first problems per format:"] + [f"- {p}" for p in problems]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragspine bench --documents", description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", required=True, metavar="DIR", help="a folder of real files (recursive)")
    parser.add_argument("--json", action="store_true", help="print per-file rows and the summary as JSON")
    parser.add_argument("--seconds", type=float, default=None, help="per-file conversion budget (default 120)")
    args = parser.parse_args(argv)
    root = Path(args.documents)
    if not root.is_dir():
        print(f"error: {root} is not a folder; pass a folder of documents", file=sys.stderr)
        return 2
    results, summary = run(root, seconds=args.seconds)
    if args.json:
        print(json.dumps({"files": [asdict(r) for r in results], "formats": [asdict(s) for s in summary]},
                         ensure_ascii=False, indent=1))
    else:
        print(markdown(summary, str(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
