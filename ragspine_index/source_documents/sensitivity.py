"""The sensitivity check: whether a document's metadata or first lines try to mark it.

Sensitivity fails closed: anything that tries to set it but is not parsed exactly is an
error for that file, never the default (the decision itself is taken in
:func:`.metadata.make_document` with the functions here; the key rules are in
:mod:`.keys`).

* ``sensitivity`` must be ``PUBLIC``, ``INTERNAL`` or ``RESTRICTED`` — ASCII,
  case-insensitive, surrounding whitespace ignored. Anything else (``RESTRICTED!``,
  ``PUBLIC # was RESTRICTED``, full-width letters, an empty value) is an error.
* A key that is not exactly a field name but matches one after Unicode NFKC, case
  folding, mapping look-alike letters to ASCII and dropping ``-``/``_``/``.``/spaces
  (``Sensitivity``, ``doc-id``), a key naming a sensitivity-like notion
  (``classification``, ``confidentiality``, ``security_level``, ``restricted``,
  ``密级``…) or misspelling one (``sensitivty``), and two keys that match each other
  after that normalisation are errors.
* Line 1 that looks like a fence without being exactly ``---`` (``--- ``, ``---yaml``,
  ``- --``, other dashes, a line of dashes only, ``+++``), such a line as the first
  non-blank line after leading blank lines, whitespace or a second byte-order mark, and
  a closing fence that is not exactly ``---`` are errors.
* A document that does not set ``sensitivity`` gets the default only if nothing tries
  to mark it. It is an error when

  - a front matter line (comments included) or another metadata value mentions a
    sensitivity notion or level: ``sensitiv…``, ``classifi…``, ``confidential``,
    ``restrict…``, the word ``secret``, ``top secret``, ``密级``/``机密``/``绝密``/
    ``秘密``/``保密``/``敏感`` (after NFKC, case folding, look-alike mapping, ignoring
    ``-``, ``_``, spaces), or spells ``sensitivity`` in a key, or ``restricted`` /
    ``confidential`` in a short value, with stray characters in between;
  - the first non-blank line after the closing fence is another fence or a metadata
    field's ``key:`` line (a doubled or early fence);
  - one of the first 20 non-blank body lines (or ``text`` lines) looks like a marking:
    it starts with a sensitivity-like key and ``:`` or ``=`` (markdown emphasis, list
    and quote markers ignored); it contains ``<sensitivity|classification|
    confidentiality|security level>: <PUBLIC|INTERNAL|RESTRICTED|CONFIDENTIAL|SECRET…>``
    (spaces ignored); it has ``RESTRICTED``, ``CONFIDENTIAL``, ``TOP SECRET``,
    ``STRICTLY CONFIDENTIAL``, ``机密``, ``绝密`` or ``秘密`` right after a ``:`` or
    ``=``; its value after the first or last ``:``/``=`` is exactly one of those words
    or ``SECRET``; it is a banner made of one of them (or an all-capitals line starting
    with one); it is a banner of the grammar of :func:`is_banner` (``HIGHLY
    CONFIDENTIAL``, ``Company Confidential``, ``Confidential (Project X)``,
    ``Restricted distribution``, ``商业秘密``, ``保密``, ``仅限董事会``…); or it is
    ``Sensitivity RESTRICTED`` without a separator. A line holding
    a carriage return or another line separator is read both joined and split.
* A document that sets ``PUBLIC`` or ``INTERNAL`` must not carry a marking (the body
  rules above, minus the "right after a ``:``" one; a metadata field's own value does
  not count) that names ``RESTRICTED``, ``CONFIDENTIAL`` or ``SECRET`` (or
  ``机密``/``绝密``/``秘密``), or is a banner of that grammar: the conflict is an error. A document that sets
  ``RESTRICTED`` is never inspected.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Iterable

from ragspine_core.records import METADATA_FIELDS

from ragspine_index.source_documents.folding import fold, norm_key, visible_text

#: How many non-blank body lines are searched for a sensitivity marking when a document
#: sets no ``sensitivity`` (see the module docstring).
SENSITIVITY_SNIFF_LINES = 20
#: Normalised key names (see :func:`norm_key`) that try to set a sensitivity.
_SENSITIVITY_LIKE = frozenset(
    {
        "sensitivity", "sensitivitylevel", "sensitive", "datasensitivity",
        "classification", "classificationlevel", "dataclassification", "securityclassification",
        "confidentiality", "confidentialitylevel", "confidential",
        "securitylevel", "restricted", "restriction", "clearance", "accesslevel",
        "密级", "保密级别", "保密等级", "敏感级别", "敏感等级", "敏感度", "安全级别", "安全等级",
    }
)
#: Names whose near misses (edit distance, see :func:`sensitivity_like`) count too.
_SENSITIVITY_FUZZY = (("sensitivity", 2), ("classification", 1), ("confidentiality", 1))
#: Values and banner lines that mark a document as sensitive.
_MARKING_WORDS = frozenset(
    {"restricted", "confidential", "strictlyconfidential", "secret", "topsecret", "机密", "绝密", "秘密"}
)
LEVEL_WORDS = _MARKING_WORDS | {"public", "internal"}
#: A metadata line (front matter, comments included, or a JSONL value) of a document that
#: sets no sensitivity must not contain any of these (after :func:`norm_key`).
_SENSITIVITY_STEMS = (
    "sensitiv", "classifi", "confidential", "restrict", "topsecret", "密级", "机密", "绝密", "秘密", "保密", "敏感",
)
_EMBEDDED_MARKING = re.compile(
    r"(?:sensitivity|classification|confidentiality|security[\s_-]*level)[\s*_\"'`]*[:=].{0,3}?"
    r"(?:public|internal|restricted|confidential|secret|top\s*secret|strictly\s*confidential)"
)
_AFTER_SEPARATOR_MARKING = re.compile(
    # not followed by a letter: ``us-gaap:RestrictedStockMember`` (an XBRL name) is no marking
    r"[:=][\s*_\"'`\[(]*(?:restricted|confidential|top\s*secret|strictly\s*confidential|机密|绝密|秘密)(?![a-z])"
)
#: A sensitivity key and its separator; the value after it is read on its letters alone, so
#: stray characters or a comment (``sensitivity: R!ESTRICTED``, ``sensitivity: # was PUBLIC
#: RESTRICTED``) do not hide a restricted-type word.
_KEY_THEN_VALUE = re.compile(r"(?:sensitivity|classification|confidentiality|security[\s_-]*level)\W{0,3}[:=](.{0,40})")
_RESTRICTED_LETTERS = ("restricted", "confidential", "secret")
# -- the banner grammar (see :func:`is_banner`) --------------------------------------
_BANNER_PRE = (r"(?:highly|strictly|very|most|company|commercial(?:ly)?|business|corporate|draft|privileged|"
               r"proprietary|personal|private|legal(?:ly)?|attorney[\s-]*client|top|and|&|\+|sensitive|"
               r"board|management|hr|personnel|client|customer|group|internal(?=[\s\-–—:/,|&+]+(?:and|&|\+)))")
_BANNER_MARK = (r"(?:confidential|restricted|secret|(?:commercial\s+)?in\s+confidence|not\s+for\s+(?:public\s+)?(?:release|distribution|"
                r"circulation|publication))")
_BANNER_POST = (r"(?:distribution|information|info|document|documents|material|materials|data|only|use|access|"
                r"copy|treatment|handling|and|&|\+|privileged|proprietary|draft|do\s+not\s+(?:copy|distribute|"
                r"forward|share|disclose)|not\s+for\s+(?:distribution|circulation|publication|public\s+release)|"
                r"internal\s+use\s+only|need\s+to\s+know|eyes\s+only|addressee\s+only)")
_BANNER_SEP = r"[\s\-–—:/,|.·•]*"
_BANNER = re.compile(
    rf"(?:{_BANNER_PRE}{_BANNER_SEP})*{_BANNER_MARK}(?:{_BANNER_SEP}{_BANNER_POST})*[\s.!]*"
    r"(?:[\-–—:|/(\[【（<].*)?"
)
_CN_PUNCT = re.compile(r"[\s【】\[\]（）()：:“”\"'‘’·•★☆※*#_\-–—|/、，,。.！!<>《》]+")
_CN_BANNER = re.compile(
    r"(?:公司|商业|严格|高度|绝对|核心|重要|特别|内部)*(?:秘密|机密|绝密|保密|商密)(?:文件|资料|信息|材料|内容|事项|级|等级)?"
    r"(?:请勿外传|不得外传|严禁外传|禁止外传|注意保密|严禁复制|不得复制|请勿复制|请勿转发|不得转发)?"
    r"|(?:仅限|仅供|只限|只供)(?:董事会|董事|董事长|管理层|高管|高级管理层|高级管理人员|收件人|指定人员|授权人员|本人|"
    r"股东|法务|律师|审计委员会|委员会|项目组|项目组成员|总裁|总经理)(?:成员)?(?:阅读|使用|查阅|参阅|传阅|知悉)?"
)
#: A banner is a short line: longer ones are prose.
_BANNER_MAX_CHARS = 160
_LEADING_MARKUP = "#>*_-+|`'\"[(•·0123456789.)\t "


def _osa_distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def sensitivity_like(norm: str) -> bool:
    """Whether a normalised name tries to name a sensitivity, misspells one, or hides
    ``sensitivity`` among stray letters (``sPUBLICensitivity``)."""
    if norm in _SENSITIVITY_LIKE:
        return True
    if len(norm) <= 2 * len("sensitivity") and _is_subsequence("sensitivity", norm):
        return True
    return any(
        abs(len(norm) - len(name)) <= limit and _osa_distance(norm, name) <= limit for name, limit in _SENSITIVITY_FUZZY
    )


def _is_subsequence(needle: str, haystack: str) -> bool:
    letters = iter(haystack)
    return all(ch in letters for ch in needle)


def front_matter_kind(line: str) -> str:
    """``field`` for a metadata field's line, else ``meta`` (extra fields and comments)."""
    key = line.partition(":")[0].strip()
    return "field" if key in METADATA_FIELDS and not line.lstrip().startswith("#") else "meta"


