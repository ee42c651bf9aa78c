"""Rerankers declare the languages they serve: outside them a query is not reranked and
a candidate keeps its place, and explain says so."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.records import Chunk, Hit
from ragspine_query.rerank import ColbertMaxSimReranker, LexicalMaxSimReranker, language_note, make_reranker
from ragspine_query.rerank.reranker import check_languages, rank_by_scores


def hit(chunk_id: str, text: str, *, language: str = "", sensitivity: str = "INTERNAL", score: float = 0.5) -> Hit:
    chunk = Chunk(chunk_id=chunk_id, library_id="lib", doc_id=f"doc-{chunk_id}", ordinal=0, text=text, start=0,
                  end=len(text), sensitivity=sensitivity, language=language)
    return Hit(chunk=chunk, score=score, scores={"bm25": 1.0, "vector": 0.0, "fused": score})


class RecordingEncoder:
    """Per-token unit vectors seeded by CRC32 (equal tokens match exactly); records its inputs."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_tokens(self, texts):
        self.seen.extend(texts)
        out = []
        for t in texts:
            toks = t.lower().split() or ["∅"]
            vs = [np.random.default_rng(zlib.crc32(x.encode())).normal(size=8) for x in toks]
            out.append(np.stack([v / np.linalg.norm(v) for v in vs]).astype(np.float32))
        return out


def test_english_only_reranker_leaves_a_chinese_query_untouched():
    enc = RecordingEncoder()
    rr = ColbertMaxSimReranker(enc, languages=("en",))
    hits = [hit("a", "成本上升"), hit("b", "营收下滑的原因"), hit("c", "revenue fell")]
    out = rr.rank("为什么营收下滑", hits)
    assert [h.chunk_id for h in out] == ["a", "b", "c"] and all(o is h for o, h in zip(out, hits))
    assert enc.seen == []  # the model never saw the Chinese query
    assert "skipped: query language zh" in language_note(rr, "为什么营收下滑", hits)


def test_candidates_outside_the_languages_keep_their_places_and_are_not_scored():
    enc = RecordingEncoder()
    rr = ColbertMaxSimReranker(enc, languages=("en",))
    hits = [hit("x", "other words here"), hit("zh", "月球 潮汐", language="zh"), hit("y", "moon tides"),
            hit("z", "tides")]
    out = rr.rank("moon tides", hits)
    assert out[1].chunk_id == "zh" and out[1] is hits[1]          # kept its slot, unscored
    # the English candidates are reordered among their own slots (0, 2, 3): the exact match first
    assert [h.chunk_id for h in out] == ["y", "zh", "z", "x"] and "rerank" in out[0].scores
    assert "月球 潮汐" not in enc.seen
    assert language_note(rr, "moon tides", hits) == "1 of 4 candidates not in en kept their places"
    # an unlabelled candidate's language is detected from its text
    assert rank_by_scores("moon", [hit("u", "潮汐涨落"), hit("v", "moon")], lambda q, ps: [1.0] * len(ps),
                          languages=frozenset({"en"}))[0].chunk_id == "u"


def test_default_languages():
    assert LexicalMaxSimReranker().languages is None  # the spec tokenizer reads both
    assert language_note(LexicalMaxSimReranker(), "为什么营收下滑", [hit("a", "营收")]) == ""
    assert ColbertMaxSimReranker(RecordingEncoder()).languages is None
    enc = RecordingEncoder()
    enc.languages = ("en", "zh")
    assert ColbertMaxSimReranker(enc).languages == frozenset({"en", "zh"})


def test_packaged_colbert_serves_english_only():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    rr = make_reranker("colbert")
    assert rr.languages == frozenset({"en"})
    hits = [hit("a", "成本上升", language="zh"), hit("b", "营收下滑的原因", language="zh")]
    assert [h.chunk_id for h in rr.rank("为什么营收下滑", hits)] == ["a", "b"]


def test_check_languages_validates():
    assert check_languages(None) is None and check_languages("EN") == frozenset({"en"})
    with pytest.raises(ConfigError, match="languages"):
        check_languages(())
