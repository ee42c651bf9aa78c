"""The relation graph's files (format: :mod:`ragspine_core.graph.artifact`): writing the
nodes, aliases, edges, walk arrays and ``params.json`` of an extracted graph, and the
degree summary the step reports (:func:`summarize_graph`). The communities file is
:mod:`ragspine_index.graph.community_file`'s."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core.graph import artifact as ga
from ragspine_core.graph.store import edges_to_csr

from ragspine_index.graph.extraction import ExtractedGraph, GraphBuilder
from ragspine_index.graph.graph_config import GraphConfig


@dataclass(frozen=True, slots=True)
class GraphLayout:
    """Node ids and the sorted edge list of a written graph (what the communities and params read)."""

    n_ent: int
    n_chunk_nodes: int
    #: entity key / ``c:<row>`` -> node id
    node_of: dict[str, int]
    edge_list: list[tuple[tuple[str, str, str], float]]
    types: list[str]


def write_graph_files(directory: Path, g: ExtractedGraph) -> GraphLayout:
    """Write ``nodes``, ``aliases`` and ``edges`` (Parquet) and the symmetric typed CSR walk arrays."""
    b, open_chunks, entity_keys = g.builder, g.open_chunks, g.entity_keys
    node_of = {k: i for i, k in enumerate(entity_keys)}
    n_ent = len(entity_keys)
    chunk_node = np.full(len(g.chunks), -1, dtype=np.int32)
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
        "label": [g.labels[k] for k in entity_keys] + [open_chunks[j].chunk_id for j in range(len(chunk_rows))],
        "source": [b.source[k] for k in entity_keys] + ["chunk"] * len(chunk_rows),
        "chunk_row": pa.array([-1] * n_ent + chunk_rows, pa.int32()),
        "df": pa.array([ent_df.get(k, 0) for k in entity_keys] + [0] * len(chunk_rows), pa.int32()),
    })
    pq.write_table(nodes, directory / ga.NODES_FILE)
    aliases = sorted((a, node_of[k]) for a, k in g.gaz_names.items() if k in node_of and a != k)
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
    return GraphLayout(n_ent, len(chunk_rows), node_of, edge_list, types)


def write_params(directory: Path, g: ExtractedGraph, layout: GraphLayout, config: GraphConfig,
                 communities: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``params.json`` (counts by node kind and edge type, settings) and return it."""
    params = {
        "communities": communities,
        "version": ga.GRAPH_VERSION,
        "counts": {"nodes": {"entity": layout.n_ent, "chunk": layout.n_chunk_nodes},
                   "edges": {t: int(c) for t, c in sorted(Counter(layout.types).items())},
                   "chunk_rows": len(g.chunks), "restricted_chunks_skipped": len(g.chunks) - len(g.open_chunks)},
        "edge_types": list(ga.EDGE_TYPES),
        "synonyms": g.synonyms_built,
        "config": {"synonym_threshold": config.synonym_threshold, "max_cooccur_entities": config.max_cooccur_entities,
                   "max_entity_df_share": config.max_entity_df_share},
        "model_derived_edges": int(sum(1 for t in layout.types if t == "model_relation")),
        "model_triples_screened": g.builder.screened,
    }
    (directory / ga.PARAMS_FILE).write_text(json.dumps(params, indent=1, sort_keys=True), encoding="utf-8")
    return params


def _edge_evidence(b: GraphBuilder, edge: tuple[str, str, str], chunk_id_of: Mapping[str, str]) -> list[str]:
    t, s, d = edge
    if t in ga.CHUNK_EDGE_TYPES:
        return [chunk_id_of[d]]
    return sorted(b.evidence.get(edge, ()))


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
