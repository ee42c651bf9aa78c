"""RESTRICTED isolation through EVERY reranker, on random mixes of hits (hypothesis).

RESTRICTED hits carry a distinctive marker in their text. Whatever the mix, the marker
never reaches a model, an encoder, a judge or an HTTP request body; RESTRICTED hits keep
their index; the set of hits is unchanged; and the LLM judge falls back to the fused
order on every server fault.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_core.records import Hit
from ragspine_query.rerank import (
    DEFAULT_TOP_N,
    ColbertMaxSimReranker,
    CrossEncoderReranker,
    LexicalMaxSimReranker,
    ListwiseReranker,
    ProviderListwiseJudge,
    SpladeReranker,
    listwise_rerank,
    make_reranker,
)
from tests.query.rerank.rerank_fixtures import HashingTokenEncoder, chunk_ids, make_hit
from tests.query.rerank.rerank_tiny_models import WORDS

MARKER = "zzsecretmarker"
# database=None: no .hypothesis/ folder left in the work tree; examples stay bounded for speed.
HYPOTHESIS = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
restricted_spelling = st.sampled_from(["RESTRICTED", "restricted", "Restricted"])
open_spelling = st.sampled_from(["PUBLIC", "INTERNAL", "public", ""])


@st.composite
def hit_lists(draw) -> list[Hit]:
    n = draw(st.integers(min_value=1, max_value=14))
    hits = []
    for i in range(n):
        text = draw(words)
        if draw(st.booleans()):
            sensitivity = draw(restricted_spelling)
            text = f"{text} {MARKER}{i} board memo"
        else:
            sensitivity = draw(open_spelling)
        hits.append(make_hit(f"c{i:02d}", text, sensitivity=sensitivity, score=1.0 - i / 100))
    return hits


def assert_isolation_invariants(original: list[Hit], reranked: list[Hit], top_n: int | None) -> None:
    assert sorted(chunk_ids(reranked)) == sorted(chunk_ids(original))
    limit = len(original) if top_n is None else min(top_n, len(original))
    for i, hit in enumerate(original):
        if hit.chunk.is_restricted or i >= limit:
            assert reranked[i] is hit, f"position {i} moved or changed"


# -- the local rerankers --------------------------------------------------------------


class RecordingTokenizer:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> list[str]:
        self.seen.append(text)
        return text.lower().split()


class RecordingCrossEncoder(CrossEncoderReranker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def score(self, query, passages):
        self.seen.extend([query, *passages])
        return super().score(query, passages)


class RecordingSplade(SpladeReranker):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def score(self, query, passages):
        self.seen.extend([query, *passages])
        return super().score(query, passages)


@dataclass
class Subject:
    reranker: object
    seen: list[str]  # every text the model/encoder/tokenizer was handed


@pytest.fixture(scope="module")
def local_subjects(request) -> dict[str, Subject]:
    subjects: dict[str, Subject] = {}
    for weighted in (True, False):
        tok = RecordingTokenizer()
        subjects[f"maxsim_weighted={weighted}"] = Subject(LexicalMaxSimReranker(weighted=weighted, tokenizer=tok), tok.seen)
    encoder = HashingTokenEncoder()
    subjects["colbert"] = Subject(ColbertMaxSimReranker(encoder), encoder.seen)
    for name, fixture, cls in (("cross_encoder", "tiny_cross_encoder", RecordingCrossEncoder), ("splade", "tiny_splade", RecordingSplade)):
        try:
            model_dir, _ = request.getfixturevalue(fixture)
        except pytest.skip.Exception:
            continue
        reranker = cls(model_dir, batch_size=4)
        subjects[name] = Subject(reranker, reranker.seen)
    return subjects


@pytest.mark.parametrize("name", ["maxsim_weighted=True", "maxsim_weighted=False", "colbert", "cross_encoder", "splade"])
@HYPOTHESIS
@given(hits=hit_lists(), query=words, top_n=st.one_of(st.none(), st.integers(min_value=1, max_value=16)))
def test_local_rerankers_keep_restricted_in_place_and_never_read_their_text(local_subjects, name, hits, query, top_n):
    if name not in local_subjects:
        pytest.skip(f"{name}: the tiny model needs the onnx package")
    subject = local_subjects[name]
    subject.seen.clear()
    reranked = subject.reranker.rank(query, hits, top_n=top_n)
    assert_isolation_invariants(hits, reranked, top_n)
    assert not any(MARKER in text for text in subject.seen)
    limit = len(hits) if top_n is None else min(top_n, len(hits))
    open_head = [reranked[i] for i in range(limit) if not hits[i].chunk.is_restricted]
    rerank_scores = [h.scores["rerank"] for h in open_head]
    assert rerank_scores == sorted(rerank_scores, reverse=True)
    assert all(h.score == h.scores["rerank"] and "fused" in h.scores for h in open_head)
    if not open_head:
        assert subject.seen == []


# -- the LLM judge against the local server ---------------------------------------------


def expected_listwise(hits: list[Hit], top_n: int, behaviour: str) -> list[str]:
    open_slots = [i for i in range(min(top_n, len(hits))) if not hits[i].chunk.is_restricted]
    n = len(open_slots)
    if behaviour == "ok":
        permutation = list(reversed(range(n)))
    elif behaviour == "partial":
        head = list(reversed(range(n)))[: max(1, n // 2)]
        permutation = head + [i for i in range(n) if i not in head]
    else:
        permutation = list(range(n))
    out = chunk_ids(hits)
    for slot, pick in zip(open_slots, permutation):
        out[slot] = hits[open_slots[pick]].chunk_id
    return out


@HYPOTHESIS
@given(
    hits=hit_lists(),
    query=words,
    top_n=st.integers(min_value=1, max_value=16),
    behaviour=st.sampled_from(["ok", "partial", "500", "429", "garbage", "no_content"]),
)
def test_listwise_judge_over_http_never_sees_restricted_text(chat_server, hits, query, top_n, behaviour):
    chat_server.set_behaviours(behaviour)
    provider = OpenAICompatibleProvider(chat_server.base_url, "judge", timeout_s=2.0, max_retries=0, backoff_s=0.0)
    reranked = listwise_rerank(query, hits, ProviderListwiseJudge(provider), top_n=top_n)

    assert_isolation_invariants(hits, reranked, top_n)
    assert chunk_ids(reranked) == expected_listwise(hits, top_n, behaviour)
    bodies = chat_server.all_raw_bodies()
    assert MARKER.encode() not in bodies
    assert b"board memo" not in bodies
    any_open = any(not h.chunk.is_restricted for h in hits[:top_n])
    assert len(chat_server.requests) == (1 if any_open else 0)
    if any_open:
        sent = chat_server.requests[0].json_body["messages"][-1]["content"]
        open_texts = [h.chunk.text for h in hits[:top_n] if not h.chunk.is_restricted]
        assert all(text in sent for text in open_texts)


@HYPOTHESIS
@given(hits=hit_lists(), query=words)
def test_factory_listwise_reranker_over_http_never_sees_restricted_text(chat_server, hits, query):
    chat_server.set_behaviours("ok")
    provider = OpenAICompatibleProvider(chat_server.base_url, "judge", timeout_s=2.0, max_retries=0)
    reranker = make_reranker("listwise", provider=provider)
    assert isinstance(reranker, ListwiseReranker)
    reranked = reranker.rank(query, hits)
    assert_isolation_invariants(hits, reranked, DEFAULT_TOP_N)
    assert MARKER.encode() not in chat_server.all_raw_bodies()


def test_listwise_timeout_falls_back_to_fused_order_with_restricted_mixed_in(chat_server):
    chat_server.set_behaviours("slow")
    hits = [make_hit("a", "acme"), make_hit("r", f"{MARKER} memo", sensitivity="RESTRICTED"), make_hit("b", "bank")]
    provider = OpenAICompatibleProvider(chat_server.base_url, "judge", timeout_s=0.2, max_retries=0)
    assert listwise_rerank("q", hits, ProviderListwiseJudge(provider)) == hits
    assert MARKER.encode() not in chat_server.all_raw_bodies()
