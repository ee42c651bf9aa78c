"""Entity extraction for the relation graph: offline, deterministic, per chunk.

Sources, strongest first (a name found by several keeps the strongest source):

* ``glossary`` — every entity and alias of the glossary (``ragspine_core.glossary``);
  all aliases of one concept map to one node (``g:<id>``);
* ``metadata`` — a chunk's ``entity`` field (comma/semicolon separated);
* ``title`` — the document title (HotpotQA-style passage titles become entity nodes;
  a trailing disambiguation ``(film)`` is dropped for matching);
* ``heading`` — a markdown heading of the chunk text, its numbering (``一、``, ``第二章``)
  dropped and cut at the boundary rule below (``### 第三节 光伏逆变器的起步`` gives
  ``光伏逆变器``), when the phrase also occurs in another document;
* ``extracted`` — from the chunk text: English capitalised spans (``Lvn Pictures``,
  ``World War II``, ``Mahbub ul Haq``) and quoted titles (``"May"``); Chinese glossary
  names plus frequent CJK terms: maximal runs in >= 2 documents that cross no boundary.

The CJK boundary rule (:func:`cjk_segments`): a name never holds a particle or function
character (``的 了 是 在 和 与 …``), a clause verb or adverb (``实现 导致 超过 …``), clause
punctuation or a digit, and never straddles a glossary name (``艾克美中国实现营业收入`` is
two glossary names and a verb, not a name).

Numbers, dates, periods and amounts (``2024Q1``, ``2023年``, ``6亿元``, ``USD 0.42``,
``End-2023``) are attributes of a chunk, never entities (:func:`is_attribute`): they are
not nodes, so they are never the endpoint of a ``synonym`` or any other edge.

Names are matched case-insensitively on a normalised key (:func:`entity_key`). Every
function here is pure; callers pass only non-RESTRICTED chunks (the relation-graph step
guarantees it), so nothing extracted here can come from RESTRICTED text.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Container, Iterable, Mapping, Sequence

from ragspine_core.graph.names import STOP_WORDS, entity_key, word_key as _word_key

#: Source of an entity name, strongest first (ties in a merged node keep the first).
ENTITY_SOURCES = ("glossary", "metadata", "title", "heading", "extracted", "model")
SOURCE_RANK = {s: i for i, s in enumerate(ENTITY_SOURCES)}

#: Lowercase words allowed inside a capitalised span ("Mahbub ul Haq", "Bank of China").
_PARTICLES = frozenset("of the de la le du des del della da di von van der den ul al bin ibn y e und".split())
#: Capitalised words that are (almost) never an entity on their own (shared with the graph channel).
_STOP_CAPS = STOP_WORDS
_WORD = r"[A-Z0-9](?:(?![\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef])[\w'’\-\.&])*"
_CAP_SPAN = re.compile(
    rf"(?<![\w'’]){_WORD}(?:[ \t]+(?:(?:{'|'.join(sorted(_PARTICLES))})[ \t]+)*{_WORD})*", re.UNICODE)
_QUOTED = re.compile(r"[\"“”«»《「]([^\"“”«»《》「」\n]{2,80})[\"“”«»》」]")
_PAREN_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
#: CJK function characters that never start or end a term.
_CJK_EDGE_STOP = frozenset("的了是在和与及等为对中也有这那一不个之而于以其或并就都被把从到向由上下")
#: CJK particles and function characters that never occur inside a name (the boundary rule).
_CJK_CUT = frozenset("的了是在和与及等为对也被把从到向由将并就都而于以其或着吗呢吧这那该此已又还再均仍但却则即我你他她们很更约每若给让")
#: Clause verbs, adverbs and time words that end a name (multi-character cut points).
_CJK_CUT_WORDS = tuple(sorted(set("""
实现 导致 包括 预计 通过 进行 成为 开始 已经 继续 主要 同比 环比 其中 以及 由于 因为 如果 可以 需要 没有 我们 他们
超过 达到 低于 高于 减少 增加 增长 下降 下滑 提升 提高 降低 完成 推进 认为 表示 决定 采用 具有 进入 发布 承担 负责 相比
期间 目前 随后 之后 之前 以来 今年 去年 明年 当季 当年 全年 上半年 下半年 季度 年度 首次 仍然 甚至 处于 来自 作为
""".split()), key=lambda w: (-len(w), w)))
_CJK_CUT_WORD_RE = re.compile("|".join(map(re.escape, _CJK_CUT_WORDS)))
#: Heading numbering: ``一、`` ``(三)`` ``第二章`` ``第一节`` ``1.``.
_HEADING_NUMBER = re.compile(r"^(?:第[一二三四五六七八九十百\d]+[章节条部分篇]\s*|[一二三四五六七八九十]+[、.．]\s*|[(（][一二三四五六七八九十\d]+[)）]\s*|\d+(?:\.\d+)*[.、]?\s+)")
_GLUED_CJK = re.compile(r"(?<=[A-Za-z0-9])[\u3400-\u4dbf\u4e00-\u9fff]+|[\u3400-\u4dbf\u4e00-\u9fff]+(?=[A-Za-z0-9])")
_HEADING_LINE = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)

#: What is left of an attribute once its digits, units, currencies and calendar words are gone.
_ATTR_WORDS = re.compile(
    r"(?i)\b(?:usd|eur|rmb|cny|gbp|jpy|us\$|hk\$|\$|€|£|¥|bn|billion|million|thousand|k|m|b|pct|percent|per ?cent|bps?|"
    r"q[1-4]|h[12]|fy|cy|end|mid|start|early|late|full|full-year|year-end|year|years|quarter|quarters|half|month|months|week|weeks|day|days|"
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|"
    r"nov(?:ember)?|dec(?:ember)?|first|second|third|fourth|fy\d+|yoy|qoq|to|and|of|the|per|st|nd|rd|th|gwh|mwh|kwh|gw|mw|kw|"
    r"ah|wh|kg|km|m2|sqm|units?|pcs|times|x|s|hours?|h|ft|mins?|minutes?|seconds?|around|roughly|about|approximately|"
    r"over|under|nearly|almost|some|than|more|less|up|down|by|at|least|most|pp|cents?|dollars?|euros?|yuan|rmb)\b")
_ATTR_CJK = re.compile(r"[年月日周天号季度第一二三四五六七八九十百千万亿元角分美人民币欧港台次个家名位项条倍吨瓦时千克米平方上下半全前后末初底中旬至到约近余多及和%％两零〇]")
_UNIT_WORDS = frozenset("usd eur rmb cny gbp jpy gwh mwh kwh gw mw kw yoy qoq bps pct".split())
_DIGIT_LETTER = re.compile(r"(?<=\d)(?=[A-Za-z])")
_ATTR_PUNCT = re.compile(r"[\s\d.,，。:：;；/\\\-–—~～+()（）'’%％<>=#×]")


def is_attribute(name: str) -> bool:
    """A number, date, period, percentage or amount (``2024Q1``, ``2023年12月18日``,
    ``2024年第三季度``, ``6亿元``, ``USD 0.42``, ``End-2023``, ``15%``): an attribute of a
    chunk, never an entity. A name holding a digit is an attribute when nothing but units,
    currencies and calendar words is left once its digits are removed."""
    s = unicodedata.normalize("NFKC", name).strip()
    if not s:
        return False
    if not any(ch.isdigit() for ch in s):
        # a unit or amount word alone ("USD", "MWh", "亿元人民币", "七百人", "三周")
        if s.casefold() in _UNIT_WORDS:
            return True
        return bool(_CJK_RUN.fullmatch(s)) and all(_ATTR_CJK.fullmatch(ch) for ch in s)
    s = _DIGIT_LETTER.sub(" ", s)  # "2024Q1" -> "2024 Q1", "5GWh" -> "5 GWh"
    rest = _ATTR_WORDS.sub(" ", s)
    rest = _ATTR_CJK.sub("", rest)
    rest = _ATTR_PUNCT.sub("", rest)
    return not rest


def title_aliases(title: str) -> tuple[str, ...]:
    """A document title and, when it ends in a disambiguation ``(…)``, the title without it."""
    t = title.strip()
    if not t:
        return ()
    short = _PAREN_TAIL.sub("", t).strip()
    return (t,) if not short or short == t else (t, short)


@lru_cache(maxsize=1 << 18)
def _useful(key: str) -> bool:
    if len(key) < 2 or key in _STOP_CAPS:
        return False
    if key.replace(" ", "").replace(".", "").isdigit() or is_attribute(key):
        return False
    return any(ch.isalpha() for ch in key)


def english_spans(text: str, known: "Container[str]" = frozenset(), common: "Container[str] | None" = None,
                  lower: "Container[str]" = frozenset()) -> list[str]:
    """Capitalised spans and quoted titles of one text, in order of appearance (deduplicated).

    ``known``: name keys (the gazetteer's) after whose possessive a span is cut
    ("Acme Energy's Reno" -> "Acme Energy's", "Reno"; "Arthur's Magazine" stays whole).
    ``common``: casefolded words the library writes capitalised inside a sentence
    (:func:`midsentence_capitalised`); a lone capitalised word at a sentence start is a name
    only when it is one of them ("Arizona"), else a capitalised common word ("Added",
    "Battery") (None: every lone sentence-initial word is dropped)."""
    out: list[str] = []
    for m in _QUOTED.finditer(text):
        q = m.group(1).strip()
        if _CJK_RUN.search(q) and (cjk_segments(q) != [q] or is_attribute(q) or len(q) < 3):
            continue  # a quoted CJK clause ("机器停了，我们就去"), not a name: the boundary rule
        q = q.rstrip(",;:").strip()  # "Hey Jude," (the comma inside the quotes)
        n_words = len(q.split())
        if not 1 <= n_words <= 8 or (n_words >= 4 and (q[:1].islower() or q[-1:] in ".!?")):
            continue  # a quoted sentence or phrase ("will not cede share in core utility accounts"), not a title
        out.append(q)
    for m in _CAP_SPAN.finditer(text):
        # a span never crosses a sentence end ("Acme China. Harold Brandt"); "M. Ruiz", "U.S." do not end one
        pos, whole = 0, m.group(0)
        if m.end() == len(text) and not whole.endswith((".", "'", "’")) and " " in whole:
            whole = whole.rsplit(" ", 1)[0]  # the chunk ends inside a word ("Group C|ontroller"): drop the cut word
        elif m.end() == len(text) and " " not in whole and len(text) > len(whole):
            continue
        for cut in [*_SENTENCE_END.finditer(whole), None]:
            end = cut.start() if cut is not None else len(whole)
            amount = text[m.start() + end:m.start() + end + 1] in ("%", "％")
            parts = _possessive_parts(whole[pos:end], known)
            for k, part in enumerate(parts):
                span = _clean_span(part, k == 0 and _sentence_initial(text, m.start() + pos),
                                   amount_after=amount and k == len(parts) - 1, common=common, lower=lower)
                if span:
                    out.append(span)
            if cut is not None:
                pos = cut.end()
    # "US Customs and Border Protection", "Patent Trial and Appeal Board": one name, not two
    for m in _AND_NAME.finditer(text):
        a, b = (_clean_span(x, False) for x in (m.group(1), m.group(2)))
        whole = _clean_span(f"{m.group(1)} and {m.group(2)}", False)
        if whole and " and " in whole:
            out = [x for x in out if x not in (a, b)] + [whole]
    seen: set[str] = set()
    uniq = []
    for s in out:
        key = entity_key(s)
        if _useful(key) and key not in seen:
            seen.add(key)
            uniq.append(s)
    return uniq


_SENTENCE_END = re.compile(r"(?:(?<=[a-z])|(?<=\d)|(?<=[\s(][A-Z]{2})|(?<=[A-Z]{3}))\.[ \t]+")
_POSSESSIVE_WORD = re.compile(r"^(.+?)['’]s$")
#: What precedes a sentence-initial word: the text start, a line start (bullets, headings,
#: table cells) or a sentence end.
_INITIAL_BEFORE = re.compile(r"(?:^|[\n.!?:;|]|\s[-–—])\s*(?:[-*+#>|]+\s*)?(?:\d+(?:\.\d+)*[.)]?\s+)?[\s\"“(*_#>-]*$")


def _sentence_initial(text: str, start: int) -> bool:
    before = text[max(0, start - 12):start]
    line_start = text.rfind("\n", 0, start) + 1
    if _INITIAL_BEFORE.search(before if start - 12 > line_start else text[line_start:start]):
        return True
    return False


_DESCRIPTIVE_SUFFIXES = ("-made", "-bound", "-based", "-owned", "-origin", "-language", "-refined", "-scale", "-only",
                         "-style", "-listed", "-led", "-funded", "-speaking")
#: Section labels that are no names.
_GENERIC = frozenset({"q&a", "faq", "faqs", "n/a", "tbd", "toc", "appendix", "summary", "quarter", "half", "group", "note",
                      "report", "results", "commentary", "update"})
#: Head words of organisation and document names that may hold an "and" ("US Customs and Border Protection").
_AND_HEADS = ("Board", "Committee", "Protection", "Policy", "Office", "Agency", "Commission", "Council", "Authority",
              "Department", "Court", "Institute", "Association", "Society", "Foundation", "Act", "Administration",
              "Bureau", "Service", "Services")
_AND_NAME = re.compile(r"(?<![\w'’])((?:[A-Z][\w'’\-\.&]*[ \t]+)*[A-Z][\w'’\-\.&]*)[ \t]+and[ \t]+"
                       r"((?:[A-Z][\w'’\-\.&]*[ \t]+)*(?:" + "|".join(_AND_HEADS) + r"))\b")
_DEMONYMS = frozenset("""
american european asian african chinese japanese korean german french dutch polish italian spanish british english
swedish nordic danish norwegian finnish vietnamese mexican canadian indian russian brazilian australian austrian swiss
belgian irish scottish welsh portuguese greek turkish thai indonesian malaysian filipino singaporean taiwanese
western eastern northern southern midwestern latin arab arabic persian jewish catholic muslim christian
""".split())


def _NAME_HEAD(words: list[str]) -> bool:
    """A capitalised stop word that starts a name here: "New" before a capitalised word ("New York")."""
    return len(words) > 1 and words[0] == "New" and words[1][:1].isupper() and words[1].casefold() not in _DEMONYMS


def _number_word(w: str) -> bool:
    return bool(w) and w.replace(".", "").replace(",", "").replace("%", "").isdigit()


def _possessive_parts(span: str, known: "Container[str]") -> list[str]:
    """``span`` cut after a possessive whose owner is a known name (the first part keeps its ``'s``)."""
    words = span.split()
    for i, w in enumerate(words[:-1]):
        m = _POSSESSIVE_WORD.match(w)
        if m is not None and entity_key(" ".join(words[:i] + [m.group(1)])) in known:
            return [" ".join(words[:i + 1]), *_possessive_parts(" ".join(words[i + 1:]), known)]
    return [span]


def _clean_span(span: str, initial: bool, *, amount_after: bool = False, common: "Container[str] | None" = None,
                lower: "Container[str]" = frozenset()) -> str:
    """One capitalised span trimmed: stop words, particles and numbers off both ends
    ("In 1998 Acme", "Revenue of USD 8.7" -> "Revenue"); at a sentence start, a lone
    capitalised word is only a capitalised common word ("Added", "Battery") and a leading
    verb form is dropped ("Founding Acme Energy" -> "Acme Energy", "Expand the Haiphong" -> "Haiphong")."""
    words = span.strip(" .,'’-").split()
    # "US-made LFP", "Chinese-language": a descriptive compound ends what came before it
    for i in range(len(words) - 1, -1, -1):
        if words[i].casefold().endswith(_DESCRIPTIVE_SUFFIXES):
            words = words[i + 1:]
            break
    # a leading particle is dropped, a capitalised one starts a name ("Van Dijk Regeltechniek")
    while words and ((words[0].casefold().strip(".") in _STOP_CAPS and not _NAME_HEAD(words))
                     or (words[0] in _PARTICLES) or _number_word(words[0])):
        if not _number_word(words.pop(0)):  # a section number keeps the next word sentence-initial
            initial = False
    # a trailing number is cut when it is an amount ("Huaxin 3.6", "Globex 14%"), kept when it
    # is part of a name ("Apollo 11", "Super Bowl 50", "PowerFlex 5")
    while words and (words[-1].casefold().strip(".") in _STOP_CAPS or words[-1].casefold() in _PARTICLES
                     or (_number_word(words[-1]) and (amount_after or not words[-1].isdigit() or len(words) == 1))):
        words.pop()
        amount_after = False
    if initial and len(words) > 1:
        first = words[0].casefold()
        if (len(first) > 4 and first.endswith("ed")) or (len(first) > 5 and first.endswith("ing")) \
                or words[1].casefold() in _PARTICLES:
            words.pop(0)
            while words and (words[0] in _PARTICLES or words[0].casefold().strip(".") in _STOP_CAPS):
                words.pop(0)
            initial = False
    if not words or len(words) > 6:
        return ""
    if initial and len(words) == 1 and not (words[0].isupper() and len(words[0]) >= 2) \
            and (common is None or words[0].casefold() not in common):
        return ""  # a sentence-initial capitalised common word; the gazetteer still finds a known name there
    if len(words) == 1 and not words[0].isupper() and words[0].casefold() in lower:
        return ""  # written in lower case more often than not: a common word
    if len(words) == 1 and words[0].casefold() in _DEMONYMS | _GENERIC:
        return ""  # an adjective of nationality or language ("German", "European"), not a name  # a sentence-initial capitalised word; the gazetteer still finds a known name there
    return " ".join(words).strip(" .,;:'’-")


def cjk_segments(text: str, *, names: Iterable[str] = ()) -> list[str]:
    """The pieces of ``text``'s CJK runs that may hold a name (the boundary rule): runs are
    cut at clause punctuation and digits (anything not CJK), at particles and function
    characters, at clause verbs/adverbs, and around every occurrence of ``names`` (glossary
    names: found on their own by the gazetteer). Pieces shorter than 2 characters are dropped."""
    if text.isascii():
        return []
    cut_names = sorted({n for n in names if n and _CJK_RUN.fullmatch(n)}, key=lambda n: (-len(n), n))
    name_re = re.compile("|".join(map(re.escape, cut_names))) if cut_names else None
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        if name_re is not None:
            run = name_re.sub("|", run)
        run = _CJK_CUT_WORD_RE.sub("|", run)
        piece: list[str] = []
        for ch in run:
            if ch == "|" or ch in _CJK_CUT:
                if len(piece) >= 2:
                    out.append("".join(piece))
                piece = []
            else:
                piece.append(ch)
        if len(piece) >= 2:
            out.append("".join(piece))
    return out


def cjk_ngrams(text: str, n_min: int = 2, n_max: int = 10, *, names: Iterable[str] = ()) -> set[str]:
    """Every CJK n-gram (``n_min``..``n_max`` characters) inside the boundary-cut pieces of
    ``text`` (:func:`cjk_segments`), not starting or ending with a function character."""
    out: set[str] = set()
    for piece in cjk_segments(text, names=names):
        for n in range(n_min, min(n_max, len(piece)) + 1):
            for i in range(len(piece) - n + 1):
                g = piece[i:i + n]
                if g[0] not in _CJK_EDGE_STOP and g[-1] not in _CJK_EDGE_STOP:
                    out.add(g)
    return out


def heading_phrases(text: str, *, names: Iterable[str] = ()) -> list[str]:
    """Candidate names of the markdown headings of ``text``: numbering dropped, then cut by
    the boundary rule (``## 三、毛利率变化原因`` -> ``变化原因``; ``### 第三节 光伏逆变器的起步``
    -> ``光伏逆变器``, ``起步``)."""
    out: list[str] = []
    for m in _HEADING_LINE.finditer(text):
        head = _HEADING_NUMBER.sub("", m.group(1).strip())
        # a CJK piece glued to Latin letters or digits ("AC-9系列伺服驱动器", "2025年目标") is part of a longer name
        glued = {g.group(0) for g in _GLUED_CJK.finditer(head)}
        out.extend(p for p in cjk_segments(head, names=names) if len(p) >= 3 and not any(p in g for g in glued))
    return out


def frequent_cjk_terms(texts: Sequence[str], *, docs: Sequence[str] | None = None, names: Iterable[str] = (),
                       min_df: int = 2, max_df_share: float = 0.05, per_chunk: int = 8) -> list[list[str]]:
    """Per text, its frequent CJK terms: n-grams of its boundary-cut pieces (:func:`cjk_ngrams`;
    ``names``: glossary names cut around) in >= ``min_df`` documents (``docs``: each text's
    document; default one document per text) and at most ``max_df_share`` of the texts,
    maximal (not inside a longer kept term of the same document frequency), at most
    ``per_chunk`` per text by length x idf (ties by the term)."""
    names = tuple(names)
    grams = [cjk_ngrams(t, names=names) for t in texts]
    doc_of = list(docs) if docs is not None else list(range(len(texts)))
    seen: dict[str, set] = defaultdict(set)
    for d, gs in zip(doc_of, grams):
        for g in gs:
            seen[g].add(d)
    df: Counter[str] = Counter({g: len(ds) for g, ds in seen.items()})
    n = max(len(set(doc_of)), 1)
    cap = max(min_df, int(max_df_share * len(texts)))
    kept = {g for g, c in df.items() if min_df <= c <= cap}
    # maximality: drop g when a longer kept gram containing it has the same df
    drop = set()
    for g in kept:
        if len(g) < 2:
            continue
        for sub_len in range(2, len(g)):
            for i in range(len(g) - sub_len + 1):
                s = g[i:i + sub_len]
                if s in kept and df[s] == df[g]:
                    drop.add(s)
    kept -= drop
    out = []
    for gs in grams:
        mine = [g for g in gs if g in kept]
        mine.sort(key=lambda g: (-len(g) * math.log(1 + n / df[g]), g))
        out.append(mine[:per_chunk])
    return out


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity name found in one chunk, with where the name came from."""

    key: str
    label: str
    source: str
    #: How many times the name occurs (titles/metadata count once).
    count: int = 1


class Gazetteer:
    """Known names (glossary aliases, titles, metadata entities) matched in text by word n-grams.

    English text is matched on word n-grams (up to ``max_words``); CJK text on
    substrings of CJK runs. Keys map to their node key (aliases of one concept share it).
    """

    def __init__(self, names: Mapping[str, str], *, max_words: int = 6, sources: Mapping[str, str] | None = None) -> None:
        #: normalised name -> node key
        self.names = dict(names)
        #: node key -> the source its gazetteer hits report (default: ``glossary`` for ``g:`` keys, else ``title``)
        self.sources = dict(sources or {})
        self.max_words = max_words
        self._cjk = {k for k in self.names if _CJK_RUN.fullmatch(k.replace(" ", ""))}
        self._cjk_lengths = sorted({len(k) for k in self._cjk}, reverse=True)

    def find(self, text: str) -> Counter[str]:
        """Node keys of the known names in ``text`` with their counts."""
        found: Counter[str] = Counter()
        if not self.names:
            return found
        raw = _WORDS.findall(text)
        n = len(raw)
        keyed: dict[int, str] = {}  # word keys, computed only for the windows looked up
        for i in range(n):
            # an English name starts capitalised (or with a digit): "Her" the film, not "her"
            if not (raw[i][:1].isupper() or raw[i][:1].isdigit()):
                continue
            parts: list[str] = []
            for j in range(i + 1, min(n, i + self.max_words) + 1):
                k = keyed.get(j - 1)
                if k is None:
                    k = keyed[j - 1] = _word_key(raw[j - 1])
                parts.append(k)
                node = self.names.get(" ".join(parts))
                if node is not None:
                    found[node] += 1
        if self._cjk:
            for run in _CJK_RUN.findall(text):
                for ln in self._cjk_lengths:
                    for i in range(len(run) - ln + 1):
                        node = self.names.get(run[i:i + ln])
                        if node is not None:
                            found[node] += 1
        return found


_WORDS = re.compile(r"[\w'’\-\.&]+")


def metadata_entities(entity_field: str) -> list[str]:
    """The names in a chunk's ``entity`` metadata field (comma/semicolon/pipe separated)."""
    return [p.strip() for p in re.split(r"[,;|，；]", entity_field or "") if p.strip()]


def midsentence_capitalised(texts: Iterable[str]) -> frozenset[str]:
    """The words (casefolded) a library writes as a lone capitalised word inside a sentence
    (after a lower-case word or a comma, before a lower-case word or punctuation: "in
    Arizona, ...", not "the Group CFO"): the evidence that a capitalised word at a sentence
    start is a name."""
    return frozenset(w.casefold() for t in texts for w in _MID_CAP.findall(t))


def lower_dominant(texts: Iterable[str]) -> frozenset[str]:
    """The words (casefolded) a library writes in lower case more often than capitalised."""
    low: Counter[str] = Counter()
    cap: Counter[str] = Counter()
    for t in texts:
        for w in _ANY_WORD.findall(t):
            (low if w[0].islower() else cap)[w.casefold()] += 1
    return frozenset(w for w, c in low.items() if c > cap.get(w, 0))


_ANY_WORD = re.compile(r"(?<![\w'’\-])[A-Za-z][a-z'’\-]*(?![\w'’])")
_MID_CAP = re.compile(r"(?<=[a-z,] )[A-Z][\w'’\-]*(?= [a-z(]|[.,;:)!?]|$)", re.MULTILINE)


_TITLE_PARTS = re.compile(r"\s[-–—|]\s|,\s|\sand\s|:\s|\s/\s")


def extract_mentions(text: str, *, title: str = "", entity_field: str = "", gazetteer: Gazetteer | None = None,
                     cjk_terms: Iterable[str] = (), common: "Container[str] | None" = None,
                     lower: "Container[str]" = frozenset(), pieces: "list[Mention] | None" = None) -> list[Mention]:
    """Every entity mention of one chunk (deterministic; sorted by key).

    Keys of gazetteer hits are node keys (``g:<id>`` for glossary concepts); others are
    :func:`entity_key` of the surface name. A span that is only a piece of a longer name of
    this chunk (a delimited piece of its own title, the head of a longer known name found
    here) is left out; ``pieces``, when given, receives those spans instead (sorted by key),
    so that a caller which finds the same name in another document can keep it ("Kansas" of
    "Antelope, Kansas" is a name of its own; "Year-End 2024 Summary" of one report's title is not).
    """
    best: dict[str, Mention] = {}

    def add(key: str, label: str, source: str, count: int = 1) -> None:
        if not key or not _useful(key.removeprefix("g:")):
            return
        prev = best.get(key)
        if prev is None or SOURCE_RANK[source] < SOURCE_RANK[prev.source]:
            best[key] = Mention(key, prev.label if prev is not None and prev.source == "glossary" else label, source,
                                max(count, prev.count if prev else 1))
        elif count > prev.count:
            best[key] = Mention(prev.key, prev.label, prev.source, count)

    gaz = gazetteer.names if gazetteer is not None else {}
    for t in title_aliases(title):
        k = entity_key(t)
        add(gaz.get(k, k), t, "title")
    for name in metadata_entities(entity_field):
        k = entity_key(name)
        add(gaz.get(k, k), name, "metadata")
    if gazetteer is not None:
        for node, c in gazetteer.find(text).items():
            add(node, node, "glossary" if node.startswith("g:") else gazetteer.sources.get(node, "title"), c)
    counts: Counter[str] = Counter()
    labels: dict[str, str] = {}
    held: Counter[str] = Counter()
    longer = [k for k in best if not k.startswith("g:")]
    own_pieces = {entity_key(p) for t in title_aliases(title) for p in _TITLE_PARTS.split(t)} - {entity_key(title)}
    for span in english_spans(text, gaz, common, lower):
        k = entity_key(span)
        node = gaz.get(k, k)
        if node not in gaz and (k in own_pieces or any(
                o != k and o.startswith(k) and o[len(k):len(k) + 1] in (" ", ",", ":", "-", "(") for o in longer)):
            # a delimited piece of the chunk's own title ("Year-End 2024 Summary" of "… Register - Year-End 2024
            # Summary") or the head of a longer known name found here ("Peer Benchmark" of "Peer Benchmark 2024 - …")
            held[node] += 1
            labels.setdefault(node, span)
            continue
        counts[node] += 1
        labels.setdefault(node, span)
    for node, c in counts.items():
        add(node, labels[node], "extracted", c)
    if pieces is not None:
        pieces.extend(Mention(node, labels[node], "extracted", c) for node, c in sorted(held.items())
                      if node not in best and _useful(node))
    for term in cjk_terms:
        add(gaz.get(term, term), term, "extracted")
    return sorted(best.values(), key=lambda m: m.key)
