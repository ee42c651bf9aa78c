"""Typed questions over the structured relation graph, answered with cited facts.

Three questions walk the glossary relations of a published library (the ``subsidiary_of``,
``peer_of`` and ``derived_from`` edges of its ``relation_graph``; the relations themselves
come from the snapshot's glossary):

* :func:`rollup` — every subsidiary of a parent (transitively), and per subsidiary the
  sentences that state a metric (optionally for a period);
* :func:`peers` — the peers of an entity and the same metric facts for each;
* :func:`derivation` — what a metric is derived from (transitively), and per metric of the
  derivation the sentences that state it for an entity/period.

Every fact is one sentence of one non-RESTRICTED chunk that names the metric and holds a
number, and it cites that chunk (``chunk_id``, document, locator). A relation cites the
chunks that name both of its ends (the edge's ``evidence`` in ``edges.parquet``; graphs
built before relation_graph 3 have none) and its glossary basis. Nothing here reads a
RESTRICTED chunk: the chunks are selected with ``sensitivity != RESTRICTED`` in SQL, so a
RESTRICTED fact can never appear.

The competitor gate (:class:`~ragspine_core.gate.CompetitorGate`) holds here as for a
query: a question whose subject is a competitor is refused, and a competitor peer's facts
are withheld (its relation is still listed, from the glossary) unless ``gate=False``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from ragspine_core.errors import ConfigError
from ragspine_query.graph.attribution import Abstention, attribute, find_periods, title_period

__all__ = ["Abstained", "Citation", "Fact", "GraphAnswer", "Relation", "RollupTotal", "derivation", "peers", "rollup"]

#: Facts kept per entity (or metric), best first.
DEFAULT_FACTS_PER_SUBJECT = 3
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_NUMBER = re.compile(r"\d")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


@dataclass(frozen=True, slots=True)
class Citation:
    """One chunk that states a fact: where it is and the sentence quoted from it."""

    chunk_id: str
    doc_id: str
    title: str
    locator: str
    quote: str

    def to_dict(self) -> dict[str, str]:
        return {"chunk_id": self.chunk_id, "doc_id": self.doc_id, "title": self.title, "locator": self.locator,
                "quote": self.quote}


@dataclass(frozen=True, slots=True)
class Fact:
    """A sentence stating ``metric`` of ``subject`` (glossary ids), with its citation."""

    subject: str
    metric: str
    #: The period the evidence states (``2024``: the full year; ``2024H1``; ``2024Q3``;
    #: ``""`` when it names none and no period was asked).
    period: str
    statement: str
    citation: Citation
    #: The value as written (``USD 3,120 million``, ``165.2亿元``, ``27.7%``).
    value: str = ""
    #: ``USD``, ``EUR``, ``RMB``, ``GBP``, ``%`` or ``""`` (a count, or a currency not written).
    unit: str = ""
    #: The value in units (``3.12e9``; ``27.7`` for a percentage).
    amount: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "metric": self.metric, "period": self.period, "statement": self.statement,
                "value": self.value, "unit": self.unit, "amount": self.amount, "citation": self.citation.to_dict()}


@dataclass(frozen=True, slots=True)
class Abstained:
    """A sentence in a chunk about an entity asked for that gives a value of ``metric`` but
    could not be attributed (``subject``: the entity when the sentence names it, else ``""``;
    each sentence once; ``reason``: ``entity`` — no entity of its own and its chunk names several;
    ``period`` — two periods, or none and its chunk names several; ``table`` — a table row)."""

    subject: str
    metric: str
    reason: str
    chunk_id: str
    statement: str

    def to_dict(self) -> dict[str, str]:
        return {"subject": self.subject, "metric": self.metric, "reason": self.reason, "chunk_id": self.chunk_id,
                "statement": self.statement}


@dataclass(frozen=True, slots=True)
class RollupTotal:
    """A roll-up's total and its parts: the parent's own stated figure (when a sentence
    states it), each part's figure in the same unit, their sum and whether it matches."""

    unit: str
    total: Fact | None
    parts: tuple[Fact, ...]
    missing: tuple[str, ...]
    parts_sum: float
    #: ``"match"`` (within 0.5 %), ``"differ"``, or ``"incomplete"`` (a part has no figure in the unit).
    check: str

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "total": self.total.to_dict() if self.total else None,
                "parts": [f.to_dict() for f in self.parts], "missing": list(self.missing), "parts_sum": self.parts_sum,
                "check": self.check}

    def format_text(self) -> str:
        def money(x: float) -> str:
            return f"{self.unit} {x / 1e6:,.0f} million" if self.unit not in ("%", "") else f"{x:,.1f}{self.unit}"

        head = (f"total: {self.total.value} [{self.total.citation.chunk_id[:12]}]" if self.total
                else "total: no sentence states the parent's own figure")
        parts = " + ".join(f"{f.subject} {f.value}" for f in self.parts) or "none"
        line = f"  {head}; parts ({self.unit}): {parts} = {money(self.parts_sum)}"
        if self.missing:
            line += f"; no {self.unit} figure for {', '.join(self.missing)}"
        verdict = {"match": "the parts sum to the total", "differ": "the parts do NOT sum to the total",
                   "incomplete": "not every part has a figure: no sum check"}[self.check]
        return line + f" -> {verdict}"


