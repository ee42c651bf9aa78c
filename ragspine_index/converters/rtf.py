"""RTF → text with striprtf (BSD-3-Clause, pure Python): paragraphs as they are, one
document without regions (a chunk cites ``note.rtf#chars=…``).

The code page is the file's ``\\ansicpgN`` (``cp1252`` when none); ``\\uN`` characters
are read as Unicode. The ``{\\info}`` title and subject are properties; page headers and
footers (``{\\header}``, ``{\\footer}``…) are not body text but are read for a
sensitivity marking, as a DOCX's are. Embedded objects and fields are not run.
"""

from __future__ import annotations

import codecs
import re

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted, TextBuilder, clean_line

VERSION = "1"
EXTRA_MODULE = "striprtf"
_CODEPAGE = re.compile(rb"\\ansicpg(\d{3,5})")
_INFO = re.compile(r"\{\\(title|subject|keywords|author|doccomm)\s+((?:[^{}\\]|\\.)*)\}")
_HEADER = re.compile(r"\{\\(header|footer|headerl|headerr|headerf|footerl|footerr|footerf)\b")


def convert_rtf(data: bytes, limits: ConversionLimits) -> Converted:
    from striprtf.striprtf import rtf_to_text

    if not data.lstrip().startswith(b"{\\rtf"):
        raise ConversionError("is not an RTF file (no {\\rtf header)", "re-save it as RTF, or give it its own suffix")
    match = _CODEPAGE.search(data[:4096])
    encoding = f"cp{match.group(1).decode()}" if match else "cp1252"
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "cp1252"
    source = data.decode("latin-1")  # RTF is 7-bit; 8-bit bytes are read as the code page says
    try:
        text = rtf_to_text(source, encoding=encoding, errors="replace")
        headers = [clean_line(rtf_to_text("{\\rtf1 " + group + "}", encoding=encoding, errors="replace"))
                   for group in _groups(source, _HEADER)]
    except Exception as exc:  # noqa: BLE001 - a damaged file may raise anything inside the parser
        raise ConversionError(f"cannot be read as RTF ({type(exc).__name__}; damaged?)", "re-save it as RTF") from exc
    out = TextBuilder(limits)
    paragraphs = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    out.add("\n".join(paragraphs).strip())
    properties = tuple((name if name != "doccomm" else "comments", clean_line(value))
                       for name, value in _INFO.findall(source) if clean_line(value))
    title = next((v for k, v in properties if k == "title"), "")
    return Converted(text=out.text(), properties=properties, header_lines=tuple(h for h in headers if h), title=title)


def _groups(source: str, opener: re.Pattern[str]) -> list[str]:
    """The text of each balanced ``{...}`` group that ``opener`` starts."""
    out = []
    for match in opener.finditer(source):
        depth, i = 0, match.start()
        while i < len(source):
            ch = source[i]
            if ch == "\\":
                i += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    out.append(source[match.end():i])
                    break
            i += 1
    return out
