"""Stage ``relation_graph``: the typed entity/chunk graph of a library and its walk arrays.

Nodes are entities and chunks. Entities come from the glossary (every alias of a concept
is one node), the chunks' ``entity`` metadata, document titles, and the offline
extractor (:mod:`.entities`); an optional LLM OpenIE extractor (:class:`OpenIETripleExtractor`)
adds ``model_relation`` edges stamped model-derived and unverified. Typed edges:

* ``about`` entity–chunk: the chunk's own document title or ``entity`` metadata (weight 3);
* ``mentions`` entity–chunk: any other name found in the chunk (weight: occurrences, capped at 3);
* ``co_occurs`` entity–entity within a chunk, weighted ``sum over chunks 1 / (k - 1)``
  over the chunk's ``k`` most specific entities (at most ``max_cooccur_entities``);
* the glossary relations ``subsidiary_of`` (``parent``), ``peer_of`` (``peers``) and
  ``derived_from``;
* ``synonym`` between entity names whose embeddings are very close (cosine >=
  ``synonym_threshold``), as HippoRAG does — when the library has an embedding backend
  and at most ``max_synonym_entities`` entities.

RESTRICTED: a RESTRICTED chunk is never given to an extractor and gets no node; every
name comes from the glossary or from non-RESTRICTED chunks; the blocking check
``no_restricted_graph_labels`` re-verifies it on the written files.

Beside this step, in :mod:`ragspine_index.graph`: entity extraction (``entities``), the LLM
extractor (``openie``), synonym rules (``synonyms``), community detection
(``community_detection``) and the input records (``graph_input``). (About 640 lines: the
builder, its check and the step's UI summaries read the same intermediate structures.)
"""

from __future__ import annotations

import hashlib
import json
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core.errors import ConfigError
from ragspine_core.graph import artifact as ga
from ragspine_core.graph.store import edges_to_csr
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.chunk_store import ChunkStore, count_active_chunks
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.graph.entities import (STOP_WORDS, Gazetteer, Mention, entity_key, extract_mentions, frequent_cjk_terms, heading_phrases,
                       lower_dominant, metadata_entities, midsentence_capitalised, title_aliases)
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome

from ragspine_index.graph.openie import OPENIE_PROMPT_VERSION, OpenIETripleExtractor, Triple, parse_triples  # noqa: F401
from ragspine_index.graph.synonyms import CJK_CHAR, synonym_allowed, synonym_pairs

from ragspine_index.graph.graph_input import GraphChunk  # noqa: F401

#: Bump when the graph written for the same input changes.
RELATION_GRAPH_VERSION = "4"  # 2: the chunk's own title/metadata entity is an ``about`` edge; 3: attributes are
#                                no entities, CJK boundary rule, heading names, edge evidence, screened synonyms;
#                                4: a piece of a chunk's own title is kept when another document names it
#: Evidence chunks kept per entity-entity edge (the smallest chunk ids).
MAX_EVIDENCE = 8


@dataclass(frozen=True, slots=True)
class GraphConfig:
    """How the relation graph is built (validated)."""

    #: ``auto``: synonym edges when an embedding backend exists and the graph has at most
    #: ``max_synonym_entities`` entities; ``on`` / ``off`` force it.
    synonyms: Literal["auto", "on", "off"] = "auto"
    synonym_threshold: float = 0.92
    max_synonym_entities: int = 5000
    max_cooccur_entities: int = 12
    #: Entities in more than this share of the chunks carry no signal (and make hubs).
    max_entity_df_share: float = 0.05
    #: Also mine frequent CJK n-gram terms from running text (boundary-cut, in >= 2 documents).
    #: Off: CJK names come from the glossary, titles, headings, metadata and quoted/《》 spans
    #: only (mined terms were 0.57 precise on the sample's hand labels, docs/graph-labels.tsv).
    cjk_mined_terms: bool = False
    #: Louvain communities of the entities with one extractive summary each (``.communities``):
    #: ``auto`` builds them when networkx is importable and the graph has at most
    #: ``max_community_entities`` entities; ``on`` / ``off`` force it.
    communities: Literal["auto", "on", "off"] = "auto"
    max_community_entities: int = 20000
    #: The ``co_occurs`` edges (the ``cooccurrence`` relation extractor): off leaves the base
    #: graph (entities, about/mentions, glossary relations, synonyms) byte-identical whatever
    #: the chunks' co-occurrences (communities are detected from them either way).
    cooccurrence: bool = True

    def __post_init__(self) -> None:
        if self.synonyms not in ("auto", "on", "off"):
            raise ConfigError(f"synonyms must be one of auto, on, off; got {self.synonyms!r}")
        if not 0.0 < self.synonym_threshold <= 1.0:
            raise ConfigError(f"synonym_threshold must be in (0, 1], got {self.synonym_threshold}")
        if self.max_cooccur_entities < 2 or self.max_synonym_entities < 0:
            raise ConfigError("max_cooccur_entities must be >= 2 and max_synonym_entities >= 0")
        if self.communities not in ("auto", "on", "off"):
            raise ConfigError(f"communities must be one of auto, on, off; got {self.communities!r}")
        if not 0.0 < self.max_entity_df_share <= 1.0:
            raise ConfigError(f"max_entity_df_share must be in (0, 1], got {self.max_entity_df_share}")


