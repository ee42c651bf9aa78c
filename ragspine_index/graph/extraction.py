"""The relation graph's entities and typed edges, read from the open chunks.

:func:`extract_graph` runs the steps in order: the gazetteer (glossary names, title
aliases, ``entity`` metadata, heading phrases), each chunk's mentions, the ``about`` /
``mentions`` / ``co_occurs`` links, the LLM extractor's ``model_relation`` triples, the
glossary relations and the ``synonym`` edges. RESTRICTED chunks are dropped before
anything reads them. The result (:class:`ExtractedGraph`) is written by
:mod:`ragspine_index.graph.graph_files`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

from ragspine_core.errors import ConfigError
from ragspine_core.records import is_restricted

from ragspine_index.graph.entities import (STOP_WORDS, Gazetteer, Mention, entity_key, extract_mentions, frequent_cjk_terms, heading_phrases,
                                           lower_dominant, metadata_entities, midsentence_capitalised, title_aliases)
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_input import GraphChunk
from ragspine_index.graph.openie import OpenIETripleExtractor
from ragspine_index.graph.synonyms import CJK_CHAR, synonym_allowed, synonym_pairs

#: Evidence chunks kept per entity-entity edge (the smallest chunk ids).
MAX_EVIDENCE = 8


@dataclass
class GraphBuilder:
    """Accumulates nodes and edges (entities keyed by their match key)."""

    labels: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    source: dict[str, str] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], float] = field(default_factory=lambda: defaultdict(float))
    #: co-occurrence weights of entity pairs (``co_occurs`` edges when the extractor is on; communities always)
    cooc: dict[tuple[str, str, str], float] = field(default_factory=lambda: defaultdict(float))
    model_edges: dict[tuple[str, str], str] = field(default_factory=dict)
    #: model triples dropped because an endpoint names a glossary competitor
    screened: int = 0
    #: entity-entity edge -> the chunk ids that state it (at most MAX_EVIDENCE, the first by chunk id kept)
    evidence: dict[tuple[str, str, str], set] = field(default_factory=lambda: defaultdict(set))

    def cite(self, edge: tuple[str, str, str], chunk_id: str) -> None:
        ev = self.evidence[edge]
        if len(ev) < MAX_EVIDENCE:
            ev.add(chunk_id)
        elif chunk_id < max(ev):
            ev.discard(max(ev))
            ev.add(chunk_id)

    def entity(self, key: str, label: str | None, source: str) -> None:
        from ragspine_index.graph.entities import SOURCE_RANK

        if label:  # None: a gazetteer hit, labelled where the name itself was found
            self.labels[key][label] += 1
        else:
            self.labels[key][""] += 0
        prev = self.source.get(key)
        if prev is None or SOURCE_RANK[source] < SOURCE_RANK[prev]:
            self.source[key] = source


@dataclass(frozen=True, slots=True)
class ExtractedGraph:
    """The entities and edges of one build, with what the files and communities are written from."""

    builder: GraphBuilder
    #: every chunk given (all snapshot rows, in row order) and the non-RESTRICTED ones
    chunks: Sequence[GraphChunk]
    open_chunks: list[GraphChunk]
    #: match key of a name -> its entity node key (a glossary name: its concept ``g:<id>``)
    gaz_names: dict[str, str]
    #: entity -> the chunk ids it is linked to (row order)
    chunks_of: dict[str, list[str]]
    #: sorted entity keys and the label of each
    entity_keys: list[str]
    labels: dict[str, str]
    synonyms_built: bool


def extract_graph(chunks: Sequence[GraphChunk], *, glossary: Any | None, config: GraphConfig, backend: Any | None,
                  extractor: OpenIETripleExtractor | None, cache_path: Path | None) -> ExtractedGraph:
    """The entities and typed edges of ``chunks`` (RESTRICTED ones skipped before anything reads them)."""
    open_chunks = [c for c in chunks if not is_restricted(c.sensitivity)]
    b = GraphBuilder()
    concepts = list(getattr(glossary, "concepts", ()) or ())
    gaz_names = _gazetteer_names(b, concepts, open_chunks)
    glossary_surface = [n for c in concepts for n in c.names]
    heading_keys = _heading_names(gaz_names, open_chunks, glossary_surface)
    gazetteer = Gazetteer(gaz_names, sources={k: "heading" for k in heading_keys})
    per_chunk = _chunk_mentions(open_chunks, gazetteer, config, glossary_surface)
    chunks_of = _link_chunks(b, open_chunks, per_chunk, gaz_names, config)
    if config.cooccurrence:
        for e, wt in b.cooc.items():
            b.edges[e] += wt
    if extractor is not None:
        _add_model_triples(b, open_chunks, extractor, glossary if concepts else None, gaz_names)
    _add_glossary_relations(b, concepts, chunks_of)
    entity_keys = sorted(b.labels)
    labels = {k: best_label(b.labels[k], k) for k in entity_keys}
    synonyms_built = _add_synonyms(b, entity_keys, labels, backend, config, cache_path)
    return ExtractedGraph(b, chunks, open_chunks, gaz_names, chunks_of, entity_keys, labels, synonyms_built)


def _gazetteer_names(b: GraphBuilder, concepts: Sequence[Any], open_chunks: Sequence[GraphChunk]) -> dict[str, str]:
    """Known names -> node key: every glossary name and id (its concept node, added to ``b``),
    the chunks' title aliases and ``entity`` metadata."""
    gaz_names: dict[str, str] = {}
    for c in concepts:
        node = f"g:{c.id}"
        for name in (*(c.names or ()), c.id):  # a chunk's `entity` metadata may hold the concept id
            gaz_names.setdefault(entity_key(name), node)
        b.entity(node, (c.names or (c.id,))[0], "glossary")
    for ch in open_chunks:
        for t in title_aliases(ch.title):
            k = entity_key(t)
            if len(k) > 2 and k not in STOP_WORDS:
                gaz_names.setdefault(k, entity_key(ch.title))
        for name in metadata_entities(ch.entity):
            gaz_names.setdefault(entity_key(name), entity_key(name))
    return gaz_names


