"""Who, when, which metric and how much a sentence states: the attribution of a graph fact.

A typed graph answer (:mod:`.questions`) quotes sentences; this module decides, for one
occurrence of a metric's name in one sentence, whether the sentence states that metric's
value for a given entity and period, reading the evidence sentence itself rather than the
nearest mention elsewhere in the chunk:

* **metric** — the name must stand for the metric itself, not a qualified one: what stands
  between the entity (or the clause start) and the name may only be period words and
  filler (``Acme US revenue``, ``全年营收``, ``Globex reported 2024 revenue``), so
  ``服务与软件业务营收`` (a segment's revenue), ``R&D spend … (6.9% of revenue)`` (a share of
  it) are not revenue; the value must follow the name closely, past growth figures (``grew
  18.0% to USD 1,260 million`` states 1,260), and be of the metric's kind (a margin or rate
  is a percentage, an amount is not);
* **entity** — the glossary entity named last before the metric in the same sentence (else
  the first between the name and its value); a sentence naming none takes its chunk's only
  entity (the chunk's text and ``entity`` field naming exactly one), else it is not
  attributable;
* **period** — the periods the sentence names outside comparisons (``from … in 2023``,
  ``较2023年``, ``环比第二季度`` are the comparison's): a year (FY), a half (``H1 2025``,
  ``first half of 2025``, ``2025年上半年``) or a quarter (``Q3 2024``, ``2024年第三季度``,
  ``本季度`` with the quarter from the chunk); a sentence naming none takes the one period
  its chunk names (else the one its document title names, else the chunk's ``period``
  field when the text names no year); two different periods are not attributable;
* **currency** — from the value (``USD``, ``$``, ``EUR``, ``RMB``, ``亿元``, ``元``).

Nothing is guessed: a candidate that cannot be attributed returns an :class:`Abstention`
with its reason (``entity``, ``period``, ``table``); one that is another metric, entity or
period is simply not this fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

__all__ = ["Abstention", "Attributed", "Period", "Value", "attribute", "find_periods", "find_value", "resolve_periods",
           "title_period"]

#: ``Period.n`` of a year named as the full year ("FY2024", "full-year", "全年").
FULL_YEAR = -2
_CN_NUM = {"一": 1, "二": 2, "三": 3, "四": 4, "1": 1, "2": 2, "3": 3, "4": 4}
_ORD = {"first": 1, "second": 2, "third": 3, "fourth": 4}
_Y = r"((?:19|20)\d\d)"
#: (pattern, kind, group of the year or 0, group of the number or 0 / a fixed number)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH = r"(" + "|".join(m.capitalize() for m in _MONTHS) + r"|" + "|".join(m[:3].capitalize() for m in _MONTHS) + r")\.?"
_DATES: tuple[tuple[re.Pattern[str], int, int, int], ...] = tuple((re.compile(p), y, mo, d) for p, y, mo, d in (
    (_Y + r"\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日", 1, 2, 3),
    (r"(?<!\d)(\d{1,2})\s+" + _MONTH + r",?\s+" + _Y, 3, 2, 1),
    (_MONTH + r"\s+(\d{1,2}),?\s+" + _Y, 3, 1, 2),
    (r"(?<!\d)" + _Y + r"-(\d{2})-(\d{2})(?!\d)", 1, 2, 3),
))
_PERIOD_PATTERNS: tuple[tuple[re.Pattern[str], str, int, int], ...] = tuple(
    (re.compile(p, re.IGNORECASE), k, y, n) for p, k, y, n in (
        (_Y + r"\s*年?\s*第?([一二三四1-4])\s*季度", "Q", 1, 2),
        (_Y + r"\s*年?\s*(上|下)半年", "H", 1, 2),
        (r"(?<![A-Za-z])" + _Y + r"\s*[-_ ]?Q([1-4])(?!\d)", "Q", 1, 2),
        (r"(?<![A-Za-z])Q([1-4])\s*(?:FY\s*)?'?" + _Y + r"?(?!\d)", "Q", 2, 1),
        (r"(?<![A-Za-z])" + _Y + r"\s*[-_ ]?H([12])(?!\d)", "H", 1, 2),
        (r"(?<![A-Za-z])H([12])\s*" + _Y + r"?(?!\d)", "H", 2, 1),
        (r"\b(first|second|third|fourth)[- ]quarter(?:\s+(?:of\s+)?" + _Y + r")?", "Q", 2, 1),
        (r"\b(first|second)[- ]half(?:\s+(?:of\s+)?(?:the\s+year\s+)?" + _Y + r")?", "H", 2, 1),
        (r"第([一二三四])季度", "Q", 0, 1),
        (r"(上|下)半年", "H", 0, 1),
        (r"本季度|当季|本季|this quarter|the quarter", "Q", 0, -1),
        (r"\bFY\s*'?" + _Y, "Y", 1, FULL_YEAR),
        (r"\bfull[- ]year(?:\s+(?:of\s+)?" + _Y + r")?", "Y", 1, FULL_YEAR),
        (r"(?:" + _Y + r"\s*年?\s*)?(?:全年|年度)", "Y", 1, FULL_YEAR),
        (r"(?<!\d)" + _Y + r"(?!\d)\s*年?", "Y", 1, 0),
    ))
#: Words before a period that make it the comparison's (``up 4.7% from USD 2,980 million in 2023``).
_COMPARISON = re.compile(r"\b(?:from|than|versus|vs\.?|compared|against|over|prior|previous|earlier|last|a year ago)\b|"
                         r"较|同比|环比|上年|去年|相比|对比", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"(?<!\d),|,(?!\d)|[，;；:：(（)）]")
#: Between the entity (or the clause start) and the metric's name: what may stand there.
_FILLER = re.compile(
    r"\b(?:the|its|their|our|total|group|full|year|annual|reported|consolidated|net|of|for|fiscal|fy|was|were|is|"
    r"and|with|but|a|an|in|at|also|whose|overall|s|on)\b|['’]s?|实现|的|全年|年度|总|整体|集团|公司|同期|期内|为|其|"
    r"合并|上半年|下半年|本季度|当季|季度|方面|和|及", re.IGNORECASE)
_NUM = re.compile(r"(?P<cur>USD|US\$|EUR|RMB|CNY|GBP|[$€£¥])?\s?(?P<num>\d[\d,]*(?:\.\d+)?)\s?"
                  r"(?P<scale>billion|million|bn|亿元|万元|亿|万|%|％|个百分点|percentage points?|pp)?(?P<cur2>\s?人民币|美元|欧元|元)?",
                  re.IGNORECASE)
_GROWTH_BEFORE = re.compile(r"(?:\b(?:up|down|grew|rose|fell|increased|decreased|declined|by|growth of|from)\b|增长|下降|"
                            r"同比|环比|提升|下滑|减少|增加|较)\s*[+-]?$", re.IGNORECASE)
_PERCENT_NAME = re.compile(r"margin|rate|ratio|churn|share|intensity|率|份额|占比", re.IGNORECASE)
_SCALE = {"billion": 1e9, "bn": 1e9, "million": 1e6, "亿元": 1e8, "亿": 1e8, "万元": 1e4, "万": 1e4}
_CURRENCY = {"usd": "USD", "us$": "USD", "$": "USD", "eur": "EUR", "€": "EUR", "rmb": "RMB", "cny": "RMB", "¥": "RMB",
             "gbp": "GBP", "£": "GBP"}
#: How far after the metric's name its value may stand (characters).
VALUE_WINDOW = 48


@dataclass(frozen=True, slots=True)
class Period:
    """A period named in a text: ``kind`` ``Y`` (a full year), ``H``, ``Q`` or ``D`` (a day:
    ``n`` is month * 100 + day); ``year`` 0 or ``n`` 0 when the text leaves it to the
    context; ``n`` -1: "this quarter"."""

    kind: str
    year: int
    n: int
    start: int
    end: int
    comparison: bool = False

    def label(self) -> str:
        if self.kind == "D":
            return f"{self.year}-{self.n // 100:02d}-{self.n % 100:02d}"
        return f"{self.year}" if self.kind == "Y" else f"{self.year}{self.kind}{self.n}"


@dataclass(frozen=True, slots=True)
class Value:
    """The value a sentence states for a metric: its text, amount, unit (``USD``, ``RMB``,
    ``%``, ``""`` for a count) and where it is in the sentence."""

    text: str
    amount: float
    unit: str
    start: int


@dataclass(frozen=True, slots=True)
class Attributed:
    """One metric occurrence attributed: the entity, the period label (``2024``, ``2024H1``,
    ``2024Q3``; ``""`` when the evidence names none) and the value."""

    entity: str
    period: str
    value: Value
    period_in_sentence: bool


@dataclass(frozen=True, slots=True)
class Abstention:
    """A metric occurrence with a value that could not be attributed, and why."""

    reason: str
    entity: str = ""


def find_periods(text: str) -> list[Period]:
    """The periods ``text`` names, left to right, longest match first where two overlap;
    each marked ``comparison`` when a comparison word stands before it in its clause."""
    found: list[Period] = []
    taken: list[tuple[int, int]] = []

    def comparison(at: int) -> bool:
        return bool(_COMPARISON.search(_CLAUSE_BREAK.split(text[:at])[-1]))

    for dp, yg, mg, dg in _DATES:  # a day ("31 March 2024", "2024年10月28日") is a point, not the year
        for m in dp.finditer(text):
            month = m.group(mg)
            mo = int(month) if month.isdigit() else next(i for i, n in enumerate(_MONTHS, 1) if n.startswith(month.lower()[:3]))
            found.append(Period("D", int(m.group(yg)), mo * 100 + int(m.group(dg)), m.start(), m.end(), comparison(m.start())))
            taken.append((m.start(), m.end()))
    for pattern, kind, yg, ng in _PERIOD_PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            year = int(m.group(yg)) if yg and m.group(yg) else 0
            if ng > 0:
                raw = m.group(ng).lower()
                n = _CN_NUM.get(raw) or _ORD.get(raw) or {"上": 1, "下": 2}.get(raw, 0)
            else:
                n = ng
            found.append(Period(kind, year, n, m.start(), m.end(), comparison(m.start())))
            taken.append((m.start(), m.end()))
    return sorted(found, key=lambda p: p.start)


def resolve_periods(periods: Iterable[Period], context: Callable[[], frozenset[str]] | None = None) -> str | None:
    """The one period label the non-comparison ``periods`` name; ``""`` when they name none.

    A yearless quarter or half (``第三季度``, ``Q3``) takes the year the sentence names, else
    the one year of the ``context`` (the chunk's period labels); "this quarter" takes the
    context's one quarter; a yearless "full year" its one year. None when the periods name
    two different ones, or a part that the context cannot complete."""
    own = [p for p in periods if not p.comparison]
    years = {p.year for p in own if p.year}
    labels: set[str] = set()
    ctx: frozenset[str] | None = None

    def context_years() -> set[int]:
        nonlocal ctx
        ctx = context() if ctx is None and context is not None else (ctx or frozenset())
        return {int(label[:4]) for label in ctx}

    for p in own:
        if p.kind == "Y":
            continue
        if p.kind == "D":
            labels.add(p.label())
            continue
        if p.n < 0:  # "this quarter": the chunk's one quarter
            context_years()
            quarters = {label for label in ctx or () if p.kind in label}
            if len(quarters) != 1:
                return None
            labels.add(quarters.pop())
            continue
        year = p.year or (next(iter(years)) if len(years) == 1 else 0)
        if not year:
            cy = context_years()
            if len(cy) != 1:
                return None
            year = cy.pop()
        labels.add(f"{year}{p.kind}{p.n}")
    if labels:
        if len(labels) > 1 or not years <= {int(label[:4]) for label in labels} or any(
                p.kind == "Y" and p.n == FULL_YEAR for p in own):
            return None
        return labels.pop()
    if len(years) > 1:
        return None
    if years:
        return str(years.pop())
    if any(p.kind == "Y" for p in own):  # "全年", "full-year" without a year: the context's year
        cy = context_years()
        return str(cy.pop()) if len(cy) == 1 else None
    return ""


def title_period(title: str) -> str:
    """The one period a document title names (``FY2024 results`` -> ``2024``, ``2024q3-note``
    -> ``2024Q3``), ``""`` when it names none or several."""
    label = resolve_periods(find_periods(title.replace("_", " ")))
    return label or ""


def find_value(sentence: str, start: int, end: int, periods: Iterable[Period]) -> Value | None:
    """The value stated right after a metric's name ``sentence[start:end]``: the first number
    within :data:`VALUE_WINDOW` characters, in the same clause run, that is not a period, a
    growth figure (``up 4.7%``, ``同比下降2.2%``) or a change in points."""
    spans = [(p.start, p.end) for p in periods]
    stop = end + VALUE_WINDOW
    for m in _NUM.finditer(sentence, end):
        if m.start() > stop:
            return None
        if any(s <= m.start("num") < e for s, e in spans):
            continue
        scale = (m.group("scale") or "").lower()
        if scale in ("个百分点", "percentage point", "percentage points", "pp"):
            continue
        if _GROWTH_BEFORE.search(sentence[max(end, m.start() - 16):m.start()]):
            continue
        if re.search(r"[。；;!?！？]", sentence[end:m.start()]):
            return None
        num = float(m.group("num").replace(",", ""))
        cur = (m.group("cur") or "").lower()
        unit = "%" if scale in ("%", "％") else _CURRENCY.get(cur, "")
        cur2 = (m.group("cur2") or "").strip()
        if not unit and (scale in ("亿元", "万元") or cur2):
            unit = {"美元": "USD", "欧元": "EUR"}.get(cur2, "RMB")
        amount = num * _SCALE.get(scale, 1.0)
        return Value(m.group(0).strip(), amount, unit, m.start())
    return None


_PAREN = re.compile(r"[(（][^()（）]*[)）]")
_APPOSITIVE = re.compile(r",\s+(?:the|a|an|its)\s[^,，;；]{0,80},", re.IGNORECASE)
_LABEL = re.compile(r"^(?:[-*•]\s*)?([^:：,，。.]{1,48})[:：]\s")


def _strip_periods(text: str) -> str:
    out = text
    for p in find_periods(text):
        out = out.replace(text[p.start:p.end], " ")
    return out


def attribute(sentence: str, start: int, end: int, *, entities: list[tuple[int, int, str]],
              chunk_entity: Callable[[], str | None], chunk_period: Callable[[], frozenset[str]]) -> Attributed | Abstention | None:
    """Attribute the metric name at ``sentence[start:end]``.

    ``entities``: the glossary entity mentions of the sentence, ``(start, end, id)``;
    ``chunk_entity``: the chunk's only entity, None when it has not exactly one;
    ``chunk_period``: the chunk's period labels. Returns None when the occurrence states no value of this metric (a
    qualified or shared metric, no value, a value of the wrong kind)."""
    if sentence.count("|") >= 2:
        return Abstention("table")  # a table row: which column is whose is not in the sentence
    periods = find_periods(sentence)
    value = find_value(sentence, start, end, periods)
    if value is None:
        return None
    expects_percent = bool(_PERCENT_NAME.search(sentence[start:end]))
    if (value.unit == "%") != expects_percent:
        return None
    label = _LABEL.match(sentence)
    if label is not None and label.end() <= start and re.search(r"[^\W\d_]", _FILLER.sub(" ", _strip_periods(label.group(1)))) \
            and not any(e[1] <= label.end() for e in entities):
        return None  # "Service and software: USD 630 million, gross margin 52.4%": the label's figures
    clause_start = max((m.end() for m in _CLAUSE_BREAK.finditer(sentence, 0, start)), default=0)
    before = [e for e in entities if e[1] <= start]
    for a in _APPOSITIVE.finditer(sentence, 0, start):  # "Acme Energy, the … unit of Acme Group, reported": not Acme Group
        if any(e[1] <= a.start() for e in before):
            before = [e for e in before if not a.start() <= e[0] < a.end()]
    in_clause = [e for e in before if e[0] >= clause_start]
    anchor: tuple[int, int, str] | None = None
    if in_clause:
        anchor = max(in_clause, key=lambda e: (e[1], e[1] - e[0]))
    elif before:
        if len({e[2] for e in before}) > 1:
            return Abstention("entity")  # "Acme Energy, the … unit of Acme Group, reported …": whose?
        anchor = before[-1]
    prefix_from = max(clause_start, anchor[1]) if anchor is not None else clause_start
    prefix = sentence[prefix_from:start]
    for p in periods:  # period words are no qualifier ("Fourth quarter gross margin")
        if p.start >= prefix_from and p.end <= start:
            prefix = prefix.replace(sentence[p.start:p.end], " ")
    if re.search(r"[^\W\d_]", _FILLER.sub(" ", prefix)):
        return None  # a qualified metric: a segment's revenue, "R&D spend … of revenue"
    if anchor is None:
        after = [e for e in entities if start <= e[0] < value.start]
        entity = min(after)[2] if after else (chunk_entity() or "")
        if not entity:
            return Abstention("entity")
    else:
        entity = anchor[2]
    # a period in a parenthesis after the value is an aside ("86.3亿元，同比增长1.8%（2024年上半年为84.8亿元）")
    asides = [(m.start(), m.end()) for m in _PAREN.finditer(sentence, value.start)]
    periods = [p if not any(a <= p.start < b for a, b in asides) else
               Period(p.kind, p.year, p.n, p.start, p.end, True) for p in periods]
    own = [p for p in periods if not p.comparison]
    period = resolve_periods(periods, chunk_period)
    if period is None:
        return Abstention("period", entity)
    in_sentence = bool(own)
    if not own:
        ctx = chunk_period()
        if len(ctx) != 1:
            return Abstention("period", entity)
        period = next(iter(ctx))
    return Attributed(entity, period, value, in_sentence)
