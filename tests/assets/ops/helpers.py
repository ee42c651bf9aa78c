"""Helpers shared by the operations tests (real files, no mocks)."""

from __future__ import annotations

import os
from pathlib import Path


def write_doc(path: Path, title: str, body: str) -> Path:
    """Write a small markdown document (creating folders) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return path


def bump_mtime(path: Path, seconds: int = 1) -> None:
    """Move the mtime forward so a same-size rewrite is noticed even on coarse clocks."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))
