"""Built-in transforms and post-processors are entries of the same registries as plug-ins
(:mod:`ragspine_query.pipeline.plugins`), so a plug-in is selected by name like a built-in
(``--transform mine``, ``RAGSPINE_TRANSFORMS=mine``), the allowed lists of errors and
``--help`` come from the registries, and the old rule still holds: a plug-in registered
with ``register_transform``/``register_postprocessor`` (``always``) runs in every pipeline."""

from __future__ import annotations

import argparse
import importlib
import json

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_query.builder import PipelineSpec, build_pipeline
from ragspine_query.intelligence import QueryIntelligence
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.pipeline.plugins import (POSTPROCESSORS, TRANSFORMS, register_postprocessor, register_transform,
                                             registered_postprocessors, registered_transforms, unregister_postprocessor,
                                             unregister_transform)
from ragspine_query.postprocess import POSTPROCESSOR_NAMES, make_postprocessor
from ragspine_query.retriever import HybridRetriever
from ragspine_query.library import open_library
from ragspine_query.transforms import TRANSFORM_NAMES, make_transforms, parse_transform_spec
from ragspine_tools.query_command import add_query_parser, main as query_main
from tests.query.qi_library import shared_sample

PLUGIN_MODULE = "tests.query.selectable_plugins"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


@pytest.fixture
def selectable():
    mod = importlib.import_module(PLUGIN_MODULE)
    mod.register()
    try:
        yield mod
    finally:
        unregister_transform("echo")
        unregister_postprocessor("stamp")


def test_builtins_are_registry_entries_in_their_order():
    assert TRANSFORMS.names() == TRANSFORM_NAMES and POSTPROCESSORS.names() == POSTPROCESSOR_NAMES
    assert all(e.builtin and not e.item.always for e in TRANSFORMS.entries() + POSTPROCESSORS.entries())
    assert registered_transforms() == () and registered_postprocessors() == ()  # only plug-ins are "registered"
    for name in TRANSFORM_NAMES:
        with pytest.raises(ConfigError, match="cannot be removed"):
            unregister_transform(name)
    with pytest.raises(ConfigError, match="cannot be removed"):
        unregister_postprocessor("mmr")
    # the messages for built-ins are today's
    with pytest.raises(ConfigError, match=r"allowed: normalize, decompose, step_back, fusion, hyde \(comma-separated\) or none"):
        parse_transform_spec("bogus")
    with pytest.raises(ConfigError, match=r"allowed: mmr, lost_in_middle, compress \(comma-separated; mmr:LAMBDA\) or none"):
        make_postprocessor("lost_in_middle:3")


def test_a_plugin_is_selected_by_name_and_listed(selectable):
    assert parse_transform_spec("Echo, hyde") == ("hyde", "echo")  # registry order: built-ins first
    assert [n for n, _ in make_transforms("echo")] == ["echo"]
    assert make_transforms("echo")[0][1](["q"]) == ["q", "q battery"]
    chain = make_postprocessor("stamp:2.5,lost_in_middle")
    assert [n for n, _ in chain] == ["stamp", "lost_in_middle"] and chain[0][1].value == 2.5
    with pytest.raises(ConfigError, match=r"allowed: normalize, decompose, step_back, fusion, hyde, echo "):
        parse_transform_spec("nope")
    with pytest.raises(ConfigError, match=r"allowed: mmr, lost_in_middle, compress, stamp "):
        make_postprocessor("nope")
    assert QueryIntelligence(transforms="echo", postprocessor="stamp").transforms == "echo"
    parser = argparse.ArgumentParser()
    add_query_parser(parser.add_subparsers())
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0].choices["query"]._actions}
    assert "hyde,echo" in helps["transform"] and "compress,stamp" in helps["postprocessor"]


def _explained(out: dict, stage: str) -> set[str]:
    return {r["name"] for r in out["explain"] if r["stage"] == stage}


