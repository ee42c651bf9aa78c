"""The query pipeline end to end: README notebook block as written (hybrid by default),
explain, a toy channel + post-processor registered from outside the core (in process and
through ``ragspine query --plugin``), multi-library CLI routing and provenance."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings

import pytest

from tests.conftest import PYTHON, RESTRICTED_MARKERS, SAMPLE_LIBRARY, copy_sample_data, ingest, python_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def onnx_root(tmp_path_factory, repo_root):
    """A data root whose ``artifacts/sample`` was built WITH the packaged MiniLM vectors."""
    pytest.importorskip("onnxruntime", reason="the embed-onnx extra builds the vectors")
    data = copy_sample_data(tmp_path_factory.mktemp("onnx_sample") / "data")
    ingest(data / "raw" / SAMPLE_LIBRARY, embedding="onnx")
    return data.parent


@pytest.fixture(scope="module")
def second_library(tmp_path_factory, repo_root):
    """A second ingested copy of the sample under another library name (``sampleb``)."""
    data = copy_sample_data(tmp_path_factory.mktemp("sampleb") / "data")
    raw = data / "raw" / "sampleb"
    shutil.move(str(data / "raw" / SAMPLE_LIBRARY), str(raw))
    ingest(raw)
    return data / "artifacts" / "sampleb"


@pytest.fixture
def toy_plugins():
    import importlib

    from ragspine_query.pipeline import unregister_channel, unregister_postprocessor

    mod = importlib.import_module("tests.query.toy_plugins")
    mod.register()
    try:
        yield mod
    finally:
        unregister_channel("toy")
        unregister_postprocessor("toy_post")


def readme_notebook_block(repo_root) -> str:
    text = (repo_root / "README.md").read_text(encoding="utf-8")
    section = text.split("## Query from a notebook", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def restricted_chunk_ids(artifacts) -> set[str]:
    from ragspine_query import open_library

    with open_library(artifacts) as lib:
        return {r[0] for r in lib.execute_read("SELECT chunk_id FROM narrative_chunk WHERE upper(sensitivity) = 'RESTRICTED'")}


def test_readme_notebook_block_runs_as_written_and_is_hybrid(onnx_root, repo_root, monkeypatch, capsys):
    from ragspine_query import HybridRetriever

    for var in ("RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_RERANKER", "RAGSPINE_EMBEDDING_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(onnx_root)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "falling back to BM25" notice: the model is installed
        exec(compile(readme_notebook_block(repo_root), "README.md:notebook", "exec"), ns)
    lib, hits, snippets = ns["lib"], ns["hits"], ns["snippets"]
    assert HybridRetriever(lib).active_mode == "hybrid"
    assert hits and any(h.scores["vector"] != 0.0 for h in hits) and any(h.scores["bm25"] != 0.0 for h in hits)
    assert all(h.chunk.sensitivity != "RESTRICTED" for h in hits)
    assert all(s["sensitivity"] != "RESTRICTED" for s in snippets)
    out = capsys.readouterr().out
    assert not any(m in out for m in RESTRICTED_MARKERS.values())


def test_missing_model_extra_falls_back_to_bm25_with_one_notice(onnx_root, monkeypatch):
    from ragspine_query import HybridRetriever, open_library
    from ragspine_query import retriever
    from ragspine_core.errors import MissingExtraError

    def missing(*a, **k):
        raise MissingExtraError("the ONNX embedding backend", "embed-onnx", "onnxruntime")

    monkeypatch.setattr(retriever, "backend_for_library", missing)  # the name the retriever calls
    monkeypatch.setattr(retriever, "_NOTIFIED", set())
    lib = open_library(onnx_root / "data" / "artifacts" / SAMPLE_LIBRARY)
    with pytest.warns(RuntimeWarning, match=r"ragspine\[embed-onnx\]"):
        assert HybridRetriever(lib).active_mode == "bm25"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert HybridRetriever(lib).active_mode == "bm25"  # one notice only


def test_search_and_retrieve_explain(onnx_root):
    from ragspine_query import HybridRetriever, build_narrative_retriever, open_library

    art = onnx_root / "data" / "artifacts" / SAMPLE_LIBRARY
    restricted = restricted_chunk_ids(art)
    assert restricted, "the sample has RESTRICTED chunks"
    r = HybridRetriever(open_library(art))
    plain = r.search("battery supply chain risk", top_k=5)
    res = r.search("battery supply chain risk", top_k=5, explain=True)
    assert res == plain and plain.explain is None
    stages = [(s.stage, s.name) for s in res.explain.stages]
    assert stages[:4] == [("mask", "filters"), ("channel", "bm25"), ("channel", "vector"), ("fuse", "rrf(channels)")]
    # then, per channel, the hits no other channel found
    assert {("only_in", "bm25"), ("only_in", "vector")} <= set(stages[4:]) and {s for s, _ in stages[4:]} == {"only_in"}
    fuse = res.explain.stages[3]
    assert [c.chunk_id for c in fuse.candidates] == [h.chunk_id for h in res]
    assert all(s.seconds >= 0 for s in res.explain.stages)
    rows = res.explain.to_rows()
    assert {"stage", "name", "rank", "chunk_id", "library_id", "score", "ms"} <= set(rows[0])
    nr = build_narrative_retriever(art, reranker=None)
    for q in ("RESTRICTED memo salary", "battery supply chain risk", "为什么营收下滑"):
        snips = nr.retrieve(q, top_k=10, explain=True)
        assert snips == nr.retrieve(q, top_k=10)
        shown = {row["chunk_id"] for row in snips.explain.to_rows()} | set(re.findall(r"[0-9a-f]{12}", snips.explain.format_table()))
        assert not {c for c in restricted if c in shown or c[:12] in shown}
        assert snips.explain.stages[-1].stage == "snippets"


def test_to_frame_has_provenance_columns(onnx_root):
    pd = pytest.importorskip("pandas")
    from ragspine_query import HybridRetriever, open_library

    frame = HybridRetriever(open_library(onnx_root / "data" / "artifacts" / SAMPLE_LIBRARY)).search("battery", top_k=3).to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert {"doc_id", "title", "locator", "library_id", "chunk_id", "sensitivity", "score", "bm25", "vector", "fused"} <= set(frame.columns)


def test_toy_channel_and_postprocessor_plug_in_without_touching_the_core(built_sample, toy_plugins):
    from ragspine_query import HybridRetriever, build_narrative_retriever, open_library

    r = HybridRetriever(open_library(built_sample))
    # the tiers' graph/tree channels are on demand: they never join a plain query's fusion
    assert [c.name for c in r.channels if not getattr(c, "on_demand", False)] == ["bm25", "toy"]
    hits = r.search("revenue decline", top_k=10, include_restricted=False, explain=True)
    assert any(h.scores.get("toy") == 1.0 for h in hits)
    assert ("channel", "toy") in [(s.stage, s.name) for s in hits.explain.stages]
    snips = build_narrative_retriever(built_sample, reranker=None).retrieve("revenue decline", top_k=5, explain=True)
    assert snips and all(s["scores"]["toy_post"] == 1.0 for s in snips)
    assert "toy_post" in snips.explain.format_table() and "toy" in {s.name for s in snips.explain.stages}


def ragspine(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "ragspine_tools.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", timeout=180, env=python_env(DAGSTER_HOME=str(cwd / "dagster_home")))


def test_cli_plugin_and_explain(built_sample, repo_root, tmp_path):
    env_cwd = repo_root  # `tests.query.toy_plugins` is importable from the repository root
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(built_sample), "battery supply chain risk",
                           "--plugin", "tests.query.toy_plugins", "--explain", "--top-k", "3"],
                          cwd=env_cwd, capture_output=True, text=True, encoding="utf-8", timeout=180,
                          env=python_env(DAGSTER_HOME=str(tmp_path / "dagster_home")))
    assert proc.returncode == 0, proc.stderr
    assert "explain:" in proc.stdout and " toy " in proc.stdout and "toy_post" in proc.stdout
    assert not any(m in proc.stdout for m in RESTRICTED_MARKERS.values())
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(built_sample), "battery", "--json", "--explain",
                           "--plugin", "tests.query.toy_plugins"], cwd=env_cwd, capture_output=True, text=True,
                          encoding="utf-8", timeout=180, env=python_env(DAGSTER_HOME=str(tmp_path / "dagster_home")))
    out = json.loads(proc.stdout)
    assert out["results"] and all(s["scores"]["toy_post"] == 1.0 for s in out["results"])
    assert {"channel", "fuse", "postprocess", "restricted_strip", "snippets"} <= {r["stage"] for r in out["explain"]}
    bad = ragspine("query", built_sample, "x", "--plugin", "no_such_plugin_module", cwd=tmp_path)
    assert bad.returncode == 2 and "no_such_plugin_module" in bad.stderr


def test_cli_multiple_libraries_fuse_with_provenance(built_sample, second_library, tmp_path):
    proc = ragspine("query", built_sample, "battery supply chain risk", "--library", second_library, "--json", "--top-k", "10",
                    "--mode", "bm25", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {s["library_id"] for s in out} == {"sample", "sampleb"}
    # the two copies hold the same documents, so each top document appears from both libraries, adjacent
    assert out[0]["doc_id"] == out[1]["doc_id"] and {out[0]["library_id"], out[1]["library_id"]} == {"sample", "sampleb"}
    assert all(s["sensitivity"] != "RESTRICTED" for s in out)
    proc = ragspine("query", built_sample, "battery", "--library", second_library, "--explain", "--mode", "bm25", cwd=tmp_path)
    assert proc.returncode == 0 and "rrf(libraries)" in proc.stdout and "route" in proc.stdout
