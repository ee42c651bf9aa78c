"""``ragspine bench`` reaches the benchmarks as modules of ``ragspine_tools.bench``, from any
directory: it no longer edits ``sys.path`` to find a ``benchmarks/`` folder beside the package
(which an installed wheel does not have)."""

from __future__ import annotations

import subprocess

from tests.conftest import PYTHON, python_env


def test_ragspine_bench_runs_outside_the_checkout(tmp_path):
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "bench", "--", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=python_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bm25s" in proc.stdout and "tantivy" in proc.stdout


def test_every_benchmark_is_an_importable_module():
    import importlib
    import pkgutil

    import ragspine_tools.bench as bench

    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__))
    assert {"bench_lexical", "bench_hybrid", "bench_scale", "bench_embedding", "lexbench"} <= set(names)
    for name in ("bench_lexical", "bench_embedding", "tune_fusion", "split_by_language"):
        assert callable(importlib.import_module(f"ragspine_tools.bench.{name}").main)
