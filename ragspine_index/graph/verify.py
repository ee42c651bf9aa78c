"""The relation graph's blocking check, re-run on the written files
(:func:`verify_relation_graph`): no RESTRICTED chunk in it, every name and community
summary grounded in open text."""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow.parquet as pq

from ragspine_core.graph import artifact as ga
from ragspine_core.records import is_restricted

from ragspine_index.graph.entities import entity_key
from ragspine_index.graph.graph_input import GraphChunk


def verify_relation_graph(directory: Path, chunks: Sequence[GraphChunk], glossary: Any | None = None) -> dict[str, int]:
    """Re-check the written graph against the chunks: ``{"restricted_nodes", "restricted_edges",
    "unsupported_labels"}`` must all be 0.

    * no chunk node or edge touches a RESTRICTED row;
    * every entity label is a glossary name or occurs (case-insensitively) in the text,
      title or ``entity`` field of a non-RESTRICTED chunk it is linked to.
    """
    nodes = pq.read_table(directory / ga.NODES_FILE).to_pydict()
    edges = pq.read_table(directory / ga.EDGES_FILE).to_pydict()
    restricted_rows = {c.row for c in chunks if is_restricted(c.sensitivity)}
    chunk_of_node = {n: r for n, r, k in zip(nodes["node_id"], nodes["chunk_row"], nodes["kind"]) if k == "chunk"}
    restricted_nodes = sum(1 for r in chunk_of_node.values() if r in restricted_rows)
    restricted_edges = sum(1 for s, d in zip(edges["src"], edges["dst"])
                           if chunk_of_node.get(s) in restricted_rows or chunk_of_node.get(d) in restricted_rows)
    return {"restricted_nodes": restricted_nodes, "restricted_edges": restricted_edges,
            "unsupported_labels": _unsupported_labels(nodes, edges, chunk_of_node, chunks, glossary),
            "unsupported_summaries": _unsupported_summaries(directory, chunks)}


def _unsupported_labels(nodes: Mapping[str, list], edges: Mapping[str, list], chunk_of_node: Mapping[int, int],
                        chunks: Sequence[GraphChunk], glossary: Any | None) -> int:
    """Entity labels neither a glossary name nor found in an open chunk the entity is linked to."""
    by_row = {c.row: c for c in chunks}
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
    return unsupported


def _unsupported_summaries(directory: Path, chunks: Sequence[GraphChunk]) -> int:
    """Community summaries with a sentence that does not occur in an open chunk it cites."""
    unsupported_summaries = 0
    cpath = directory / ga.COMMUNITIES_FILE
    if cpath.is_file():
        open_text = {c.chunk_id: c.text for c in chunks if not is_restricted(c.sensitivity)}
        com = pq.read_table(cpath, columns=["summary", "citations", "quotes"]).to_pydict()
        for summary, cites, quotes in zip(com["summary"], com["citations"], com["quotes"]):
            ok = (len(cites) == len(quotes) and " ".join(quotes) == summary
                  and all(q and q in open_text.get(cid, "") for cid, q in zip(cites, quotes)))
            unsupported_summaries += not ok
    return unsupported_summaries


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().replace("’", "'").split())
