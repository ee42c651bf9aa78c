"""Does a file that failed to parse mention RESTRICTED (or another marking word:
CONFIDENTIAL, SECRET, 机密, 绝密, 秘密, 保密), in any spelling the parser could meet?

A file that fails to parse normally keeps its previous chunks (bad input loses nothing),
but one that *may have become RESTRICTED* has them withdrawn (fail closed,
``documents._withdraw_reason``). The word must therefore be found however the file
was re-saved or written:

* UTF-8 with or without a byte order mark, UTF-16 and UTF-32 (either byte order, with or
  without a BOM) — a re-saved file is "binary" to the parser (NUL bytes) and its letters
  are interleaved with NULs;
* JSON string escapes (``"\\u0052ESTRICTED"``, ``"RES\\nTRICTED"``) and HTML character
  references (``&#82;ESTRICTED``);
* Unicode compatibility forms (NFKC), any letter case, and white space or invisible
  format characters (zero-width space, soft hyphen…) between the letters.

Content that decodes to no readable text at all (a binary file where a text document
was) cannot be checked and counts as a yes.
"""

from __future__ import annotations

import codecs
import html
import json
import re
import unicodedata

WORD = "restricted"
#: Every word whose appearance may mean the file was re-marked (a banner ``CONFIDENTIAL`` or
#: ``机密`` next to an unrelated error is withdrawn too). ``secret`` also matches
#: ``secretary``: a broken file that says so loses its old chunks (fail closed).
WORDS = (WORD, "confidential", "secret", "机密", "绝密", "秘密", "保密")
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_JSON_ESCAPES = re.compile(r'(?:\\(?:u[0-9a-fA-F]{4}|[nrtbf"/\\]))+')
#: Largest share of undecodable / control / unassigned characters of a readable decoding.
_UTF8_BAD_SHARE = 0.2
_WIDE_BAD_SHARE = 0.05


def _unescape_json(text: str) -> str:
    def one(m: re.Match) -> str:
        try:
            return json.loads('"' + m.group(0) + '"')
        except ValueError:
            return m.group(0)
    return _JSON_ESCAPES.sub(one, text)


def _fold(text: str) -> str:
    """NFKC, case folded, white space and format characters (category Cf) removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) != "Cf" and ch != "\x00")


def decodings(data: bytes) -> list[str]:
    """Every plausible reading of ``data``: by its BOM, as UTF-8, and as UTF-16/32 in both
    byte orders (undecodable bytes dropped)."""
    out: list[str] = []
    for bom, codec in _BOMS:
        if data.startswith(bom):
            out.append(data[len(bom):].decode(codec, errors="ignore"))
    out.append(data.decode("utf-8", errors="ignore"))
    if b"\x00" in data:
        for codec in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            out.append(data.decode(codec, errors="ignore"))
    return out


_UNREADABLE = frozenset({"Cc", "Cn", "Co", "Cs"})


def _readable(data: bytes, codec: str) -> bool:
    """Whether ``data`` decodes as ``codec`` to text: almost no undecodable bytes, control,
    unassigned, private-use or surrogate characters."""
    text = data.decode(codec, errors="replace")
    if not text:
        return False
    bad = sum(1 for ch in text if ch == "\ufffd" or (unicodedata.category(ch) in _UNREADABLE and ch not in "\n\r\t"))
    # a few stray bytes in UTF-8 are a broken text file (kept: bad input loses nothing); random
    # bytes read as UTF-16 are ~15% unassigned or private-use characters, real UTF-16 text ~0%
    return bad / len(text) <= (_UTF8_BAD_SHARE if codec == "utf-8" else _WIDE_BAD_SHARE)


def mentions_restricted(data: bytes) -> bool:
    """True when ``data`` spells "restricted" or another of :data:`WORDS` in any reading above,
    or cannot be read at all."""
    for text in decodings(data):
        for variant in (text, _unescape_json(text), html.unescape(text), html.unescape(_unescape_json(text))):
            folded = _fold(variant)
            if any(word in folded for word in WORDS):
                return True
    body = data
    for bom, _ in _BOMS:
        body = body.removeprefix(bom)
    codecs_tried = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be") if b"\x00" in data else ("utf-8",)
    return not any(_readable(body, codec) for codec in codecs_tried)


__all__ = ["decodings", "mentions_restricted"]
