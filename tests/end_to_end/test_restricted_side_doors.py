"""RESTRICTED side doors (issue 9, items 1, 4-8, 10): each test failed before its fix.

Every test builds its own small library with a RESTRICTED document that carries a
unique marker, through the real Dagster assets (or the evaluation pipeline), and then
looks for the marker, or the RESTRICTED title, where it must never be.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.steps.chunk_embeddings import text_hash
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig
from ragspine_core.errors import ConfigError, RagspineError
from ragspine_query.library import open_library
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.conftest import PYTHON, ingest, python_env

from tests.query.rerank.llm_server import LocalChatServer

pytestmark = pytest.mark.slow

MARKER = "SIDEDOORMARKERZULU"
SECRET_TITLE = "Project Nightingale acquisition memo"
OPEN_DOC = """---
doc_id: open-note
sensitivity: PUBLIC
---
# Quarterly widget note

Widget revenue grew in the quarter while supply costs fell. The widget team hired staff.
"""
SECRET_DOC = f"""---
doc_id: secret-memo
sensitivity: RESTRICTED
---
# {SECRET_TITLE}

{MARKER} widget revenue plan: the board approved the Nightingale acquisition {MARKER}.
"""


def make_library(data: Path, name: str = "lib", extra: dict[str, str] | None = None) -> Path:
    raw = data / "raw" / name
    raw.mkdir(parents=True)
    (raw / "open.md").write_text(OPEN_DOC, encoding="utf-8")
    (raw / "secret.md").write_text(SECRET_DOC, encoding="utf-8")
    for rel, text in (extra or {}).items():
        (raw / rel).write_text(text, encoding="utf-8")
    return raw


def all_bytes_under(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# --------------------------------------------------------------------- item 1: metadata
def test_dagster_event_log_holds_no_restricted_text_or_title(tmp_path):
    from dagster._serdes import serialize_value

    data = tmp_path / "data"
    raw = make_library(data)
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        summary = ingest(raw, instance=instance)
        events = "\n".join(serialize_value(e) for e in instance.all_logs(summary.run_id))
        previews = [e.dagster_event.event_specific_data.materialization.metadata
                    for e in instance.all_logs(summary.run_id)
                    if e.is_dagster_event and e.dagster_event.is_step_materialization]
    assert "open-note" in events, "the open document is listed in the previews"
    for needle in (MARKER, SECRET_TITLE, "Nightingale"):
        assert needle not in events
        assert needle.encode() not in all_bytes_under(home)
    docs_preview = next(m["preview"].value for m in previews if "by_sensitivity" in m)
    assert "1 RESTRICTED document withheld" in docs_preview and "secret-memo" not in docs_preview
    text_preview = next(m["preview"].value for m in previews if "restricted_rows" in m)
    assert "1 RESTRICTED chunk withheld" in text_preview


# ------------------------------------------------------------------- item 4: eval marks
def test_eval_honours_the_corpus_sensitivity_field(tmp_path):
    from ragspine_tools.evaluate import evaluate_dataset
    from ragspine_tools.eval.metrics import read_trec_run

    ds = tmp_path / "tiny"
    (ds / "qrels").mkdir(parents=True)
    docs = [
        {"_id": "d1", "title": "Tides", "text": "The moon pulls the ocean tides twice a day."},
        {"_id": "d2", "title": "Secret", "text": f"{MARKER} moon ocean tides acquisition plan.", "sensitivity": "RESTRICTED"},
        {"_id": "d3", "title": "Glaciers", "text": "Glaciers carve valleys as snow flows downhill."},
    ]
    (ds / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    (ds / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": f"moon ocean tides {MARKER}"}) + "\n")
    (ds / "qrels" / "test.tsv").write_text("q1\td1\t1\nq1\td2\t1\n")
    out = tmp_path / "eval"
    [res] = evaluate_dataset(ds, modes=("hybrid",), embedding="deterministic", out=out, quiet=True)
    run = read_trec_run(res.run_path)
    assert "d1" in run["q1"] and "d2" not in run["q1"], "a RESTRICTED document is never in a result"
    [lib_dir] = [p for p in (out).glob("tiny-*/artifacts/tiny")]
    with open_library(lib_dir) as lib:
        assert lib.manifest["counts"]["restricted_chunks"] == 1
        assert lib.manifest["counts"]["embedded_chunks"] == lib.n_chunks - 1
        secret_texts = [r[0] for r in lib.execute_read("SELECT index_text FROM narrative_chunk WHERE doc_id = 'd2'")]
    cache = sqlite3.connect(out / "cache" / "embeddings.sqlite")
    cached = {r[0] for r in cache.execute("SELECT text_hash FROM embedding_cache")}
    cache.close()
    assert cached and not ({text_hash(t) for t in secret_texts} & cached)
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(lib_dir), f"tides {MARKER}", "--json"],
                          capture_output=True, text=True, timeout=120, env=python_env())
    assert proc.returncode == 0, proc.stderr
    assert MARKER not in proc.stdout and json.loads(proc.stdout)


def test_eval_refuses_a_sensitivity_key_it_cannot_parse_exactly(tmp_path):
    from ragspine_core.errors import DatasetError
    from ragspine_tools.eval.beir import iter_corpus_jsonl

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "x", "Sensitivity": "RESTRICTED"}) + "\n")
    with pytest.raises(DatasetError, match="spelled like 'sensitivity'"):
        list(iter_corpus_jsonl(corpus))


# -------------------------------------------------------------- item 5: reclassification
RECLASS = """---
doc_id: qfsupplier
sensitivity: {sens}
{extra}---
# Supplier review