@dataclass(frozen=True, slots=True)
class RelationGraphRef:
    """The written graph directory and what the asset reports."""

    directory: str
    content_hash: str
    node_counts: Mapping[str, int]
    edge_counts: Mapping[str, int]
    top_entities: tuple[tuple[str, int], ...]
    seconds: float
    restricted_chunks_skipped: int
    synonyms_built: bool
    neighbourhood_mermaid: str = ""
    reused: bool = False
    #: Why there is no graph (``directory`` empty), e.g. the library is above ``graph_max_chunks``.
    note: str = ""
    llm_calls: int = 0
    llm_cached: int = 0
    #: LLM replies with no readable triple (those chunks add no model edge) / cut short, complete triples kept
    llm_unparsed: int = 0
    llm_salvaged: int = 0
    #: The largest communities: (title, entities, member chunks, summary, cited chunk ids) — UI metadata.
    communities: tuple[tuple[str, int, int, str, str], ...] = ()
    communities_count: int = 0
    communities_note: str = ""

    def artifact_paths(self) -> dict[str, Path]:
        """Artifact name -> directory (none when no graph was built)."""
        return {"relation_graph": Path(self.directory)} if self.directory else {}


# ----------------------------------------------------------------------- the builder
@dataclass
class _Builder:
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


def read_graph_chunks(store_path: Path) -> list[GraphChunk]:
    """Active chunks in snapshot row order (chunk_id order), with the fields the graph reads."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            "SELECT chunk_id, doc_id, text, title, entity, sensitivity FROM narrative_chunk WHERE active = 1 ORDER BY chunk_id")
    return [GraphChunk(i, r["chunk_id"], r["doc_id"], r["text"], r["title"], r["entity"], r["sensitivity"]) for i, r in enumerate(rows)]


def build_relation_graph(directory: Path, chunks: Sequence[GraphChunk], *, glossary: Any | None = None,
                         config: GraphConfig = GraphConfig(), backend: Any | None = None,
                         extractor: OpenIETripleExtractor | None = None, cache_path: Path | None = None) -> dict[str, Any]:
    """Build the graph of ``chunks`` (all snapshot rows, in row order) into ``directory``.

    RESTRICTED chunks are skipped before anything reads them. Returns the ``params``
    written to ``params.json`` (counts by node kind and edge type, settings).
    """
    open_chunks = [c for c in chunks if not is_restricted(c.sensitivity)]
    b = _Builder()
    gaz_names: dict[str, str] = {}
    concepts = list(getattr(glossary, "concepts", ()) or ())
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
    glossary_surface = [n for c in concepts for n in c.names]
    # heading phrases (boundary-cut) that occur in the text of >= 2 documents are names
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
    gazetteer = Gazetteer(gaz_names, sources={k: "heading" for k in heading_keys})
    cjk_terms = (frequent_cjk_terms([c.text for c in open_chunks], docs=[c.doc_id for c in open_chunks], names=glossary_surface)
                 if config.cjk_mined_terms else [()] * len(open_chunks))
    common = midsentence_capitalised(c.text for c in open_chunks)
    lower = lower_dominant(c.text for c in open_chunks)
    per_chunk: list[list[Mention]] = []
    held: list[list[Mention]] = []  # per chunk: spans that are only pieces of a longer name of the chunk
    chunks_of: dict[str, list[str]] = defaultdict(list)  # entity -> the chunk ids it is linked to (row order)
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
    if config.cooccurrence:
        for e, wt in b.cooc.items():
            b.edges[e] += wt
    gate = None
    if extractor is not None and concepts:
        from ragspine_core.gate import CompetitorGate

        gate = CompetitorGate(cast(Any, glossary))  # concepts come from it: not None here
    if extractor is not None:
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
    # glossary relations (concept ids that exist)
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
    entity_keys = sorted(b.labels)
    labels = {k: _best_label(b.labels[k], k) for k in entity_keys}
    synonyms_built = False
    if backend is not None and (config.synonyms == "on" or (config.synonyms == "auto" and len(entity_keys) <= config.max_synonym_entities)):
        for ia, iz in synonym_pairs([labels[k] for k in entity_keys], backend, threshold=config.synonym_threshold,
                                    cache_path=cache_path):
            if synonym_allowed(labels[entity_keys[ia]], labels[entity_keys[iz]]):
                b.edges[("synonym", entity_keys[ia], entity_keys[iz])] = 1.0
        synonyms_built = True
    elif config.synonyms == "on":
        raise ConfigError("synonyms='on' needs an embedding backend (set the library's embedding)")
    node_of = {k: i for i, k in enumerate(entity_keys)}
    n_ent = len(entity_keys)
    chunk_node = np.full(len(chunks), -1, dtype=np.int32)
    chunk_rows = [c.row for c in open_chunks]
    for j, row in enumerate(chunk_rows):
        chunk_node[row] = n_ent + j
        node_of[f"c:{row}"] = n_ent + j
    n_nodes = n_ent + len(chunk_rows)
    chunk_id_of = {f"c:{c.row}": c.chunk_id for c in open_chunks}
    edge_list = sorted(b.edges.items())
    src = np.asarray([node_of[s] for (_, s, _), _ in edge_list], dtype=np.int64)
    dst = np.asarray([node_of[d] for (_, _, d), _ in edge_list], dtype=np.int64)
    w = np.asarray([v for _, v in edge_list], dtype=np.float64)
    et = np.asarray([ga.EDGE_TYPE_CODE[t] for (t, _, _), _ in edge_list], dtype=np.int64)
    ent_df = Counter(s for s, _ in {(s, d) for (t, s, d), _ in edge_list if t in ga.CHUNK_EDGE_TYPES})
    directory.mkdir(parents=True, exist_ok=True)
    nodes = pa.table({
        "node_id": pa.array(list(range(n_nodes)), pa.int32()),
        "kind": ["entity"] * n_ent + ["chunk"] * len(chunk_rows),
        "key": entity_keys + [open_chunks[j].chunk_id for j in range(len(chunk_rows))],
        "label": [labels[k] for k in entity_keys] + [open_chunks[j].chunk_id for j in range(len(chunk_rows))],
        "source": [b.source[k] for k in entity_keys] + ["chunk"] * len(chunk_rows),
        "chunk_row": pa.array([-1] * n_ent + chunk_rows, pa.int32()),
        "df": pa.array([ent_df.get(k, 0) for k in entity_keys] + [0] * len(chunk_rows), pa.int32()),
    })
    pq.write_table(nodes, directory / ga.NODES_FILE)
    aliases = sorted((a, node_of[k]) for a, k in gaz_names.items() if k in node_of and a != k)
    pq.write_table(pa.table({"alias": [a for a, _ in aliases], "node_id": pa.array([n for _, n in aliases], pa.int32())}),
                   directory / ga.ALIASES_FILE)
    types = [t for (t, _, _), _ in edge_list]
    pq.write_table(pa.table({
        "src": pa.array(src, pa.int32()), "dst": pa.array(dst, pa.int32()), "type": types,
        "weight": pa.array(w, pa.float32()),
        "provenance": [ga.PROVENANCE_MODEL if t == "model_relation" else ga.PROVENANCE_DETERMINISTIC for t in types],
        "verified": [t != "model_relation" for t in types],
        "label": [b.model_edges.get((s, d), "") if t == "model_relation" else t for (t, s, d), _ in edge_list],
        # the chunks that state the edge: the chunk itself for an entity-chunk edge
        "evidence": pa.array([_edge_evidence(b, e, chunk_id_of) for e, _ in edge_list], pa.list_(pa.string())),
    }), directory / ga.EDGES_FILE)
    # symmetric CSR with the type of each entry (the walk ignores direction)
    s2, d2 = np.concatenate([src, dst]), np.concatenate([dst, src])
    w2, e2 = np.concatenate([w, w]), np.concatenate([et, et])
    order = np.lexsort((e2, d2, s2))
    indptr, indices, weights = edges_to_csr(n_nodes, s2[order], d2[order], w2[order], undirected=False)
    np.save(directory / ga.INDPTR_FILE, indptr)
    np.save(directory / ga.INDICES_FILE, indices)
    np.save(directory / ga.WEIGHTS_FILE, weights)
    np.save(directory / ga.ETYPE_FILE, e2[order][np.lexsort((d2[order], s2[order]))].astype(np.uint8))
    np.save(directory / ga.CHUNK_NODE_FILE, chunk_node)
    communities = _write_communities(directory, config, n_ent, edge_list + ([] if config.cooccurrence else sorted(b.cooc.items())),
                                     node_of, chunks_of, open_chunks, [labels[k] for k in entity_keys])
    params = {
        "communities": communities,
        "version": ga.GRAPH_VERSION,
        "counts": {"nodes": {"entity": n_ent, "chunk": len(chunk_rows)},
                   "edges": {t: int(c) for t, c in sorted(Counter(types).items())},
                   "chunk_rows": len(chunks), "restricted_chunks_skipped": len(chunks) - len(open_chunks)},
        "edge_types": list(ga.EDGE_TYPES),
        "synonyms": synonyms_built,
        "config": {"synonym_threshold": config.synonym_threshold, "max_cooccur_entities": config.max_cooccur_entities,
                   "max_entity_df_share": config.max_entity_df_share},
        "model_derived_edges": int(sum(1 for t in types if t == "model_relation")),
        "model_triples_screened": b.screened,
    }
    (directory / ga.PARAMS_FILE).write_text(json.dumps(params, indent=1, sort_keys=True), encoding="utf-8")
    return params


def _write_communities(directory: Path, config: GraphConfig, n_ent: int, edge_list: Sequence, node_of: Mapping[str, int],
                       chunks_of: Mapping[str, Sequence[str]], open_chunks: Sequence[GraphChunk],
                       labels: Sequence[str]) -> dict[str, Any]:
    """Detect and summarise the entity communities (:mod:`.communities`) into ``communities.parquet``."""
    from ragspine_index.graph.community_detection import LOUVAIN_SEED, build_communities, detect_communities

    why = ""
    if config.communities == "off":
        why = "communities = off"
    elif n_ent > config.max_community_entities and config.communities == "auto":
        why = f"{n_ent} entities, more than max_community_entities={config.max_community_entities}"
    else:
        try:
            import networkx  # noqa: F401
        except ImportError:
            if config.communities == "on":
                raise ConfigError("communities = 'on' needs networkx: pip install 'ragspine[graph]'") from None
            why = "networkx is not installed (extra 'graph')"
    groups: list = []
    found: list = []
    if not why:
        ee = [(node_of[s], node_of[d], float(w)) for (t, s, d), w in edge_list
              if t not in ga.CHUNK_EDGE_TYPES and s in node_of and d in node_of]
        degree: dict[int, float] = defaultdict(float)
        for a, z, w in ee:
            degree[a] += w
            degree[z] += w
        groups = detect_communities(n_ent, ee, seed=LOUVAIN_SEED)
        entity_chunks = {node_of[k]: v for k, v in chunks_of.items() if k in node_of}
        found = build_communities(groups, labels=labels, entity_chunks=entity_chunks,
                                  chunk_text={c.chunk_id: c.text for c in open_chunks}, degree=degree)
    pq.write_table(pa.table({
        "community_id": pa.array([c.community_id for c in found], pa.int32()),
        "title": [c.title for c in found],
        "size": pa.array([len(c.entity_nodes) for c in found], pa.int32()),
        "entity_nodes": pa.array([list(c.entity_nodes) for c in found], pa.list_(pa.int32())),
        "member_chunks": pa.array([list(c.member_chunks) for c in found], pa.list_(pa.string())),
        "summary": [c.summary for c in found],
        "citations": pa.array([list(c.citations) for c in found], pa.list_(pa.string())),
        "quotes": pa.array([list(c.quotes) for c in found], pa.list_(pa.string())),
    }), directory / ga.COMMUNITIES_FILE)
    return {"built": not why, "count": len(found), "algorithm": "louvain", "seed": LOUVAIN_SEED, "note": why}


def _edge_evidence(b: _Builder, edge: tuple[str, str, str], chunk_id_of: Mapping[str, str]) -> list[str]:
    t, s, d = edge
    if t in ga.CHUNK_EDGE_TYPES:
        return [chunk_id_of[d]]
    return sorted(b.evidence.get(edge, ()))


def _best_label(counts: Counter, key: str) -> str:
    """The most frequent surface form; ties by the form (deterministic).

    An entity seen only where its surface form equals its match key (a Chinese title's
    short alias: ``朱椿`` of ``朱椿 (明朝)``) has no recorded form: its key is its label.
    """
    named = [(lab, c) for lab, c in counts.items() if lab]
    return sorted(named, key=lambda kv: (-kv[1], kv[0]))[0][0] if named else key


# ------------------------------------------------------------------------ the check
def verify_relation_graph(directory: Path, chunks: Sequence[GraphChunk], glossary: Any | None = None) -> dict[str, int]:
    """Re-check the written graph against the chunks: ``{"restricted_nodes", "restricted_edges",
    "unsupported_labels"}`` must all be 0.

    * no chunk node or edge touches a RESTRICTED row;
    * every entity label is a glossary name or occurs (case-insensitively) in the text,
      title or ``entity`` field of a non-RESTRICTED chunk it is linked to.
    """
    nodes = pq.read_table(directory / ga.NODES_FILE).to_pydict()
    edges = pq.read_table(directory / ga.EDGES_FILE).to_pydict()
    by_row = {c.row: c for c in chunks}
    restricted_rows = {c.row for c in chunks if is_restricted(c.sensitivity)}
    chunk_of_node = {n: r for n, r, k in zip(nodes["node_id"], nodes["chunk_row"], nodes["kind"]) if k == "chunk"}
    restricted_nodes = sum(1 for r in chunk_of_node.values() if r in restricted_rows)
    restricted_edges = sum(1 for s, d in zip(edges["src"], edges["dst"])
                           if chunk_of_node.get(s) in restricted_rows or chunk_of_node.get(d) in restricted_rows)
    glossary_names = {entity_key(n) for c in getattr(glossary, "concepts", ()) or () for n in (*c.names, c.id)}
    linked: dict[int, list[int]] = defaultdict(list)
    for s, d, t in zip(edges["src"], edges["dst"], edges["type"]):
        if t in ga.CHUNK_EDGE_TYPES and d in chunk_of_node:
            linked[s].append(chunk_of_node[d])
    unsupported = 0
    for n, kind, label, source in zip(nodes["node_id"], nodes["kind"], nodes["label"], nodes["source"]):
        if kind != "entity":
            continue
        if source == "glossary" and entity_key(label) in glossary_names:
            continue
        low = _norm(label)
        ok = False
        for r in linked.get(n, ()):
            c = by_row.get(r)
            if c is None or is_restricted(c.sensitivity):
                continue
            # a model-derived name was read by the model in this open chunk only
            if source == "model" or low in _norm(c.text) or low in _norm(c.title) or low in _norm(c.entity):
                ok = True
                break
        unsupported += not ok
    # every community summary sentence occurs in an open chunk it cites
    unsupported_summaries = 0
    cpath = directory / ga.COMMUNITIES_FILE
    if cpath.is_file():
        open_text = {c.chunk_id: c.text for c in chunks if not is_restricted(c.sensitivity)}
        com = pq.read_table(cpath, columns=["summary", "citations", "quotes"]).to_pydict()
        for summary, cites, quotes in zip(com["summary"], com["citations"], com["quotes"]):
            ok = (len(cites) == len(quotes) and " ".join(quotes) == summary
                  and all(q and q in open_text.get(cid, "") for cid, q in zip(cites, quotes)))
            unsupported_summaries += not ok
    return {"restricted_nodes": restricted_nodes, "restricted_edges": restricted_edges, "unsupported_labels": unsupported,
            "unsupported_summaries": unsupported_summaries}


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().replace("’", "'").split())


# --------------------------------------------------------------------------------- step
NO_RESTRICTED_GRAPH_LABELS = CheckSpec(
    "no_restricted_graph_labels", blocking=True,
    description="no node or edge touches a RESTRICTED chunk, and every entity label comes from the glossary or non-RESTRICTED text")
RELATION_GRAPH_CHECKS = (NO_RESTRICTED_GRAPH_LABELS,)


def build_library_relation_graph(paths: LibraryPaths, store_path: Path, *, glossary_path: Path | None = None,
                                 backend: Any | None = None, config: GraphConfig = GraphConfig(),
                                 extractor: OpenIETripleExtractor | None = None,
                                 cache_path: Path | None = None) -> tuple[RelationGraphRef, list[GraphChunk], Any]:
    """Build (or reuse, content-addressed) the library's graph under ``work/relation_graph``."""
    from ragspine_core.glossary import Glossary

    t0 = time.perf_counter()
    chunks = read_graph_chunks(store_path)
    glossary = Glossary.load(glossary_path) if glossary_path is not None else None
    key = sha256_json([
        RELATION_GRAPH_VERSION, ga.GRAPH_VERSION,
        [(c.chunk_id, c.sensitivity, c.title, c.entity, hashlib.sha256(c.text.encode("utf-8")).hexdigest()) for c in chunks],
        glossary.to_dict() if glossary is not None else None,
        [config.synonyms, config.synonym_threshold, config.max_synonym_entities, config.max_cooccur_entities, config.max_entity_df_share,
         config.cjk_mined_terms, config.communities, config.max_community_entities, config.cooccurrence],
        getattr(backend, "model_id", None), None if extractor is None else [extractor.model_id, OPENIE_PROMPT_VERSION],
    ])
    target = paths.work_dir("relation_graph", key)
    reused = target.is_dir()
    write_once(target, lambda tmp: build_relation_graph(tmp, chunks, glossary=glossary, config=config, backend=backend,
                                                         extractor=extractor, cache_path=cache_path))
    params = json.loads((target / ga.PARAMS_FILE).read_text(encoding="utf-8"))
    top, mermaid = summarize_graph(target)
    com = params.get("communities") or {}
    ref = RelationGraphRef(str(target), key, dict(params["counts"]["nodes"]), dict(params["counts"]["edges"]), top,
                           time.perf_counter() - t0, int(params["counts"]["restricted_chunks_skipped"]),
                           bool(params["synonyms"]), mermaid, reused,
                           llm_calls=0 if extractor is None else extractor.calls,
                           llm_cached=0 if extractor is None else extractor.cache_hits,
                           llm_unparsed=0 if extractor is None else extractor.unparsed,
                           llm_salvaged=0 if extractor is None else extractor.salvaged,
                           communities=summarize_communities(target), communities_count=int(com.get("count", 0)),
                           communities_note=str(com.get("note", "")))
    return ref, chunks, glossary


