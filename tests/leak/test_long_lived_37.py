"""A long-lived retriever notices a newer published snapshot (issue 37): a document the
newer snapshot withdraws or marks RESTRICTED stops being served by a retriever opened
before it, within ``RECHECK_SECONDS``, without reopening."""

from __future__ import annotations

import pytest

from ragspine_query import library as library_module
from ragspine_query.agent_api import build_narrative_retriever
from tests.leak.test_reclassification_history import OPEN_NOTE, Lib, doc


@pytest.fixture(autouse=True)
def _recheck_every_query(monkeypatch):
    monkeypatch.setattr(library_module, "RECHECK_SECONDS", 0.0, raising=False)


def _ids(retriever, query: str) -> set[str]:
    return {h["doc_id"] for h in retriever.retrieve(query, top_k=10)}


@pytest.mark.parametrize("change", ["marked", "deleted"])
def test_a_document_withdrawn_after_the_retriever_opened_is_not_served(tmp_path, change):
    lib = Lib(tmp_path)
    lib.write("supplier.md", doc("PUBLIC"))
    lib.write("garden2.md", OPEN_NOTE.replace("benches", "benches near the Quillfeather supplier sign"))
    lib.build()
    retriever = build_narrative_retriever(lib.paths.root, reranker=None, mode="bm25", glossary=None,
                                          embedding_backend=None)
    assert "supplier" in _ids(retriever, "Quillfeather supplier")
    if change == "marked":
        lib.write("supplier.md", doc("RESTRICTED"))
    else:
        (lib.raw / "supplier.md").unlink()
    lib.build()
    served = _ids(retriever, "Quillfeather supplier")
    assert "supplier" not in served
    if change == "deleted":  # the old snapshot stays servable: the rest still answers
        assert "garden2" in served
