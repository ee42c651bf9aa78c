"""Helpers shared by the dense-channel tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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