def summarize_communities(directory: Path, *, top: int = 8) -> tuple[tuple[str, int, int, str, str], ...]:
    """The ``top`` largest communities as (title, entities, member chunks, summary, cited chunk ids)."""
    path = directory / ga.COMMUNITIES_FILE
    if not path.is_file():
        return ()
    t = pq.read_table(path).to_pydict()
    return tuple((t["title"][i], int(t["size"][i]), len(t["member_chunks"][i]), t["summary"][i],
                  ", ".join(c[:12] for c in t["citations"][i])) for i in range(min(top, len(t["title"]))))


def summarize_graph(directory: Path, *, top: int = 10, picture_neighbours: int = 8) -> tuple[tuple[tuple[str, int], ...], str]:
    """Top entities by degree (label, degree) and a Mermaid picture of the most connected
    entity's neighbourhood (entity neighbours only, strongest edges first)."""
    nodes = pq.read_table(directory / ga.NODES_FILE, columns=["kind", "label"]).to_pydict()
    indptr = np.load(directory / ga.INDPTR_FILE)
    indices = np.load(directory / ga.INDICES_FILE)
    weights = np.load(directory / ga.WEIGHTS_FILE)
    n_ent = sum(1 for k in nodes["kind"] if k == "entity")
    if n_ent == 0:
        return (), ""
    deg = np.diff(indptr)[:n_ent]
    order = np.lexsort((np.arange(n_ent), -deg))[:top]
    best = [(nodes["label"][int(i)], int(deg[int(i)])) for i in order]
    hub = int(order[0])
    nb, nw = indices[indptr[hub]:indptr[hub + 1]], weights[indptr[hub]:indptr[hub + 1]]
    agg: dict[int, float] = defaultdict(float)
    for v, wt in zip(nb.tolist(), nw.tolist()):
        if v < n_ent and v != hub:
            agg[v] += wt
    chosen = sorted(agg.items(), key=lambda kv: (-kv[1], kv[0]))[:picture_neighbours]
    n_chunks = int(sum(1 for v in nb.tolist() if v >= n_ent))

    def q(s: str) -> str:
        return s.replace('"', "'").replace("\n", " ")[:40]

    lines = ["graph LR", f'  E{hub}["{q(nodes["label"][hub])}"]', f'  C{hub}(("{n_chunks} chunks"))', f"  E{hub} --- C{hub}"]
    for v, wt in chosen:
        lines.append(f'  E{hub} -- "{wt:.2g}" --- E{v}["{q(nodes["label"][v])}"]')
    return tuple(best), "\n".join(lines)


