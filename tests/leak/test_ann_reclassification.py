"""Item 8 of issue 28: the ANN update never keeps a vector of RESTRICTED text.

An ANN index updated in place keeps a deleted node's vector in its file, so a removed
row whose text belongs to a RESTRICTED document must force a full build. Before the fix
the rule compared the removed rows with the index texts of the documents that are
RESTRICTED now *by doc_id*: a document moved and renamed while being marked RESTRICTED
(a new default doc_id, a new contextual index text) slipped past it and its old vector
stayed in the updated index. The decision is tested directly (usearch is optional);
``tests/ops/test_ann_update.py`` runs it end to end where usearch is installed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.steps.chunk_embeddings import ann_update_allowed, restricted_text_hashes, text_hash
from ragspine_index.pipeline import build_library
from ragspine_query.library import open_library

BODY = ("Supplier Quillfeather will be acquired by the group for twelve million euros. "
        "The board asked the team to keep the talks quiet until the close.\n")


def _keys(snapshot_dir: Path) -> set[bytes]:
    with open_library(snapshot_dir) as lib:
        texts = [r[0] for r in lib.execute_read(
            "SELECT index_text FROM narrative_chunk WHERE upper(sensitivity) != 'RESTRICTED' ORDER BY row_idx")]
    return {bytes.fromhex(text_hash(t)[:32]) for t in texts}


def _setup(tmp_path: Path):
    raw = tmp_path / "raw" / "lib"
    raw.mkdir(parents=True)
    for i in range(4):
        (raw / f"open{i}.md").write_text(f"---\nsensitivity: PUBLIC\n---\n# Note {i}\n\nThe canteen menu number {i} "
                                         "changes every week for all staff.\n", encoding="utf-8")
    (raw / "a").mkdir()
    (raw / "a" / "supplier.md").write_text(f"---\nsensitivity: PUBLIC\n---\n# Supplier review\n\n{BODY}", encoding="utf-8")
    paths = LibraryPaths("lib", raw, tmp_path / "artifacts" / "lib")
    cache = tmp_path / "cache" / "embeddings.sqlite"
    return raw, paths, cache


def _removed_after(paths: LibraryPaths, cache: Path, change) -> tuple[np.ndarray, set[str]]:
    before = build_library(paths, embedding="deterministic", cache_path=cache)
    old = _keys(Path(before.snapshot_dir))
    change()
    after = build_library(paths, embedding="deterministic", cache_path=cache)
    removed = np.array(sorted(old - _keys(Path(after.snapshot_dir))), dtype="S16")
    return removed, set(restricted_text_hashes(paths.chunk_store))


def test_move_rename_and_mark_restricted_forces_a_full_build(tmp_path):
    raw, paths, cache = _setup(tmp_path)

    def move_and_mark():
        (raw / "a" / "supplier.md").unlink()
        (raw / "b").mkdir()
        (raw / "b" / "memo.md").write_text(f"---\nsensitivity: RESTRICTED\n---\n# Memo\n\n{BODY}", encoding="utf-8")

    removed, restricted_hashes = _removed_after(paths, cache, move_and_mark)
    assert removed.size, "the moved document's old row left the vectors"
    # by hash alone (the old rule) the update would be allowed: the doc_id and index text are new
    assert ann_update_allowed(removed, restricted_hashes, None)
    assert not ann_update_allowed(removed, restricted_hashes, paths.chunk_store)


def test_an_open_edit_still_updates(tmp_path):
    raw, paths, cache = _setup(tmp_path)

    def edit():
        (raw / "open1.md").write_text("---\nsensitivity: PUBLIC\n---\n# Note 1\n\nThe canteen now opens at nine "
                                      "on weekdays.\n", encoding="utf-8")

    removed, restricted_hashes = _removed_after(paths, cache, edit)
    assert removed.size
    assert ann_update_allowed(removed, restricted_hashes, paths.chunk_store)