def first_body_lines(body: str, where: Any) -> list[tuple[str, str, str]]:
    """The first ``SENSITIVITY_SNIFF_LINES`` non-blank lines as ``(where(n), line, "body")``."""
    out: list[tuple[str, str, str]] = []
    for n, line in enumerate(body.split("\n")):
        pieces = line.splitlines()
        if len(pieces) > 1:  # a CR or other line separator inside: read it both ways
            out.append((where(n), "".join(pieces), "body"))
        for piece in pieces:
            if not visible_text(piece):
                continue
            out.append((where(n), piece, "body"))
            if len(out) >= SENSITIVITY_SNIFF_LINES:
                return out
    return out


def _looks_like_marking(line: str, *, value_rule: bool = True, strict: bool = False) -> bool:
    """Whether one line looks like it marks a sensitivity (see the module docstring).

    ``strict`` (no sensitivity is set) also counts a restricted-type word right after
    any ``:`` or ``=`` (``Access: restricted to staff``).
    """
    folded = fold(line)
    if _EMBEDDED_MARKING.search(folded) or _EMBEDDED_MARKING.search("".join(folded.split())):
        return True
    value = _KEY_THEN_VALUE.search(folded)
    if value is not None and (strict or any(word in norm_key(value.group(1)) for word in _RESTRICTED_LETTERS)):
        # with no sensitivity set, any ``sensitivity:`` line near the top is a marking to
        # declare properly: its value may be garbled past reading (fail closed)
        return True
    if strict and _AFTER_SEPARATOR_MARKING.search(folded):
        return True
    text = folded.strip().lstrip(_LEADING_MARKUP)
    separator = re.search(r"[:=]", text)
    if separator is not None and separator.start() <= 40:
        if sensitivity_like(norm_key(text[: separator.start()])):
            return True
        if value_rule and norm_key(text[separator.end() :]) in _MARKING_WORDS:
            return True
    last = max(text.rfind(":"), text.rfind("="))
    if value_rule and last >= 0 and norm_key(text[last + 1 :]) in _MARKING_WORDS:
        return True
    words = re.findall(r"[^\W_]+", text)
    if not words:
        return False
    if "".join(words) in _MARKING_WORDS:
        return True
    if sensitivity_like(words[0]) and "".join(words[1:]) in LEVEL_WORDS:
        return True
    shown = unicodedata.normalize("NFKC", line)
    banner = shown == shown.upper() and any(ch.isalpha() for ch in shown)
    return banner and (words[0] in _MARKING_WORDS or "".join(words[:2]) in _MARKING_WORDS) or is_banner(line)


