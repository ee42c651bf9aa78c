"""``ragspine eval`` builds a library whose ``_library.toml`` asks for an LLM (``summarizer`` or
``relation_extractor`` = ``llm``) with the provider the ``RAGSPINE_LLM_*`` settings name, as
``ragspine ingest`` does, and caches it apart per model; a real loopback chat server."""

from __future__ import annotations

import json

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_tools.evaluate import evaluate_dataset
from tests.end_to_end.test_eval_tiny import write_dataset
from tests.query.rerank.llm_server import LocalChatServer


def _triples(req: dict | None) -> str:
    """A usable triple for the photosynthesis passage, prose (no triple) for every other one."""
    user = (req or {}).get("messages", [{}])[-1].get("content", "")
    return '{"triples": [["Chlorophyll", "absorbs", "light"]]}' if "Chlorophyll" in user else "I am not sure."


def _graph_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("relation graph: OpenIE")]
    assert len(lines) == 1, err
    return lines[0]


def test_an_llm_build_without_a_provider_names_the_variables(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGSPINE_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("RAGSPINE_LLM_MODEL", raising=False)
    ds = write_dataset(tmp_path / "tiny")
    with pytest.raises(ConfigError, match="RAGSPINE_LLM_BASE_URL"):
        evaluate_dataset(ds, modes=("bm25",), embedding="none", out=tmp_path / "eval", quiet=True,
                         chunker_options={"relation_extractor": "llm"})


def test_an_llm_relation_extractor_library_is_built_with_the_provider_and_cached_per_model(tmp_path, monkeypatch, capsys):
    ds = write_dataset(tmp_path / "tiny")
    out = tmp_path / "eval"
    options = {"relation_extractor": "llm"}
    with LocalChatServer("ok", reply=_triples) as server:
        monkeypatch.setenv("RAGSPINE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGSPINE_LLM_MODEL", "model-a")
        [res] = evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=False, live_progress=False,
                                 chunker_options=options, settings=Settings.from_env())  # as `ragspine eval`'s edge reads it
        asked = len(server.requests)
        assert asked == 6 and res.metrics["n_queries"] == 4  # one OpenIE call per open chunk
        # the build says its fallbacks: five prose replies gave no triple
        line = _graph_line(capsys.readouterr().err)
        assert line.startswith("relation graph: OpenIE 6 call(s), 0 cached; 5 reply(ies) with no readable triple"), line

        # the same model again: the cached index is reused, nothing more is asked
        evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True, chunker_options=options,
                         settings=Settings.from_env())
        assert len(server.requests) == asked

        # another model is another index, never the first model's one
        monkeypatch.setenv("RAGSPINE_LLM_MODEL", "model-b")
        evaluate_dataset(ds, modes=("bm25",), embedding="none", out=out, quiet=True, chunker_options=options,
                         settings=Settings.from_env())
        assert len(server.requests) == 2 * asked
        assert {json.loads(r.raw_body)["model"] for r in server.requests} == {"model-a", "model-b"}
    assert len(list(out.glob("tiny-*/artifacts/tiny/current/manifest.json"))) == 2


def test_two_builds_runs_are_compared_paired(tmp_path):
    """A: every query's judged document first; B: q1's judged document is gone from the top 10."""
    from ragspine_tools.eval.metrics import write_trec_run
    from ragspine_tools.llm_features import compare_runs

    ds = write_dataset(tmp_path / "tiny")
    best = {"q1": {"d1": 3.0, "d2": 1.0}, "q2": {"d2": 3.0}, "q3": {"d3": 3.0, "d6": 2.0}, "q4": {"d4": 3.0}}
    worse = {**best, "q1": {"d2": 3.0, "d5": 1.0}}
    write_trec_run(tmp_path / "a.trec", best, "a")
    write_trec_run(tmp_path / "b.trec", worse, "b")
    out = compare_runs(ds, tmp_path / "a.trec", tmp_path / "b.trec", split="test")
    assert (out["n_queries"], out["ndcg@10_a"], out["ndcg@10_b"], out["difference"]) == (4, 1.0, 0.75, -0.25)
    assert out["ci95"][0] <= -0.25 <= out["ci95"][1] and out["ci95"][1] <= 0.0
    assert compare_runs(ds, tmp_path / "a.trec", tmp_path / "a.trec", split="test")["difference"] == 0.0
