"""Helpers shared by the operations tests (real files, no mocks)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Dagster's SQLite storage commits (fsyncs) every event: ~5 ms each on disk, free on tmpfs
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def write_doc(path: Path, title: str, body: str) -> Path:
    """Write a small markdown document (creating folders) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return path


def bump_mtime(path: Path, seconds: int = 1) -> None:
    """Move the mtime forward so a same-size rewrite is noticed even on coarse clocks."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def make_dagster_home(path: Path | None = None) -> Path:
    """A persistent DAGSTER_HOME folder with telemetry off (for DagsterInstance.local_temp).

    Without ``path``, a fresh folder on tmpfs where available; the caller removes it.
    """
    path = Path(tempfile.mkdtemp(prefix="dagster_home-", dir=FAST_TMP)) if path is None else path
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return path