def _heading_names(gaz_names: dict[str, str], open_chunks: Sequence[GraphChunk], glossary_surface: Sequence[str]) -> dict[str, str]:
    """Heading phrases (boundary-cut) that occur in the text of >= 2 documents are names:
    added to ``gaz_names``; returns them (match key -> phrase)."""
    heading_keys: dict[str, str] = {}
    for ch in open_chunks:
        for h in heading_phrases(ch.text, names=glossary_surface):
            heading_keys.setdefault(entity_key(h), h)
    for k in sorted(heading_keys):
        if k in gaz_names:
            continue
        if len({c.doc_id for c in open_chunks if k in c.text}) >= 2:
            gaz_names[k] = k
        else:
            del heading_keys[k]
    return heading_keys


def _chunk_mentions(open_chunks: Sequence[GraphChunk], gazetteer: Gazetteer, config: GraphConfig,
                    glossary_surface: Sequence[str]) -> list[list[Mention]]:
    """The names each open chunk mentions (pieces of a longer name kept when another document
    names them; a CJK name read from running text only when two documents have it)."""
    cjk_terms = (frequent_cjk_terms([c.text for c in open_chunks], docs=[c.doc_id for c in open_chunks], names=glossary_surface)
                 if config.cjk_mined_terms else [()] * len(open_chunks))
    common = midsentence_capitalised(c.text for c in open_chunks)
    lower = lower_dominant(c.text for c in open_chunks)
    per_chunk: list[list[Mention]] = []
    held: list[list[Mention]] = []  # per chunk: spans that are only pieces of a longer name of the chunk
    for ch, terms in zip(open_chunks, cjk_terms):
        pieces: list[Mention] = []
        ms = extract_mentions(ch.text, title=ch.title, entity_field=ch.entity, gazetteer=gazetteer, cjk_terms=terms,
                              common=common, lower=lower, pieces=pieces)
        per_chunk.append(ms)
        held.append(pieces)
    # a piece of a longer name is a name of its own when another document names it ("Kansas" of
    # "Antelope, Kansas", "San Francisco" of "University of California, San Francisco")
    if any(held):
        named_in: dict[str, set] = defaultdict(set)
        for ch, ms in zip(open_chunks, per_chunk):
            for m in ms:
                named_in[m.key].add(ch.doc_id)
        per_chunk = [sorted(ms + [m for m in hs if named_in.get(m.key, set()) - {ch.doc_id}], key=lambda m: m.key)
                     for ch, ms, hs in zip(open_chunks, per_chunk, held)]
    # a CJK name read from running text (a quoted span) must occur in two documents, as a heading's must
    cjk_docs: dict[str, set] = defaultdict(set)
    for ch, ms in zip(open_chunks, per_chunk):
        for m in ms:
            if m.source == "extracted" and CJK_CHAR.search(m.key):
                cjk_docs[m.key].add(ch.doc_id)
    lone = {k for k, docs in cjk_docs.items() if len(docs) < 2}
    if lone:
        per_chunk = [[m for m in ms if m.key not in lone] for ms in per_chunk]
    return per_chunk


