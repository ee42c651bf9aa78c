"""The front-matter grammar of ``.md``/``.markdown``/``.txt`` files.

Front matter is a first line that is exactly ``---`` (one leading UTF-8 byte-order mark
is dropped first), then ``key: value`` lines, then a line that is exactly ``---``.
Blank lines and lines starting with ``#`` are allowed. Every other line is
``key: value`` starting in column 1 (an indented line — YAML nesting or continuation —
is an error). Keys are ASCII names, ``[A-Za-z_][A-Za-z0-9_.-]*`` of at most 64
characters, or names written only in CJK scripts (``作者``; Han, kana, Hangul, digits,
``_``) (whitespace before the ``:`` is ignored), and each appears once. Values are
plain strings: surrounding whitespace and one pair of matching quotes are removed,
nothing else — no YAML (``|``, ``>``, ``[...]``) and no trailing ``# comments``; those
are part of the value. Control characters other than tab, and Unicode line or
paragraph separators, are errors anywhere in front matter. Keys that are not metadata
fields become ``extra`` fields.
"""

from __future__ import annotations

import unicodedata

from ragspine_core.errors import DocumentError
from ragspine_core.records import METADATA_FIELDS

from ragspine_index.source_documents.folding import breaks_lines, fold, norm_key, visible_text
from ragspine_index.source_documents.keys import check_key

FRONT_MATTER_FENCE = "---"
_FIX_FRONT_MATTER = (
    "front matter is a first line '---', then one 'key: value' per line, then a line '---'"
)
_FIELD_NORMS = frozenset(name.replace("_", "") for name in METADATA_FIELDS)


def split_front_matter(
    text: str, rel: str
) -> tuple[dict[str, str], str, int, list[tuple[int, str]]] | DocumentError:
    """``(metadata, body, body's first line number, front matter lines)`` or the first error."""
    lines = text.split("\n")
    if lines[0] != FRONT_MATTER_FENCE:
        misplaced = _misplaced_fence(lines)
        if misplaced is not None:
            return DocumentError(rel, misplaced, field="front_matter", hint=_FIX_FRONT_MATTER_START)
        return {}, text, 1, []
    close = next(
        (i for i in range(1, len(lines)) if lines[i] == FRONT_MATTER_FENCE or _fence_like(lines[i])), None
    )
    if close is None:
        return DocumentError(
            rel,
            "front matter opened on line 1 is never closed",
            field="front_matter",
            hint=f"add a line containing only '---' after the last 'key: value' line ({_FIX_FRONT_MATTER})",
        )
    if lines[close] != FRONT_MATTER_FENCE:
        return DocumentError(
            rel,
            f"front matter line {close + 1} looks like the closing fence but is not exactly '---' "
            f"({_extra_chars(lines[close])})",
            field="front_matter",
            hint="write the closing fence as three hyphens alone on the line, with no spaces",
        )
    meta: dict[str, str] = {}
    seen_on: dict[str, tuple[str, int]] = {}
    for index in range(1, close):
        lineno = index + 1
        line = lines[index]
        control = next(((col, ch) for col, ch in enumerate(line, 1) if breaks_lines(ch)), None)
        if control is not None:
            col, ch = control
            return DocumentError(
                rel,
                f"front matter line {lineno} contains a control character (U+{ord(ch):04X}) at column {col}",
                field="front_matter",
                hint="front matter values are single-line text; remove the character",
            )
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line[0].isspace():
            return DocumentError(
                rel,
                f"front matter line {lineno} is indented",
                field="front_matter",
                hint="nested or continued (YAML) values are not supported: write each 'key: value' on one line, "
                "starting in column 1",
            )
        key, colon, value = line.partition(":")
        key = key.rstrip()
        if not colon:
            return DocumentError(
                rel, f"front matter line {lineno} has no ':'", field="front_matter",
                hint=f"write it as 'key: value'; {_FIX_FRONT_MATTER}",
            )
        if not key:
            return DocumentError(
                rel, f"front matter line {lineno} has an empty key", field="front_matter",
                hint="put the field name before the ':'",
            )
        key_problem = check_key(key, METADATA_FIELDS)
        if key_problem is not None:
            field, problem, hint = key_problem
            if field is None and any(ch.isspace() for ch in key):
                hint = "keys are single words such as valid_as_of; is the closing '---' missing?"
            problem = f"front matter line {lineno}: {problem}"
            return DocumentError(rel, problem, field=field or "front_matter", hint=hint)
        norm = norm_key(key)
        if norm in seen_on:
            first, first_line = seen_on[norm]
            if first == key:
                problem = f"front matter key {key!r} appears on line {first_line} and again on line {lineno}"
            else:
                problem = (
                    f"front matter keys {first!r} (line {first_line}) and {key!r} (line {lineno}) name the same field"
                )
            return DocumentError(rel, problem, field=key, hint="keep one of the two lines")
        seen_on[norm] = (key, lineno)
        meta[key] = _unquote(value.strip())
    after = _front_matter_again(lines, close + 1) if "sensitivity" not in meta else None
    if after is not None:
        return DocumentError(
            rel,
            f"line {after} right after the front matter looks like front matter again (a fence or a "
            "metadata 'key: value' line), and no sensitivity is set",
            field="front_matter",
            hint="put every 'key: value' line between the two '---' lines and start the body with text, "
            "or set 'sensitivity' in the front matter",
        )
    front_lines = [(index + 1, lines[index]) for index in range(1, close)]
    return meta, "\n".join(lines[close + 1 :]), close + 2, front_lines


_FIX_FRONT_MATTER_START = (
    "front matter starts with a first line that is exactly '---' (no spaces, nothing before it); "
    "if this line is meant as text, put a line of text before it"
)


def _fence_like(line: str) -> bool:
    """``---`` with stray characters (``--- ``, ``---yaml``, ``- --``, full-width ``－－－``, other
    dashes), a line of dashes only, or ``+++``."""
    visible = visible_text(line)
    squeezed = "".join(visible.split())
    dashes_only = len(squeezed) >= 2 and all(unicodedata.category(ch) == "Pd" for ch in squeezed)
    return visible == "+++" or visible.startswith("---") or dashes_only


def _extra_chars(line: str) -> str:
    extra = len(line) - len(FRONT_MATTER_FENCE) if line.strip() == FRONT_MATTER_FENCE else None
    if extra is not None:
        return f"it has {extra} extra whitespace character(s)"
    return f"it is {len(line)} characters long"


def _front_matter_again(lines: list[str], start: int) -> int | None:
    """The line number of the first non-blank body line when it is a fence or a metadata
    field's ``key:`` line (a doubled or misplaced fence), else ``None``."""
    for index in range(start, len(lines)):
        line = lines[index]
        if not visible_text(line):
            continue
        key, colon, _ = fold(line).partition(":")
        if _fence_like(line) or (colon and norm_key(key) in _FIELD_NORMS):
            return index + 1
        return None
    return None


def _misplaced_fence(lines: list[str]) -> str | None:
    """Why the first non-blank line looks like a fence that does not open front matter."""
    for lineno, line in enumerate(lines, start=1):
        if not visible_text(line):
            continue
        if not _fence_like(line):
            return None
        if lineno == 1:
            return f"line 1 looks like a front-matter fence but is not exactly '---' ({_extra_chars(line)})"
        return (
            f"line {lineno} looks like a front-matter fence, but front matter must start on line 1 "
            "(the lines before it are blank or invisible)"
        )
    return None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
