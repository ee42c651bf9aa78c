"""Tier 2: incremental chunking through the plain build steps.

``load_documents`` + ``update_chunk_store`` are exactly what the ``documents`` and
``chunks`` assets call; here they run without Dagster on a small library.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_index.steps.chunks import update_chunk_store, verify_chunks
from ragspine_index.steps.documents import load_documents
from ragspine_core import schema
from ragspine_core.chunk_rows import ChunkStoreReader

DOCS = {
    "alpha.md": "---\ndoc_id: alpha\ntitle: Alpha\nentity: ACME_CN\nperiod: 2024Q3\n---\n# Alpha\n\nRevenue fell 11.4% in the quarter.\n\nMargins narrowed.\n",
    "beta.md": "---\ndoc_id: beta\nentity: ACME_US\nsensitivity: PUBLIC\n---\nBeta paragraph one.\n\nBeta paragraph two.\n",
    "notes/gamma.txt": "Gamma has no front matter at all.\n",
    "zh.md": "---\ndoc_id: zh\nlanguage: zh\n---\n艾克美中国营收下滑。\n\n毛利率下降。\n",
}


def write_library(root: Path, docs: dict[str, str]) -> Path:
    for rel, text in docs.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def versions(store_path: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    with ChunkStoreReader(store_path) as r:
        for row in r.execute_read(f"SELECT doc_id, version FROM {schema.CHUNK_TABLE} WHERE active = 1"):
            out.setdefault(row["doc_id"], set()).add(row["version"])
    return out


def active_ids(store_path: Path, doc_id: str) -> list[str]:
    with ChunkStoreReader(store_path) as r:
        return [c.chunk_id for c in r.iter_chunks(doc_id=doc_id)]


@pytest.fixture
def library(tmp_path) -> tuple[Path, Path]:
    raw = write_library(tmp_path / "raw" / "lib", DOCS)
    store = tmp_path / "artifacts" / "lib" / schema.CHUNK_STORE_FILE
    first = update_chunk_store(load_documents(raw, "lib"), store, run_id="run-1")
    assert sorted(first.added) == ["alpha", "beta", "notes-gamma", "zh"]
    assert first.changed == () and first.removed == () and first.unchanged == 0
    return raw, store


def test_unchanged_library_rechunks_nothing(library):
    raw, store = library
    before = versions(store)
    again = update_chunk_store(load_documents(raw, "lib"), store, run_id="run-2")
    assert (again.added, again.changed, again.removed, again.chunks_written) == ((), (), (), 0)
    assert again.unchanged == 4
    assert versions(store) == before == {d: {1} for d in ("alpha", "beta", "notes-gamma", "zh")}


def test_changing_one_document_rechunks_only_it_and_bumps_only_its_version(library):
    raw, store = library
    beta_ids = active_ids(store, "beta")
    (raw / "alpha.md").write_text(DOCS["alpha.md"] + "\nA new closing paragraph.\n", encoding="utf-8")
    update = update_chunk_store(load_documents(raw, "lib"), store, run_id="run-2")
    assert update.changed == ("alpha",)
    assert update.added == () and update.removed == () and update.unchanged == 3
    assert versions(store) == {"alpha": {2}, "beta": {1}, "notes-gamma": {1}, "zh": {1}}
    assert active_ids(store, "beta") == beta_ids
    with ChunkStoreReader(store) as r:
        runs = {row["doc_id"]: row["run_id"] for row in r.execute_read(
            f"SELECT doc_id, run_id FROM {schema.CHUNK_TABLE} WHERE active = 1")}
    assert runs == {"alpha": "run-2", "beta": "run-1", "notes-gamma": "run-1", "zh": "run-1"}


def test_metadata_only_edit_counts_as_a_change(library):
    raw, store = library
    (raw / "beta.md").write_text(DOCS["beta.md"].replace("ACME_US", "ACME_EU"), encoding="utf-8")
    update = update_chunk_store(load_documents(raw, "lib"), store)
    assert update.changed == ("beta",)
    with ChunkStoreReader(store) as r:
        assert {c.entity for c in r.iter_chunks(doc_id="beta")} == {"ACME_EU"}


def test_deleting_a_file_withdraws_its_chunks(library):
    raw, store = library
    (raw / "notes" / "gamma.txt").unlink()
    update = update_chunk_store(load_documents(raw, "lib"), store)
    assert update.removed == ("notes-gamma",)
    assert active_ids(store, "notes-gamma") == []
    assert set(versions(store)) == {"alpha", "beta", "zh"}
    assert update.n_active_docs == 3


def test_a_file_that_becomes_broken_keeps_its_previous_chunks(library):
    raw, store = library
    kept = active_ids(store, "beta")
    (raw / "beta.md").write_bytes(b"---\ndoc_id: beta\n---\nbroken \xff\xfe bytes\n")
    docs = load_documents(raw, "lib")
    assert docs.error_paths == ("beta.md",)
    assert any("beta.md" in e and "UTF-8" in e for e in docs.errors)
    update = update_chunk_store(docs, store)
    assert update.kept_on_error == ("beta",)
    assert update.removed == ()
    assert active_ids(store, "beta") == kept
    assert verify_chunks(docs, store) == {"substring": [], "unique_ids": [], "locators": []}


def test_fixing_the_broken_file_again_is_unchanged(library):
    raw, store = library
    (raw / "beta.md").write_text("---\nbroken: [\n", encoding="utf-8")  # front matter never closed
    update_chunk_store(load_documents(raw, "lib"), store)
    (raw / "beta.md").write_text(DOCS["beta.md"], encoding="utf-8")
    update = update_chunk_store(load_documents(raw, "lib"), store)
    assert update.changed == () and update.unchanged == 4
    assert versions(store)["beta"] == {1}


def test_active_hash_tracks_the_active_set(library):
    raw, store = library
    h1 = update_chunk_store(load_documents(raw, "lib"), store).active_hash
    h2 = update_chunk_store(load_documents(raw, "lib"), store).active_hash
    assert h1 == h2
    (raw / "zh.md").write_text(DOCS["zh.md"] + "\n新增一段。\n", encoding="utf-8")
    assert update_chunk_store(load_documents(raw, "lib"), store).active_hash != h1


def test_chunks_are_substrings_of_their_source(library):
    raw, store = library
    docs = load_documents(raw, "lib")
    bodies = {d.doc_id: d.body for d in docs.documents}
    with ChunkStoreReader(store) as r:
        chunks = r.iter_chunks()
    assert chunks
    for c in chunks:
        assert bodies[c.doc_id][c.start:c.end] == c.text
        assert c.text in c.index_text  # contextual header is prepended to index text only
    assert verify_chunks(docs, store) == {"substring": [], "unique_ids": [], "locators": []}


def test_chunk_ids_are_deterministic_content_hashes(tmp_path):
    raw = write_library(tmp_path / "raw" / "lib", DOCS)
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    update_chunk_store(load_documents(raw, "lib"), a, run_id="x")
    update_chunk_store(load_documents(raw, "lib"), b, run_id="y")
    for doc_id in ("alpha", "beta", "notes-gamma", "zh"):
        ids = active_ids(a, doc_id)
        assert ids == active_ids(b, doc_id)
        assert all(len(i) == 64 and int(i, 16) >= 0 for i in ids)
