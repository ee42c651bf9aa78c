"""The relation graph (index side): entities, typed edges, storage, the LLM extractor and RESTRICTED."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_index.graph.entities import english_spans, extract_mentions, frequent_cjk_terms
from ragspine_index.graph.build import build_relation_graph
from ragspine_index.graph.graph_config import GraphConfig
from ragspine_index.graph.graph_files import summarize_graph
from ragspine_index.graph.graph_input import GraphChunk
from ragspine_index.graph.openie import OpenIETripleExtractor
from ragspine_index.graph.verify import verify_relation_graph
from ragspine_core.glossary import Glossary
from ragspine_core.graph import artifact as ga

from tests.query.rerank.llm_server import LocalChatServer

GLOSSARY = Glossary.from_dict({"entities": [
    {"id": "ACME_GROUP", "names": ["Acme Group", "艾克美集团"], "peers": ["GLOBEX"]},
    {"id": "ACME_CN", "names": ["Acme China", "艾克美中国"], "parent": "ACME_GROUP"},
    {"id": "GLOBEX", "names": ["Globex"]},
    {"id": "ACME_EV", "names": ["Acme EV"], "derived_from": ["ACME_CN"]},
]})


def chunk(row, text, title="", entity="", sensitivity="PUBLIC", doc=None):
    return GraphChunk(row, f"c{row:03d}", doc or f"d{row}", text, title, entity, sensitivity)


CHUNKS = [
    chunk(0, "Fred Cortes was a Filipino actor who starred for Lvn Pictures before World War II.", title="Fred Cortes"),
    chunk(1, "Lvn Pictures was a film studio in Manila founded by Narcisa de Leon.", title="Lvn Pictures"),
    chunk(2, "Acme China reported revenue growth; Globex lost share in Shenzhen.", entity="ACME_CN"),
    chunk(3, "艾克美中国的电池供应链风险上升，电池供应链本地化继续推进。", title="电池报告"),
    chunk(4, "电池供应链本地化是艾克美集团的重点。", title="集团战略"),
]


def build(tmp_path, chunks=CHUNKS, **kw):
    d = tmp_path / "g"
    params = build_relation_graph(d, chunks, glossary=GLOSSARY, **kw)
    nodes = pq.read_table(d / ga.NODES_FILE).to_pydict()
    edges = pq.read_table(d / ga.EDGES_FILE).to_pydict()
    return d, params, nodes, edges


def node_id(nodes, label):
    return nodes["node_id"][nodes["label"].index(label)]


def test_english_spans_and_chinese_terms():
    spans = english_spans('In 1998 the Bank of China hired Mahbub ul Haq. He wrote "The Long Road".')
    assert "Bank of China" in spans and "Mahbub ul Haq" in spans and "The Long Road" in spans
    assert "In" not in spans and "He" not in spans
    terms = frequent_cjk_terms([c.text for c in CHUNKS[3:]] + ["无关的句子"])
    assert "电池供应链本地化" in terms[0] and "电池供应链本地化" in terms[1]
    assert not any("的" in t[:1] or "的" in t[-1:] for ts in terms for t in ts)


def test_graph_has_typed_edges_titles_glossary_relations_and_walk_arrays(tmp_path):
    d, params, nodes, edges = build(tmp_path)
    counts = params["counts"]["edges"]
    assert {"mentions", "co_occurs", "subsidiary_of", "peer_of", "derived_from"} <= set(counts)
    typed = set(zip(edges["type"], edges["src"], edges["dst"]))
    cn, group = node_id(nodes, "Acme China"), node_id(nodes, "Acme Group")
    assert ("subsidiary_of", cn, group) in typed
    # the title of chunk 1 is an entity mentioned by chunk 0 (the bridge a multi-hop walk takes)
    lvn = node_id(nodes, "Lvn Pictures")
    chunk_node = np.load(d / ga.CHUNK_NODE_FILE)
    assert ("mentions", lvn, int(chunk_node[0])) in typed and ("about", lvn, int(chunk_node[1])) in typed
    assert ("mentions", lvn, int(chunk_node[1])) not in typed  # its own title: one `about` edge, no `mentions`
    assert ("about", cn, int(chunk_node[2])) in typed  # the `entity` metadata (ACME_CN) is what chunk 2 is about
    # the glossary alias in Chinese text maps to the concept's node
    assert ("mentions", cn, int(chunk_node[3])) in typed
    assert all(p == ga.PROVENANCE_DETERMINISTIC for p in edges["provenance"])
    n_ent = params["counts"]["nodes"]["entity"]
    df = dict(zip(nodes["node_id"][:n_ent], nodes["df"][:n_ent]))
    assert df[lvn] == 2  # chunks linked by `about` or `mentions`
    # CSR: symmetric, each edge both ways, with its type
    indptr, indices = np.load(d / ga.INDPTR_FILE), np.load(d / ga.INDICES_FILE)
    etype = np.load(d / ga.ETYPE_FILE)
    assert indptr[-1] == indices.shape[0] == 2 * len(edges["src"]) == etype.shape[0]
    assert verify_relation_graph(d, CHUNKS, GLOSSARY) == {"restricted_nodes": 0, "restricted_edges": 0, "unsupported_labels": 0,
                                                          "unsupported_summaries": 0}
    top, mermaid = summarize_graph(d)
    assert top and mermaid.startswith("graph LR")


def test_build_is_deterministic(tmp_path):
    a, _, _, _ = build(tmp_path / "a")
    b, _, _, _ = build(tmp_path / "b")
    for name in (ga.NODES_FILE, ga.EDGES_FILE, ga.INDPTR_FILE, ga.INDICES_FILE, ga.WEIGHTS_FILE, ga.ETYPE_FILE):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_synonym_edges_from_close_embeddings(tmp_path):
    from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

    chunks = CHUNKS + [chunk(5, "Lvn Pictures Inc produced films.", title="")]
    _, params, nodes, edges = build(tmp_path, chunks, backend=DeterministicEmbeddingBackend(), config=GraphConfig(synonym_threshold=0.6))
    assert params["synonyms"] is True and params["counts"]["edges"].get("synonym", 0) >= 1


MARKER_WORDS = st.lists(st.sampled_from(["Zorvath", "Quillon", "Marbek", "Tesselin", "Vortigan", "Cyrillix"]), min_size=2, max_size=3, unique=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=MARKER_WORDS, title=st.sampled_from(["Secret Plan Omega", "Zorvath Holdings"]), as_glossary_free=st.booleans())
def test_no_label_from_restricted_text(tmp_path_factory, words, title, as_glossary_free):
    """Marker names that occur only in RESTRICTED chunks never reach a node, edge or alias."""
    marker = " ".join(words)
    secret = [chunk(5, f"The board met {marker} Corporation and {marker} in \"{marker} Accord\".", title=title,
                    entity=f"{words[0]} Ltd", sensitivity="RESTRICTED"),
              chunk(6, f"{marker} Corporation will acquire Acme China.", sensitivity=" restricted ")]
    chunks = CHUNKS + secret
    d = tmp_path_factory.mktemp("g")
    build_relation_graph(d, chunks, glossary=GLOSSARY if as_glossary_free else None)
    blob = b"".join((d / f).read_bytes() for f in (ga.NODES_FILE, ga.EDGES_FILE, ga.ALIASES_FILE, ga.PARAMS_FILE))
    text = json.dumps(pq.read_table(d / ga.NODES_FILE).to_pydict()) + json.dumps(pq.read_table(d / ga.ALIASES_FILE).to_pydict())
    for w in words + ["Secret Plan Omega"]:
        assert w.lower() not in text.lower() and w.encode() not in blob
    assert (np.load(d / ga.CHUNK_NODE_FILE)[[5, 6]] == -1).all()
    assert verify_relation_graph(d, chunks, GLOSSARY)["restricted_nodes"] == 0


def test_check_catches_a_graph_built_from_restricted_text(tmp_path):
    """The blocking check fails on a graph whose labels come from RESTRICTED text."""
    leaked = [GraphChunk(c.row, c.chunk_id, c.doc_id, c.text, c.title, c.entity, "PUBLIC") for c in CHUNKS]
    leaked.append(chunk(5, "Zorvath Quillon met the board.", title="Zorvath Quillon"))
    d = tmp_path / "g"
    build_relation_graph(d, leaked)
    as_stored = leaked[:-1] + [chunk(5, leaked[-1].text, title=leaked[-1].title, sensitivity="RESTRICTED")]
    found = verify_relation_graph(d, as_stored)
    assert found["restricted_nodes"] == 1 and found["restricted_edges"] >= 1 and found["unsupported_labels"] >= 1


def openie_reply(request_json) -> str:
    text = request_json["messages"][-1]["content"]
    names = re.findall(r"[A-Z][a-z]+ [A-Z][a-z]+", text)
    triples = [[names[0], "related to", n] for n in names[1:]]
    return "Here you go:\n```json\n" + json.dumps({"triples": triples}) + "\n```"


def test_llm_openie_extractor_against_a_local_server(tmp_path):
    from ragspine_core.llm import OpenAICompatibleProvider

    secret = chunk(5, "Zorvath Quillon told Marbek Tesselin about the merger.", sensitivity="RESTRICTED")
    chunks = CHUNKS + [secret]
    with LocalChatServer("ok", reply=openie_reply) as server:
        provider = OpenAICompatibleProvider(server.base_url, "tiny", timeout_s=5.0, backoff_s=0.01)
        ex = OpenIETripleExtractor(provider, model_id="tiny", cache_path=tmp_path / "openie.sqlite")
        try:
            params = build_relation_graph(tmp_path / "g1", chunks, glossary=GLOSSARY, extractor=ex)
            first_calls = ex.calls
            build_relation_graph(tmp_path / "g2", chunks, glossary=GLOSSARY, extractor=ex)
        finally:
            ex.close()
        # replies asked with another token cap are not reused (a reply cut at a smaller cap
        # must not stand in for one a larger cap allows)
        wider = OpenIETripleExtractor(provider, model_id="tiny", cache_path=tmp_path / "openie.sqlite",
                                      max_tokens=ex.max_tokens * 2)
        try:
            build_relation_graph(tmp_path / "g3", chunks, glossary=GLOSSARY, extractor=wider)
        finally:
            wider.close()
        bodies = server.all_raw_bodies()
    assert wider.calls == len(CHUNKS) and wider.cache_hits == 0
    assert first_calls == len(CHUNKS)  # every open chunk once, the RESTRICTED one never
    assert ex.calls == first_calls and ex.cache_hits == len(CHUNKS)  # cached by chunk hash
    assert b"Zorvath" not in bodies and b"Marbek" not in bodies
    assert params["model_derived_edges"] >= 1
    edges = pq.read_table(tmp_path / "g1" / ga.EDGES_FILE).to_pydict()
    model = [i for i, t in enumerate(edges["type"]) if t == "model_relation"]
    assert model and all(edges["provenance"][i] == ga.PROVENANCE_MODEL and not edges["verified"][i] for i in model)
    assert {edges["label"][i] for i in model} == {"related to"}
    with pytest.raises(Exception, match="RESTRICTED"):
        OpenIETripleExtractor(provider, model_id="tiny", cache_path=tmp_path / "o2.sqlite").extract(secret)


def test_mentions_keep_the_strongest_source():
    ms = extract_mentions("Acme China grew.", title="Acme China", entity_field="Acme China")
    assert [(m.key, m.source) for m in ms] == [("acme china", "metadata")]


def _write_graph_library(raw: Path) -> str:
    """Three open documents that name each other, one RESTRICTED one with a marker name."""
    raw.mkdir(parents=True, exist_ok=True)
    docs = {
        "fred.md": ("Fred Cortes", "Fred Cortes was a Filipino actor who starred for Lvn Pictures before World War II."),
        "lvn.md": ("Lvn Pictures", "Lvn Pictures was a film studio in Manila founded by Narcisa Leon."),
        "narcisa.md": ("Narcisa Leon", "Narcisa Leon ran Lvn Pictures and produced films with Fred Cortes."),
    }
    for name, (title, body) in docs.items():
        (raw / name).write_text(f"---\ntitle: {title}\n---\n{body}\n", encoding="utf-8")
    marker = "Zorvath Quillon"
    (raw / "secret.md").write_text(f"---\ntitle: Secret Memo\nsensitivity: RESTRICTED\n---\n{marker} met Marbek Tesselin "
                                   "to discuss Lvn Pictures.\n", encoding="utf-8")
    return marker


def test_library_setting_graph_extractor_llm_end_to_end(tmp_path):
    """``graph_extractor = "llm"`` in _library.toml runs the OpenIE extractor through the llm
    resource (a local OpenAI-compatible server): RESTRICTED text never sent, cached by chunk
    hash (a rebuild asks nothing), edges stamped model-derived/unverified in the snapshot."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_core.errors import ConfigError
    from ragspine_core.llm import OpenAICompatibleProvider

    raw = tmp_path / "raw" / "lib"
    marker = _write_graph_library(raw)
    (raw / "_library.toml").write_text('graph_extractor = "llm"\nsummarizer = "none"\n', encoding="utf-8")
    paths = LibraryPaths("lib", raw, tmp_path / "art" / "lib")
    cache = tmp_path / "c" / "e.sqlite"
    with pytest.raises(ConfigError, match="graph_extractor"):
        build_library(paths, embedding="none", cache_path=cache)  # no LLM configured: says what to set
    with LocalChatServer("ok", reply=openie_reply) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "tiny", timeout_s=10, max_retries=0)  # noqa: E731
        first = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        n_first = len(server.requests)
        (raw / "_library.toml").write_text('graph_extractor = "llm"\nsummarizer = "none"\nmax_chars = 470\n', encoding="utf-8")
        second = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)  # new graph, same chunk texts
        bodies = server.all_raw_bodies()
        n_second = len(server.requests)
    assert n_first == 3 and n_second == n_first  # one call per open chunk; the rebuild hits the cache
    assert marker.split()[0].encode() not in bodies and b"Marbek" not in bodies
    for res in (first, second):
        edges = pq.read_table(Path(res.snapshot_dir) / "relation_graph" / ga.EDGES_FILE).to_pydict()
        model = [i for i, t in enumerate(edges["type"]) if t == "model_relation"]
        assert model and all(edges["provenance"][i] == ga.PROVENANCE_MODEL and not edges["verified"][i] for i in model)
        labels = pq.read_table(Path(res.snapshot_dir) / "relation_graph" / ga.NODES_FILE).column("label").to_pylist()
        assert not any("Zorvath" in x or "Marbek" in x for x in labels)


