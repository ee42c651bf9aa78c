"""Tier 3: the sample library materialized by Dagster, queried through ``ragspine_query``.

Everything here reads the session's ``built_sample`` index (one real ``materialize``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

from ragspine_index.source_documents.parse_library import parse_library
from ragspine_core import integrity, schema
from ragspine_core.errors import FilterError, IndexIncompatibleError, IndexNotFoundError
from ragspine_query.library import open_library
from ragspine_query.agent_api import NarrativeIndexRetriever, build_narrative_retriever
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.conftest import RESTRICTED_MARKERS

pytestmark = pytest.mark.slow

#: Queries aimed squarely at each RESTRICTED document (raw search must find it).
RESTRICTED_PROBES = {
    "price cut PowerFlex 7": "acme-us-pricing-action-2025",
    "PowerFlex 7 list price reduction pricing committee": "acme-us-pricing-action-2025",
    "Nordvolt acquisition": "board-minutes-2024-11",
    "Leipzig acquisition board of directors": "board-minutes-2024-11",
    "艾克美中国 人员优化": "acme-cn-workforce-plan-2025",
    "distributor revenue recognition investigation": "acme-eu-distributor-review",
    "RESTRICTED-MARKER-ALPHA": "board-minutes-2024-11",
    "RESTRICTED-MARKER-BRAVO": "acme-cn-workforce-plan-2025",
    "RESTRICTED-MARKER-CHARLIE": "acme-us-pricing-action-2025",
    "RESTRICTED-MARKER-DELTA": "acme-eu-distributor-review",
}
OTHER_QUERIES = [
    "why did Acme Europe revenue decline in Q3 2024",
    "为什么营收下滑",
    "数据出境 第五条",
    "headcount reduction plan Acme China",
    "Acme Group board minutes November 2024",
    "Acme US pricing 2025",
    "艾克美中国 2025 组织 人员 方案",
    "internal investigation Acme Europe",
    "RESTRICTED",
    "marker",
    "project codename",
    "Acme",
]
ALL_QUERIES = list(RESTRICTED_PROBES) + OTHER_QUERIES


@pytest.fixture(scope="module")
def library(built_sample):
    with open_library(built_sample) as lib:
        yield lib


@pytest.fixture(scope="module")
def bm25(library) -> HybridRetriever:
    return HybridRetriever(library, config=RetrievalConfig(mode="bm25"))


@pytest.fixture(scope="module")
def narrative(built_sample) -> NarrativeIndexRetriever:
    return build_narrative_retriever(built_sample, embedding_backend=None, reranker=None, mode="auto")


def assert_no_restricted(snippets: list[dict]) -> None:
    dumped = json.dumps([s if isinstance(s, dict) else s.to_dict() for s in snippets], ensure_ascii=False)
    for marker in RESTRICTED_MARKERS.values():
        assert marker not in dumped
    assert "RESTRICTED-MARKER" not in dumped
    for s in snippets:
        assert s["sensitivity"] != "RESTRICTED"
        assert s["doc_id"] not in RESTRICTED_MARKERS


# ------------------------------------------------------------------------- answers
@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("why did Acme Europe revenue decline in Q3 2024", "acme-eu-2024q3-earnings"),
        ("数据出境 第五条", "acme-data-security-measures"),
    ],
)
def test_english_and_chinese_queries_return_the_expected_document_first(narrative, query, doc_id):
    snippets = narrative.retrieve(query, top_k=5)
    assert snippets, query
    # in the top 3: with filter extraction off by default (issue 36) the group history's "weak demand from
    # German machine builders" chunk (judged relevant, 1, to the same question in data/eval/sample) may lead
    assert doc_id in [s.doc_id for s in snippets[:3]]
    assert_no_restricted(snippets)


def test_snippets_carry_full_provenance(narrative, library):
    snippets = narrative.retrieve("why did Acme Europe revenue decline in Q3 2024", top_k=10)
    for s in snippets:
        assert {"text", "doc_id", "title", "source_locator", "chunk_id", "library_id", "sensitivity", "scores",
                "entity", "topic", "geography", "period", "language", "valid_as_of"} <= set(s.to_dict())
        assert s["library_id"] == "sample" and s["title"] and s["source_locator"]
        assert set(s["scores"]) >= {"bm25", "vector", "fused"}
        assert s["scores"]["vector"] == 0.0  # built with --embedding none
    assert snippets[0]["scores"]["bm25"] > 0


def test_snippet_text_is_the_cited_span_of_the_source_file(narrative, built_sample):
    raw = built_sample.parent.parent / "raw" / "sample"
    bodies = {d.doc_id: d.body for d in parse_library(raw).documents}
    for q in ("why did Acme Europe revenue decline in Q3 2024", "数据出境 第五条", "为什么营收下滑"):
        for s in narrative.retrieve(q, top_k=10):
            start, end = s["span"]
            assert bodies[s["doc_id"]][start:end] == s["text"]
            assert s["locator"].endswith(f"#chars={start}-{end}")


def test_manifest_describes_the_published_index(library):
    m = library.manifest
    assert m["schema_version"] == schema.SCHEMA_VERSION and m["library_id"] == "sample"
    assert m["counts"]["documents"] == 46 and m["counts"]["parse_errors"] == 0
    assert m["counts"]["chunks"] == library.n_chunks
    assert m["counts"]["restricted_chunks"] > 0 and m["counts"]["embedded_chunks"] == 0
    assert m["bm25"]["k1"] == 1.5 and m["bm25"]["b"] == 0.75
    assert m["tokenizer"]["analyzer"] in ("spec@1", "english@1")
    assert m["errors"] == [] and m["embedding"] is None
    assert set(m["documents"]) >= set(RESTRICTED_MARKERS)


# ----------------------------------------------------------------------- RESTRICTED
@pytest.mark.parametrize(("query", "restricted_doc"), list(RESTRICTED_PROBES.items()))
def test_raw_search_ranks_the_restricted_document(bm25, query, restricted_doc):
    hits = bm25.search(query, top_k=5)
    assert restricted_doc in [h.chunk.doc_id for h in hits]


@pytest.mark.parametrize("query", ALL_QUERIES)
def test_no_restricted_text_in_any_snippet(narrative, query):
    assert_no_restricted(narrative.retrieve(query, top_k=50))


@pytest.mark.parametrize("query", list(RESTRICTED_PROBES))
def test_restricted_strip_is_what_removes_the_text(library, bm25, query):
    """Same index, same query: the raw hits hold the marker, the snippets do not."""
    raw_hits = bm25.search(query, top_k=50)
    assert any(h.chunk.is_restricted for h in raw_hits)
    snippets = NarrativeIndexRetriever(bm25).retrieve(query, top_k=50)
    assert_no_restricted(snippets)
    # the link searches deeper so that top_k open snippets survive the strip
    deep_open = [h.chunk_id for h in bm25.search(query, top_k=4096) if not h.chunk.is_restricted]
    assert [s["chunk_id"] for s in snippets] == deep_open[:50]


def test_restricted_strip_applies_with_filters_and_after_the_retry(narrative):
    for filters in ({"entity": "ACME_US"}, {"sensitivity": {"eq": "RESTRICTED"}}, {"entity": "NO_SUCH"}):
        assert_no_restricted(narrative.retrieve("price cut PowerFlex 7", filters=filters, top_k=50))


def test_default_chain_strips_restricted(built_sample, monkeypatch):
    for var in ("RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_EMBEDDING", "RAGSPINE_RERANKER"):
        monkeypatch.setenv(var, "nonsense")  # below the edge nothing reads them: the Settings defaults apply
    retriever = build_narrative_retriever(built_sample)
    for query in RESTRICTED_PROBES:
        assert_no_restricted(retriever.retrieve(query, top_k=50))


# -------------------------------------------------------------------------- filters
QUERY_EU = "why did Acme Europe revenue decline in Q3 2024"


def test_filters_narrow_before_scoring(library):
    shallow = HybridRetriever(library, config=RetrievalConfig(mode="bm25", depth=1))
    unfiltered = shallow.search(QUERY_EU, top_k=3)
    assert "ACME_CN" not in {h.chunk.entity for h in unfiltered}
    filtered = shallow.search(QUERY_EU, filters={"entity": {"eq": "ACME_CN"}}, top_k=3)
    # a post-filter of the top 3 would be empty; a pre-filter finds 3 ACME_CN chunks
    assert len(filtered) == 3 and {h.chunk.entity for h in filtered} == {"ACME_CN"}
    full = {h.chunk_id: h.scores["bm25"] for h in shallow.search(QUERY_EU, top_k=library.n_chunks)}
    for h in filtered:
        assert h.scores["bm25"] == pytest.approx(full[h.chunk_id])  # statistics are not re-computed


def test_entity_filter_returns_only_that_entity(narrative):
    snippets = narrative.retrieve("营收 revenue", filters={"entity": {"eq": "ACME_CN"}}, top_k=50)
    assert snippets and {s["entity"] for s in snippets} == {"ACME_CN"}


def test_combined_filters_are_anded(bm25):
    hits = bm25.search("revenue", filters={"entity": {"in": ["ACME_CN", "ACME_US"]}, "period": {"between": ["2024Q1", "2024Q4"]}}, top_k=50)
    assert hits
    for h in hits:
        assert h.chunk.entity in ("ACME_CN", "ACME_US") and "2024Q1" <= h.chunk.period <= "2024Q4"


def test_extra_fields_are_filterable(library, bm25):
    assert "author" in library.filter_fields()
    value = next(v for v in library.column("author").tolist() if v)
    hits = bm25.search("Acme", filters={"author": value}, top_k=50)
    assert hits and all(dict(h.chunk.extra).get("author") == value for h in hits)


def test_empty_filter_result_retries_without_the_callers_filters_only_when_asked(narrative, built_sample):
    # a caller's filter is a constraint: by default an empty filtered result stays empty
    kept = narrative.retrieve(QUERY_EU, filters={"entity": {"eq": "NO_SUCH_ENTITY"}}, top_k=5)
    assert kept == [] and kept.dropped_filters == ()
    relaxed = build_narrative_retriever(built_sample, embedding_backend=None, reranker=None, mode="auto", relax_filters=True)
    unfiltered = relaxed.retrieve(QUERY_EU, top_k=5)
    retried = relaxed.retrieve(QUERY_EU, filters={"entity": {"eq": "NO_SUCH_ENTITY"}}, top_k=5)
    assert retried == unfiltered and retried
    assert [(d["field"], d["op"], d["value"], d["origin"]) for d in retried.dropped_filters] == [
        ("entity", "eq", "NO_SUCH_ENTITY", "caller")]


def test_no_retry_when_disabled(bm25):
    strict = NarrativeIndexRetriever(bm25, retry_without_filters=False)
    assert strict.retrieve(QUERY_EU, filters={"entity": "NO_SUCH_ENTITY"}, top_k=5) == []


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"entity": {"like": "ACME%"}}, "unknown filter operator 'like'"),
        ({"entitee": "ACME_CN"}, "unknown filter field 'entitee'"),
        ({"period": {"between": ["2024Q1"]}}, "exactly two values"),
    ],
)
def test_bad_filter_raises_instead_of_broadening(narrative, filters, message):
    with pytest.raises(FilterError, match=message):
        narrative.retrieve(QUERY_EU, filters=filters, top_k=5)


# ------------------------------------------------------------------ determinism/ties
def test_rankings_are_deterministic_with_chunk_id_ties(bm25):
    for q in ALL_QUERIES:
        a = [(h.chunk_id, h.score) for h in bm25.search(q, top_k=30)]
        b = [(h.chunk_id, h.score) for h in bm25.search(q, top_k=30)]
        assert a == b
        assert a == sorted(a, key=lambda cs: (-cs[1], cs[0]))


def test_zero_top_k_and_unknown_words_return_nothing(bm25):
    assert bm25.search(QUERY_EU, top_k=0) == []
    assert bm25.search("qwxzv zzyzx", top_k=5) == []


# -------------------------------------------------------------------- read-only side
def test_published_snapshot_is_opened_read_only(library):
    with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|attempt to write"):
        library.execute_read(f"DELETE FROM {schema.CHUNK_TABLE}")
    # small arrays are copied at open (a file changed in place later cannot change this reader), large ones mapped
    small = library.bm25.postings.nbytes <= integrity.COPY_AT_OPEN_MAX_FILE_BYTES
    assert isinstance(library.bm25.impacts, np.memmap) is not small and isinstance(library.bm25.postings, np.memmap) is not small
    assert not library.bm25.postings.flags.writeable or small
    assert library.execute_read(f"SELECT COUNT(*) FROM {schema.CHUNK_TABLE}")[0][0] == library.n_chunks


def test_missing_index_names_the_asset_to_materialize(tmp_path):
    with pytest.raises(IndexNotFoundError, match="materialize the index_manifest asset"):
        open_library(tmp_path / "artifacts" / "nothing-here")
    with pytest.raises(IndexNotFoundError, match="index_manifest"):
        build_narrative_retriever(tmp_path / "artifacts" / "nothing-here", embedding_backend=None, reranker=None)


def copy_snapshot(built_sample, dest):
    shutil.copytree((built_sample / schema.CURRENT_POINTER).resolve(), dest)
    return dest


def test_wrong_schema_version_is_incompatible(built_sample, tmp_path):
    snap = copy_snapshot(built_sample, tmp_path / "snap")
    manifest = json.loads((snap / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    manifest["schema_version"] = schema.SCHEMA_VERSION + 98
    (snap / schema.MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexIncompatibleError, match=r"schema_version 99 .*re-materialize the index_manifest"):
        open_library(snap)


def test_manifest_missing_keys_is_incompatible(built_sample, tmp_path):
    snap = copy_snapshot(built_sample, tmp_path / "snap")
    manifest = json.loads((snap / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    del manifest["tokenizer"]
    (snap / schema.MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexIncompatibleError, match="tokenizer"):
        open_library(snap)


def test_missing_bm25_directory_names_the_asset(built_sample, tmp_path):
    snap = copy_snapshot(built_sample, tmp_path / "snap")
    shutil.rmtree(snap / schema.BM25_DIR)
    with pytest.raises(IndexNotFoundError, match="bm25_index"):
        open_library(snap)


def test_library_opens_from_raw_path_and_snapshot_dir(built_sample):
    raw = built_sample.parent.parent / "raw" / "sample"
    with open_library(raw) as a, open_library((built_sample / "current").resolve()) as b:
        assert a.snapshot_id == b.snapshot_id
