"""Language-aware fusion end to end: a tiny mixed-language and a tiny Chinese library,
built by the production pipeline (deterministic embeddings), searched in ``auto`` mode
and evaluated with ``ragspine eval``'s function (the ``auto`` figure and its plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_tools.evaluate import evaluate_dataset, prepare_library, sample_queries
from ragspine_tools.eval.beir import load_beir
from ragspine_query.builder import build_pipeline
from ragspine_query.fusion import FUSION_POLICIES, fuse_mixed_languages
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig

MIXED_DOCS = {
    "en1": ("Tides", "The gravitational pull of the moon drives ocean tides twice a day."),
    "en2": ("Volcanoes", "Magma rises through the crust and erupts as lava from a volcano."),
    "en3": ("Vaccines", "A vaccine trains the immune system to recognise a pathogen."),
    "en4": ("Glaciers", "Glaciers carve valleys as compacted snow slowly flows downhill."),
    "zh1": ("潮汐", "月球的引力每天两次推动海洋潮汐的涨落。"),
    "zh2": ("火山", "岩浆穿过地壳上升，从火山口喷发成为熔岩。"),
    "sec": ("Memo", "Confidential tides memo about the moon."),  # RESTRICTED (see write_dataset)
}
MIXED_QUERIES = {"q1": "moon gravity ocean tides", "q2": "岩浆 火山 喷发"}
MIXED_QRELS = [("q1", "en1", 1), ("q1", "zh1", 1), ("q2", "zh2", 1), ("q2", "en2", 1)]

ZH_DOCS = {
    "a": ("营收", "公司第三季度营收增长百分之十二，主要来自海外市场。"),
    "b": ("成本", "原材料成本上升导致毛利率下降两个百分点。"),
    "c": ("研发", "研发投入继续加大，新产品将在明年上市。"),
}
ZH_QUERIES = {"z1": "营收增长", "z2": "毛利率下降的原因"}
ZH_QRELS = [("z1", "a", 1), ("z2", "b", 1)]


def write_dataset(root: Path, docs, queries, qrels) -> Path:
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in docs.items():
            rec = {"_id": doc_id, "title": title, "text": text}
            if doc_id == "sec":
                rec["sensitivity"] = "RESTRICTED"
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels))
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    base = tmp_path_factory.mktemp("lang")
    out = base / "eval"
    mixed = write_dataset(base / "mixed", MIXED_DOCS, MIXED_QUERIES, MIXED_QRELS)
    zh = write_dataset(base / "zh", ZH_DOCS, ZH_QUERIES, ZH_QRELS)
    results = {
        "mixed": evaluate_dataset(mixed, modes=("auto", "bm25"), embedding="deterministic", out=out, quiet=True),
        "zh": evaluate_dataset(zh, modes=("auto", "hybrid"), embedding="deterministic", out=out, quiet=True),
    }
    libs = {name: open_library(prepare_library(ds, out, quiet=True, embedding="deterministic").root)
            for name, ds in (("mixed", mixed), ("zh", zh))}
    yield results, libs
    for lib in libs.values():
        lib.close()


def test_eval_reports_auto_with_its_fusion_plan_next_to_forced_modes(built):
    results, _ = built
    auto, bm25 = results["mixed"]
    assert auto.mode == "auto" and auto.metrics["active_mode"] == "hybrid" and bm25.metrics["active_mode"] == "bm25"
    fusion = auto.metrics["fusion"]
    assert list(fusion) == ["mixed:en", "mixed:zh"] and fusion["mixed:en"]["queries"] == 1 and fusion["mixed:zh"]["queries"] == 1
    assert fusion["mixed:en"]["method"] == "mixed" and fusion["mixed:en"]["mixed"] == FUSION_POLICIES["mixed:en"].mixed.to_dict()
    assert "fusion" not in bm25.metrics  # a forced mode fuses statically
    zh_auto, zh_hybrid = results["zh"]
    assert list(zh_auto.metrics["fusion"]) == ["same-language:zh"] and "fusion" not in zh_hybrid.metrics
    json.dumps(auto.metrics, ensure_ascii=False)  # the eval JSON carries it


def test_mixed_library_fuses_by_language_and_dense_admission(built):
    _, libs = built
    lib = libs["mixed"]
    r = HybridRetriever(lib, config=RetrievalConfig(mode="auto"))
    assert r.language_profile.mixed and r.language_profile.majority == "en"
    restricted = lib.restricted_mask()
    assert restricted.any() and r.language_profile.total == int((~restricted).sum())  # RESTRICTED rows are not counted
    query = "moon gravity ocean tides"
    plan = r.fusion_plan(query)
    assert plan.case == "mixed:en" and plan.query_language == "en" and plan.method == "mixed"
    res = r.search(query, top_k=20, explain=True, include_restricted=False)
    assert all(h.chunk.doc_id != "sec" for h in res)
    # the fused order is exactly fuse_mixed_languages over the channels' own rankings
    allowed = r.allowed_mask(None, include_restricted=False)
    depth = plan.mixed.depth
    rankings = [(c.name, *c.search(query, depth, allowed)) for c in r.channels]
    rows, fused = fuse_mixed_languages(rankings, row_language=r._row_languages(), query_language="en", policy=plan.mixed,
                                       channel_languages={c.name: getattr(c, "languages", None) for c in r.channels})
    ids = lib.chunk_ids()
    assert [h.chunk_id for h in res] == [ids[x] for x in rows[:20]]
    assert [h.score for h in res] == pytest.approx(fused[:20].tolist())
    assert any(h.chunk.language == "zh" for h in res), "the Chinese rows must stay reachable from an English query"
    fuse = [s for s in res.explain.stages if s.stage == "fuse"]
    assert fuse and "language-aware mixed:en" in fuse[0].detail and "earn=" in fuse[0].detail
    # a forced hybrid keeps the static equal-weight RRF
    hybrid = HybridRetriever(lib, config=RetrievalConfig(mode="hybrid"))
    assert hybrid.fusion_plan(query) is None
    hres = hybrid.search(query, top_k=5, explain=True)
    assert "k=60" in [s for s in hres.explain.stages if s.stage == "fuse"][0].detail


def test_chinese_library_chinese_query_runs_bm25_alone_and_says_so(built):
    _, libs = built
    lib = libs["zh"]
    r = HybridRetriever(lib, config=RetrievalConfig(mode="auto"))
    assert r.fusion_plan("营收增长").case == "same-language:zh"
    res = r.search("营收增长", top_k=3, explain=True)
    skipped = [s for s in res.explain.stages if s.stage == "channel" and s.name == "vector"]
    assert len(skipped) == 1 and skipped[0].detail.startswith("skipped: weight 0") and not skipped[0].candidates
    assert res[0].chunk.doc_id == "a"
    bm25_only = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search("营收增长", top_k=3)
    assert [h.chunk_id for h in res] == [h.chunk_id for h in bm25_only]
    # an English query in the Chinese library is cross-lingual: both channels, dense leading
    plan = r.fusion_plan("revenue growth")
    assert plan.case == "cross-lingual" and plan.weight("vector") > plan.weight("bm25")


def test_sample_queries_is_deterministic_and_keeps_qrels_aligned(built, tmp_path):
    ds = load_beir(write_dataset(tmp_path / "s", MIXED_DOCS, MIXED_QUERIES, MIXED_QRELS), "test")
    one = sample_queries(ds, 1)
    assert len(one.queries) == 1 and set(one.qrels) == set(one.queries) and one.queries == sample_queries(ds, 1).queries
    assert sample_queries(ds, 0) is ds and sample_queries(ds, 5) is ds


def test_explain_notes_a_reranker_skipped_for_a_language_it_does_not_serve(built):
    from ragspine_query.rerank import LexicalMaxSimReranker

    _, libs = built
    r = HybridRetriever(libs["zh"], config=RetrievalConfig(mode="auto"))
    english_only = LexicalMaxSimReranker(languages=("en",))
    res = build_pipeline(r, reranker=english_only, glossary=None).run("营收增长", top_k=3, explain=True)
    [stage] = [s for s in res.explain.stages if s.stage == "rerank"]
    assert stage.detail.startswith("skipped: query language zh") and "rerank" not in res[0].scores
    both = build_pipeline(r, reranker=LexicalMaxSimReranker(), glossary=None).run("营收增长", top_k=3, explain=True)
    [stage] = [s for s in both.explain.stages if s.stage == "rerank"]
    assert stage.detail == "" and "rerank" in both[0].scores