def test_plugins_selected_through_ragspine_query(sample, selectable, capsys, monkeypatch):
    for var in ("RAGSPINE_TRANSFORMS", "RAGSPINE_POSTPROCESSOR"):
        monkeypatch.delenv(var, raising=False)
    base = ["query", str(sample), "Acme China revenue", "--top-k", "3", "--json", "--explain", "--plugin", PLUGIN_MODULE]
    assert query_main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "echo" not in _explained(plain, "transform") and "stamp" not in _explained(plain, "postprocess")
    assert plain["results"] and all("stamp" not in s["scores"] for s in plain["results"])

    assert query_main([*base, "--transform", "echo", "--postprocessor", "stamp:2"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert "echo" in _explained(named, "transform") and "stamp" in _explained(named, "postprocess")
    assert named["results"] and all(s["scores"]["stamp"] == 2.0 for s in named["results"])
    assert any("battery" in (r["detail"] or "") for r in named["explain"] if r["name"] == "echo")

    monkeypatch.setenv("RAGSPINE_TRANSFORMS", "echo")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "stamp")
    assert query_main(base) == 0
    env = json.loads(capsys.readouterr().out)
    assert "echo" in _explained(env, "transform") and all(s["scores"]["stamp"] == 1.0 for s in env["results"])

    monkeypatch.delenv("RAGSPINE_TRANSFORMS")
    assert query_main([*base, "--transform", "nope"]) == 2
    assert "allowed: normalize, decompose, step_back, fusion, hyde, echo" in capsys.readouterr().err


def test_always_plugins_run_unnamed_and_once_when_named(sample):
    calls: list[str] = []

    def tr(variants):
        calls.append("tr")
        return variants

    def post(query, hits):
        calls.append("post")
        return [h.with_score(h.score, always=1.0) for h in hits]

    register_transform("always_tr", tr)
    register_postprocessor("always_post", post)
    try:
        assert registered_transforms() == ("always_tr",) and registered_postprocessors() == ("always_post",)
        snips = build_narrative_retriever(sample, reranker=None, settings=Settings()).retrieve("Acme China revenue", top_k=3)
        assert snips and all(s["scores"]["always"] == 1.0 for s in snips) and "tr" in calls and "post" in calls
        with open_library(sample) as lib:
            retriever = HybridRetriever(lib, embedding_backend=None)
            for qi in (QueryIntelligence(), QueryIntelligence(transforms="always_tr", postprocessor="always_post")):
                pipe = build_pipeline(retriever, PipelineSpec(intelligence=qi, reranker="none"), glossary=None)
                stages = {s.name: s for s in pipe.stages}
                assert [n for n, _ in stages["transforms"].transforms].count("always_tr") == 1  # type: ignore[attr-defined]
                assert [n for n, _ in stages["postprocess"].postprocessors].count("always_post") == 1  # type: ignore[attr-defined]
            named = build_pipeline(retriever, PipelineSpec(intelligence=QueryIntelligence(transforms="always_tr,normalize"),
                                                           reranker="none"), glossary=None)
            order = [n for n, _ in {s.name: s for s in named.stages}["transforms"].transforms]  # type: ignore[attr-defined]
            assert order == ["normalize", "always_tr"]
    finally:
        unregister_transform("always_tr")
        unregister_postprocessor("always_post")


def test_the_query_library_never_reads_the_environment(sample, monkeypatch):
    monkeypatch.setenv("RAGSPINE_INGEST_WORKERS", "many")  # Settings.from_env() refuses it
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "nonsense")
    with pytest.raises(ConfigError, match="RAGSPINE_INGEST_WORKERS"):
        Settings.from_env()  # only an edge reads the environment, and it would refuse this one
    with open_library(sample) as lib:
        given = HybridRetriever(lib, settings=Settings())  # the dense backend from these settings
        assert given.embedding_backend is not None and given.embedding_backend.model_id == lib.embedding_model_id
        bare = HybridRetriever(lib)  # no settings: the Settings defaults, the environment is not read
        assert bare.embedding_backend is not None and bare.embedding_backend.model_id == lib.embedding_model_id
        assert HybridRetriever(lib, embedding_backend=None).embedding_backend is None  # BM25 only
    # the builders below the edge take settings as an argument (default: the Settings defaults)
    snips = build_narrative_retriever(sample, reranker=None).retrieve("Acme China revenue", top_k=3)
    assert snips and build_pipeline(sample).source.active_mode == "hybrid"
