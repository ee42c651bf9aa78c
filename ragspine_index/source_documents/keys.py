"""The key rules of front matter, JSONL objects and converted files' sidecars.

Keys are ASCII names, ``[A-Za-z_][A-Za-z0-9_.-]*`` of at most 64 characters, or names
written only in CJK scripts (``作者``; Han, kana, Hangul, digits, ``_``). A key that is
only almost a metadata field (after Unicode NFKC, case folding, mapping look-alike
letters to ASCII and dropping ``-``/``_``/``.``/spaces) or that looks like a sensitivity
setting is an error (:mod:`.sensitivity`). A key is quoted in an error message only when
it is a well-formed name.
"""

from __future__ import annotations

import re
import unicodedata

from ragspine_core.records import SENSITIVITIES

from ragspine_index.sources.paths import unprintable
from ragspine_index.source_documents.folding import norm_key
from ragspine_index.source_documents.sensitivity import sensitivity_like

_FIX_KEY = ("keys are ASCII names (a letter or '_', then letters, digits, '_', '.' or '-') or names written "
            "only in CJK characters, at most 64 characters")
#: Key names (a key is quoted in an error message only when it is one).
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def _describe_key(key: str) -> str:
    """A key that is not a well-formed name, described without quoting it."""
    traits = []
    if any(ch.isspace() for ch in key):
        traits.append("containing whitespace")
    if not key.isascii():
        traits.append("with non-ASCII characters")
    if any(unprintable(ch) for ch in key):
        traits.append("with control or invisible characters")
    if not traits:
        traits.append("that is not a plain name")
    return f"a key of {len(key)} character{'s' if len(key) != 1 else ''} " + " and ".join(traits)


def check_key(key: str, known: tuple[str, ...]) -> tuple[str | None, str, str] | None:
    """``(field, problem, hint)`` for a key that is malformed or only almost a known field."""
    if key in known:
        return None
    norm = norm_key(key)
    subject = f"key {key!r}" if _KEY.fullmatch(key) else _describe_key(key)
    for name in known:
        if norm == norm_key(name):
            return name, f"{subject} is not written exactly as the field {name!r}", f"write the key exactly as '{name}'"
    if sensitivity_like(norm):
        return (
            "sensitivity",
            f"{subject} looks like a sensitivity setting, but only a key written exactly 'sensitivity' is read",
            f"write it as 'sensitivity' with one of {', '.join(SENSITIVITIES)}; "
            "no default is assumed while it is there",
        )
    if not (_KEY.fullmatch(key) or _cjk_key(key)):
        return None, _describe_key(key), _FIX_KEY
    return None


def _cjk_key(key: str) -> bool:
    """A key written only in CJK scripts (Han, kana, Hangul; digits and ``_`` allowed),
    such as ``作者``: those scripts have no look-alikes of ASCII letters, so such a key can
    never pose as a field name. Sensitivity-like ones (``密级``…) were refused before."""
    if not 0 < len(key) <= 64 or not unicodedata.is_normalized("NFKC", key):
        return False
    return all(ch.isdigit() and ch.isascii() or ch == "_" or _CJK_KEY_SCRIPT.match(unicodedata.name(ch, "")) for ch in key) \
        and not key[0].isdigit()


_CJK_KEY_SCRIPT = re.compile(r"CJK UNIFIED IDEOGRAPH|HIRAGANA LETTER|KATAKANA LETTER|HANGUL SYLLABLE")
