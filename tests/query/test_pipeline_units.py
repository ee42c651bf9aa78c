"""Tier 1: the one fusion, the exact pruned BM25 blend, the stage registries, Explain."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_query.fusion import rrf_fuse, weighted_rrf
from ragspine_core.lexical.bm25 import BM25Index, blend_reference, build_bm25_arrays, search_blended
from ragspine_query.pipeline import Candidate, Explain, StageTrace, register_postprocessor, unregister_postprocessor
from ragspine_query.pipeline.plugins import registered_postprocessors
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_core.records import Chunk, Hit
from ragspine_query.retriever import MultiIndexRetriever


# ------------------------------------------------------------------ fusion
def test_weighted_rrf_numpy_and_generic_paths_agree_bit_for_bit():
    rng = np.random.default_rng(3)
    for _ in range(50):
        lists = [rng.permutation(40)[: rng.integers(0, 30)].astype(np.int64) for _ in range(rng.integers(1, 4))]
        w = [float(x) for x in rng.uniform(0.5, 2.0, len(lists))]
        rows, scores = weighted_rrf(lists, weights=w)
        ids, gscores = weighted_rrf([r.tolist() for r in lists], weights=w)
        assert rows.tolist() == ids and scores.tolist() == gscores


def test_weighted_rrf_weights_ties_and_names():
    ids, scores = weighted_rrf({"a": ["x", "y"], "b": ["y", "x"]}, weights={"b": 2.0})
    assert ids == ["y", "x"] and scores[0] == 2.0 / 61 + 1.0 / 62
    ids, _ = weighted_rrf({"a": [("c2", "lib1")], "b": [("c1", "lib2")]})
    assert ids == [("c1", "lib2"), ("c2", "lib1")]  # tie: chunk_id, then library
    assert rrf_fuse([["b", "a"], ["a", "b"]]) == {"a": 1 / 61 + 1 / 62, "b": 1 / 61 + 1 / 62}


# ------------------------------------------------------------------ exact pruned blend
@pytest.fixture(scope="module")
def two_fields():
    rng = np.random.default_rng(7)
    vocab = [f"t{i}" for i in range(300)]
    p = 1.0 / np.arange(1, 301) ** 1.1
    p /= p.sum()
    n_docs, row_doc, chunks = 400, [], []
    docs = [[] for _ in range(n_docs)]
    for d in range(n_docs):
        for _ in range(int(rng.integers(1, 4))):
            toks = list(rng.choice(vocab, size=int(rng.integers(3, 25)), p=p))
            chunks.append(toks)
            docs[d].extend(toks)
            row_doc.append(d)
    return (BM25Index(build_bm25_arrays(chunks)), BM25Index(build_bm25_arrays(docs)),
            np.asarray(row_doc, dtype=np.int64), vocab, rng)


@pytest.mark.parametrize("weight", [0.0, 2.0, 0.7])
@pytest.mark.parametrize("k", [1, 10, 100])
def test_search_blended_is_exactly_the_reference(two_fields, weight, k):
    chunk, doc, row_doc, vocab, rng = two_fields
    for i in range(150):
        q = list(rng.choice(vocab[:120], size=int(rng.integers(1, 6))))
        allowed = None if i % 3 else rng.random(chunk.n_rows) < 0.5
        ref = blend_reference(chunk, doc, row_doc, q, k, doc_weight=weight, allowed=allowed)
        got = search_blended(chunk, doc, row_doc, q, k, doc_weight=weight, allowed=allowed)
        assert got[0].tolist() == ref[0].tolist() and got[1].tobytes() == ref[1].tobytes(), q


# ------------------------------------------------------------------ explain
def test_explain_rows_table_and_restricted_view():
    ex = Explain("q", (StageTrace("channel", "bm25", 0.001, (Candidate(1, "c1", "lib", 2.5, "PUBLIC"),
                                                               Candidate(2, "c9", "lib", 1.0, "RESTRICTED"))),
                       StageTrace("mask", "filters", 0.0)))
    rows = ex.to_rows()
    assert [r["chunk_id"] for r in rows] == ["c1", "c9", None] and rows[0]["ms"] == 1.0
    assert "bm25" in ex.format_table() and "c1" in ex.format_table()
    assert "c9" not in ex.without_restricted().format_table()
    with pytest.raises(Exception):
        ex.query = "x"  # frozen


# ------------------------------------------------------------------ stages + multi-index
def _hit(cid: str, lib: str, score: float, sens: str = "PUBLIC") -> Hit:
    return Hit(Chunk(cid, lib, "d-" + cid, 0, "text " + cid, 0, 1, sensitivity=sens), score, {"bm25": score})


class FakeIndex:
    def __init__(self, lib: str, ids: list[str]) -> None:
        self.lib, self.ids, self.calls = lib, ids, 0

    def search(self, query, *, filters=None, top_k=10, include_restricted=True, explain=False):
        from ragspine_query.pipeline import SearchResult

        self.calls += 1
        return SearchResult([_hit(c, self.lib, 1.0 / (i + 1)) for i, c in enumerate(self.ids[:top_k])])


def test_multi_index_routing_fallback_and_provenance():
    a, b = FakeIndex("a", ["a1", "a2"]), FakeIndex("b", ["b1"])
    multi = MultiIndexRetriever({"b": b, "a": a}, router=lambda q: ["b"] if "only-b" in q else [])
    hits = multi.search("only-b please", top_k=5)
    assert [h.chunk.library_id for h in hits] == ["b"] and a.calls == 0
    hits = multi.search("anything", top_k=5)  # router returned nothing: every library
    assert [(h.chunk_id, h.chunk.library_id) for h in hits] == [("a1", "a"), ("b1", "b"), ("a2", "a")]
    assert hits[0].scores["fused"] == 1 / 61

    def boom(q):
        raise RuntimeError("router down")

    multi = MultiIndexRetriever({"a": a, "b": b}, router=boom)
    assert {h.chunk.library_id for h in multi.search("x")} == {"a", "b"}
    ex = multi.search("x", explain=True).explain
    assert ex.stages[0].stage == "route" and ex.stages[-1].name == "rrf(libraries)"
    multi = MultiIndexRetriever({"a": a, "b": b}, router=lambda q: ["nope"])
    assert {h.chunk.library_id for h in multi.search("x")} == {"a", "b"}


def test_registered_postprocessor_runs_and_restricted_is_stripped_after_it():
    def sneaky(query, hits):  # a plugin that (wrongly) lets a RESTRICTED hit in
        return [_hit("r1", "a", 9.0, "RESTRICTED"), *[h.with_score(h.score, seen=1.0) for h in hits]]

    register_postprocessor("sneaky", sneaky)
    try:
        assert "sneaky" in registered_postprocessors()
        res = QueryPipeline(FakeIndex("a", ["a1", "a2"])).run("q", top_k=5, explain=True)
        assert [h.chunk_id for h in res] == ["a1", "a2"] and all(h.scores["seen"] == 1.0 for h in res)
        assert [s.stage for s in res.explain.stages][-2:] == ["postprocess", "restricted_strip"]
        assert "r1" not in res.explain.format_table()
    finally:
        unregister_postprocessor("sneaky")
    assert "sneaky" not in registered_postprocessors()