def is_banner(line: str) -> bool:
    """Whether ``line`` is a banner that marks a document restricted, in the phrasings real
    documents use (measured in ``tests/leak/test_banner_grammar.py``):

    * English: optional qualifiers, the marking word ``CONFIDENTIAL``/``RESTRICTED``/
      ``SECRET`` (or ``NOT FOR DISTRIBUTION``…), optional qualifiers after it, then
      optionally a separator (``-``, ``–``, ``:``, ``|``, ``(``…) and free text:
      ``HIGHLY CONFIDENTIAL``, ``PRIVILEGED & CONFIDENTIAL``, ``DRAFT - CONFIDENTIAL``,
      ``Company Confidential``, ``Confidential (Project X)``, ``Restricted distribution``,
      ``CONFIDENTIAL – Q3 plan``; any letter case, Markdown emphasis and brackets ignored.
      Prose does not match: ``Confidential information must be protected`` goes on with
      words that are no qualifier and no separator.
    * Chinese: ``商业秘密``, ``保密``, ``机密文件``, ``【绝密】``, ``秘密★请勿外传``,
      ``仅限董事会``, ``仅供收件人阅读``: the whole line (punctuation ignored) is qualifiers
      and a marking, or "only for" an audience.
    """
    if len(line) > _BANNER_MAX_CHARS:
        return False
    folded = " ".join(fold(line).split())
    text = folded.strip().lstrip(_LEADING_MARKUP).rstrip("*_`'\" ])）】")
    if text and _BANNER.fullmatch(text):
        return True
    cn = _CN_PUNCT.sub("", text)
    return bool(cn) and len(cn) <= 24 and _CN_BANNER.fullmatch(cn) is not None


