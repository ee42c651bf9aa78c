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
from dataclasses import dataclass, field
from typing import Any, Iterable

from ragspine_core.errors import ConfigError

__all__ = ["Citation", "Fact", "GraphAnswer", "Relation", "derivation", "peers", "rollup"]

#: Facts kept per entity (or metric), best first.
DEFAULT_FACTS_PER_SUBJECT = 3
_SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])|\n+")
_NUMBER = re.compile(r"\d")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_AMOUNT = re.compile(r"USD|EUR|RMB|CNY|[$€£¥]|亿元|万元|亿美元|million|billion|%", re.IGNORECASE)
_VALUE_AFTER = re.compile(r"[^，。；,;:：!?！？]{0,14}?\d")
_FINER = re.compile(r"季度|上半年|下半年|\b[QH][1-4]\b|quarter|half|month", re.IGNORECASE)
_SHARE_OF = re.compile(r"占$|of\s*$|比$", re.IGNORECASE)
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
    period: str
    statement: str
    citation: Citation

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "metric": self.metric, "period": self.period, "statement": self.statement,
                "citation": self.citation.to_dict()}


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

    def citations(self) -> tuple[Citation, ...]:
        """Every chunk the answer cites (facts, then relations), each once."""
        seen: dict[str, Citation] = {}
        for c in [f.citation for f in self.facts] + [c for r in self.relations for c in r.citations]:
            seen.setdefault(c.chunk_id, c)
        return tuple(seen.values())

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "subject": self.subject, "metric": self.metric, "period": self.period,
                "refusal": self.refusal, "notes": list(self.notes), "relations": [r.to_dict() for r in self.relations],
                "facts": [f.to_dict() for f in self.facts]}

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
            lines.append(f"  - {f.subject}: {f.statement}  [{f.citation.chunk_id[:12]} {f.citation.locator}]")
        lines.extend(f"  note: {n}" for n in self.notes)
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


def _name_pattern(names: Iterable[str]) -> re.Pattern | None:
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


def _facts(o: _Open, subject: str, metric: str, period: str, limit: int) -> list[Fact]:
    """The sentences of open chunks that state ``metric`` (with a number) of ``subject``.

    A sentence states it of the subject when the first glossary entity it names is the
    subject, or when it names none and its chunk's ``entity`` metadata is the subject. With
    ``period``, a sentence naming years must name the period's year, and one naming none
    must come from a chunk of that period. Best first: the sentence or its chunk is of exactly
    ``period``, a number follows the metric's name closely, the sentence names its year, it states an amount (a currency, 亿元, million,
    %), it names the subject, then chunk id."""
    ent, met = o.concepts[subject], o.concepts[metric]
    met_re = _name_pattern((*met.names, met.id.replace("_", " ")))
    year = _YEAR.search(period).group(0) if period and _YEAR.search(period) else ""  # type: ignore[union-attr]
    found: list[tuple[tuple, Fact]] = []
    for ch in o.chunks:
        own = _chunk_names(ch, ent)
        if not own and not o.names_re[subject].search(ch["text"]):
            continue
        for sent in _sentences(ch["text"]):
            if not _NUMBER.search(sent) or met_re is None or not met_re.search(sent):
                continue
            first = o.first_entity(sent)
            if first is None and not own or first is not None and first != subject:
                continue
            years = set(_YEAR.findall(sent))
            if period:
                if years and year not in years:
                    continue
                if not years and not (ch.get("period") or "").strip().startswith(period):
                    continue
            # a year asked: a sentence about a quarter or half of it is not of exactly that period
            finer = bool(period) and period.isdigit() and bool(_FINER.search(sent))
            exact = bool(period) and not finer and (period in sent or (ch.get("period") or "").strip() == period)
            named_year = bool(year) and year in years
            # the metric's value follows its name closely ("revenue of USD 590 million", "营业收入165.2亿元")
            # (not a share of it: "占营业收入的4.6%", "6.9% of revenue")
            valued = any(_VALUE_AFTER.match(sent, m.end()) and not _SHARE_OF.search(sent[max(0, m.start() - 4):m.start()])
                         for m in met_re.finditer(sent))
            key = (not exact, not valued, not (exact or named_year), not _AMOUNT.search(sent), first is None, ch["chunk_id"],
                   len(found))
            found.append((key, Fact(subject, metric, period or (ch.get("period") or ""), sent, _citation(ch, sent))))
    found.sort(key=lambda kv: kv[0])
    out, seen = [], set()
    for _, f in found:
        if f.statement in seen:
            continue
        seen.add(f.statement)
        out.append(f)
        if len(out) >= limit:
            break
    return out


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
    relations, facts, notes = [], [], []
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
                    facts.extend(_facts(o, c.id, met, period, facts_per_subject))
        frontier = nxt
    return GraphAnswer("rollup", p.id, met, period, tuple(relations), tuple(facts), tuple(notes))


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
    relations = [_relation(o, "peer_of", e.id, p) for p in ids]
    facts, notes = [], []
    if met:
        facts.extend(_facts(o, e.id, met, period, facts_per_subject))
        for p in ids:
            if gate and o.concepts[p].competitor:
                notes.append(f"facts of {o.name(p)} withheld: a competitor (the security gate)")
                continue
            facts.extend(_facts(o, p, met, period, facts_per_subject))
    return GraphAnswer("peers", e.id, met, period, tuple(relations), tuple(facts), tuple(notes))


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
    facts = []
    if ent is not None:
        for mid in order:
            facts.extend(_facts(o, ent.id, mid, period, facts_per_subject))
    return GraphAnswer("derivation", m.id, m.id, period, tuple(relations), tuple(facts))