def _link_chunks(b: GraphBuilder, open_chunks: Sequence[GraphChunk], per_chunk: Sequence[list[Mention]],
                 gaz_names: Mapping[str, str], config: GraphConfig) -> dict[str, list[str]]:
    """Entity nodes and their ``about`` / ``mentions`` edges to each chunk, and the chunk's
    co-occurrence weights (``b.cooc``); returns entity -> linked chunk ids (row order)."""
    chunks_of: dict[str, list[str]] = defaultdict(list)
    df = Counter(m.key for ms in per_chunk for m in ms)
    n_open = max(len(open_chunks), 1)
    max_df = max(2, int(config.max_entity_df_share * n_open))
    for ch, ms in zip(open_chunks, per_chunk):
        ckey = f"c:{ch.row}"
        own = {entity_key(a) for a in title_aliases(ch.title)} | {entity_key(e) for e in metadata_entities(ch.entity)}
        kept = [m for m in ms if m.source == "glossary" or m.key in own or df[m.key] <= max_df]
        # what the chunk is about: its document title and `entity` metadata (as nodes: a glossary name is its concept)
        about = {gaz_names.get(k, k) for k in ([entity_key(ch.title)] if ch.title.strip() else [])
                 + [entity_key(e) for e in metadata_entities(ch.entity)]}
        for m in kept:
            label = m.label if m.label != m.key or m.source == "extracted" else None
            if m.source == "title" and m.key == entity_key(ch.title):
                label = ch.title
            b.entity(m.key, label, m.source)
            chunks_of[m.key].append(ch.chunk_id)
            if m.key in about:  # a type of its own (its query-time weight: GraphChannelConfig.type_weights)
                b.edges[("about", m.key, ckey)] = 3.0
            else:
                b.edges[("mentions", m.key, ckey)] += float(min(m.count, 3))
        # co-occurrence among the chunk's most specific entities
        # (most specific = smallest df; same order as -log(1 + n/df), without the float per entity)
        spec = sorted(m.key for m in sorted(kept, key=lambda m: (df[m.key], m.key))[: config.max_cooccur_entities])
        n_spec = len(spec)
        if n_spec > 1:
            inc, edges = 1.0 / (n_spec - 1), b.cooc
            for i in range(n_spec):
                a = spec[i]
                for j in range(i + 1, n_spec):  # spec is sorted: (a, spec[j]) is already the canonical pair
                    edges[("co_occurs", a, spec[j])] += inc
                    b.cite(("co_occurs", a, spec[j]), ch.chunk_id)
    return chunks_of


