"""Channel abilities are declared on :class:`Channel` (with defaults) and by every
built-in channel, never probed with ``getattr`` by the retriever; a registered channel
that does not subclass :class:`Channel` is adapted once, keeping what it declares."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_query.graph.communities import CommunityChannel
from ragspine_query.graph.graph_channel import GraphChannel
from ragspine_query.pipeline.channels import (Channel, DenseChannel, LexicalChannel, OnDemandChannel, PluginChannel, as_channel,
                                              register_channel, unregister_channel)
from ragspine_query.tree.tree_channel import TreeChannel
from tests.query.qi_library import shared_sample


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return shared_sample(tmp_path_factory)


class FirstRows(Channel):
    name = "first"

    def search(self, query, depth, allowed):
        rows = np.arange(depth, dtype=np.int64)
        return rows, np.linspace(1.0, 0.5, depth).astype(np.float32)


def test_the_base_declares_every_ability_with_its_default():
    ch = FirstRows()
    assert (ch.on_demand, ch.reaches_via, ch.default_weight, ch.fusion_rrf_k, ch.languages, ch.cross_lingual) == \
        (False, False, 1.0, None, None, False)
    rows, scores, vias = ch.search_with_via("q", 3, None)
    assert rows.tolist() == [0, 1, 2] and vias == ("", "", "") and ch.describe("q", 3, None) is None
    for cls in (LexicalChannel, DenseChannel, OnDemandChannel, GraphChannel, CommunityChannel, TreeChannel):
        assert issubclass(cls, Channel), cls
    assert TreeChannel.reaches_via and OnDemandChannel.on_demand and OnDemandChannel.reaches_via
    assert as_channel(ch) is ch
    with pytest.raises(NotImplementedError, match="must define search"):
        Channel().search("q", 1, None)


class ViaPlugin:
    """A plug-in that does not subclass Channel but declares abilities of its own."""

    name = "viaplug"
    reaches_via = True
    default_weight = 0.5

    def __init__(self, n: int) -> None:
        self.n = n

    def search(self, query, depth, allowed):  # pragma: no cover - reaches_via: search_with_via is called
        raise AssertionError("search_with_via must be used")

    def search_with_via(self, query, depth, allowed):
        rows = np.arange(self.n, dtype=np.int64)
        if allowed is not None:
            rows = rows[allowed]
        rows = rows[:depth]
        return rows, np.linspace(1.0, 0.5, rows.size).astype(np.float32), tuple(f"node{r}" for r in rows.tolist())

    def describe(self, query, depth, allowed):
        return f"plugin saw {query!r}"


def test_a_plugin_channel_is_adapted_with_what_it_declares(sample):
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    register_channel("viaplug", lambda ctx: ViaPlugin(ctx.library.n_chunks))
    try:
        lib = open_library(sample)
        r = HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="bm25"))
        plug = next(c for c in r.channels if c.name == "viaplug")
        assert isinstance(plug, PluginChannel) and isinstance(plug.inner, ViaPlugin) and plug.reaches_via
        assert plug.default_weight == 0.5 and not plug.on_demand and plug.languages is None
        assert all(isinstance(c, Channel) for c in r.channels)
        res = r.search("revenue", top_k=50, explain=True)
        assert any(h.via.startswith("node") for h in res)
        detail = next(s.detail for s in res.explain.stages if s.stage == "channel" and s.name == "viaplug")
        assert detail == "plugin saw 'revenue'"
        lexical = next(s.detail for s in res.explain.stages if s.stage == "channel" and s.name == "bm25")
        assert lexical == ""  # the default describe says nothing
    finally:
        unregister_channel("viaplug")
