"""The leak suite's LLM-body scan against a real model (issue 42): llama.cpp's server with the
packaged Gemma 3 270M (extra ``llm-local``), behind the recording proxy of
:mod:`tests.llm_local.harness` (the fixtures of :mod:`tests.llm_local.fixtures`).

A small library — two open documents of the sample and its four RESTRICTED ones — is
built by the plain pipeline with every build-side LLM seam on (the OpenIE relation
extractor and the LLM RAPTOR summarizer), then queried with every query-side LLM feature
on at once (HyDE, RAG-Fusion, step-back, decomposition, the LLM tier classifier, LLM filter
extraction, the corrective loop's LLM grader and rewrite, the listwise judge), in process
and through ``ragspine query`` (``--explain``, ``--json``; HyDE, LLM filters and the judge),
with queries whose candidates include RESTRICTED chunks. Scanned for RESTRICTED fingerprints: every request body the
features sent (raw and each message decoded), every reply the model gave, and everything
those replies reach: snippets, explain tables and rows, the CLI's stdout and stderr, the
relation graph's and the summary tree's files. Expected: 0.

Skipped, saying why, where the ``llm-local`` extra or its model is not installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, REPO_ROOT, python_env
from tests.leak.test_leak_suite import Scanner, fingerprints
from tests.llm_local.fixtures import local_llm, provider, proxy  # noqa: F401  (fixtures)
from tests.llm_local.harness import TEST_MAX_TOKENS

pytestmark = [pytest.mark.slow, pytest.mark.llm_local]

OPEN_DOCS = ("acme-us-product-roadmap-2025.md", "acme-cn-product-launch-2024.md")
RESTRICTED_DOCS = ("board-minutes-2024-11.md", "acme-cn-workforce-plan-2025.md", "acme-us-pricing-action-2025.md",
                   "acme-eu-distributor-review.md")
#: their words reach the RESTRICTED documents too: RESTRICTED chunks are among the candidates
QUERIES = ("merger pricing and new products in 2025",)
CLI_QUERY = "Acme US pricing action and product roadmap 2025"
FEATURES = {"transforms": "decompose,step_back,fusion,hyde", "tiers": "llm", "filters": "llm", "corrective": "llm"}
#: the CLI run: fewer features (each one is seconds of a 2-core CPU model), the output path is what it adds
CLI_FEATURES = {"RAGSPINE_TRANSFORMS": "hyde", "RAGSPINE_FILTER_EXTRACTION": "llm", "RAGSPINE_RERANKER": "listwise"}


@pytest.fixture(scope="module")
def llm_library(tmp_path_factory, proxy, provider):  # noqa: F811
    """The small library, built with the model as relation extractor and summarizer."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    root = tmp_path_factory.mktemp("leak_llm")
    raw = root / "data" / "raw" / "small"
    raw.mkdir(parents=True)
    for name in OPEN_DOCS + RESTRICTED_DOCS:
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    (raw / "_library.toml").write_text('relation_extractor = "llm"\nsummarizer = "llm"\n', encoding="utf-8")
    shutil.copy2(REPO_ROOT / "data" / "glossary.toml", root / "data" / "glossary.toml")
    mark = proxy.mark()
    res = build_library(LibraryPaths("small", raw, root / "data" / "artifacts" / "small"), embedding="deterministic",
                        cache_path=root / "data" / "cache" / "e.sqlite", make_llm=lambda: provider,
                        glossary_path=root / "data" / "glossary.toml")
    return {"root": root, "raw": raw, "art": root / "data" / "artifacts" / "small", "snapshot": Path(res.snapshot_dir),
            "build_calls": len(proxy.answered(mark)), "prints": fingerprints(raw)}


