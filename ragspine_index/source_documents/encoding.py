"""Byte-level checks of a library file: empty, binary (a NUL byte) or not UTF-8."""

from __future__ import annotations

from ragspine_core.errors import DocumentError

#: How many leading bytes are searched for a NUL byte (the binary-file test).
BINARY_SNIFF_BYTES = 8192
_BOM = "\ufeff"


def _binary_error(data: bytes, rel: str, hint: str) -> DocumentError | None:
    """A NUL byte in the first ``BINARY_SNIFF_BYTES`` marks a binary file."""
    nul = data.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul < 0:
        return None
    return DocumentError(rel, f"looks like a binary file (NUL byte at offset {nul})", field="content", hint=hint)


def _check_bytes(data: bytes, rel: str) -> DocumentError | None:
    """Empty, binary or invalid UTF-8 → the error; else ``None``."""
    if not data:
        return DocumentError(rel, "the file is empty (0 bytes)", field="body", hint="add text or delete the file")
    binary = _binary_error(data, rel, "convert it to UTF-8 text (.md, .txt or .jsonl) or move it out of the library")
    if binary is not None:
        return binary
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return DocumentError(
            rel,
            f"is not valid UTF-8 at byte offset {exc.start} ({exc.reason})",
            field="encoding",
            hint="re-save the file as UTF-8",
        )
    return None