def relation_graph_step(ctx: StepContext, chunks: ChunkUpdate, index_text: IndexTextRef, documents: DocumentSet) -> StepResult:
    """Build the relation graph of the library's active chunks and check it for RESTRICTED labels."""
    from ragspine_index.library_settings import resolve_library_settings

    settings = resolve_library_settings(documents, embedding=ctx.embedding, glossary_path=ctx.glossary_path)
    max_chunks = int(getattr(documents.config, "graph_max_chunks", 0) or 0)
    if max_chunks:
        n_open, _ = count_active_chunks(chunks.store_path)
        if n_open > max_chunks:  # too big for a default build: the library opts in
            note = (f"no graph: {n_open} open chunks, more than graph_max_chunks={max_chunks}; "
                    "raise graph_max_chunks in _library.toml (0: no limit) to build it")
            ref = RelationGraphRef("", sha256_json(["too-big", max_chunks, index_text.content_hash]), {}, {}, (), 0.0, 0,
                                   False, note=note)
            return StepResult(ref, (outcome(NO_RESTRICTED_GRAPH_LABELS, True, {"restricted_nodes": 0, "restricted_edges": 0,
                                                                               "unsupported_labels": 0, "unsupported_summaries": 0},
                                            note),))
    backend = ctx.backend(settings.embedding_spec) if settings.embedding != "none" else None
    extractor = None
    slot = str(getattr(documents.config, "relation_extractor", "cooccurrence"))
    legacy_llm = getattr(documents.config, "graph_extractor", "offline") == "llm"  # co-occurrence and OpenIE, as before
    config = GraphConfig(cooccurrence=slot == "cooccurrence" or (legacy_llm and slot != "none"))
    if slot == "llm" or legacy_llm:
        key = "relation_extractor = \"llm\"" if slot == "llm" else "graph_extractor = \"llm\""
        make_llm = getattr(ctx, "make_llm", None)
        llm = make_llm() if make_llm is not None else None
        if llm is None:
            raise ConfigError(f"this library's _library.toml sets {key} but no LLM is configured: set "
                              "RAGSPINE_LLM_BASE_URL (and RAGSPINE_LLM_MODEL), or set relation_extractor = \"cooccurrence\" "
                              "(or \"none\")")
        extractor = OpenIETripleExtractor(llm, model_id=str(getattr(llm, "model_id", None) or getattr(llm, "model", "llm")),
                                          cache_path=Path(ctx.cache_path).parent / "openie.sqlite")
    try:
        ref, graph_chunks, glossary = build_library_relation_graph(
            ctx.paths, Path(chunks.store_path), glossary_path=settings.glossary_path, backend=backend,
            config=config, extractor=extractor, cache_path=ctx.cache_path)
    finally:
        if extractor is not None:
            extractor.close()
    if len(graph_chunks) != index_text.n_rows:
        raise ConfigError(f"the relation graph read {len(graph_chunks)} chunk rows but index_text has {index_text.n_rows}: "
                          "re-materialize chunks and downstream")
    found = verify_relation_graph(Path(ref.directory), graph_chunks, glossary)
    bad = found["restricted_nodes"] + found["restricted_edges"] + found["unsupported_labels"] + found["unsupported_summaries"]
    return StepResult(ref, (outcome(NO_RESTRICTED_GRAPH_LABELS, bad == 0, dict(found),
                                    f"{found['restricted_nodes']} RESTRICTED chunk node(s), {found['restricted_edges']} edge(s) on "
                                    f"RESTRICTED chunks, {found['unsupported_labels']} label(s) not found in open text, "
                                    f"{found['unsupported_summaries']} community summary(ies) not quoted from their cited open chunks"),))
