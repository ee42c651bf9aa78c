"""The relation graph's ``communities.parquet``: detecting and summarising the entity
communities (:mod:`ragspine_index.graph.community_detection`) into it, and the largest
ones for the step's UI summary (:func:`summarize_communities`)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core.errors import ConfigError
from ragspine_core.graph import artifact as ga

from ragspine_index.graph.community_detection import LOUVAIN_SEED, build_communities, detect_communities
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_input import GraphChunk


def write_communities(directory: Path, config: GraphConfig, n_ent: int, edge_list: Sequence, node_of: Mapping[str, int],
                      chunks_of: Mapping[str, Sequence[str]], open_chunks: Sequence[GraphChunk],
                      labels: Sequence[str]) -> dict[str, Any]:
    """Detect and summarise the entity communities into ``communities.parquet``; returns
    what ``params.json`` records of them (built, count, algorithm, seed, why not)."""
    why = _why_no_communities(config, n_ent)
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


def _why_no_communities(config: GraphConfig, n_ent: int) -> str:
    """Why no communities are built ("" when they are); ``on`` without networkx is an error."""
    if config.communities == "off":
        return "communities = off"
    if n_ent > config.max_community_entities and config.communities == "auto":
        return f"{n_ent} entities, more than max_community_entities={config.max_community_entities}"
    try:
        import networkx  # noqa: F401
    except ImportError:
        if config.communities == "on":
            raise ConfigError("communities = 'on' needs networkx: pip install 'ragspine[graph]'") from None
        return "networkx is not installed (extra 'graph')"
    return ""


def summarize_communities(directory: Path, *, top: int = 8) -> tuple[tuple[str, int, int, str, str], ...]:
    """The ``top`` largest communities as (title, entities, member chunks, summary, cited chunk ids)."""
    path = directory / ga.COMMUNITIES_FILE
    if not path.is_file():
        return ()
    t = pq.read_table(path).to_pydict()
    return tuple((t["title"][i], int(t["size"][i]), len(t["member_chunks"][i]), t["summary"][i],
                  ", ".join(c[:12] for c in t["citations"][i])) for i in range(min(top, len(t["title"]))))
