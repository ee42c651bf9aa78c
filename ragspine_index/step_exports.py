"""Compatibility re-exports: the pipeline's steps now live in one module per stage.

``documents`` · ``chunks`` · ``index_text`` · ``lexical`` (bm25_index) · ``embeddings``
(chunk_embeddings) · ``manifest`` (index_manifest) · ``pipeline`` (the declared step
sequence and :func:`build_library`). Import from those; this module keeps old imports
(and Dagster step outputs pickled before the split, which name
``ragspine_index.step_exports._load_saved_document_set``) working.
"""

from __future__ import annotations

from ragspine_index.steps.chunks import ChunkUpdate, update_chunk_store, verify_chunks
from ragspine_index.steps.documents import DocumentSet, _load_saved_document_set, load_documents
from ragspine_index.steps.chunk_embeddings import (EmbeddingCache, EmbeddingRef, build_embeddings, resolve_embedding_spec,
                         restricted_text_hashes, text_hash, verify_embeddings)
from ragspine_index.steps.index_text import INDEX_TEXT_SCHEMA, IndexTextRef, export_index_text, read_index_text
from ragspine_index.steps.bm25_index import Bm25Ref, build_bm25, resolve_analyzer
from ragspine_index.library_settings import LibrarySettings, resolve_library_settings
from ragspine_index.steps.index_manifest import build_manifest
from ragspine_index.pipeline import STEPS, BuildResult, Step, build_library

__all__ = [
    "BuildResult", "Bm25Ref", "ChunkUpdate", "DocumentSet", "EmbeddingCache", "EmbeddingRef", "INDEX_TEXT_SCHEMA",
    "IndexTextRef", "LibrarySettings", "STEPS", "Step", "_load_saved_document_set", "build_bm25", "build_embeddings",
    "build_library", "build_manifest", "export_index_text", "load_documents", "read_index_text",
    "resolve_analyzer", "resolve_embedding_spec", "resolve_library_settings", "restricted_text_hashes", "text_hash",
    "update_chunk_store", "verify_chunks", "verify_embeddings",
]