def test_library_above_graph_max_chunks_gets_no_graph_until_it_raises_the_limit(tmp_path):
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.library_config import LibraryConfig
    from ragspine_index.pipeline import build_library
    from ragspine_query import HybridRetriever, RetrievalConfig, open_library
    from ragspine_core.errors import ConfigError, IndexNotFoundError

    raw = tmp_path / "raw" / "lib"
    _write_graph_library(raw)
    paths = LibraryPaths("lib", raw, tmp_path / "art" / "lib")
    cache = tmp_path / "c" / "e.sqlite"
    (raw / "_library.toml").write_text('graph_max_chunks = 2\nsummarizer = "none"\n', encoding="utf-8")
    small = build_library(paths, embedding="none", cache_path=cache)
    assert not (Path(small.snapshot_dir) / "relation_graph").exists()
    with open_library(small.snapshot_dir) as lib:
        assert lib.relation_graph() is None
        with pytest.raises(IndexNotFoundError, match="relation_graph"):
            HybridRetriever(lib, embedding_backend=None, config=RetrievalConfig(mode="graph"))
    (raw / "_library.toml").write_text('graph_max_chunks = 0\nsummarizer = "none"\n', encoding="utf-8")  # 0: no limit
    full = build_library(paths, embedding="none", cache_path=cache)
    assert (Path(full.snapshot_dir) / "relation_graph" / ga.NODES_FILE).is_file()
    with pytest.raises(ConfigError, match="graph_max_chunks"):
        LibraryConfig(graph_max_chunks=-1)
    with pytest.raises(ConfigError, match="graph_extractor"):
        LibraryConfig(graph_extractor="gpt")


def test_chinese_title_short_alias_is_labelled_by_its_key(tmp_path):
    # "朱椿 (明朝)" has the short alias "朱椿", whose surface form equals its match key:
    # no form is recorded for it, and the build used to fail with an IndexError (cmrc2018)
    chunks = [
        chunk(0, "朱椿（），是明太祖朱元璋第十一子，洪武四年八月初八生。", title="朱椿 (明朝)"),
        chunk(1, "朱椿向朝廷求救，朱元璋派遣都指挥瞿能出大渡河将番人击破。", title="朱椿 (明朝)", doc="d0"),
    ]
    _, _, nodes, edges = build(tmp_path, chunks)
    entity_labels = [lab for lab, kind in zip(nodes["label"], nodes["kind"]) if kind == "entity"]
    assert "朱椿" in entity_labels and "朱椿 (明朝)" in entity_labels
    assert all(entity_labels)  # every entity node has a non-empty label
    short = node_id(nodes, "朱椿")
    assert any(s == short for s in edges["src"])  # and it is linked, not a dangling node