def _mentions_sensitivity(line: str) -> bool:
    """Whether a metadata line mentions a sensitivity notion or level at all — also with
    stray characters mixed in: a key spelling ``sensitivity`` among other letters, or a
    short value spelling ``restricted``/``confidential`` among other letters."""
    letters = norm_key(line)
    if any(stem in letters for stem in _SENSITIVITY_STEMS) or re.search(r"\bsecret\b", fold(line)):
        return True
    key, colon, value = fold(line).partition(":")
    if not colon:
        return False
    key_letters, value_letters = norm_key(key), norm_key(value)
    if len(key_letters) <= 64 and _is_subsequence("sensitivity", key_letters):
        return True
    return any(
        len(value_letters) <= 3 * len(word) and _is_subsequence(word, value_letters)
        for word in ("restricted", "confidential")
    )


def first_marking(lines: Iterable[tuple[str, str, str]], *, restricted_only: bool = False) -> str | None:
    """Where the first marking is among ``(where, line, kind)``.

    Without ``restricted_only`` (no sensitivity is set): a metadata line (``meta`` or
    ``field``) that mentions a sensitivity notion at all, or a body line that looks like a
    marking. With it (``PUBLIC``/``INTERNAL`` is set): a line that looks like a marking and
    names a restricted-type word (``RESTRICTED``, ``CONFIDENTIAL``, ``SECRET``…); the value
    of a metadata field's own line does not count as a marking then.
    """
    for where, line, kind in lines:
        if restricted_only:
            if _looks_like_marking(line, value_rule=kind != "field") and any(
                word in norm_key(line) for word in _MARKING_WORDS
            ) or kind != "field" and is_banner(line):
                return where
        elif (kind != "body" and _mentions_sensitivity(line)) or _looks_like_marking(line, strict=True):
            return where
    return None
