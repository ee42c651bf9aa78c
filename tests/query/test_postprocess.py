"""Post-processing: MMR over the chunk vectors, lost-in-the-middle, extractive compression (prompt_text only)."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_query.postprocess import (ExtractiveCompressor, LostInMiddlePostProcessor, MMRPostProcessor, VectorLookup,
                                        compress_text, lost_in_middle_order, make_postprocessor, mmr_order)
from ragspine_query.postprocess.compress import sentences
from ragspine_core.records import Chunk, Hit, to_snippet
from tests.query.qi_library import shared_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


def _hit(cid: str, text: str, score: float) -> Hit:
    return Hit(Chunk(cid, "lib", "d", 0, text, 0, len(text)), score, {"fused": score})


def test_mmr_order_prefers_a_diverse_second_pick():
    rel = np.array([1.0, 0.95, 0.9])
    sim = np.array([[1, 0.99, 0.1], [0.99, 1, 0.1], [0.1, 0.1, 1.0]])
    assert mmr_order(rel, sim, lam=1.0) == [0, 1, 2]
    assert mmr_order(rel, sim, lam=0.5) == [0, 2, 1]


def test_mmr_uses_the_stored_chunk_vectors(sample):
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever

    with open_library(sample) as lib:
        r = HybridRetriever(lib)
        hits = list(r.search("Acme China revenue 2024", top_k=30))
        lookup = VectorLookup.of_source(r)
        mat, has = lookup.vectors(hits)
        emb = lib.embeddings()
        row = {cid: i for i, cid in enumerate(lib.chunk_ids())}
        i0 = int(np.searchsorted(np.asarray(emb.rows), row[hits[0].chunk_id]))
        v = np.asarray(emb.vectors[i0], dtype=np.float32)
        assert has.all() and np.allclose(mat[0], v / np.linalg.norm(v), atol=1e-6)
        out = MMRPostProcessor(lookup, lam=0.3)("q", hits)
        assert sorted(h.chunk_id for h in out) == sorted(h.chunk_id for h in hits) and out[0] is hits[0]
        assert [h.chunk_id for h in out] != [h.chunk_id for h in hits]
        assert MMRPostProcessor(lookup, lam=1.0)("q", hits) == hits
    with pytest.raises(ConfigError):
        MMRPostProcessor(None, lam=1.5)


def test_mmr_without_vectors_falls_back_to_token_overlap():
    hits = [_hit("a", "alpha beta gamma", 1.0), _hit("b", "alpha beta gamma", 0.99), _hit("c", "delta epsilon", 0.9)]
    assert [h.chunk_id for h in MMRPostProcessor(None, lam=0.5)("q", hits)] == ["a", "c", "b"]


def test_lost_in_the_middle_puts_the_best_at_both_ends():
    assert lost_in_middle_order(5) == [0, 2, 4, 3, 1] and lost_in_middle_order(0) == []
    hits = [_hit(str(i), "x", 1.0 - i / 10) for i in range(4)]
    assert [h.chunk_id for h in LostInMiddlePostProcessor()("q", hits)] == ["0", "2", "3", "1"]


def test_compression_writes_prompt_text_only_and_citations_stay_exact():
    body = "Acme China revenue rose 8% in 2024. The weather was mild. Margins improved on revenue mix."
    hit = _hit("a", body, 1.0)
    out = ExtractiveCompressor()("Acme China revenue", [hit])[0]
    snip, orig = to_snippet(out), to_snippet(hit)
    assert snip["prompt_text"] == "Acme China revenue rose 8% in 2024. Margins improved on revenue mix."
    assert snip["text"] == body and snip["span"] == orig["span"] and snip["locator"] == orig["locator"]
    assert compress_text("unrelated words", body) == body  # nothing shared: unchanged


def test_make_postprocessor_parses_specs_and_rejects_unknown_names():
    chain = make_postprocessor("mmr:0.5, lost_in_middle ,compress")
    assert [n for n, _ in chain] == ["mmr", "lost_in_middle", "compress"] and chain[0][1].lam == 0.5
    assert make_postprocessor("") == [] and make_postprocessor("none") == []
    with pytest.raises(ConfigError, match="allowed: mmr"):
        make_postprocessor("mmr,bogus")
    with pytest.raises(ConfigError):
        make_postprocessor("mmr:abc")


def _is_extractive(prompt: str, text: str) -> bool:
    """Whether ``prompt`` is a subsequence of ``sentences(text)`` joined by single spaces (a
    re-split of ``prompt`` would merge a heading with the sentence after it)."""
    pos = 0
    for unit in sentences(text):
        if prompt.startswith(unit, pos):
            pos += len(unit)
            if pos == len(prompt):
                return True
            if prompt[pos] != " ":
                return False
            pos += 1
    return pos >= len(prompt)


def test_postprocessors_run_after_rerank_in_the_pipeline_and_show_in_explain(sample):
    from ragspine_query.intelligence import QueryIntelligence
    from ragspine_query.agent_api import build_narrative_retriever
    from ragspine_core.settings import Settings

    r = build_narrative_retriever(sample, reranker=None, settings=Settings(postprocessor="mmr,lost_in_middle,compress"))
    out = r.retrieve("Acme US gross margin 2024", top_k=5, explain=True)
    names = [(s.stage, s.name) for s in out.explain.stages]
    i = names.index(("postprocess", "mmr"))
    assert names[i + 1:i + 3] == [("postprocess", "lost_in_middle"), ("postprocess", "compress")]
    assert names[i + 3][0] == "restricted_strip" and len(out) == 5
    compressed = [s for s in out if "prompt_text" in s]
    assert compressed and all(s["prompt_text"] != s["text"] for s in compressed)
    for s in compressed:  # extractive: the prompt text is sentences of the cited text, in order, joined by spaces
        assert _is_extractive(s["prompt_text"], s["text"]), s["prompt_text"]
    with pytest.raises(ConfigError):
        QueryIntelligence(postprocessor="nope")


class _Vectors:
    """A library's stored vectors, as ``Library.embeddings()`` gives them."""

    def __init__(self, model_id: str, vectors: np.ndarray) -> None:
        self.model_id, self.vectors, self.rows = model_id, vectors, np.arange(vectors.shape[0])


