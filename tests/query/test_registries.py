"""The query side's extension points are :class:`~ragspine_core.registry.Registry` tables:
channels, transforms, post-processors and rerankers are ordered by ``(order, name)``,
never by import or registration order, and the old register/unregister/registered_*
functions keep working over them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_query.pipeline.channels import BUILTIN_CHANNEL_ORDER, CHANNELS, register_channel, registered_channels, unregister_channel
from ragspine_query.pipeline.plugins import (register_postprocessor, register_transform, registered_postprocessors, registered_transforms,
                                             unregister_postprocessor, unregister_transform)
from ragspine_query.pipeline.runner import QueryPipeline
from ragspine_query.rerank import (RERANKER_CHOICES, LexicalMaxSimReranker, RerankerContext, make_reranker, register_reranker,
                                   registered_rerankers, unregister_reranker)

BUILTIN = ("bm25", "vector", "tree", "graph", "community")
REPO = Path(__file__).resolve().parents[2]

# registers a plug-in first, then re-runs the built-in channel modules' registrations in
# another order than the package's imports (as a different import order would)
_REORDER = """
import importlib, json
import ragspine_query.graph.communities as com
import ragspine_query.graph.graph_channel as graph
import ragspine_query.tree.tree_channel as tree
from ragspine_query.pipeline import channels
channels.register_channel("aaa_plugin", lambda ctx: None)
for module in (com, graph, tree):
    importlib.reload(module)
importlib.reload(channels)  # bm25 and vector last (a fresh table: every built-in registers again)
for module in (tree, com, graph):
    importlib.reload(module)
channels.register_channel("aaa_plugin", lambda ctx: None)
print(json.dumps(channels.registered_channels()))
"""


def test_builtin_channel_order_does_not_depend_on_import_order():
    assert registered_channels()[: len(BUILTIN)] == BUILTIN
    assert tuple(sorted(BUILTIN_CHANNEL_ORDER, key=BUILTIN_CHANNEL_ORDER.get)) == BUILTIN
    done = subprocess.run([sys.executable, "-c", _REORDER], capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert tuple(json.loads(done.stdout.strip().splitlines()[-1])) == BUILTIN + ("aaa_plugin",)


def test_channel_registration_rules():
    with pytest.raises(ConfigError, match="already registered"):
        register_channel("bm25", lambda ctx: None)
    for name in BUILTIN:
        with pytest.raises(ConfigError, match="cannot be removed"):
            unregister_channel(name)
    with pytest.raises(TypeError, match="needs a factory"):
        register_channel("broken", "not callable")  # type: ignore[arg-type]
    register_channel("zz_late", lambda ctx: None)
    register_channel("aa_early", lambda ctx: None, order=500)
    register_channel("mm_mid", lambda ctx: None)
    try:
        assert registered_channels() == BUILTIN + ("aa_early", "mm_mid", "zz_late")
        original = CHANNELS.get("graph")
        register_channel("graph", lambda ctx: None, replace=True)  # a replaced built-in keeps its place
        assert registered_channels()[: len(BUILTIN)] == BUILTIN
        register_channel("graph", original, replace=True)
    finally:
        for name in ("zz_late", "aa_early", "mm_mid"):
            unregister_channel(name)
    assert registered_channels() == BUILTIN


def test_transforms_and_postprocessors_run_in_registry_order():
    def tag(name):
        def post(query, hits):
            return hits
        post.__name__ = name
        return post

    register_postprocessor("zz_post", tag("zz"))
    register_postprocessor("aa_post", tag("aa"))
    register_transform("zz_tr", lambda variants: variants)
    register_transform("aa_tr", lambda variants: variants, order=2000)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_postprocessor("aa_post", tag("again"))
        with pytest.raises(TypeError, match="must be callable"):
            register_transform("bad", 3)  # type: ignore[arg-type]
        assert registered_postprocessors() == ("aa_post", "zz_post")
        assert registered_transforms() == ("zz_tr", "aa_tr")
        p = QueryPipeline(None, postprocessors=[("mine", tag("mine"))])
        assert [n for n, _ in p.postprocessors] == ["mine", "aa_post", "zz_post"]
        assert [n for n, _ in p.transforms] == ["zz_tr", "aa_tr"]
        assert QueryPipeline(None, use_registered=False).postprocessors == []
    finally:
        for name in ("zz_post", "aa_post"):
            unregister_postprocessor(name)
        for name in ("zz_tr", "aa_tr"):
            unregister_transform(name)
    assert registered_postprocessors() == () and registered_transforms() == ()


def test_a_reranker_is_registered_by_name():
    assert registered_rerankers() == RERANKER_CHOICES
    seen = []

    def mine(ctx: RerankerContext):
        seen.append(ctx)
        return LexicalMaxSimReranker(weighted=False)

    register_reranker("Mine", mine)
    try:
        assert registered_rerankers() == RERANKER_CHOICES + ("mine",)
        got = make_reranker(" MINE ")
        assert isinstance(got, LexicalMaxSimReranker) and seen and seen[0].provider is None
        assert isinstance(make_reranker(settings=Settings.from_env({"RAGSPINE_RERANKER": "mine"})), LexicalMaxSimReranker)
        with pytest.raises(ConfigError, match=r"allowed: none, auto, listwise, cross_encoder, ce, colbert, maxsim, splade, mine"):
            make_reranker("bge")
        with pytest.raises(ConfigError, match="cannot be removed"):
            unregister_reranker("maxsim")
    finally:
        unregister_reranker("mine")
    with pytest.raises(ConfigError, match="unknown reranker 'mine'"):
        make_reranker("mine")
