"""Byte-level checks of a library file: empty, binary (a NUL byte) or not decodable.

Text is UTF-8, or UTF-16/UTF-32 when the file starts with that encoding's byte-order mark
(Windows "Unicode" text, Excel's "Unicode Text" export); a UTF-8 byte-order mark is
dropped. :func:`decode_text` returns the text or the located error.
"""

from __future__ import annotations

from ragspine_core.errors import DocumentError

#: How many leading bytes are searched for a NUL byte (the binary-file test).
BINARY_SNIFF_BYTES = 8192
BOM = "\ufeff"
#: Byte-order marks and their codecs (UTF-32 before UTF-16: ``FF FE 00 00`` starts with ``FF FE``).
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32"), (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32"),
         (b"\xff\xfe", "utf-16-le", "UTF-16"), (b"\xfe\xff", "utf-16-be", "UTF-16"))


def bom_codec(data: bytes) -> tuple[str, str, int] | None:
    """``(codec, name, BOM length)`` when ``data`` starts with a UTF-16/UTF-32 byte-order mark."""
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            return codec, name, len(bom)
    return None


def binary_error(data: bytes, rel: str, hint: str) -> DocumentError | None:
    """A NUL byte in the first ``BINARY_SNIFF_BYTES`` marks a binary file."""
    nul = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul < 0:
        return None
    return DocumentError(rel, f"looks like a binary file (NUL byte at offset {nul})", field="content", hint=hint)


def decode_text(data: bytes, rel: str) -> str | DocumentError:
    """The text of a file (UTF-8, or UTF-16/32 by its byte-order mark; no BOM kept), or
    the error: empty, binary, or not valid in its encoding."""
    if not data:
        return DocumentError(rel, "the file is empty (0 bytes)", field="body", hint="add text or delete the file")
    hint = "convert it to UTF-8 text (.md, .txt or .jsonl) or move it out of the library"
    marked = bom_codec(data)
    if marked is not None:
        codec, name, skip = marked
        try:
            text = data[skip:].decode(codec)
        except UnicodeDecodeError as exc:
            return DocumentError(rel, f"starts with a {name} byte-order mark but is not valid {name} at byte offset "
                                 f"{exc.start + skip} ({exc.reason})", field="encoding", hint="re-save the file as UTF-8")
        if "\x00" in text[:BINARY_SNIFF_BYTES]:
            return DocumentError(rel, f"looks like a binary file (a NUL character in its {name} text)",
                                 field="content", hint=hint)
        return text
    binary = binary_error(data, rel, hint)
    if binary is not None:
        return binary
    try:
        return data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        return DocumentError(
            rel,
            f"is not valid UTF-8 at byte offset {exc.start} ({exc.reason})",
            field="encoding",
            hint="re-save the file as UTF-8 (UTF-16 is read when it starts with a byte-order mark)",
        )


def _check_bytes(data: bytes, rel: str) -> DocumentError | None:
    """Empty, binary or not decodable → the error; else ``None``."""
    result = decode_text(data, rel)
    return result if isinstance(result, DocumentError) else None
