"""Text folding shared by the front-matter grammar, the key rules and the sensitivity
check: NFKC, case folding, look-alike letters mapped to ASCII, invisible characters
dropped."""

from __future__ import annotations

import unicodedata

from ragspine_index.sources.paths import unprintable

#: Lower-case letters from other scripts that look like ASCII ones (after NFKC + casefold).
_CONFUSABLES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
        "с": "c", "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
        "ԛ": "q", "ԝ": "w", "ӏ": "l", "һ": "h", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i",
        "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ı": "i",
        "ɩ": "i", "ɡ": "g", "ʏ": "y", "ꜱ": "s", "ᴄ": "c", "ᴏ": "o", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z",
        "∶": ":", "꞉": ":", "˸": ":", "։": ":", "׃": ":", "⁚": ":", "≔": ":",
    }
)


def visible_text(line: str) -> str:
    """``line`` after NFKC without invisible formatting characters, stripped."""
    if line.isascii() and line.isprintable():  # NFKC is the identity on ASCII; nothing to drop
        return line.strip()
    return "".join(ch for ch in unicodedata.normalize("NFKC", line) if not unprintable(ch) or ch.isspace()).strip()


def breaks_lines(ch: str) -> bool:
    """A control character other than tab, a line/paragraph separator or a surrogate."""
    return ch != "\t" and unicodedata.category(ch) in {"Cc", "Zl", "Zp", "Cs"}


def fold(text: str) -> str:
    """NFKC, case folding, look-alike letters mapped to ASCII, invisible characters dropped."""
    folded = (text if text.isascii() else unicodedata.normalize("NFKC", text)).casefold().translate(_CONFUSABLES)
    if folded.isascii():  # NFKC is the identity on ASCII, and no ASCII character is a format (Cf) one
        return folded
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def norm_key(key: str) -> str:
    """``Sensitivity``/``SENSITIVITY``/``sensi-tivity``/``ｓｅｎｓｉｔｉｖｉｔｙ`` → ``sensitivity``."""
    return "".join(ch for ch in fold(key) if ch.isalnum())