def _add_model_triples(b: GraphBuilder, open_chunks: Sequence[GraphChunk], extractor: OpenIETripleExtractor,
                       glossary: Any | None, gaz_names: Mapping[str, str]) -> None:
    """The LLM extractor's triples as ``model_relation`` edges (and ``mentions`` of both ends);
    with a glossary (one with concepts), a triple naming a competitor is dropped."""
    gate = None
    if glossary is not None:
        from ragspine_core.gate import CompetitorGate

        gate = CompetitorGate(cast(Any, glossary))
    for ch in open_chunks:
        for triple in extractor.extract(ch):
            s, o = entity_key(triple.subject), entity_key(triple.object)
            if not s or not o or s == o:
                continue
            # both endpoints screened by the competitor gate: a model never adds a competitor's relation
            if gate is not None and (gate.competitors_in(triple.subject) or gate.competitors_in(triple.object)):
                b.screened += 1
                continue
            s, o = gaz_names.get(s, s), gaz_names.get(o, o)
            b.entity(s, triple.subject, "model")
            b.entity(o, triple.object, "model")
            b.edges[("mentions", s, f"c:{ch.row}")] += 1.0
            b.edges[("mentions", o, f"c:{ch.row}")] += 1.0
            b.edges[("model_relation", s, o)] += 1.0
            b.model_edges[(s, o)] = triple.predicate
            b.cite(("model_relation", s, o), ch.chunk_id)


def _add_glossary_relations(b: GraphBuilder, concepts: Sequence[Any], chunks_of: Mapping[str, Sequence[str]]) -> None:
    """The glossary relations between concepts that exist, each cited by the chunks naming both ends."""
    ids = {c.id for c in concepts}
    for c in concepts:
        if c.parent and c.parent in ids:
            b.edges[("subsidiary_of", f"g:{c.id}", f"g:{c.parent}")] += 1.0
        for p in c.peers:
            if p in ids and p != c.id:
                a, z = sorted((f"g:{c.id}", f"g:{p}"))
                b.edges[("peer_of", a, z)] = 1.0
        for d in c.derived_from:
            if d in ids and d != c.id:
                b.edges[("derived_from", f"g:{c.id}", f"g:{d}")] += 1.0
    # a typed glossary relation is stated by the chunks that name both of its ends
    for (t, a, z) in [e for e in b.edges if e[0] in ("subsidiary_of", "peer_of", "derived_from")]:
        both = sorted(set(chunks_of.get(a, ())) & set(chunks_of.get(z, ())))
        for cid in both[:MAX_EVIDENCE]:
            b.cite((t, a, z), cid)


def _add_synonyms(b: GraphBuilder, entity_keys: Sequence[str], labels: Mapping[str, str], backend: Any | None,
                  config: GraphConfig, cache_path: Path | None) -> bool:
    """``synonym`` edges between entities whose label embeddings are very close; whether they were built."""
    if backend is not None and (config.synonyms == "on" or (config.synonyms == "auto" and len(entity_keys) <= config.max_synonym_entities)):
        for ia, iz in synonym_pairs([labels[k] for k in entity_keys], backend, threshold=config.synonym_threshold,
                                    cache_path=cache_path):
            if synonym_allowed(labels[entity_keys[ia]], labels[entity_keys[iz]]):
                b.edges[("synonym", entity_keys[ia], entity_keys[iz])] = 1.0
        return True
    if config.synonyms == "on":
        raise ConfigError("synonyms='on' needs an embedding backend (set the library's embedding)")
    return False


def best_label(counts: Counter, key: str) -> str:
    """The most frequent surface form; ties by the form (deterministic).

    An entity seen only where its surface form equals its match key (a Chinese title's
    short alias: ``朱椿`` of ``朱椿 (明朝)``) has no recorded form: its key is its label.
    """
    named = [(lab, c) for lab, c in counts.items() if lab]
    return sorted(named, key=lambda kv: (-kv[1], kv[0]))[0][0] if named else key