@dataclass(frozen=True, slots=True)
class Relation:
    """A typed glossary relation ``source -[kind]-> target`` and the chunks that name both ends."""

    kind: str
    source: str
    target: str
    source_name: str
    target_name: str
    citations: tuple[Citation, ...] = ()
    basis: str = "glossary"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "source": self.source, "target": self.target, "source_name": self.source_name,
                "target_name": self.target_name, "basis": self.basis, "citations": [c.to_dict() for c in self.citations]}


@dataclass(frozen=True, slots=True)
class GraphAnswer:
    """The answer to one typed question: relations, facts, notes (withheld facts) or a refusal."""

    question: str
    subject: str
    metric: str = ""
    period: str = ""
    relations: tuple[Relation, ...] = ()
    facts: tuple[Fact, ...] = ()
    notes: tuple[str, ...] = ()
    refusal: str = ""
    #: Sentences that give a value but could not be attributed: left out, counted here.
    abstained: tuple[Abstained, ...] = ()
    #: A roll-up's total and whether its parts sum to it (``rollup`` with a metric and period).
    total: RollupTotal | None = None

    def citations(self) -> tuple[Citation, ...]:
        """Every chunk the answer cites (facts, then relations), each once."""
        seen: dict[str, Citation] = {}
        for c in [f.citation for f in self.facts] + [c for r in self.relations for c in r.citations]:
            seen.setdefault(c.chunk_id, c)
        return tuple(seen.values())

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "subject": self.subject, "metric": self.metric, "period": self.period,
                "refusal": self.refusal, "notes": list(self.notes), "relations": [r.to_dict() for r in self.relations],
                "facts": [f.to_dict() for f in self.facts], "abstained": [a.to_dict() for a in self.abstained],
                "total": self.total.to_dict() if self.total else None}

    def format_text(self) -> str:
        """A plain-text rendering: relations, then facts, each with ``[chunk_id]`` citations."""
        head = f"{self.question} {self.subject}" + (f" metric={self.metric}" if self.metric else "") + (
            f" period={self.period}" if self.period else "")
        lines = [head]
        if self.refusal:
            lines.append(f"  refused: {self.refusal}")
            return "\n".join(lines)
        for r in self.relations:
            cites = (", ".join(c.chunk_id[:12] for c in r.citations[:3]) + (f" +{len(r.citations) - 3} more" if len(r.citations) > 3 else "")
                     ) or "no chunk names both"
            lines.append(f"  {r.source_name} -[{r.kind}]-> {r.target_name}  ({r.basis}; chunks: {cites})")
        for f in self.facts:
            stated = f" ({f.period}: {f.value})" if f.value else ""
            lines.append(f"  - {f.subject}{stated}: {f.statement}  [{f.citation.chunk_id[:12]} {f.citation.locator}]")
        if self.total is not None:
            lines.append(self.total.format_text())
        lines.extend(f"  note: {n}" for n in self.notes)
        if self.abstained:
            reasons = Counter(a.reason for a in self.abstained)
            lines.append(f"  abstained: {len(self.abstained)} sentence(s) with a value left out, not attributable ("
                         + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) + "; --json lists them)")
        if not self.facts and self.metric and self.question != "derivation":
            lines.append("  (no open chunk states this metric)")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- reading