Supplier Quillfeather delivered {n} widget lots late this quarter; penalties apply.
"""


def _cached_hashes(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "cache" / "embeddings.sqlite")
    try:
        return {r[0] for r in conn.execute("SELECT text_hash FROM embedding_cache")}
    finally:
        conn.close()


def _all_versions_texts(artifacts: Path, doc_id: str) -> set[str]:
    conn = sqlite3.connect(artifacts / "chunk_store.sqlite")
    try:
        return {r[0] for r in conn.execute("SELECT index_text FROM narrative_chunk WHERE doc_id = ?", (doc_id,))}
    finally:
        conn.close()


def test_reclassified_document_leaves_no_vector_and_old_snapshot_cannot_be_rolled_back_to(tmp_path):
    from ragspine_index.publish import rollback

    data = tmp_path / "data"
    raw = make_library(data, extra={"reclass.md": RECLASS.format(sens="PUBLIC", extra="", n=3)})
    first = ingest(raw, embedding="deterministic")
    art = data / "artifacts" / "lib"
    assert {text_hash(t) for t in _all_versions_texts(art, "qfsupplier")} <= _cached_hashes(data)
    # an edit, then the reclassification: every version's vector must go
    (raw / "reclass.md").write_text(RECLASS.format(sens="PUBLIC", extra="", n=4), encoding="utf-8")
    second = ingest(raw, embedding="deterministic")
    (raw / "reclass.md").write_text(RECLASS.format(sens="RESTRICTED", extra="", n=4), encoding="utf-8")
    third = ingest(raw, embedding="deterministic")
    assert len({first.snapshot_id, second.snapshot_id, third.snapshot_id}) == 3
    versions = _all_versions_texts(art, "qfsupplier")
    assert len(versions) >= 2
    assert not ({text_hash(t) for t in versions} & _cached_hashes(data))
    paths = LibraryPaths("lib", raw, art)
    for target in (second.snapshot_id, first.snapshot_id):
        with pytest.raises(RagspineError, match="RESTRICTED now") as err:
            rollback(paths, target)
        assert "qfsupplier" not in str(err.value) and "Quillfeather" not in str(err.value)
    assert os.readlink(art / "current").endswith(third.snapshot_id), "a refused rollback changes nothing"


def test_pinned_snapshot_is_released_when_it_serves_a_reclassified_document(tmp_path):
    from ragspine_index.publish import pinned_snapshot, rollback

    data = tmp_path / "data"
    raw = make_library(data, extra={"reclass.md": RECLASS.format(sens="PUBLIC", extra="", n=3)})
    first = ingest(raw)
    (raw / "other.md").write_text("# Other\n\nAn unrelated open note about gardens.\n", encoding="utf-8")
    ingest(raw)
    paths = LibraryPaths("lib", raw, data / "artifacts" / "lib")
    rollback(paths, first.snapshot_id)
    assert pinned_snapshot(paths) == first.snapshot_id
    (raw / "reclass.md").write_text(RECLASS.format(sens="RESTRICTED", extra="", n=3), encoding="utf-8")
    third = ingest(raw)
    assert pinned_snapshot(paths) is None, "a pin never keeps serving a document that is RESTRICTED now"
    assert os.readlink(paths.current).endswith(third.snapshot_id)
    with open_library(paths.root) as lib:
        hits = build_narrative_retriever(paths.root, reranker=None, mode="bm25").retrieve("Quillfeather widget lots")
        assert all(h["doc_id"] != "qfsupplier" for h in hits)
        assert lib.snapshot_id == third.snapshot_id


def test_reclassified_file_that_fails_to_parse_is_withdrawn_and_other_broken_files_are_kept(tmp_path):
    data = tmp_path / "data"
    raw = make_library(data, extra={
        "reclass.md": RECLASS.format(sens="PUBLIC", extra="", n=3),
        "kept.md": RECLASS.replace("qfsupplier", "kept").format(sens="PUBLIC", extra="", n=5),
    })
    ingest(raw)
    # reclassified AND broken (a bad date): withdrawn; merely broken: keeps serving
    (raw / "reclass.md").write_text(RECLASS.format(sens="RESTRICTED", extra="valid_as_of: 2024-13-45\n", n=3), encoding="utf-8")
    (raw / "kept.md").write_text(RECLASS.replace("qfsupplier", "kept").format(sens="PUBLIC", extra="valid_as_of: nope\n", n=5), encoding="utf-8")
    summary = ingest(raw)
    with open_library(summary.snapshot_dir) as lib:
        served = {r[0] for r in lib.execute_read("SELECT DISTINCT doc_id FROM narrative_chunk")}
        assert lib.manifest["counts"]["parse_errors"] == 2
    assert "kept" in served and "qfsupplier" not in served


# ------------------------------------------------------------ item 6: scores say nothing
def test_visible_ranks_and_scores_ignore_restricted_rows(tmp_path):
    data = tmp_path / "data"
    raw = make_library(data)
    ingest(raw)
    art = data / "artifacts" / "lib"
    query = f"{MARKER} Nightingale widget revenue"
    with open_library(art) as lib:
        raw_hits = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search(query, top_k=5)
        assert raw_hits[0].chunk.doc_id == "secret-memo", "the RESTRICTED chunk would rank first"
    snippets = build_narrative_retriever(art, reranker=None, mode="bm25", glossary=None).retrieve(query, top_k=5)
    assert snippets and all(s["doc_id"] != "secret-memo" for s in snippets)
    # the first visible hit is rank 1 of its channel: 1/(60+1), as if the RESTRICTED one did not exist
    assert snippets[0]["scores"]["fused"] == pytest.approx(1 / 61)
    assert MARKER not in json.dumps([s.to_dict() for s in snippets])


# ----------------------------------------------------------- item 7: "none" means none
@pytest.mark.parametrize("how", ["flag", "env"])
def test_reranker_none_makes_no_llm_call(built_sample, tmp_path, how):
    with LocalChatServer("ok") as server:
        env = python_env(RAGSPINE_LLM_BASE_URL=server.base_url, RAGSPINE_LLM_MODEL="local-test")
        args = [PYTHON, "-m", "ragspine_tools.cli", "query", str(built_sample), "price cut PowerFlex 7", "--json"]
        if how == "flag":
            args += ["--reranker", "none"]
        else:
            env["RAGSPINE_RERANKER"] = "none"
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)
        assert server.requests == [], "reranker none must not call the LLM"
        # with nothing said, no judge either: it is opt-in, also with a provider configured
        env.pop("RAGSPINE_RERANKER", None)
        proc = subprocess.run(args[:7] + ["--json"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert server.requests == [], "an unnamed reranker must not call the LLM"
        # the control: named, the configured judge is called
        proc = subprocess.run(args[:7] + ["--json", "--reranker", "listwise"], capture_output=True, text=True,
                              timeout=120, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert server.requests, "--reranker listwise runs the judge"


# ------------------------------------------------------------- item 8: library names
@pytest.mark.parametrize("name", ["../../outside", "..", ".", "", "a/b", "a\\b", "-x", ".hidden", "x\n", "a" * 129])
def test_library_names_that_could_leave_the_data_root_are_refused(tmp_path, name):
    cfg = RagspineConfig(data_root=str(tmp_path / "data"))
    with pytest.raises(ConfigError, match="library name"):
        cfg.library_paths(name)


def test_partition_key_outside_the_data_root_writes_nothing_outside(tmp_path):
    from ragspine_assets.assets import ALL_ASSETS
    from ragspine_assets.io_manager import StepOutputIOManager
    from ragspine_assets.partitions import LIBRARIES_PARTITION

    data = tmp_path / "nest" / "data"
    make_library(data)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, ["../../outside"])
        result = dg.materialize(ALL_ASSETS, instance=instance, partition_key="../../outside", raise_on_error=False,
                                resources={"ragspine": RagspineConfig(data_root=str(data), embedding_backend=EmbeddingBackendResource(spec="none")),
                                           "io_manager": StepOutputIOManager()})
    assert not result.success
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before, "a bad partition key created files"


def test_sensor_skips_folders_that_are_not_library_names(tmp_path):
    cfg = RagspineConfig(data_root=str(tmp_path / "data"))
    (tmp_path / "data" / "raw" / "good-lib").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "bad name").mkdir()
    assert cfg.library_folders() == (["good-lib"], ["bad name"])


# ---------------------------------------------------------------- item 10: small ones
def test_negative_top_k_is_a_clear_error(built_sample, tmp_path):
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(built_sample), "revenue", "--top-k", "-5"],
                          capture_output=True, text=True, timeout=120, env=python_env(), cwd=tmp_path)
    assert proc.returncode == 2 and "--top-k" in proc.stderr and ">= 0" in proc.stderr
    assert proc.stdout == ""
    with open_library(built_sample) as lib:
        with pytest.raises(ConfigError, match="top_k"):
            HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search("revenue", top_k=-5)
    with pytest.raises(ConfigError, match="top_k"):
        build_narrative_retriever(built_sample, reranker=None, mode="bm25").retrieve("revenue", top_k=-5)


def test_cli_output_keeps_each_field_on_one_line(tmp_path):
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "weird\nname.md").write_text("# Gardens\n\nTulip gardens bloom in spring.\n", encoding="utf-8")
    ingest(raw)
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "query", str(data / "artifacts" / "lib"), "tulip gardens",
                           "--mode", "bm25"], capture_output=True, text=True, timeout=120, env=python_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    header = [line for line in proc.stdout.splitlines() if line.startswith("[1]")]
    assert header and "name.md" in header[0], proc.stdout
