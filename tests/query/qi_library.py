"""The sample library built once per test module through the plain index pipeline (no
Dagster, deterministic vectors; ~0.6 s), for the query-intelligence tests."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from tests.conftest import REPO_ROOT


def build_sample(dest: Path, embedding: str = "deterministic") -> Path:
    """``dest/art/sample`` (a published library with the sample glossary)."""
    from ragspine_assets.indexing.artifacts import LibraryPaths
    from ragspine_assets.indexing.steps import build_library

    raw = dest / "raw" / "sample"
    shutil.copytree(REPO_ROOT / "data" / "raw" / "sample", raw)
    root = dest / "art" / "sample"
    build_library(LibraryPaths("sample", raw, root), embedding=embedding, cache_path=dest / "cache.sqlite",
                  glossary_path=REPO_ROOT / "data" / "glossary.toml")
    return root


@functools.lru_cache(maxsize=None)
def _cached(base: str, embedding: str) -> Path:
    return build_sample(Path(base) / f"qi-sample-{embedding}", embedding)


def shared_sample(tmp_path_factory, embedding: str = "deterministic") -> Path:
    """One build per test session and embedding (read-only: do not modify it)."""
    return _cached(str(tmp_path_factory.getbasetemp()), embedding)