@dataclass
class _Open:
    """What the questions read of a library: its glossary, open chunks, relation evidence."""

    concepts: dict[str, Any]
    chunks: list[dict[str, str]]
    evidence: dict[tuple[str, str, str], tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names_re = {cid: _name_pattern((*c.names, cid)) or re.compile(r"(?!x)x") for cid, c in self.concepts.items()}

    def name(self, cid: str) -> str:
        c = self.concepts.get(cid)
        return (c.names[0] if c is not None and c.names else cid)

    def first_entity(self, sentence: str) -> str | None:
        """The glossary entity a sentence names first (ties: the longer name), or None."""
        best: tuple[int, int, str] | None = None
        for cid, c in self.concepts.items():
            if c.kind != "entity":
                continue
            m = self.names_re[cid].search(sentence)
            if m is not None and (best is None or (m.start(), -len(m.group(0))) < best[:2]):
                best = (m.start(), -len(m.group(0)), cid)
        return best[2] if best is not None else None


def _open(library: Any) -> _Open:
    from ragspine_core.glossary import Glossary

    path = library.artifact_path("glossary")
    if path is None or not path.is_file():
        raise ConfigError(f"library {library.library_id!r} has no glossary in its snapshot: typed graph questions walk the "
                          "glossary's parent / peers / derived_from relations (set the library's glossary and re-ingest)")
    glossary = Glossary.from_dict(json.loads(path.read_text(encoding="utf-8")), source=str(path))
    concepts = {c.id: c for c in glossary.concepts}
    rows = library.execute_read(
        "SELECT chunk_id, doc_id, title, entity, period, source_locator, text FROM narrative_chunk "
        "WHERE upper(trim(sensitivity)) != 'RESTRICTED' ORDER BY chunk_id")
    chunks = [dict(r) for r in rows]
    return _Open(concepts, chunks, _relation_evidence(library))


def _relation_evidence(library: Any) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """``(type, source id, target id)`` -> evidence chunk ids of the graph's typed glossary edges."""
    d = library.artifact_path("relation_graph")
    if d is None:
        return {}
    import pyarrow.parquet as pq

    from ragspine_core.graph.artifact import EDGES_FILE, NODES_FILE

    edges = pq.read_table(d / EDGES_FILE)
    if "evidence" not in edges.column_names:
        return {}
    keys = pq.read_table(d / NODES_FILE, columns=["key"]).column("key").to_pylist()
    e = edges.to_pydict()
    out = {}
    for s, t, ty, ev in zip(e["src"], e["dst"], e["type"], e["evidence"]):
        if ty in ("subsidiary_of", "peer_of", "derived_from") and keys[s].startswith("g:") and keys[t].startswith("g:"):
            out[(ty, keys[s][2:], keys[t][2:])] = tuple(ev or ())
    return out


def _name_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """One regex for a concept's names: whole words for Latin names, substrings for CJK ones."""
    parts = []
    for n in sorted({n for n in names if n.strip()}, key=lambda n: (-len(n), n)):
        esc = re.escape(n)
        parts.append(esc if _CJK.search(n) else rf"(?<![\w&]){esc}(?![\w&])")
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def _sentences(text: str) -> list[str]:
    return [s.strip(" \t-*#>|") for s in _SENTENCE.split(text) if s and s.strip(" \t-*#>|")]


def _chunk_names(chunk: dict[str, str], concept: Any) -> bool:
    fields = [p.strip() for p in re.split(r"[,;|，；]", chunk.get("entity") or "") if p.strip()]
    return concept.id in fields or any(n in fields for n in concept.names)


def _citation(chunk: dict[str, str], quote: str) -> Citation:
    return Citation(chunk["chunk_id"], chunk["doc_id"], chunk["title"], chunk.get("source_locator") or chunk["doc_id"],
                    quote)


def _entity_mentions(o: _Open, text: str) -> list[tuple[int, int, str]]:
    """The glossary entity mentions of ``text``, ``(start, end, id)``, a mention inside a longer one dropped."""
    found = [(m.start(), m.end(), cid) for cid, c in o.concepts.items() if c.kind == "entity"
             for m in o.names_re[cid].finditer(text)]
    found.sort(key=lambda e: (e[0], -(e[1] - e[0]), e[2]))
    out: list[tuple[int, int, str]] = []
    for e in found:
        if out and e[0] < out[-1][1]:
            continue
        out.append(e)
    return out


def _chunk_entity(o: _Open, ch: dict[str, str]) -> str | None:
    """The chunk's only entity: its text and ``entity`` field name exactly one glossary entity."""
    ids = {e[2] for e in _entity_mentions(o, ch["text"])}
    for name in re.split(r"[,;|，；]", ch.get("entity") or ""):
        name = name.strip()
        for cid, c in o.concepts.items():
            if c.kind == "entity" and name and (name == cid or name in c.names):
                ids.add(cid)
    return ids.pop() if len(ids) == 1 else None


def _chunk_period(ch: dict[str, str]) -> frozenset[str]:
    """The chunk's period labels: those its text names outside comparisons (a year, half or
    quarter, each with its year); when it names none, the one its document title names,
    else its ``period`` field (a year, half or quarter)."""
    labels = frozenset(p.label() for p in find_periods(ch["text"]) if not p.comparison and p.year and (p.kind == "Y" or (p.kind in "QH" and p.n > 0)))
    if labels or _YEAR.search(ch["text"]):
        return labels
    titled = title_period(ch.get("title") or "") or title_period(
        (ch.get("source_locator") or "").split("#")[0].rsplit("/", 1)[-1])
    if titled:
        return frozenset({titled})
    field_ = (ch.get("period") or "").strip().upper()
    return frozenset({field_}) if re.fullmatch(r"\d{4}(?:[QH]\d)?", field_) else frozenset()


def _facts(o: _Open, subject: str, metric: str, period: str, limit: int,
           abstained: list[Abstained] | None = None) -> list[Fact]:
    """The sentences of open chunks that state ``metric`` of ``subject`` (for ``period``).

    Each occurrence of the metric's name is attributed from its sentence
    (:func:`~.attribution.attribute`: the entity named before it, the periods named outside
    comparisons, the value right after it, the metric unqualified); a sentence without an
    entity or period takes its chunk's only one. An occurrence that cannot be attributed in
    a chunk about the subject is left out and appended to ``abstained``. Best first: the
    sentence names its period, the value has a unit, chunk id."""
    ent, met = o.concepts[subject], o.concepts[metric]
    met_re = _name_pattern((*met.names, met.id.replace("_", " ")))
    want = _period_label(period)
    found: list[tuple[tuple[Any, ...], Fact]] = []
    for ch in o.chunks:
        if met_re is None or not (_chunk_names(ch, ent) or o.names_re[subject].search(ch["text"])):
            continue
        ch_entity: list[str | None] = []
        ch_period: list[frozenset[str]] = []

        def chunk_entity(ch: dict[str, str] = ch, memo: list[str | None] = ch_entity) -> str | None:
            if not memo:
                memo.append(_chunk_entity(o, ch))
            return memo[0]

        def chunk_period(ch: dict[str, str] = ch, memo: list[frozenset[str]] = ch_period) -> frozenset[str]:
            if not memo:
                memo.append(_chunk_period(ch))
            return memo[0]

        for sent in _sentences(ch["text"]):
            if not _NUMBER.search(sent) or not met_re.search(sent):
                continue
            mentions = _entity_mentions(o, sent)
            for m in met_re.finditer(sent):
                got = attribute(sent, m.start(), m.end(), entities=mentions, chunk_entity=chunk_entity,
                                chunk_period=chunk_period)
                if got is None:
                    continue
                if isinstance(got, Abstention):
                    if got.entity in ("", subject) and abstained is not None and not any(
                            a.chunk_id == ch["chunk_id"] and a.statement == sent and a.metric == metric for a in abstained):
                        abstained.append(Abstained(got.entity, metric, got.reason, ch["chunk_id"], sent))
                    continue
                if got.entity != subject or (want and got.period != want):
                    continue
                v = got.value
                key = (not got.period_in_sentence, not v.unit, ch["chunk_id"], m.start())
                found.append((key, Fact(subject, metric, got.period, sent, _citation(ch, sent), v.text, v.unit, v.amount)))
    found.sort(key=lambda kv: kv[0])
    out, seen = [], set()
    for _, f in found:
        if (f.statement, f.value) in seen:
            continue
        seen.add((f.statement, f.value))
        out.append(f)
        if len(out) >= limit:
            break
    return out


def _period_label(period: str) -> str:
    """A period argument as the attribution labels it (``2024``, ``2024Q3``, ``2024H1``; ``FY2024`` -> ``2024``)."""
    p = period.strip().upper().replace(" ", "")
    if not p:
        return ""
    m = re.fullmatch(r"(?:FY)?(\d{4})(?:([QH])([1-4]))?", p) or re.fullmatch(r"([QH])([1-4])(\d{4})", p)
    if m is None:
        raise ConfigError(f"period {period!r} is not one the graph questions read: give a year (2024 or FY2024), "
                          "a half (2024H1) or a quarter (2024Q3)")
    g = m.groups()
    if g[0] in ("Q", "H"):
        return f"{g[2]}{g[0]}{g[1]}"
    return g[0] + (f"{g[1]}{g[2]}" if g[1] else "")


def _relation(o: _Open, kind: str, source: str, target: str) -> Relation:
    """A glossary relation and the chunks naming both ends (graph evidence, else found in the open chunks)."""
    ids = o.evidence.get((kind, source, target)) or (o.evidence.get((kind, target, source)) if kind == "peer_of" else None)
    by_id = {c["chunk_id"]: c for c in o.chunks}
    a, b = o.concepts[source], o.concepts[target]
    ra, rb = _name_pattern((*a.names,)), _name_pattern((*b.names,))
    cites = []
    for cid in ids or ():
        ch = by_id.get(cid)
        if ch is None:
            continue
        quote = next((s for s in _sentences(ch["text"]) if ra is not None and rb is not None and ra.search(s) and rb.search(s)),
                     "")
        cites.append(_citation(ch, quote))
    return Relation(kind, source, target, o.name(source), o.name(target), tuple(cites))


def _need(o: _Open, cid: str, kind: str) -> Any:
    c = o.concepts.get(cid)
    if c is None:
        # accept a surface name too
        for con in o.concepts.values():
            if cid.casefold() in (n.casefold() for n in con.names) or cid.casefold() == con.id.casefold():
                c = con
                break
    if c is None or c.kind != kind:
        known = ", ".join(sorted(k for k, v in o.concepts.items() if v.kind == kind))
        plural = "entities" if kind == "entity" else "metrics"
        raise ConfigError(f"{cid!r} is not a glossary {kind} of this library; known {plural}: {known}")
    return c


def _refused(o: _Open, question: str, c: Any, metric: str, period: str, gate: bool) -> GraphAnswer | None:
    if gate and c.competitor:
        return GraphAnswer(question, c.id, metric, period,
                           refusal=f"{o.name(c.id)} is a competitor in the glossary: the security gate refuses questions "
                                   "about a competitor entity")
    return None


# --------------------------------------------------------------------------- questions
def rollup(library: Any, parent: str, metric: str = "", period: str = "", *, gate: bool = True,
           facts_per_subject: int = DEFAULT_FACTS_PER_SUBJECT) -> GraphAnswer:
    """Every subsidiary of ``parent`` (``subsidiary_of``, transitively) with the cited
    sentences stating ``metric`` (optional) for ``period`` (optional, e.g. ``2024``)."""
    o = _open(library)
    p = _need(o, parent, "entity")
    met = _need(o, metric, "metric").id if metric else ""
    refused = _refused(o, "rollup", p, met, period, gate)
    if refused is not None:
        return refused
    _period_label(period)  # a clear error for a period it cannot read
    relations: list[Relation] = []
    facts: list[Fact] = []
    notes: list[str] = []
    abstained: list[Abstained] = []
    parts: list[str] = []
    frontier, seen = [p.id], {p.id}
    while frontier:
        nxt = []
        for par in frontier:
            for c in sorted((c for c in o.concepts.values() if c.parent == par and c.kind == "entity"), key=lambda c: c.id):
                if c.id in seen:
                    continue
                seen.add(c.id)
                nxt.append(c.id)
                relations.append(_relation(o, "subsidiary_of", c.id, par))
                if met:
                    if gate and c.competitor:
                        notes.append(f"facts of {o.name(c.id)} withheld: a competitor (the security gate)")
                        continue
                    if c.parent == p.id:
                        parts.append(c.id)
                    facts.extend(_facts(o, c.id, met, period, facts_per_subject, abstained))
        frontier = nxt
    total = None
    if met and period:
        own = _facts(o, p.id, met, period, facts_per_subject, abstained)
        facts[:0] = own
        total = _rollup_total(own, [f for f in facts if f.subject in parts], parts)
    return GraphAnswer("rollup", p.id, met, period, tuple(relations), tuple(facts), tuple(notes), abstained=tuple(abstained),
                       total=total)


def _rollup_total(own: list[Fact], facts: list[Fact], parts: list[str]) -> RollupTotal | None:
    """The parent's first stated figure with a unit and, in that unit (else the parts' common
    one), the first figure of each direct part; their sum checked against the total."""
    total = next((f for f in own if f.unit), None)
    units = [total.unit] if total else []
    units += sorted({f.unit for f in facts if f.unit and f.unit != "%"})
    if not units or (total is not None and total.unit == "%"):
        return None  # a margin or rate does not sum
    unit = units[0]
    chosen = {}
    for f in facts:
        if f.unit == unit and f.subject not in chosen:
            chosen[f.subject] = f
    picked = tuple(chosen[s] for s in parts if s in chosen)
    missing = tuple(s for s in parts if s not in chosen)
    parts_sum = sum(f.amount for f in picked)
    if missing or total is None:
        check = "incomplete" if missing else "differ"
        if total is None and not missing:
            check = "incomplete"
    else:
        check = "match" if abs(parts_sum - total.amount) <= 0.005 * abs(total.amount) else "differ"
    return RollupTotal(unit, total, picked, missing, parts_sum, check)


def peers(library: Any, entity: str, metric: str = "", period: str = "", *, gate: bool = True,
          facts_per_subject: int = DEFAULT_FACTS_PER_SUBJECT) -> GraphAnswer:
    """The peers of ``entity`` (``peer_of``, either direction) and, with ``metric``, the
    cited facts of the entity and each peer. A competitor peer's facts are withheld while
    ``gate`` is on (the relation is still listed)."""
    o = _open(library)
    e = _need(o, entity, "entity")
    met = _need(o, metric, "metric").id if metric else ""
    refused = _refused(o, "peers", e, met, period, gate)
    if refused is not None:
        return refused
    ids = sorted({p for p in e.peers if p in o.concepts and p != e.id}
                 | {c.id for c in o.concepts.values() if e.id in c.peers and c.id != e.id})
    _period_label(period)
    relations = [_relation(o, "peer_of", e.id, p) for p in ids]
    facts: list[Fact] = []
    notes: list[str] = []
    abstained: list[Abstained] = []
    if met:
        facts.extend(_facts(o, e.id, met, period, facts_per_subject, abstained))
        for p in ids:
            if gate and o.concepts[p].competitor:
                notes.append(f"facts of {o.name(p)} withheld: a competitor (the security gate)")
                continue
            facts.extend(_facts(o, p, met, period, facts_per_subject, abstained))
    return GraphAnswer("peers", e.id, met, period, tuple(relations), tuple(facts), tuple(notes), abstained=tuple(abstained))


def derivation(library: Any, metric: str, entity: str = "", period: str = "", *, gate: bool = True,
               facts_per_subject: int = DEFAULT_FACTS_PER_SUBJECT) -> GraphAnswer:
    """What ``metric`` is derived from (``derived_from``, transitively) and, with ``entity``,
    the cited facts stating each metric of the derivation for that entity (and ``period``)."""
    o = _open(library)
    m = _need(o, metric, "metric")
    ent = _need(o, entity, "entity") if entity else None
    if ent is not None:
        refused = _refused(o, "derivation", ent, m.id, period, gate)
        if refused is not None:
            return GraphAnswer("derivation", m.id, m.id, period, refusal=refused.refusal)
    relations, order, seen = [], [m.id], {m.id}
    i = 0
    while i < len(order):
        cur = o.concepts[order[i]]
        for d in cur.derived_from:
            if d not in o.concepts:
                continue
            relations.append(_relation(o, "derived_from", cur.id, d))
            if d not in seen:
                seen.add(d)
                order.append(d)
        i += 1
    _period_label(period)
    facts: list[Fact] = []
    abstained: list[Abstained] = []
    if ent is not None:
        for mid in order:
            facts.extend(_facts(o, ent.id, mid, period, facts_per_subject, abstained))
    return GraphAnswer("derivation", m.id, m.id, period, tuple(relations), tuple(facts), abstained=tuple(abstained))
