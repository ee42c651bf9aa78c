"""make_reranker: specs, env defaults, precedence of a local reranker over the LLM judge."""

from __future__ import annotations

import sys

import pytest

from tests.query.rerank.llm_server import LocalChatServer
from ragspine_core.errors import ConfigError
from ragspine_core.llm import OpenAICompatibleProvider
from ragspine_query.rerank import (
    RERANKER_CHOICES,
    CrossEncoderReranker,
    LexicalMaxSimReranker,
    ListwiseReranker,
    ProviderListwiseJudge,
    SpladeReranker,
    make_reranker,
)
from ragspine_core.settings import Settings

PROVIDER = OpenAICompatibleProvider("http://127.0.0.1:9/v1", "m")


def test_importing_rerank_does_not_import_onnxruntime_or_tokenizers():
    import subprocess

    code = (
        "import sys, ragspine_query.rerank, ragspine_core.llm; "
        "bad = [m for m in ('onnxruntime', 'tokenizers', 'onnx') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(_repo_root()))
    assert done.returncode == 0, done.stdout + done.stderr


def _repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("spec", [None, "", "none", "NONE", " None "])
def test_none_and_unset_mean_no_reranker(spec):
    assert make_reranker(spec, provider=PROVIDER) is None


def test_unknown_spec_lists_the_allowed_values():
    with pytest.raises(ConfigError) as info:
        make_reranker("bge")
    for choice in RERANKER_CHOICES:
        assert choice in str(info.value)


def test_unknown_env_value_names_the_variable():
    with pytest.raises(ConfigError, match="RAGSPINE_RERANKER"):
        make_reranker(settings=Settings.from_env({"RAGSPINE_RERANKER": "colbertv9"}))


def test_env_supplies_the_default_spec():
    assert isinstance(make_reranker(settings=Settings.from_env({"RAGSPINE_RERANKER": "maxsim"})), LexicalMaxSimReranker)


def test_explicit_spec_wins_over_env():
    assert make_reranker("none", settings=Settings.from_env({"RAGSPINE_RERANKER": "maxsim"})) is None


def test_listwise_needs_a_provider():
    with pytest.raises(ConfigError, match="provider"):
        make_reranker("listwise")


def test_listwise_wraps_a_provider_judge():
    reranker = make_reranker("listwise", provider=PROVIDER)
    assert isinstance(reranker, ListwiseReranker) and reranker.is_listwise
    assert isinstance(reranker.judge, ProviderListwiseJudge) and reranker.judge.provider is PROVIDER


@pytest.mark.parametrize("spec", ["cross_encoder", "ce", "CE"])
def test_cross_encoder_without_a_dir_names_the_env_var(spec):
    with pytest.raises(ConfigError, match="RAGSPINE_CROSS_ENCODER_DIR"):
        make_reranker(spec)


def test_cross_encoder_reads_its_dir_from_env(tiny_cross_encoder):
    env = {"RAGSPINE_CROSS_ENCODER_DIR": str(tiny_cross_encoder[0])}
    reranker = make_reranker("ce", settings=Settings.from_env(env))
    assert isinstance(reranker, CrossEncoderReranker)
    assert reranker.model_dir == tiny_cross_encoder[0]


def test_splade_without_a_dir_names_the_env_var():
    with pytest.raises(ConfigError, match="RAGSPINE_SPLADE_DIR"):
        make_reranker("splade")


def test_splade_reads_its_dir_from_env(tiny_splade):
    reranker = make_reranker("splade", settings=Settings.from_env({"RAGSPINE_SPLADE_DIR": str(tiny_splade[0])}))
    assert isinstance(reranker, SpladeReranker)


def test_auto_prefers_the_local_cross_encoder_over_the_llm_judge(tiny_cross_encoder):
    env = {"RAGSPINE_CROSS_ENCODER_DIR": str(tiny_cross_encoder[0])}
    assert isinstance(make_reranker("auto", provider=PROVIDER, settings=Settings.from_env(env)), CrossEncoderReranker)


def test_auto_uses_the_judge_when_no_local_model_is_configured():
    assert isinstance(make_reranker("auto", provider=PROVIDER), ListwiseReranker)
    assert make_reranker("auto") is None


def test_auto_with_a_broken_cross_encoder_dir_fails_loudly(tmp_path):
    with pytest.raises(ConfigError, match="incomplete"):
        make_reranker("auto", provider=PROVIDER, settings=Settings.from_env({"RAGSPINE_CROSS_ENCODER_DIR": str(tmp_path)}))


def test_a_local_reranker_never_calls_the_provider():
    with LocalChatServer("ok") as server:
        provider = OpenAICompatibleProvider(server.base_url, "m", timeout_s=1.0)
        reranker = make_reranker("maxsim", provider=provider)
        from tests.query.rerank.rerank_fixtures import make_hit

        reranker.rank("acme", [make_hit("a", "bank"), make_hit("b", "acme")])
        assert server.requests == []


def test_colbert_uses_the_packaged_minilm_token_encoder():
    pytest.importorskip("onnxruntime")
    dense = pytest.importorskip("ragspine_core.dense.minilm_onnx")
    if not hasattr(dense.OnnxEmbeddingBackend, "embed_tokens"):
        pytest.skip("OnnxEmbeddingBackend.embed_tokens is not available yet")
    try:
        reranker = make_reranker("colbert")
    except ImportError as err:  # packaged model not installed here
        pytest.skip(str(err))
    from tests.query.rerank.rerank_fixtures import chunk_ids, make_hit

    hits = [make_hit("off", "the weather in paris was mild"), make_hit("on", "acme revenue fell sharply in china")]
    reranked = reranker.rank("why did acme's revenue drop", hits)
    assert chunk_ids(reranked) == ["on", "off"]
    assert -1.0 <= reranked[1].scores["rerank"] <= reranked[0].scores["rerank"] <= 1.0
