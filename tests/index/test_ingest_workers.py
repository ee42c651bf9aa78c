"""The ingest's worker processes (``indexing/workers.py``): same bytes as a serial run.

Parsing, chunking and BM25 counting of a large library run in worker processes. The
thresholds are lowered here so that a small library takes the parallel path; the
published snapshot id (a hash of every artifact's bytes and of the chunk rows) must equal
the serial build's.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from ragspine_index.steps import chunks as chunks_mod
from ragspine_index.steps import bm25_index as lexical_mod
from ragspine_index import workers
from ragspine_index import machine as machine_mod
from ragspine_index.machine import MachineSettings, adopt_machine, configure_machine, machine_settings
from ragspine_core.settings import Settings
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_index.source_documents import jsonl as jsonl_mod
from ragspine_core.errors import ConfigError, RagspineError
from ragspine_core.lexical.bm25 import build_bm25_arrays, build_bm25_from_counts, count_rows

WORDS = ("revenue margin audit policy bribery supplier forecast quarter board pricing region "
         "workforce plan risk control ledger invoice contract renewal").split()


def _library(root: Path, n_docs: int = 240) -> Path:
    rng = random.Random(7)
    raw = root / "raw" / "wk"
    raw.mkdir(parents=True)
    lines = []
    for i in range(n_docs):
        paras = ["Section %d. " % j + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))) + "."
                 for j in range(rng.randint(1, 5))]
        doc = {"doc_id": f"d{i:04d}", "title": f"Doc {i}", "text": "\n\n".join(paras)}
        if i % 50 == 3:
            doc["sensitivity"] = "RESTRICTED"
        lines.append(json.dumps(doc))
    lines.insert(17, '{"doc_id": "broken", "text": ')  # a bad line: reported, never fatal
    (raw / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (raw / "note.md").write_text("# Note\n\nA markdown file beside the JSONL file.\n", encoding="utf-8")
    return raw


def _build(tmp: Path, raw: Path, name: str):
    paths = LibraryPaths("wk", raw, tmp / name / "artifacts")
    return build_library(paths, embedding="none", cache_path=tmp / name / "cache.sqlite")


def test_parallel_ingest_publishes_the_bytes_of_the_serial_one(tmp_path, monkeypatch):
    raw = _library(tmp_path)
    monkeypatch.setattr(machine_mod, "_current", MachineSettings(ingest_workers=1))  # what an edge configures
    serial = _build(tmp_path, raw, "serial")

    pools: list[int] = []

    class CountingPool(workers.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            pools.append(kwargs["max_workers"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(workers, "ProcessPoolExecutor", CountingPool)
    monkeypatch.setattr(machine_mod, "_current", MachineSettings(ingest_workers=2))
    for module, names in ((jsonl_mod, {"JSONL_LINES_PER_TASK": 7, "JSONL_MIN_TASKS_IN_WORKERS": 2}),
                          (chunks_mod, {"DOCS_PER_TASK": 5, "MIN_TASKS_IN_WORKERS": 2, "DOCS_PER_TRANSACTION": 13}),
                          (lexical_mod, {"TEXTS_PER_TASK": 11, "MIN_TASKS_IN_WORKERS": 2})):
        for name, value in names.items():
            monkeypatch.setattr(module, name, value)
    parallel = _build(tmp_path, raw, "parallel")

    assert pools == [2, 2, 2, 2], "parse, chunk, and BM25 counting (chunks, documents) each ran on a pool of 2"
    assert parallel.snapshot_id == serial.snapshot_id
    manifest = json.loads((Path(parallel.snapshot_dir) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["documents"] == 241 and manifest["counts"]["parse_errors"] == 1
    assert any("docs.jsonl#L18" in e for e in manifest["errors"]), manifest["errors"]


def test_count_blocks_give_the_arrays_of_one_pass():
    rng = random.Random(3)
    rows = [[rng.choice(WORDS) for _ in range(rng.randint(0, 30))] for _ in range(400)]
    whole = build_bm25_arrays(rows)
    cuts = sorted(rng.sample(range(1, 400), 9))
    parts = [count_rows(rows[a:b]) for a, b in zip([0, *cuts], [*cuts, 400])]
    split = build_bm25_from_counts(parts)
    assert whole.tokens == split.tokens
    for name in ("indptr", "postings", "impacts", "max_impact", "doc_lengths"):
        assert np.array_equal(getattr(whole, name), getattr(split, name)), name
    assert whole.avgdl == split.avgdl


@pytest.mark.parametrize("value", ["two", "-1"])
def test_a_bad_worker_count_is_a_config_error_at_the_edge(monkeypatch, value):
    monkeypatch.setenv(workers.WORKERS_ENV, value)
    with pytest.raises(ConfigError, match=workers.WORKERS_ENV):
        configure_machine(Settings.from_env())


def test_the_count_comes_from_the_configured_machine_not_the_environment(monkeypatch):
    monkeypatch.setenv(workers.WORKERS_ENV, "3")  # read by an edge only
    before = machine_settings()
    try:
        configure_machine(Settings())
        assert 1 <= workers.ingest_workers() <= workers.MAX_DEFAULT_WORKERS  # the default: one per CPU, capped
        configure_machine(Settings.from_env())  # what the code location and the CLI do
        assert workers.ingest_workers() == 3
        configure_machine(Settings(ingest_workers=1))
        assert workers.ingest_workers() == 1
    finally:
        adopt_machine(before)


def _die(_item: int) -> int:
    os._exit(3)


def test_a_dead_worker_fails_the_step_with_what_to_do():
    with pytest.raises(RagspineError, match="RAGSPINE_INGEST_WORKERS=1"):
        list(workers.ordered_map(_die, list(range(4)), min_items=1, workers=2))


def test_results_keep_input_order_with_a_bounded_window():
    items = list(range(100))
    assert list(workers.ordered_map(abs, [-i for i in items], min_items=1, workers=2)) == items


def _ordered_in_daemon(queue) -> None:
    queue.put(list(workers.ordered_map(abs, [-1, -2, -3], min_items=1, workers=2)))


def test_a_daemonic_process_runs_serially():
    """Dask's worker processes are daemonic and may not start a pool: the step runs serially there."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    queue = ctx.Queue()
    proc = ctx.Process(target=_ordered_in_daemon, args=(queue,), daemon=True)
    proc.start()
    try:
        assert queue.get(timeout=60) == [1, 2, 3]
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
