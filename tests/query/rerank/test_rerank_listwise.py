"""Listwise LLM reranking: prompt, parser, RESTRICTED exit #1 and the fused-order fall-back."""

from __future__ import annotations

import pytest

from llm_server import LocalChatServer
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_query.rerank import (
    DEFAULT_TOP_N,
    ListwiseJudge,
    ListwiseReranker,
    ProviderListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)
from rerank_fixtures import chunk_ids, make_hit


class ReverseJudge:
    """A real (if simple-minded) judge: ranks candidates last-first; records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.calls.append((query, list(candidates)))
        return list(reversed(range(len(candidates))))


class FixedAnswerJudge:
    def __init__(self, answer) -> None:
        self.answer = answer

    def judge(self, query: str, candidates: list[str]):
        return self.answer


class FailingJudge:
    def judge(self, query: str, candidates: list[str]) -> list[int]:
        raise RuntimeError("judge backend exploded")


def judge_for(server: LocalChatServer, **kwargs) -> ProviderListwiseJudge:
    provider = OpenAICompatibleProvider(
        server.base_url,
        "judge-model",
        timeout_s=kwargs.pop("timeout_s", 2.0),
        max_retries=kwargs.pop("max_retries", 0),
        backoff_s=0.0,
    )
    return ProviderListwiseJudge(provider, **kwargs)


HITS = [
    make_hit("a", "acme revenue fell in china"),
    make_hit("b", "SECRET restricted board memo", sensitivity="RESTRICTED"),
    make_hit("c", "guidance for the next quarter"),
    make_hit("d", "credit risk outlook"),
]


# -- parse_listwise_response -----------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[2] > [0] > [1]", [2, 0, 1]),
        ("[2]>[0]>[1]", [2, 0, 1]),
        ("[2, 0, 1]", [2, 0, 1]),
        ('["2", "0", "1"]', [2, 0, 1]),
        ("2, 0, 1", [2, 0, 1]),
        ("2 > 0 > 1", [2, 0, 1]),
        ("```json\n[1, 2, 0]\n```", [1, 2, 0]),
        ("Ranking: [1, 0, 2]. Passage 1 answers the question.", [1, 0, 2]),
        ("The best is [2], then [1], then [0].", [2, 1, 0]),
        ('{"ranking": [1, 2, 0]}', [1, 2, 0]),
        ("1", [1, 0, 2]),
    ],
)
def test_parse_accepts_common_ranking_formats(text, expected):
    assert parse_listwise_response(text, 3) == expected


def test_parse_completes_a_partial_ranking_in_original_order():
    assert parse_listwise_response("[3] > [1]", 5) == [3, 1, 0, 2, 4]


def test_parse_drops_repeated_indices_keeping_the_first():
    assert parse_listwise_response("[2] > [2] > [0] > [2]", 3) == [2, 0, 1]


@pytest.mark.parametrize(
    "text",
    ["", "   ", "I cannot rank these passages.", "[5] > [0]", "[2] > [-1]", "2, 0, 9", "[true, false]", '{"x": 1}', None],
)
def test_parse_garbage_or_out_of_range_gives_identity(text):
    assert parse_listwise_response(text, 3) == [0, 1, 2]


def test_parse_with_no_candidates_is_empty():
    assert parse_listwise_response("[0]", 0) == []


# -- build_listwise_prompt ----------------------------------------------------------------


def test_prompt_labels_every_candidate_and_carries_the_query():
    messages = build_listwise_prompt("why did revenue fall", ["alpha text", "beta\n\ntext", "gamma"])
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "why did revenue fall" in user
    assert "[0] alpha text" in user and "[1] beta text" in user and "[2] gamma" in user
    assert "[2] > [0] > [1]" in messages[0]["content"]


def test_prompt_cuts_very_long_passages():
    messages = build_listwise_prompt("q", ["word " * 5000], max_passage_chars=100)
    assert len(messages[1]["content"]) < 400


def test_prompt_round_trips_through_the_server_ranking():
    # The local server's default reply ranks the [k] labels it finds, so the prompt's
    # labels must be what the parser reads back.
    with LocalChatServer("ok") as server:
        judge = judge_for(server)
        assert judge.judge("q", ["x", "y", "z", "w"]) == [3, 2, 1, 0]
        assert len(server.requests) == 1


# -- listwise_rerank with in-process judges ---------------------------------------------


def test_default_top_n_is_ten():
    assert DEFAULT_TOP_N == 10


def test_judge_order_fills_open_slots_and_restricted_stays_put():
    judge = ReverseJudge()
    assert isinstance(judge, ListwiseJudge)
    reranked = listwise_rerank("q", HITS, judge)
    assert chunk_ids(reranked) == ["d", "b", "c", "a"]
    assert reranked[1] is HITS[1]
    (_, candidates), = judge.calls
    assert candidates == ["acme revenue fell in china", "guidance for the next quarter", "credit risk outlook"]


def test_restricted_never_reaches_judge_prompt_case_insensitively():
    hits = [make_hit(str(i), f"open text {i}") for i in range(3)]
    hits.insert(1, make_hit("r1", "SECRET lower", sensitivity="restricted"))
    hits.insert(3, make_hit("r2", "SECRET mixed", sensitivity="Restricted"))
    judge = ReverseJudge()
    reranked = listwise_rerank("q", hits, judge)
    assert all("SECRET" not in text for text in judge.calls[0][1])
    assert reranked[1].chunk_id == "r1" and reranked[3].chunk_id == "r2"


def test_all_restricted_never_calls_the_judge():
    hits = [make_hit(str(i), "SECRET", sensitivity="RESTRICTED") for i in range(4)]
    judge = ReverseJudge()
    assert listwise_rerank("q", hits, judge) == hits
    assert judge.calls == []


def test_only_top_n_are_sent_and_the_tail_keeps_its_order():
    hits = [make_hit(f"h{i:02d}", f"text {i}") for i in range(15)]
    judge = ReverseJudge()
    reranked = listwise_rerank("q", hits, judge, top_n=4)
    assert chunk_ids(reranked) == ["h03", "h02", "h01", "h00", *chunk_ids(hits[4:])]
    assert len(judge.calls[0][1]) == 4


def test_restricted_past_top_n_is_not_considered():
    hits = [make_hit("a", "x"), make_hit("b", "y"), make_hit("r", "SECRET", sensitivity="RESTRICTED")]
    judge = ReverseJudge()
    assert chunk_ids(listwise_rerank("q", hits, judge, top_n=2)) == ["b", "a", "r"]


@pytest.mark.parametrize("top_n", [0, -3, "ten", None])
def test_non_positive_or_invalid_top_n_reorders_nothing_and_does_not_raise(top_n):
    judge = ReverseJudge()
    assert listwise_rerank("q", HITS, judge, top_n=top_n) == HITS
    assert judge.calls == []


def test_judge_exception_falls_back_to_rrf_order():
    assert listwise_rerank("q", HITS, FailingJudge()) == HITS


@pytest.mark.parametrize(
    "answer",
    [[0, 0, 1], [0, 1], [0, 1, 2, 3], [0, 1, 5], [2, 1, -1], ["2", "1", "0"], [True, False, 2], "2,1,0", None, {0: 1}, [1.0, 0.0, 2.0]],
)
def test_malformed_judge_output_falls_back_to_rrf_order(answer):
    assert listwise_rerank("q", HITS, FixedAnswerJudge(answer)) == HITS


def test_input_list_is_not_mutated():
    hits = list(HITS)
    listwise_rerank("q", hits, ReverseJudge())
    assert hits == HITS


def test_listwise_reranker_exposes_judge_and_uses_its_top_n():
    judge = ReverseJudge()
    reranker = ListwiseReranker(judge, top_n=2)
    assert reranker.is_listwise and reranker.judge is judge
    hits = [make_hit(f"h{i}", f"t{i}") for i in range(4)]
    assert chunk_ids(reranker.rank("q", hits)) == ["h1", "h0", "h2", "h3"]
    assert chunk_ids(reranker.rank("q", hits, top_n=3)) == ["h2", "h1", "h0", "h3"]


# -- listwise_rerank + ProviderListwiseJudge against the local server ------------------


def test_provider_judge_reorders_through_the_real_server(chat_server):
    chat_server.set_behaviours("ok")
    reranked = listwise_rerank("why did acme revenue fall", HITS, judge_for(chat_server))
    assert chunk_ids(reranked) == ["d", "b", "c", "a"]
    assert len(chat_server.requests) == 1
    body = chat_server.requests[0].raw_body.decode()
    assert "SECRET" not in body
    assert "why did acme revenue fall" in body


def test_provider_judge_completes_a_partial_permutation(chat_server):
    chat_server.set_behaviours("partial")
    hits = [make_hit(f"h{i}", f"text {i}") for i in range(5)]
    # the server ranks only "[4] > [3]"; the rest follow in fused order
    assert chunk_ids(listwise_rerank("q", hits, judge_for(chat_server))) == ["h4", "h3", "h0", "h1", "h2"]


@pytest.mark.parametrize("behaviour", ["500", "garbage", "no_content", "400", "429"])
def test_server_faults_fall_back_to_rrf_order_without_raising(chat_server, behaviour):
    chat_server.set_behaviours(behaviour)
    assert listwise_rerank("q", HITS, judge_for(chat_server, max_retries=1)) == HITS
    assert len(chat_server.requests) >= 1


def test_server_timeout_falls_back_to_rrf_order(chat_server):
    chat_server.set_behaviours("slow")
    judge = judge_for(chat_server, timeout_s=0.2, max_retries=0)
    assert listwise_rerank("q", HITS, judge) == HITS
    assert len(chat_server.requests) == 1


def test_all_restricted_sends_no_request_to_the_server(chat_server):
    chat_server.set_behaviours("ok")
    hits = [make_hit(str(i), f"SECRET {i}", sensitivity="RESTRICTED") for i in range(3)]
    assert listwise_rerank("q", hits, judge_for(chat_server)) == hits
    assert chat_server.requests == []