class _Lib:
    def __init__(self, ids: list[str], emb: _Vectors) -> None:
        self._ids, self._emb = ids, emb

    def chunk_ids(self) -> list[str]:
        return self._ids

    def embeddings(self) -> _Vectors:
        return self._emb


def test_mmr_over_libraries_of_different_vector_sizes_compares_within_one_space_only():
    """Issue 37: two libraries with 3- and 5-dimensional vectors crashed MMR; vectors of
    different spaces are not comparable, so such a pair falls back to token overlap."""
    a = _Lib(["a1", "a2"], _Vectors("m-small", np.array([[1, 0, 0], [1, 0, 0]], dtype=np.float32)))
    b = _Lib(["b1"], _Vectors("m-large", np.array([[1, 0, 0, 0, 0]], dtype=np.float32)))
    lookup = VectorLookup({"A": a, "B": b})

    def hit(cid: str, lib: str, text: str, score: float) -> Hit:
        return Hit(Chunk(cid, lib, "d", 0, text, 0, len(text)), score, {"fused": score})

    hits = [hit("a1", "A", "harbour cranes rotterdam", 1.0), hit("a2", "A", "electric vessels", 0.99),
            hit("b1", "B", "harbour cranes rotterdam", 0.98)]
    mat, has, space = lookup.vectors_and_spaces(hits)
    assert mat is not None and mat.shape == (3, 5) and has.all() and space[0] == space[1] != space[2]
    # a2 is a vector twin of a1 (same space); b1 is a token twin of a1 (other space)
    order = [h.chunk_id for h in MMRPostProcessor(lookup, lam=0.5, top_n=None)("q", hits)]
    assert order[0] == "a1" and len(order) == 3
    sim_b1 = MMRPostProcessor(lookup, lam=0.0)("q", [hits[0], hits[2]])  # pure diversity: runs, no crash
    assert [h.chunk_id for h in sim_b1] == ["a1", "b1"]
