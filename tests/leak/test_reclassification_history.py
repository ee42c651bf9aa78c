"""Items 1 and 6 of issue 28: reclassification is keyed by content and history.

A snapshot that serves as open a text (or a document lineage) that became RESTRICTED
after it was built can be neither rolled back to, nor kept by a pin, nor opened
directly from its folder. Before the fix the guard compared ``doc_id``s with the
RESTRICTED-now set, so moving a file while marking it RESTRICTED (a new default
``doc_id``), or marking it and then deleting it, got past it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_index.publish import list_snapshots, pinned_snapshot, rollback
from ragspine_index.reclassification import unservable_count
from ragspine_core.errors import IndexNotFoundError, RagspineError
from ragspine_query.library import open_library
from ragspine_query.agent_api import build_narrative_retriever

SECRET_BODY = ("Supplier Quillfeather will be acquired by the group for twelve million euros. "
               "The board asked the team to keep the Quillfeather talks quiet until the close.\n")
OPEN_NOTE = "---\nsensitivity: PUBLIC\n---\n# Garden note\n\nThe office garden gets new benches in spring.\n"


def doc(sens: str, body: str = SECRET_BODY, title: str = "Supplier review") -> str:
    return f"---\nsensitivity: {sens}\n---\n# {title}\n\n{body}"


class Lib:
    def __init__(self, root: Path) -> None:
        self.raw = root / "raw" / "lib"
        self.raw.mkdir(parents=True)
        self.paths = LibraryPaths("lib", self.raw, root / "artifacts" / "lib")
        self.cache = root / "cache" / "embeddings.sqlite"
        (self.raw / "garden.md").write_text(OPEN_NOTE, encoding="utf-8")

    def write(self, rel: str, text: str) -> None:
        (self.raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.raw / rel).write_text(text, encoding="utf-8")

    def build(self) -> str:
        return build_library(self.paths, cache_path=self.cache).snapshot_id

    def served(self, query: str = "Quillfeather acquired") -> str:
        hits = build_narrative_retriever(self.paths.root, reranker=None, mode="bm25", glossary=None,
                                         embedding_backend=None).retrieve(query, top_k=10)
        return json.dumps([s.to_dict() for s in hits], ensure_ascii=False)


def _refused(lib: Lib, snapshot_id: str) -> None:
    before = os.readlink(lib.paths.current)
    with pytest.raises(RagspineError, match="RESTRICTED now") as err:
        rollback(lib.paths, snapshot_id)
    assert "Quillfeather" not in str(err.value) and "supplier" not in str(err.value).lower()
    assert os.readlink(lib.paths.current) == before, "a refused rollback changes nothing"
    assert "Quillfeather" not in lib.served()


def _old_folder_cannot_be_opened(lib: Lib, snapshot_id: str) -> None:
    with pytest.raises(IndexNotFoundError):
        open_library(lib.paths.snapshots / snapshot_id)


def test_move_and_mark_restricted_blocks_rollback_and_direct_opening(tmp_path):
    lib = Lib(tmp_path)
    lib.write("a/supplier.md", doc("PUBLIC"))
    first = lib.build()
    assert "Quillfeather" in lib.served()
    (lib.raw / "a" / "supplier.md").unlink()
    lib.write("b/renamed-supplier.md", doc("RESTRICTED"))  # a new default doc_id
    second = lib.build()
    assert first != second and "Quillfeather" not in lib.served()
    _refused(lib, first)
    _old_folder_cannot_be_opened(lib, first)
    hist = [json.loads(line) for line in (lib.paths.root / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    assert any(r["snapshot_id"] == first and r.get("quarantined") for r in hist)
    assert first not in {r["snapshot_id"] for r in list_snapshots(lib.paths)}


def test_mark_restricted_then_delete_blocks_rollback(tmp_path):
    lib = Lib(tmp_path)
    lib.write("supplier.md", doc("PUBLIC"))
    first = lib.build()
    lib.write("supplier.md", doc("RESTRICTED"))
    second = lib.build()
    (lib.raw / "supplier.md").unlink()
    third = lib.build()
    assert len({first, second, third}) == 3
    _refused(lib, first)
    rollback(lib.paths, second)  # serves the document as RESTRICTED: hidden, so allowed
    assert "Quillfeather" not in lib.served()


def test_move_rename_and_edit_still_blocks_by_sentence(tmp_path):
    lib = Lib(tmp_path)
    lib.write("supplier.md", doc("PUBLIC"))
    first = lib.build()
    (lib.raw / "supplier.md").unlink()
    # moved, renamed, re-titled and one sentence added: the chunk text differs, its sentences do not
    lib.write("x/y.md", doc("RESTRICTED", "Prepared for the board. " + SECRET_BODY, title="Memo"))
    lib.build()
    _refused(lib, first)


def test_a_pin_is_released_by_a_move_and_mark_and_history_records_it(tmp_path):
    lib = Lib(tmp_path)
    lib.write("a/supplier.md", doc("PUBLIC"))
    first = lib.build()
    lib.write("other.md", "---\nsensitivity: PUBLIC\n---\n# Other\n\nAn unrelated note about the canteen menu.\n")
    lib.build()
    rollback(lib.paths, first)
    assert pinned_snapshot(lib.paths) == first
    (lib.raw / "a" / "supplier.md").unlink()
    lib.write("b/moved.md", doc("RESTRICTED"))
    third = lib.build()
    assert pinned_snapshot(lib.paths) is None, "the pin was released"
    assert os.readlink(lib.paths.current).endswith(third)
    assert "Quillfeather" not in lib.served()
    last = [json.loads(line) for line in (lib.paths.root / "history.jsonl").read_text(encoding="utf-8").splitlines()
            if json.loads(line).get("run_id") != "quarantine"][-1]
    assert last["snapshot_id"] == third and last["held_by_pin"] is None
    assert last["pin_released"]["snapshot_id"] == first


def test_shared_boilerplate_and_declassification_do_not_block_a_legitimate_rollback(tmp_path):
    boiler = "This document is distributed under the group's standard notice for staff."
    lib = Lib(tmp_path)
    lib.write("notice.md", doc("PUBLIC", f"{boiler} The canteen opens at eight.\n", title="Canteen"))
    lib.write("secret.md", doc("RESTRICTED", f"{boiler} {SECRET_BODY}", title="Deal"))
    lib.write("memo.md", doc("RESTRICTED", "The Heronsgate plan is confidential and stays with the board.\n",
                             title="Heronsgate"))
    first = lib.build()
    # an open document changes, and a RESTRICTED one is declassified and then edited
    lib.write("notice.md", doc("PUBLIC", f"{boiler} The canteen opens at nine.\n", title="Canteen"))
    lib.write("memo.md", doc("PUBLIC", "The Heronsgate plan is confidential and stays with the board.\n",
                             title="Heronsgate"))
    second = lib.build()
    lib.write("memo.md", doc("PUBLIC", "The Heronsgate plan was announced to staff.\n", title="Heronsgate"))
    third = lib.build()
    assert len({first, second, third}) == 3
    assert unservable_count(lib.paths.snapshots / first, lib.paths.chunk_store) == 0
    assert unservable_count(lib.paths.snapshots / second, lib.paths.chunk_store) == 0
    rollback(lib.paths, first)
    rollback(lib.paths, second)
