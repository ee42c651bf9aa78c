"""What every converter shares: the result record, the per-file limits, the errors.

A converter turns the bytes of one file into Markdown-shaped text (headings, lists,
tables as Markdown tables) plus *regions*: ``(start, end, fragment)`` character ranges
of that text that come from one place of the original file (``page=4``, ``slide=2``,
``sheet=Q3&cells=A5:F5``, ``anchor=revenue``). A chunk's citation carries the fragment
of the region(s) it was cut from (:func:`~.regions.fragment_for`).

Converters never run a file's macros or scripts (none of the libraries used can), never
fetch anything (links are text), and stop with a :class:`ConversionError` when a file
passes one of the :class:`ConversionLimits`.
"""

from __future__ import annotations

import re
import time
import unicodedata
import zipfile
from dataclasses import dataclass, field
from io import BytesIO

from ragspine_core.text.normalize import normalize_extracted


#: The property a converter reports for a sensitivity label that is enabled in the file but
#: whose name the file does not hold (``docMetadata/LabelInfo.xml``): restricted unless a
#: sidecar sets the sensitivity (fail closed: the label may be "Highly Confidential").
UNNAMED_LABEL_PROPERTY = "MSIP_Label_without_name"
#: a Purview (MSIP) label's custom properties: ``MSIP_Label_<id>_Enabled`` / ``…_Name``
MSIP_LABEL = re.compile(r"msip_label_\{?([0-9a-z-]+)\}?_(enabled|name)", re.I)


class LabelProperties:
    """Custom document properties read for a sensitivity (OOXML ``custom.xml``, OLE
    user-defined properties): every ``(name, value)`` with text, and the Purview label ids
    seen enabled and seen named — an enabled label without a name is itself a marking."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []
        self.enabled: set[str] = set()
        self.named: set[str] = set()

    def add(self, name: str, value: str) -> None:
        label = MSIP_LABEL.fullmatch(name)
        if label and label.group(2).lower() == "enabled" and value.lower() in ("true", "1"):
            self.enabled.add(label.group(1).lower())
        elif label and value:
            self.named.add(label.group(1).lower())
        if name and value:
            self.pairs.append((name, value))

    def unnamed(self) -> list[tuple[str, str]]:
        """The marking pair for an enabled label whose name the file does not hold (or none)."""
        if self.enabled - self.named:
            return [(UNNAMED_LABEL_PROPERTY, "a sensitivity label whose name the file does not hold")]
        return []


class ConversionError(Exception):
    """A file that cannot be converted: ``problem`` says why, ``hint`` what to do.

    Messages never quote the file's text (it may be RESTRICTED)."""

    def __init__(self, problem: str, hint: str, *, field: str = "content") -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint
        self.field = field


