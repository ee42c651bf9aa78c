"""``bench_concurrency`` runs end to end on a small library (no timing is asserted): the
threaded rankings equal the one-thread rankings, the query path's pools are pinned and
the compiled kernels answer when numba is installed; and ``lexbench.unpin_threads``
puts back the thread variables that importing ``lexbench`` pinned."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT


def test_bench_concurrency_small_run():
    env = {**os.environ, "RAGSPINE_INGEST_WORKERS": "1"}
    out = subprocess.run([sys.executable, "-m", "ragspine_tools.bench.bench_concurrency", "--chunks", "300", "--queries", "60",
                          "--rounds", "1", "--threads", "1,2", "--json"],
                         capture_output=True, text=True, timeout=900, cwd=REPO_ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["benchmark"] == "concurrency" and report["chunks"] == 300 and report["queries"] == 60
    for mode in ("auto", "bm25"):
        figures = report["modes"][mode]
        assert set(figures["qps_median"]) == {"1", "2"} and all(v > 0 for v in figures["qps_median"].values())
        assert figures["rankings_identical"] == {"1": True, "2": True}
        assert figures["ratio_vs_1_thread"]["1"] == 1.0
    assert isinstance(report["goal_auto_2_threads_ge_1.6x"], bool)
    assert report["thread_pools"]["pinned"]["threads"] == 1
    numba = importlib.util.find_spec("numba") is not None
    assert (report["query_kernels"] == "ready") == numba, report["query_kernels"]


def test_unpin_threads_restores_the_variables():
    code = textwrap.dedent("""
        import os, sys
        from ragspine_tools.bench import lexbench
        pinned = {v: os.environ.get(v) for v in lexbench.SINGLE_THREAD_VARS}
        lexbench.unpin_threads()
        print(pinned["OMP_NUM_THREADS"], pinned["OPENBLAS_NUM_THREADS"], os.environ.get("OMP_NUM_THREADS"),
              os.environ.get("OPENBLAS_NUM_THREADS"))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    env["OMP_NUM_THREADS"] = "7"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7", "1", "7", "None"]
