"""The relation-extractor slot (issue 26): ``none`` leaves the base graph as it is,
``cooccurrence`` adds the co_occurs edges, ``llm`` adds model relations whose endpoints
the competitor gate screens; the graph store is selectable."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from ragspine_index.library_config import LibraryConfig
from ragspine_index.graph.build import build_relation_graph
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_input import GraphChunk
from ragspine_index.graph.openie import OpenIETripleExtractor
from ragspine_core.errors import ConfigError
from ragspine_core.glossary import Glossary
from ragspine_core.graph import artifact as ga

from tests.query.rerank.llm_server import LocalChatServer

GLOSSARY = Glossary.from_dict({"entities": [
    {"id": "ACME_CN", "names": ["Acme China"]},
    {"id": "GLOBEX", "names": ["Globex Corp", "Globex"], "competitor": True},
]})


def chunk(row, text, title=""):
    return GraphChunk(row, f"c{row:03d}", f"d{row}", text, title, "", "PUBLIC")


CHUNKS = [chunk(0, "Acme China met Harold Brandt and Miriam Cole in Suzhou.", title="Suzhou Plant"),
          chunk(1, "Harold Brandt and Miriam Cole toured Suzhou Plant with Globex Corp engineers.", title="Plant Tour"),
          chunk(2, "Miriam Cole founded Acme China in Suzhou with Harold Brandt.", title="Founding")]


def edges_of(d):
    e = pq.read_table(d / ga.EDGES_FILE).to_pydict()
    return [(t, s, x) for t, s, x in zip(e["type"], e["src"], e["dst"])]


def test_none_is_the_base_graph_and_cooccurrence_adds_only_co_occurs(tmp_path):
    base = tmp_path / "base"
    build_relation_graph(base, CHUNKS, glossary=GLOSSARY, config=GraphConfig(cooccurrence=False))
    again = tmp_path / "again"
    build_relation_graph(again, CHUNKS, glossary=GLOSSARY, config=GraphConfig(cooccurrence=False))
    for f in (ga.NODES_FILE, ga.EDGES_FILE, ga.INDPTR_FILE, ga.INDICES_FILE, ga.WEIGHTS_FILE, ga.COMMUNITIES_FILE):
        assert (base / f).read_bytes() == (again / f).read_bytes()
    with_co = tmp_path / "co"
    build_relation_graph(with_co, CHUNKS, glossary=GLOSSARY, config=GraphConfig(cooccurrence=True))
    assert (base / ga.NODES_FILE).read_bytes() == (with_co / ga.NODES_FILE).read_bytes()
    b, c = edges_of(base), edges_of(with_co)
    assert not [e for e in b if e[0] == "co_occurs"] and [e for e in c if e[0] == "co_occurs"]
    assert [e for e in c if e[0] != "co_occurs"] == b
    # communities come from the co-occurrences either way
    assert (pq.read_table(base / ga.COMMUNITIES_FILE).to_pydict()["entity_nodes"]
            == pq.read_table(with_co / ga.COMMUNITIES_FILE).to_pydict()["entity_nodes"])


def test_library_setting_names_the_slot():
    assert LibraryConfig().relation_extractor in ("none", "cooccurrence")
    for v in ("none", "cooccurrence", "llm"):
        assert LibraryConfig(relation_extractor=v).relation_extractor == v
    with pytest.raises(ConfigError, match="relation_extractor"):
        LibraryConfig(relation_extractor="spacy")


def reply(request_json) -> str:
    return json.dumps({"triples": [["Globex Corp", "supplies", "Acme China"], ["Harold Brandt", "founded", "Acme China"],
                                   ["Miriam Cole", "partnered with", "Globex"]]})


def test_llm_endpoints_are_screened_by_the_competitor_gate(tmp_path):
    from ragspine_core.llm import OpenAICompatibleProvider

    with LocalChatServer("ok", reply=reply) as server:
        provider = OpenAICompatibleProvider(server.base_url, "tiny", timeout_s=5.0, backoff_s=0.01)
        ex = OpenIETripleExtractor(provider, model_id="tiny", cache_path=tmp_path / "openie.sqlite")
        try:
            params = build_relation_graph(tmp_path / "g", CHUNKS, glossary=GLOSSARY, extractor=ex,
                                          config=GraphConfig(cooccurrence=False))
        finally:
            ex.close()
    nodes = pq.read_table(tmp_path / "g" / ga.NODES_FILE).to_pydict()
    labels = nodes["label"]
    model = [(labels[s], labels[x]) for t, s, x in edges_of(tmp_path / "g") if t == "model_relation"]
    assert model and all("Globex" not in a and "Globex" not in b for a, b in model)
    assert params["model_triples_screened"] == 2 * len(CHUNKS)


def test_the_graph_store_is_selectable(built_sample):
    pytest.importorskip("networkx")
    from ragspine_query.graph.graph_channel import GraphChannel, GraphChannelConfig
    from ragspine_core.graph.networkx_store import NetworkXGraphStore
    from ragspine_query.library import open_library

    with pytest.raises(ConfigError, match="RAGSPINE_GRAPH_STORE"):
        GraphChannelConfig(store="neo4j")
    with open_library(built_sample) as lib:
        a = GraphChannel(lib)
        b = GraphChannel(lib, config=GraphChannelConfig(store="networkx"))
        assert isinstance(b.store, NetworkXGraphStore)
        q = "Which subsidiary of Acme Group makes the PowerFlex 5?"  # Acme Group: a hub, PowerFlex 5 seeds
        ra, sa = a.search(q, 10, None)
        rb, sb = b.search(q, 10, None)
        assert ra.size and np.allclose(sa, sb, atol=1e-5)
