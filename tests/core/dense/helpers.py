"""Helpers shared by the dense-channel tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np


REPO_ROOT = Path(__file__).resolve().parents[3]


def run_python(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (clean ``sys.modules``) from the repo root; return stdout."""
    environ = {**os.environ, **env}
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=environ, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def reference_top_k(matrix: np.ndarray, query: np.ndarray, k: int, rows: np.ndarray | None = None):
    """Score every row, sort by (-score, row), take k."""
    candidates = np.arange(matrix.shape[0]) if rows is None else np.asarray(rows)
    scores = matrix[candidates].astype(np.float64) @ query.astype(np.float64)
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], candidates[i]))[:k]
    return candidates[order], scores[order]


def integer_matrix(rng: np.random.Generator, n: int, d: int, levels: int = 3) -> np.ndarray:
    # Small integer entries make every dot product exact in float32, so ties are real ties.
    return rng.integers(-levels, levels + 1, size=(n, d)).astype(np.float32)
