"""Sentence embeddings at chunking time: the library's backend, a cache, and RESTRICTED kept out.

These run the real chunks step function (``update_chunk_store``) on a small library with
``chunker = "semantic"``; the backend is the real offline ``deterministic`` one, wrapped
only to record what it was asked to embed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragspine_index.chunking.semantic_embedding import SentenceEmbeddings
from ragspine_index.step_exports import load_documents, update_chunk_store, verify_chunks
from ragspine_core import schema
from ragspine_core.chunk_rows import ChunkStoreReader
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

SECRET = "ZEPHYRMARKER"
#: the library's non-default settings, recorded after the version (``chunker_signature``)
SETTINGS = ";max_chars=160,overlap_chars=20,breakpoint_percentile=30"
OPEN_BODY = ("Mitochondria produce ATP inside the cell. The cell divides its mitochondria. "
             "Damaged mitochondria make the cell die.\n\nThe river flooded the valley. Flood barriers held the river. "
             "Farmers lost crops in the flood.\n")
DOCS = {
    "_library.toml": 'chunker = "semantic"\nmax_chars = 160\noverlap_chars = 20\nbreakpoint_percentile = 30\n',
    "open.md": "---\ndoc_id: open\n---\n" + OPEN_BODY,
    "zh.md": "---\ndoc_id: zh\nlanguage: zh\n---\n线粒体为细胞提供能量。细胞中的线粒体会分裂。\n\n河流在暴雨后淹没了山谷。农民因洪水失去庄稼。\n",
    "secret.md": (f"---\ndoc_id: secret\nsensitivity: RESTRICTED\n---\n{SECRET} merger terms were agreed. "
                  f"The {SECRET} board approved the price. Lawyers drafted the {SECRET} contract.\n"),
}


class RecordingBackend(DeterministicEmbeddingBackend):
    """The deterministic backend, remembering every text it embedded."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.seen: list[str] = []

    def embed(self, texts, **kwargs):
        self.seen.extend(texts)
        return super().embed(texts, **kwargs)


def write(root: Path, docs: dict[str, str]) -> Path:
    for rel, text in docs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def chunk_rows(store: Path) -> list[tuple]:
    with ChunkStoreReader(store) as r:
        return [tuple(row) for row in r.execute_read(
            f"SELECT doc_id, start_char, end_char, chunker, chunker_version FROM {schema.CHUNK_TABLE} "
            "WHERE active = 1 ORDER BY doc_id, start_char")]


def run(raw: Path, store: Path, backend, cache: Path | None):
    with SentenceEmbeddings(backend, "lib", cache) as sentences:
        return update_chunk_store(load_documents(raw, "lib"), store, run_id="r", sentences=sentences)


@pytest.fixture
def lib(tmp_path) -> tuple[Path, Path, Path]:
    raw = write(tmp_path / "raw" / "lib", DOCS)
    return raw, tmp_path / "store" / schema.CHUNK_STORE_FILE, tmp_path / "cache" / "embeddings.sqlite"


def test_restricted_text_never_reaches_the_backend_nor_the_cache(lib):
    raw, store, cache = lib
    backend = RecordingBackend()
    update = run(raw, store, backend, cache)
    assert backend.seen and not any(SECRET in t for t in backend.seen)
    rows = chunk_rows(store)
    versions = {d: v for d, *_, v in rows}
    assert versions["open"] == versions["zh"] == "1+deterministic-hash-v1-d64" + SETTINGS
    assert versions["secret"] == "1+lexical-tfidf-v1-d1024" + SETTINGS, "RESTRICTED boundaries: the lexical embedder"
    assert update.chunker == "semantic@1+deterministic-hash-v1-d64" + SETTINGS
    assert "deterministic-hash-v1-d64" in update.boundary_embedder and "RESTRICTED" in update.boundary_embedder
    with sqlite3.connect(cache) as conn:
        owners = {r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM semantic_sentence_owner")}
        n = conn.execute("SELECT COUNT(*) FROM semantic_sentence_cache").fetchone()[0]
    assert owners == {"open", "zh"} and n == update.sentences_embedded > 0
    assert not any(verify_chunks(load_documents(raw, "lib"), store).values())


def test_sentence_vectors_are_reused_from_the_cache_and_give_the_same_chunks(lib, tmp_path):
    raw, store, cache = lib
    first = run(raw, store, RecordingBackend(), cache)
    other_store = tmp_path / "other" / schema.CHUNK_STORE_FILE
    backend = RecordingBackend()
    second = run(raw, other_store, backend, cache)
    assert backend.seen == [] and second.sentences_embedded == 0
    assert second.sentences_from_cache == first.sentences_embedded
    assert chunk_rows(other_store) == chunk_rows(store)


def test_a_document_reclassified_restricted_loses_its_cached_sentence_vectors(lib):
    raw, store, cache = lib
    run(raw, store, RecordingBackend(), cache)
    with sqlite3.connect(cache) as conn:
        before = conn.execute("SELECT COUNT(*) FROM semantic_sentence_owner WHERE doc_id = 'open'").fetchone()[0]
    assert before > 0
    (raw / "open.md").write_text("---\ndoc_id: open\nsensitivity: RESTRICTED\n---\n" + OPEN_BODY, encoding="utf-8")
    backend = RecordingBackend()
    update = run(raw, store, backend, cache)
    assert "open" in update.changed and not any("Mitochondria" in t for t in backend.seen)
    with sqlite3.connect(cache) as conn:
        assert conn.execute("SELECT COUNT(*) FROM semantic_sentence_owner WHERE doc_id = 'open'").fetchone()[0] == 0
        # every window of the open document's text is gone, for every model
        left = conn.execute("SELECT COUNT(*) FROM semantic_sentence_cache").fetchone()[0]
        zh = conn.execute("SELECT COUNT(*) FROM semantic_sentence_owner WHERE doc_id = 'zh'").fetchone()[0]
    assert left == zh
    # a later run with the paragraph chunker and no backend still purges (the file exists)
    assert SentenceEmbeddings(None, "lib", cache).purge_documents(["zh"]) == zh


def test_switching_the_boundary_embedder_rechunks_every_open_document(lib):
    raw, store, cache = lib
    lexical = run(raw, store, None, cache)  # no backend configured: the offline fallback
    assert lexical.chunker == "semantic@1+lexical-tfidf-v1-d1024" + SETTINGS
    assert "offline fallback" in lexical.boundary_embedder
    again = run(raw, store, None, cache)
    assert again.unchanged == 3 and again.chunks_written == 0
    switched = run(raw, store, RecordingBackend(), cache)
    # the RESTRICTED document keeps its lexical boundaries: unchanged; the open ones are redone
    assert switched.unchanged - switched.rechunked_identical == 1
    assert len(switched.changed) + switched.rechunked_identical == 2
    assert {v for d, *_, v in chunk_rows(store) if d != "secret"} == {"1+deterministic-hash-v1-d64" + SETTINGS}


def test_boundary_embedder_lexical_never_calls_the_backend(lib):
    raw, store, cache = lib
    (raw / "_library.toml").write_text(DOCS["_library.toml"] + 'boundary_embedder = "lexical"\n', encoding="utf-8")
    backend = RecordingBackend()
    update = run(raw, store, backend, cache)
    assert backend.seen == []
    assert update.chunker == "semantic@1+lexical-tfidf-v1-d1024" + SETTINGS + ",boundary_embedder=lexical"
    assert 'boundary_embedder = "lexical"' in update.boundary_embedder
