"""rank_by_scores: the ordering rule every scoring reranker shares."""

from __future__ import annotations

import math

import pytest

from ragspine_core.errors import ConfigError, MissingExtraError, RagspineError
from ragspine_query.rerank import CrossEncoderReranker, SpladeReranker, passage_text, rank_by_scores
from ragspine_core.records import Chunk, Hit
from rerank_fixtures import chunk_ids, make_hit


def length_scorer(seen: list[str]):
    def score(query: str, passages: list[str]) -> list[float]:
        seen.extend(passages)
        return [float(len(p)) for p in passages]

    return score


def test_sorts_open_hits_by_descending_score_with_stable_ties():
    hits = [make_hit("a", "xx"), make_hit("b", "xxxx"), make_hit("c", "yy"), make_hit("d", "zzzz")]
    reranked = rank_by_scores("q", hits, length_scorer([]))
    assert chunk_ids(reranked) == ["b", "d", "a", "c"]
    assert [h.scores["rerank"] for h in reranked] == [4.0, 4.0, 2.0, 2.0]
    assert reranked[0].scores["fused"] == hits[1].scores["fused"]


def test_restricted_hits_are_not_scored_and_keep_their_index():
    seen: list[str] = []
    hits = [make_hit("a", "x"), make_hit("r", "SECRET", sensitivity="restricted"), make_hit("b", "xxx")]
    reranked = rank_by_scores("q", hits, length_scorer(seen))
    assert chunk_ids(reranked) == ["b", "r", "a"]
    assert reranked[1] is hits[1] and "rerank" not in reranked[1].scores
    assert seen == ["x", "xxx"]


def test_all_restricted_never_calls_the_scorer():
    seen: list[str] = []
    hits = [make_hit("r", "SECRET", sensitivity="RESTRICTED")]
    assert rank_by_scores("q", hits, length_scorer(seen)) == hits
    assert seen == []


def test_top_n_limits_scoring_to_the_head():
    seen: list[str] = []
    hits = [make_hit(str(i), "x" * i) for i in range(1, 6)]
    reranked = rank_by_scores("q", hits, length_scorer(seen), top_n=2)
    assert chunk_ids(reranked) == ["2", "1", "3", "4", "5"]
    assert reranked[2:] == hits[2:]
    assert seen == ["x", "xx"]


def test_nan_scores_sort_last():
    hits = [make_hit("a", "a"), make_hit("b", "b"), make_hit("c", "c")]
    scores = {"a": math.nan, "b": -1.0, "c": 2.0}
    reranked = rank_by_scores("q", hits, lambda q, ps: [scores[p] for p in ps])
    assert chunk_ids(reranked) == ["c", "b", "a"]


def test_scorer_returning_the_wrong_count_is_an_error():
    with pytest.raises(RagspineError, match="2 scores for 3 passages"):
        rank_by_scores("q", [make_hit(c, c) for c in "abc"], lambda q, ps: [1.0, 2.0])


@pytest.mark.parametrize("top_n", [0, -1, 2.5, True])
def test_invalid_top_n_is_a_config_error(top_n):
    with pytest.raises(ConfigError, match="top_n"):
        rank_by_scores("q", [make_hit("a", "a")], lambda q, ps: [0.0], top_n=top_n)


def test_passage_text_prefers_the_index_text():
    chunk = Chunk("c", "lib", "d", 0, "body", 0, 4, index_text="Title · Entity\nbody")
    assert passage_text(Hit(chunk, 1.0)) == "Title · Entity\nbody"
    assert passage_text(make_hit("x", "plain")) == "plain"


@pytest.mark.parametrize("cls", [CrossEncoderReranker, SpladeReranker])
@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers"])
def test_missing_runtime_names_the_extra(monkeypatch, tmp_path, cls, module):
    (tmp_path / "model.onnx").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    monkeypatch.setitem(__import__("sys").modules, module, None)
    with pytest.raises(MissingExtraError) as info:
        cls(tmp_path)
    assert "ragspine[embed-onnx]" in str(info.value)
    assert info.value.module == module
