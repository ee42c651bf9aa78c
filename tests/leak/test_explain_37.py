"""``explain`` counts only what the caller may see (issue 37): every stage of an explained
search without RESTRICTED rows reads the same on a library built with RESTRICTED
documents as on one built without them (the mask stage said ``240 of 263 rows``)."""

from __future__ import annotations

from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.leak.test_bm25_statistics import _queries, pair  # noqa: F401 - the module fixture


def _explained(root, query: str, filters=None):
    with open_library(root) as lib:
        result = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search(
            query, top_k=5, include_restricted=False, explain=True, filters=filters)
        return [(s.stage, s.name, s.detail, [(c.rank, c.chunk_id, round(c.score, 9)) for c in s.candidates])
                for s in result.explain.stages]


def test_every_explained_stage_equals_a_library_without_the_restricted_documents(pair):  # noqa: F811
    with_secret, without = pair
    for query in _queries()[:20]:
        got, want = _explained(with_secret, query), _explained(without, query)
        assert got == want, query
    mask = [s for s in _explained(with_secret, "merger") if s[0] == "mask"]
    assert mask and "rows allowed" in mask[0][2]


def test_a_filtered_explain_counts_visible_rows_only(pair):  # noqa: F811
    with_secret, without = pair
    filters = {"sensitivity": "PUBLIC"}
    assert _explained(with_secret, "board", filters) == _explained(without, "board", filters)


def test_the_manifest_lists_no_hash_of_a_restricted_document(pair):  # noqa: F811
    from ragspine_index.chunk_store import ChunkStore
    from ragspine_core import schema

    with_secret, _ = pair
    with open_library(with_secret) as lib:
        manifest, snapshot = lib.manifest, lib.snapshot_dir
    assert manifest["documents"]["s1"] is None and manifest["documents"]["s2"] is None
    assert manifest["documents"]["board"]  # open documents keep theirs
    with ChunkStore(with_secret / "chunk_store.sqlite") as store:
        hashes = {r[0] for r in store.execute_read(
            f"SELECT content_hash FROM {schema.DOCUMENT_TABLE} WHERE doc_id IN ('s1', 's2')")}
    text = (snapshot / "manifest.json").read_text()
    assert hashes and not any(h in text for h in hashes)