@dataclass(frozen=True, slots=True)
class ConversionLimits:
    """Per-file bounds: a file past one is one located error, never a stuck build.

    ``seconds`` is checked between pages, paragraphs, slides and rows; ``hard_seconds`` and
    ``memory_bytes`` bound the child process a file is converted in (:mod:`.isolation`);
    ``max_unzipped_bytes`` and ``max_ratio`` refuse zip bombs before an Office file is opened.
    """

    max_file_bytes: int = 200 * 1024 * 1024
    max_text_chars: int = 20_000_000
    max_pages: int = 5_000
    max_cells: int = 2_000_000
    max_unzipped_bytes: int = 500 * 1024 * 1024
    max_zip_members: int = 20_000
    max_ratio: int = 200
    seconds: float = 120.0
    #: The child process converting a file is killed after this long (``isolation.py``).
    hard_seconds: float = 180.0
    #: Address-space limit of that child process (``RLIMIT_AS``).
    memory_bytes: int = 4 * 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Converted:
    """One converted file.

    ``text`` is the document body; ``regions`` are sorted, non-overlapping
    ``(start, end, fragment)`` ranges of it; ``properties`` are the file's own metadata
    (``("Title", "...")``, ``("Keywords", "...")``, custom properties, HTML ``<meta>``)
    in file order; ``header_lines`` are page header/footer lines that are not part of the
    text but are read for a sensitivity marking; ``marking_lines`` are ``(where, line)``
    from every other place outside the body a marking can be (watermarks, text boxes,
    content controls, tracked changes, slide masters, print headers, PDF annotations,
    the HTML ``<title>``: :mod:`.markings`), read the same way; ``title`` is the best
    title the file itself gives (property or first heading), ``""`` when none; ``engine_note`` says when
    another engine than the format's own read some of it (``pdfminer.six 20260107: pages
    2, 5 (garbled in pypdf)``), appended to the ``converter`` field; ``parts`` are the
    parts of a container that become documents of their own (an e-mail's attachments):
    ``(fragment, name, converted)``, cited as ``<file>#<fragment>&…``.
    """

    text: str
    regions: tuple[tuple[int, int, str], ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    header_lines: tuple[str, ...] = ()
    title: str = ""
    marking_lines: tuple[tuple[str, str], ...] = ()
    engine_note: str = ""
    parts: tuple[tuple[str, str, "Converted"], ...] = ()


class Deadline:
    """A per-file time budget checked between units of work."""

    __slots__ = ("_end", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left of the budget (0 when spent)."""
        return max(0.0, self._end - time.monotonic())

    def check(self, what: str) -> None:
        if time.monotonic() > self._end:
            raise ConversionError(
                f"conversion took longer than {self._seconds:g} s (stopped at {what})",
                "split the file, or raise the limit (RAGSPINE_CONVERT_SECONDS)", field="limits")


@dataclass
class TextBuilder:
    """Appends blocks of text separated by blank lines and records their regions."""

    limits: ConversionLimits
    parts: list[str] = field(default_factory=list)
    regions: list[tuple[int, int, str]] = field(default_factory=list)
    length: int = 0

    def add(self, block: str, fragment: str = "") -> tuple[int, int]:
        """Append ``block`` in its index form (:func:`normalize_extracted`: NFKC, no control
        characters) stripped of trailing whitespace; returns its ``(start, end)``."""
        block = normalize_extracted(block).rstrip()
        if not block.strip():
            return self.length, self.length
        if self.parts:
            self.parts.append("\n\n")
            self.length += 2
        start = self.length
        self.parts.append(block)
        self.length += len(block)
        if self.length > self.limits.max_text_chars:
            raise ConversionError(
                f"the extracted text passes {self.limits.max_text_chars:,} characters",
                "split the file into smaller ones", field="limits")
        if fragment:
            self.regions.append((start, self.length, fragment))
        return start, self.length

    def add_table(self, rows: list[tuple[int, list[str]]], *, fragment: str = "", split_hint: str,
                  group_chars: int = 0) -> None:
        """Append ``rows`` (source row number, cell texts) as a Markdown table, a region per row.

        The first row is the header (a ``|---|`` line follows it); short rows are padded to
        the widest. Each row's region is ``cells=A<r>:<last column><r>``, after
        ``fragment&`` when given (e.g. the sheet). With ``group_chars``, the rows are written
        in groups of at most that many characters (a row longer than that alone), each its
        own paragraph opening with the header row again, so a chunk of whole groups always
        holds whole rows under their header.
        """
        width = max(len(t) for _, t in rows)
        lines = [(r, "| " + " | ".join(texts + [""] * (width - len(texts))) + " |") for r, texts in rows]
        sep = "|" + "|".join(["---"] * width) + "|"
        head_r, head = lines[0]

        def cells(r: int) -> str:
            c = f"cells=A{r}:{column_letter(width)}{r}"
            return f"{fragment}&{c}" if fragment else c

        def put(lead: str, line: str, r: int) -> None:
            self.parts.append(lead + line)
            start = self.length + len(lead)
            self.length = start + len(line)
            self.regions.append((start, self.length, cells(r)))

        put("\n\n" if self.parts else "", head, head_r)
        self.parts.append("\n" + sep)
        self.length += 1 + len(sep)
        size = len(head) + 1 + len(sep)
        for r, line in lines[1:]:
            if group_chars and size + 1 + len(line) > group_chars and size > len(head) + 1 + len(sep):
                put("\n\n", head, head_r)  # a new group: the header row again
                self.parts.append("\n" + sep)
                self.length += 1 + len(sep)
                size = len(head) + 1 + len(sep)
            put("\n", line, r)
            size += 1 + len(line)
        if self.length > self.limits.max_text_chars:
            raise ConversionError(f"the extracted text passes {self.limits.max_text_chars:,} characters",
                                  split_hint, field="limits")

    def text(self) -> str:
        return "".join(self.parts)


def check_zip(data: bytes, limits: ConversionLimits, kind: str) -> None:
    """Refuse an Office file that is not a zip, or whose members would unpack past the limits.

    The sizes in the zip directory are checked first; the libraries then inflate at most
    that much (a member whose real size differs from its declared one fails its CRC).
    """
    if data.startswith(OLE_MAGIC):
        raise ole_error(data, kind)
    try:
        archive = zipfile.ZipFile(BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ConversionError(
            f"is not a valid {kind} file (not a zip package: {exc})",
            f"re-save it from the application as {kind}, or remove it from the library", field="content") from exc
    members = archive.infolist()
    if len(members) > limits.max_zip_members:
        raise ConversionError(f"the {kind} package has {len(members):,} parts (limit {limits.max_zip_members:,})",
                              "this is not a normal document; remove it from the library", field="limits")
    total = sum(m.file_size for m in members)
    packed = max(1, sum(m.compress_size for m in members))
    if total > limits.max_unzipped_bytes or (total > 10 * 1024 * 1024 and total / packed > limits.max_ratio):
        raise ConversionError(
            f"the {kind} package would unpack to {total:,} bytes from {len(data):,} (a zip bomb?)",
            "remove it from the library; a real document unpacks to far less", field="limits")
    if any(m.flag_bits & 0x1 for m in members):
        raise ConversionError(f"the {kind} package is encrypted", "save an unprotected copy", field="encrypted")


#: Tables are written in groups of whole rows of at most this many characters, each opening
#: with the header row (under the default chunk budget of 480, so a chunk holds whole rows
#: under their header).
TABLE_GROUP_CHARS = 400


#: The first bytes of an OLE compound file: legacy .doc/.xls/.ppt, .msg, and an Office
#: Open XML file saved with a password (its package encrypted inside an OLE container).
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")


def ole_error(data: bytes, kind: str) -> ConversionError:
    """The error for an OLE compound file where an Office Open XML package was expected:
    a password-protected file (its ``EncryptedPackage`` stream), else a legacy binary one."""
    if _ENCRYPTED_STREAM in data:
        return ConversionError(f"is an encrypted {kind} file (password-protected)",
                               "save an unprotected copy; encrypted files are not indexed", field="encrypted")
    return ConversionError(f"is a legacy binary Office file (OLE), not {kind}",
                           f"re-save it as {kind} (or give it its own suffix: .doc, .xls, .ppt)", field="content")


def markdown_table(rows: list[list[str]], *, group_chars: int = 0) -> str:
    """Rows of cell strings as a Markdown table (the first row is the header); with
    ``group_chars``, in blank-line separated groups of whole rows of at most that many
    characters (a longer row alone), each opening with the header row again."""
    width = max((len(r) for r in rows), default=0)
    if width == 0:
        return ""
    lines = ["| " + " | ".join([cell_text(c) for c in row] + [""] * (width - len(row))) + " |" for row in rows]
    head = lines[0] + "\n" + "|" + "|".join(["---"] * width) + "|"
    groups = [head]
    for line in lines[1:]:
        if group_chars and len(groups[-1]) + 1 + len(line) > group_chars and groups[-1] != head:
            groups.append(head)
        groups[-1] += "\n" + line
    return "\n\n".join(groups)


def cell_text(value: object) -> str:
    """One table cell on one line in its index form: NFKC, no controls, whitespace
    collapsed, ``|`` escaped (after NFKC, which makes ``｜`` a ``|``)."""
    if value is None:
        return ""
    return " ".join(normalize_extracted(str(value)).split()).replace("|", "\\|")


class CellBudget:
    """The non-empty cells a spreadsheet-like converter has read, against ``limits.max_cells``;
    ``advice`` is what the error past it tells the user to do."""

    def __init__(self, limits: ConversionLimits, advice: str) -> None:
        self.limits = limits
        self.advice = advice
        self.cells = 0

    def row(self, texts: list[str]) -> list[str]:
        """``texts`` without its trailing empty cells (an empty list: a row with nothing to
        keep), counted against the budget.

        Raises:
            ConversionError: past ``max_cells`` non-empty cells (``field="limits"``).
        """
        while texts and not texts[-1]:
            texts.pop()
        self.cells += len(texts)
        if self.cells > self.limits.max_cells:
            raise ConversionError(f"has more than {self.limits.max_cells:,} non-empty cells", self.advice, field="limits")
        return texts


def clean_line(text: str) -> str:
    """Whitespace runs collapsed to one space (no newlines)."""
    return " ".join(text.split())


_SLUG_DROP = re.compile(r"[^\w\- ]+")


def slug(text: str) -> str:
    """A heading anchor: lowercased, punctuation dropped, spaces to ``-`` (CJK kept)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "-".join(_SLUG_DROP.sub("", folded).split())[:80] or "section"


def column_letter(index: int) -> str:
    """1 → ``A``, 27 → ``AA``."""
    out = ""
    while index > 0:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out
