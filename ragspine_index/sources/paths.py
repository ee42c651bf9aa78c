"""File names as they are shown: printable on one line.

Control and invisible formatting characters in a file name (Unicode categories Cc, Cf,
Zl, Zp, and undecodable bytes) are percent-encoded as UTF-8 in the ``source_path``, the
default ``source_locator``, the default title and error paths (a newline shows as
``%0A``), so every one stays on one printable line.
"""

from __future__ import annotations

import unicodedata

#: Control, format (invisible), line/paragraph separator and surrogate characters.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def unprintable(ch: str) -> bool:
    return unicodedata.category(ch) in _UNPRINTABLE


def printable_path(rel_path: str) -> str:
    """``rel_path`` with control and invisible formatting characters percent-encoded.

    Each such character (Unicode category Cc, Cf, Zl, Zp, or an undecodable byte kept as
    a surrogate) becomes its UTF-8 bytes as ``%XX`` — ``"a\nb.md"`` → ``"a%0Ab.md"`` —
    so the path always prints on one line. Other characters are kept as they are.
    """
    if not any(unprintable(ch) for ch in rel_path):
        return rel_path
    out = []
    for ch in rel_path:
        if not unprintable(ch):
            out.append(ch)
            continue
        try:
            encoded = ch.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            encoded = ch.encode("utf-8", "surrogatepass")
        out.append("".join(f"%{byte:02X}" for byte in encoded))
    return "".join(out)
