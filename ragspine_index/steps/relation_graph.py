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

This module is the step (its check, the content-addressed build under ``work/`` and what
it reports); the graph itself is built in :mod:`ragspine_index.graph`: ``build`` (the
builder: extract, then write), ``extraction`` (entities and typed edges from the chunks,
on ``entities``, ``openie`` and ``synonyms``), ``graph_files`` (nodes, aliases, edges, walk
arrays, ``params.json``), ``community_file`` (communities, on ``community_detection``),
``verify`` (the check on the written files), ``graph_config`` and ``graph_input`` (the
settings and the records read from the chunk store).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ragspine_core.errors import ConfigError
from ragspine_core.graph import artifact as ga

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.chunk_store import count_active_chunks
from ragspine_index.graph.build import build_relation_graph
from ragspine_index.graph.community_file import summarize_communities
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_files import summarize_graph
from ragspine_index.graph.graph_input import GraphChunk, read_graph_chunks
from ragspine_index.graph.openie import OPENIE_PROMPT_VERSION, OpenIETripleExtractor
from ragspine_index.graph.verify import verify_relation_graph
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome

#: Bump when the graph written for the same input changes.
RELATION_GRAPH_VERSION = "4"  # 2: the chunk's own title/metadata entity is an ``about`` edge; 3: attributes are
#                                no entities, CJK boundary rule, heading names, edge evidence, screened synonyms;
#                                4: a piece of a chunk's own title is kept when another document names it


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


def relation_graph_step(ctx: StepContext, chunks: ChunkUpdate, index_text: IndexTextRef, documents: DocumentSet) -> StepResult:
    """Build the relation graph of the library's active chunks and check it for RESTRICTED labels."""
    from ragspine_index.library_settings import resolve_library_settings

    settings = resolve_library_settings(documents, embedding=ctx.embedding, glossary_path=ctx.glossary_path)
    too_big = _too_big_for_a_graph(chunks, index_text, documents)
    if too_big is not None:
        return too_big
    backend = ctx.backend(settings.embedding_spec) if settings.embedding != "none" else None
    config, extractor = _relation_extractor(ctx, documents)
    try:
        ref, graph_chunks, glossary = build_library_relation_graph(
            ctx.paths, Path(chunks.store_path), glossary_path=settings.glossary_path, backend=backend,
            config=config, extractor=extractor, cache_path=ctx.cache_path)
    finally:
        if extractor is not None:
            extractor.close()
    if extractor is not None:  # the build-side fallbacks, said where the run's progress goes
        ctx.log(f"relation graph: OpenIE {ref.llm_calls} call(s), {ref.llm_cached} cached; {ref.llm_unparsed} reply(ies) with "
                f"no readable triple (no model edge for that chunk), {ref.llm_salvaged} cut short (complete triples kept); "
                f"edges {dict(sorted(ref.edge_counts.items()))}")
    if len(graph_chunks) != index_text.n_rows:
        raise ConfigError(f"the relation graph read {len(graph_chunks)} chunk rows but index_text has {index_text.n_rows}: "
                          "re-materialize chunks and downstream")
    found = verify_relation_graph(Path(ref.directory), graph_chunks, glossary)
    bad = found["restricted_nodes"] + found["restricted_edges"] + found["unsupported_labels"] + found["unsupported_summaries"]
    return StepResult(ref, (outcome(NO_RESTRICTED_GRAPH_LABELS, bad == 0, dict(found),
                                    f"{found['restricted_nodes']} RESTRICTED chunk node(s), {found['restricted_edges']} edge(s) on "
                                    f"RESTRICTED chunks, {found['unsupported_labels']} label(s) not found in open text, "
                                    f"{found['unsupported_summaries']} community summary(ies) not quoted from their cited open chunks"),))


def _too_big_for_a_graph(chunks: ChunkUpdate, index_text: IndexTextRef, documents: DocumentSet) -> StepResult | None:
    """The step's result without a graph when the library has more open chunks than its
    ``graph_max_chunks`` (None: build it)."""
    max_chunks = int(getattr(documents.config, "graph_max_chunks", 0) or 0)
    if not max_chunks:
        return None
    n_open, _ = count_active_chunks(chunks.store_path)
    if n_open <= max_chunks:
        return None
    # too big for a default build: the library opts in
    note = (f"no graph: {n_open} open chunks, more than graph_max_chunks={max_chunks}; "
            "raise graph_max_chunks in _library.toml (0: no limit) to build it")
    ref = RelationGraphRef("", sha256_json(["too-big", max_chunks, index_text.content_hash]), {}, {}, (), 0.0, 0,
                           False, note=note)
    return StepResult(ref, (outcome(NO_RESTRICTED_GRAPH_LABELS, True, {"restricted_nodes": 0, "restricted_edges": 0,
                                                                       "unsupported_labels": 0, "unsupported_summaries": 0},
                                    note),))


def _relation_extractor(ctx: StepContext, documents: DocumentSet) -> tuple[GraphConfig, OpenIETripleExtractor | None]:
    """The graph settings and LLM extractor of the library's ``relation_extractor`` slot
    (``cooccurrence``, ``llm`` or ``none``; the older ``graph_extractor = "llm"`` is
    co-occurrence and OpenIE)."""
    slot = str(getattr(documents.config, "relation_extractor", "cooccurrence"))
    legacy_llm = getattr(documents.config, "graph_extractor", "offline") == "llm"  # co-occurrence and OpenIE, as before
    config = GraphConfig(cooccurrence=slot == "cooccurrence" or (legacy_llm and slot != "none"))
    if not (slot == "llm" or legacy_llm):
        return config, None
    key = "relation_extractor = \"llm\"" if slot == "llm" else "graph_extractor = \"llm\""
    make_llm = getattr(ctx, "make_llm", None)
    llm = make_llm() if make_llm is not None else None
    if llm is None:
        raise ConfigError(f"this library's _library.toml sets {key} but no LLM is configured: set "
                          "RAGSPINE_LLM_BASE_URL (and RAGSPINE_LLM_MODEL), or set relation_extractor = \"cooccurrence\" "
                          "(or \"none\")")
    return config, OpenIETripleExtractor(llm, model_id=str(getattr(llm, "model_id", None) or getattr(llm, "model", "llm")),
                                         cache_path=Path(ctx.cache_path).parent / "openie.sqlite")
