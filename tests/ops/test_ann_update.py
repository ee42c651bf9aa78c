"""Updating the ANN index after a small change instead of rebuilding it (``dense/ann.py``).

A re-ingest that changes a few rows deletes the removed rows from the published index,
renumbers the kept ones and inserts the new ones; the labels stay row positions, so the
reader is unchanged. Checked here: every row is found at its own new position, recall
against the exact scan, determinism, the share above which a full build runs again, and
that a row which is RESTRICTED now always forces a full build (no deleted node of its
vector may survive in the file).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ragspine_query import open_library
from ragspine_core.dense.ann import (ANN_INDEX_FILE, ANN_PARAMS_FILE, MAX_UPDATE_SHARE, ROW_KEYS_FILE, AnnConfig,
                                      AnnIndex, AnnParams, ann_delta, build_ann_index, engine_available,
                                      update_ann_index)
from ragspine_core.dense.vector_store import top_k_cosine
from tests.conftest import SAMPLE_LIBRARY, copy_sample_data

pytestmark = pytest.mark.skipif(not engine_available("usearch"),
                                reason="usearch is not installed (pip install 'ragspine[ann]'); the exact scan is used")


def _unit(rng: np.random.Generator, n: int, dim: int = 32) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _keys(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.array([rng.bytes(16) for _ in range(n)], dtype="S16")


def test_delta_pairs_equal_keys_in_row_order() -> None:
    old = np.array([b"a", b"b", b"a", b"c"], dtype="S16")
    new = np.array([b"a", b"d", b"a", b"a", b"b"], dtype="S16")
    d = ann_delta(old, new)
    assert d.kept_old.tolist() == [0, 2, 1] and d.kept_new.tolist() == [0, 2, 4]
    assert d.removed.tolist() == [3] and d.added.tolist() == [1, 3] and d.changed == 3


def test_an_update_finds_every_row_at_its_new_position(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    old_vectors, old_keys = _unit(rng, 3000), _keys(rng, 3000)
    base = tmp_path / "base"
    base.mkdir()
    build_ann_index(old_vectors, base, AnnParams(m=16, ef_construction=64, ef_search=64))
    # 1% of the rows go, 1% new ones come, and every row moves (new rows are spread between them)
    keep = np.ones(3000, dtype=bool)
    keep[rng.choice(3000, 30, replace=False)] = False
    new_vectors, new_keys = list(old_vectors[keep]), list(old_keys[keep])
    fresh_vectors, fresh_keys = _unit(rng, 30), _keys(rng, 30)
    for at, v, k in sorted(zip(rng.choice(len(new_vectors), 30, replace=False).tolist(), fresh_vectors, fresh_keys),
                           key=lambda t: -t[0]):
        new_vectors.insert(at, v)
        new_keys.insert(at, k)
    vectors, keys = np.stack(new_vectors), np.array(new_keys, dtype="S16")
    delta = ann_delta(old_keys, keys)
    assert delta.changed == 60 and (delta.kept_old != delta.kept_new).any()

    outs = []
    for name in ("u1", "u2"):
        out = tmp_path / name
        out.mkdir()
        meta = update_ann_index(base, delta, vectors, out)
        outs.append((out / ANN_INDEX_FILE).read_bytes())
    assert outs[0] == outs[1], "an update is deterministic for a given base and delta"
    assert meta["count"] == 3000 and meta["rows_changed_since_full"] == 60
    assert json.loads((base / ANN_PARAMS_FILE).read_text())["count"] == 3000  # the base is untouched

    index = AnnIndex(tmp_path / "u1")
    top1 = [int(index.search(vectors[i], 1)[0][0]) for i in range(len(vectors))]
    assert top1 == list(range(len(vectors))), "each row is found under its new position"
    hits = 0
    for q in _unit(rng, 100):
        exact, _ = top_k_cosine(vectors, q, 10)
        got, _ = index.search(q, 10)
        hits += len(set(exact.tolist()) & set(got.tolist()))
    assert hits / 1000 >= 0.95


def _library(tmp_path: Path):
    from ragspine_index.artifacts import LibraryPaths

    data = copy_sample_data(tmp_path / "data")
    raw = data / "raw" / SAMPLE_LIBRARY
    return raw, LibraryPaths(SAMPLE_LIBRARY, raw, data / "artifacts" / SAMPLE_LIBRARY), data / "cache" / "embeddings.sqlite"


def _build(paths, cache: Path):
    from ragspine_index.pipeline import build_library

    return build_library(paths, embedding="deterministic", cache_path=cache, ann=AnnConfig(min_vectors=10))


def _small_change(raw: Path) -> None:
    """One new two-paragraph document, and one short document deleted."""
    (raw / "acme-nordic-note.md").write_text(
        "---\ndoc_id: acme-nordic-note\ntitle: Nordic distributor note\nsensitivity: INTERNAL\n---\n\n"
        "The distributor review was extended to Norway, Sweden and Finland in the second half.\n\n"
        "Two distributors in Finland were placed on a remediation plan after the audit.\n", encoding="utf-8")
    (raw / "acme-cn-hr-faq.md").unlink()


def _ann_meta(snapshot_dir: str) -> dict:
    return json.loads((Path(snapshot_dir) / "ann" / ANN_PARAMS_FILE).read_text(encoding="utf-8"))


def _check_against_exact(snapshot_dir: str) -> None:
    with open_library(Path(snapshot_dir)) as lib:
        emb = lib.embeddings()
        index = AnnIndex(lib.artifact_path("ann"))
        assert index.count == emb.vectors.shape[0]
        assert not lib.restricted_mask()[np.asarray(emb.rows)].any()
        for i in range(emb.vectors.shape[0]):
            exact, _ = top_k_cosine(emb.vectors, np.asarray(emb.vectors[i]), 5)
            got, _ = index.search(np.asarray(emb.vectors[i]), 5)
            assert got.tolist() == exact.tolist()


def test_a_small_change_updates_and_a_new_restricted_document_rebuilds(tmp_path: Path) -> None:
    raw, paths, cache = _library(tmp_path)
    first = _build(paths, cache)
    assert "rows_changed_since_full" not in _ann_meta(first.snapshot_dir)  # a full build
    assert (Path(first.snapshot_dir) / "ann" / ROW_KEYS_FILE).is_file()

    _small_change(raw)
    second = _build(paths, cache)
    meta = _ann_meta(second.snapshot_dir)
    n = second.embeddings.count
    assert n != first.embeddings.count
    assert 2 <= meta["rows_changed_since_full"] <= MAX_UPDATE_SHARE * n, meta
    _check_against_exact(second.snapshot_dir)

    other = raw / "acme-cn-product-launch-2024.md"
    text = other.read_text(encoding="utf-8")
    assert re.search(r"^sensitivity: (INTERNAL|PUBLIC)$", text, flags=re.M)
    other.write_text(re.sub(r"^sensitivity: \w+$", "sensitivity: RESTRICTED", text, count=1, flags=re.M), encoding="utf-8")
    third = _build(paths, cache)
    assert third.embeddings.count < n
    # within the share an update would have run: only the RESTRICTED rule makes this a full build
    assert meta["rows_changed_since_full"] + (n - third.embeddings.count) <= MAX_UPDATE_SHARE * n
    assert "rows_changed_since_full" not in _ann_meta(third.snapshot_dir), "RESTRICTED rows force a full build"
    _check_against_exact(third.snapshot_dir)


def test_past_the_share_the_index_is_built_afresh(tmp_path: Path, monkeypatch) -> None:
    from ragspine_index.steps import chunk_embeddings as emb_mod

    raw, paths, cache = _library(tmp_path)
    _build(paths, cache)
    monkeypatch.setattr(emb_mod, "MAX_UPDATE_SHARE", 0.0)
    _small_change(raw)
    again = _build(paths, cache)
    assert "rows_changed_since_full" not in _ann_meta(again.snapshot_dir)
    _check_against_exact(again.snapshot_dir)


def test_a_document_moved_renamed_and_marked_restricted_rebuilds(tmp_path: Path) -> None:
    """Issue 28 item 8: a new doc_id (the file moved, its doc_id line dropped) does not hide
    that the removed rows' text is RESTRICTED now; the update would keep their vectors."""
    raw, paths, cache = _library(tmp_path)
    first = _build(paths, cache)
    n = first.embeddings.count
    other = raw / "acme-cn-product-launch-2024.md"
    text = re.sub(r"^doc_id:.*\n", "", other.read_text(encoding="utf-8"), flags=re.M)
    text = re.sub(r"^title:.*\n", "title: Moved memo\n", text, count=1, flags=re.M)
    other.unlink()
    (raw / "moved").mkdir()
    (raw / "moved" / "memo.md").write_text(
        re.sub(r"^sensitivity: \w+$", "sensitivity: RESTRICTED", text, count=1, flags=re.M), encoding="utf-8")
    second = _build(paths, cache)
    assert second.embeddings.count < n
    assert (n - second.embeddings.count) <= MAX_UPDATE_SHARE * n, "within the share an update would have run"
    assert "rows_changed_since_full" not in _ann_meta(second.snapshot_dir), "the moved RESTRICTED rows force a full build"
    _check_against_exact(second.snapshot_dir)