def test_every_llm_seam_on_a_real_model_sends_and_shows_no_restricted_text(llm_library, proxy, provider, local_llm):  # noqa: F811
    from ragspine_query.agent_api import build_narrative_retriever
    from ragspine_query.intelligence import QueryIntelligence
    from ragspine_query.rerank import make_reranker

    lib = llm_library
    prints = lib["prints"]
    scan = Scanner(prints)
    assert lib["build_calls"] >= 2, "the build asked the model (OpenIE triples, RAPTOR summaries)"
    for q in (*QUERIES, CLI_QUERY):  # a fingerprint in a request body can then only come from the index
        assert not any(p in q for p in prints), q

    # the build's model-written artifacts
    for sub in ("relation_graph", "summary_tree"):
        folder = lib["snapshot"] / sub
        assert folder.is_dir(), f"the build published {sub}"
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            scan.blob(f"{sub}/{path.name}", path.read_bytes())

    # every query-side feature at once, in process (what `ragspine query` wires)
    qi = QueryIntelligence(**FEATURES)
    r = build_narrative_retriever(lib["art"], provider, embedding_backend=None, mode="bm25",
                                  reranker=make_reranker("listwise", provider=provider), intelligence=qi, rerank_top_n=5)
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    with open_library(lib["art"]) as opened:
        bare = HybridRetriever(opened, embedding_backend=None, config=RetrievalConfig(mode="bm25"))
        for q in QUERIES:  # the candidates the features see include RESTRICTED chunks
            hits = bare.search(q, top_k=10, include_restricted=True)
            assert any(h.chunk.is_restricted for h in hits) and not all(h.chunk.is_restricted for h in hits), q
    mark = proxy.mark()
    for i, q in enumerate(QUERIES):
        out = r.retrieve(q, top_k=5, explain=True)
        assert all(s["sensitivity"] != "RESTRICTED" for s in out)
        scan.text(f"snippets #{i}", json.dumps([s.to_dict() for s in out], ensure_ascii=False))
        table = out.explain.format_table(per_stage=50)
        for word in ("decompose:", "step_back:", "hyde:", "listwise:", "filters:llm"):
            assert word in table, f"{word} missing from explain:\n{table[:3000]}"
        scan.text(f"explain table #{i}", table)
        scan.text(f"explain rows #{i}", json.dumps(out.explain.to_rows(), ensure_ascii=False))
    asked = proxy.answered(mark)
    systems = {json.loads(e.sent)["messages"][0]["content"][:40] for e in proxy.exchanges[mark:]}
    assert len(asked) >= 6 and len(systems) >= 6, f"every kind of prompt reached the model: {sorted(systems)}"

    # the CLI, every feature from the environment, the model behind the proxy
    env = python_env(RAGSPINE_LLM_BASE_URL=proxy.base_url, RAGSPINE_LLM_MODEL=local_llm.alias,
                     RAGSPINE_LLM_MAX_TOKENS=str(TEST_MAX_TOKENS), RAGSPINE_LLM_DEADLINE_S="120",
                     RAGSPINE_EMBEDDING="none", **CLI_FEATURES)
    mark = proxy.mark()
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(lib["art"]), CLI_QUERY, "--mode", "bm25",
                           "--top-k", "5", "--explain", "--json"], capture_output=True, text=True, timeout=600,
                          cwd=lib["root"], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proxy.answered(mark), "the CLI asked the model"
    payload = json.loads(proc.stdout)
    assert payload["results"] and all(s["sensitivity"] != "RESTRICTED" for s in payload["results"])
    scan.text("CLI stdout", proc.stdout)
    scan.text("CLI stderr", proc.stderr)

    # every request body the features sent, and every reply the model gave
    assert proxy.exchanges
    for i, ex in enumerate(proxy.exchanges):
        scan.blob(f"LLM request body #{i}", ex.sent)
        for m in json.loads(ex.sent)["messages"]:
            scan.text(f"LLM request body #{i} ({m['role']} message, decoded)", m["content"])
        scan.blob(f"LLM reply #{i}", ex.reply)
        if ex.status == 200:
            for choice in json.loads(ex.reply).get("choices", []):
                scan.text(f"LLM reply #{i} (decoded)", (choice.get("message") or {}).get("content") or "")
    print(f"\n{len(proxy.exchanges)} LLM exchanges ({lib['build_calls']} at build time) and {scan.scanned} outputs "
          f"scanned against {len(prints)} RESTRICTED fingerprints: 0 found")
