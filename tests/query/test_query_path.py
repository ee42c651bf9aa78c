"""The query path the benchmark's ``query-path`` engine times (``HybridRetriever`` in BM25
mode over a published library) returns exactly what the general pipeline returns: the
one-channel fast path and its lazily filled hits are a shortcut, not another ranking."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragspine_core.lexical.bm25 import BM25Index, build_bm25_arrays, search_blended
from ragspine_core.records import Hit, is_restricted

N_DOCS = 600


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A library built by the real indexing steps: multi-paragraph documents (several
    chunks each, so the document field matters), every 7th document RESTRICTED."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_query.library import open_library

    root = tmp_path_factory.mktemp("qpath")
    raw = root / "raw" / "qpath"
    raw.mkdir(parents=True)
    (raw / "_library.toml").write_text('max_chars = 300\noverlap_chars = 0\nanalyzer = "spec"\n', encoding="utf-8")
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(400)]
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    with open(raw / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d in range(N_DOCS):
            paras = ["  ".join([" ".join(rng.choice(vocab, size=int(rng.integers(8, 30)), p=p))])
                     for _ in range(int(rng.integers(1, 4)))]
            f.write(json.dumps({"doc_id": f"d{d:04d}", "title": " ".join(rng.choice(vocab, size=2)),
                                "text": "\n\n".join(paras),
                                "sensitivity": "RESTRICTED" if d % 7 == 3 else "INTERNAL"}) + "\n")
    res = build_library(LibraryPaths("qpath", raw, root / "artifacts" / "qpath"), embedding="none",
                        cache_path=root / "cache.sqlite", run_id="test-query-path")
    lib = open_library(res.snapshot_dir)
    assert lib.n_chunks > N_DOCS  # several chunks per document
    queries = [" ".join(rng.choice(vocab, size=int(rng.integers(1, 6)), p=p)) for _ in range(120)]
    queries += ["w1 w2 w1", "w399 nosuchword", "nosuchword", "W3 w3 w3"]
    yield lib, queries
    lib.close()


def _bm25(lib):
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    return HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))


def _view(hits) -> list[tuple]:
    return [(h.row, h.chunk_id, h.score, dict(h.scores)) for h in hits]


def test_fast_path_returns_the_general_pipelines_hits(library):
    lib, queries = library
    r = _bm25(lib)
    assert [c.name for c in r.channels if not getattr(c, "on_demand", False)] == ["bm25"]
    checked = 0
    for q in queries:
        for top_k in (1, 10, 25):
            fast = r.search(q, top_k=top_k)
            general = r.search(q, top_k=top_k, explain=True)  # the tracer takes the general fusion path
            assert _view(fast) == _view(general), q
            assert all(type(h) is Hit for h in fast) and all(type(h) is Hit for h in general)  # one hit type
            # chunks load on first use and are the chunks of those rows
            assert [h.chunk for h in fast] == [h.chunk for h in general]
            checked += bool(fast)
    assert checked > 100


def test_hits_follow_the_two_field_bm25_ranking(library):
    """The index-time blend adds chunk + 2 x document impacts before rounding to float32,
    the query-time two-field path after: equal scores within float32 rounding, the same
    rows except where two of them tie within that rounding."""
    lib, queries = library
    r = _bm25(lib)
    row_doc = np.asarray(lib.row_doc)
    for q in queries:
        hits = r.search(q, top_k=10)
        rows, scores = search_blended(lib.bm25, lib.bm25_doc, row_doc, lib.analyzer(q), 10, doc_weight=2.0)
        got = np.asarray([h.scores["bm25"] for h in hits], dtype=np.float32)
        np.testing.assert_allclose(got, scores, rtol=1e-5, atol=1e-6)
        if [h.row for h in hits] != rows.tolist():
            assert np.allclose(np.sort(got), np.sort(scores), rtol=1e-5), q
        assert [h.score for h in hits] == [1.0 / (60 + i) for i in range(1, len(hits) + 1)]


def test_restricted_rows_are_masked_without_changing_any_score(library):
    lib, queries = library
    r = _bm25(lib)
    sens = lib.column("sensitivity")
    stripped_any = False
    for q in queries:
        deep = [h for h in r.search(q, top_k=200) if not is_restricted(sens[h.row])]
        open_hits = r.search(q, top_k=10, include_restricted=False)
        assert not any(h.chunk.is_restricted for h in open_hits)
        assert [(h.row, h.scores["bm25"]) for h in open_hits] == [(h.row, h.scores["bm25"]) for h in deep[:10]]
        stripped_any = stripped_any or any(is_restricted(sens[h.row]) for h in r.search(q, top_k=10))
    assert stripped_any  # some query ranks a RESTRICTED chunk in its top 10 when it is not masked


def test_a_lazily_filled_hit_is_a_plain_hit(library):
    lib, _ = library
    r = _bm25(lib)
    hits = r.search("w1 w2 w5", top_k=3)
    general = r.search("w1 w2 w5", top_k=3, explain=True)
    h = hits[0]
    assert type(h) is Hit and not hasattr(type(h), "__getattr__")
    assert h.chunk_id == general[0].chunk_id == h.chunk.chunk_id
    assert h.scores is h.scores  # one dict, filled once
    assert list(h.scores) == ["bm25", "vector", "fused"]
    assert h == general[0] and hits == general
    moved = h.with_score(0.5, fused=0.5)
    assert moved.score == 0.5 and moved.scores["bm25"] == h.scores["bm25"] and moved.chunk == h.chunk
    with pytest.raises(AttributeError):
        h.no_such_field  # noqa: B018
    assert repr(h).startswith("Hit(chunk=Chunk(")
    with pytest.raises(AttributeError):
        h.score = 1.0  # frozen
    import pickle

    back = pickle.loads(pickle.dumps(h))
    assert type(back) is Hit and back == h and back.row == h.row and back.scores == h.scores


def test_lookup_is_term_ids_and_spans_in_one_pass():
    index = BM25Index(build_bm25_arrays([["a", "b", "b"], ["b", "c"], ["c"]]))
    for tokens in (["b", "zz", "a", "b"], [], ["zz"], ["c", "c"]):
        ids, spans = index._lookup(tokens)
        assert ids == index.term_ids(tokens)
        assert spans == index._spans(ids)[0]
    assert "zz" not in index._known  # unknown tokens are not remembered
