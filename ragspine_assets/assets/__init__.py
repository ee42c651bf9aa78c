"""Thin Dagster assets: read, call one plain function from ``build``, write, report."""

from .chunks import chunks
from .documents import documents
from .embeddings import chunk_embeddings
from .index_text import index_text
from .lexical import bm25_index
from .manifest import index_manifest
from .summary_tree import summary_tree
from .relation_graph import relation_graph

ALL_ASSETS = [documents, chunks, index_text, bm25_index, chunk_embeddings, summary_tree, relation_graph, index_manifest]

__all__ = ["ALL_ASSETS", "documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "summary_tree", "relation_graph", "index_manifest"]
