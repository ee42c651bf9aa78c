"""The relation graph builder: :func:`build_relation_graph` extracts the entities and typed
edges of a library's chunks (:mod:`ragspine_index.graph.extraction`) and writes the graph
files (:mod:`ragspine_index.graph.graph_files`), its communities
(:mod:`ragspine_index.graph.community_file`) and ``params.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ragspine_index.graph.community_file import write_communities
from ragspine_index.graph.extraction import extract_graph
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_files import write_graph_files, write_params
from ragspine_index.graph.graph_input import GraphChunk
from ragspine_index.graph.openie import OpenIETripleExtractor


def build_relation_graph(directory: Path, chunks: Sequence[GraphChunk], *, glossary: Any | None = None,
                         config: GraphConfig = GraphConfig(), backend: Any | None = None,
                         extractor: OpenIETripleExtractor | None = None, cache_path: Path | None = None) -> dict[str, Any]:
    """Build the graph of ``chunks`` (all snapshot rows, in row order) into ``directory``.

    RESTRICTED chunks are skipped before anything reads them. Returns the ``params``
    written to ``params.json`` (counts by node kind and edge type, settings).
    """
    g = extract_graph(chunks, glossary=glossary, config=config, backend=backend, extractor=extractor, cache_path=cache_path)
    layout = write_graph_files(directory, g)
    # communities are detected from the co-occurrences whether or not they are edges
    community_edges = layout.edge_list + ([] if config.cooccurrence else sorted(g.builder.cooc.items()))
    communities = write_communities(directory, config, layout.n_ent, community_edges, layout.node_of, g.chunks_of,
                                    g.open_chunks, [g.labels[k] for k in g.entity_keys])
    return write_params(directory, g, layout, config, communities)
