"""Thin Dagster assets: read, call one plain function from ``build``, write, report."""

from ragspine_dagster.assets.chunks import chunks
from ragspine_dagster.assets.documents import documents
from ragspine_dagster.assets.embeddings import chunk_embeddings
from ragspine_dagster.assets.index_text import index_text
from ragspine_dagster.assets.lexical import bm25_index
from ragspine_dagster.assets.manifest import index_manifest
from ragspine_dagster.assets.summary_tree import summary_tree
from ragspine_dagster.assets.relation_graph import relation_graph

ALL_ASSETS = [documents, chunks, index_text, bm25_index, chunk_embeddings, summary_tree, relation_graph, index_manifest]

__all__ = ["ALL_ASSETS", "documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "summary_tree", "relation_graph", "index_manifest"]
