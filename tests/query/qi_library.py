"""The sample library built once per test module through the plain index pipeline (no
Dagster, deterministic vectors; ~0.6 s), for the query-intelligence tests."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from tests.conftest import REPO_ROOT


def build_sample(dest: Path, embedding: str = "deterministic") -> Path:
    """``dest/art/sample`` (a published library with the sample glossary)."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.step_exports import build_library

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


#: Three libraries cut from the sample (by file), for the router tests: the China business
#: (Chinese and English), the US and European businesses, and the rest (group, energy, peers).
SPLIT = {
    "cn": ("acme-cn-*", "huaxin-acme-cn-comparison.md", "acme-group-history-zh.md", "reports/acme-cn-*"),
    "us_eu": ("acme-us-*", "acme-eu-*", "reports/acme-us-*", "reports/acme-eu-*", "policies/acme-eu-*"),
}


def build_split(dest: Path, embedding: str = "deterministic") -> dict[str, Path]:
    """``{name: library dir}`` of the three libraries of :data:`SPLIT` (+ ``group``: the rest)."""
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.step_exports import build_library

    src = REPO_ROOT / "data" / "raw" / "sample"
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    taken: dict[str, list[Path]] = {name: [] for name in (*SPLIT, "group")}
    for rel in files:
        name = next((n for n, pats in SPLIT.items() if any(rel.match(pat) and len(rel.parts) == len(Path(pat).parts) for pat in pats)), "group")
        taken[name].append(rel)
    out = {}
    for name, rels in taken.items():
        raw = dest / "raw" / name
        for rel in rels:
            (raw / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, raw / rel)
        root = dest / "art" / name
        build_library(LibraryPaths(name, raw, root), embedding=embedding, cache_path=dest / "cache.sqlite",
                      glossary_path=REPO_ROOT / "data" / "glossary.toml")
        out[name] = root
    return out


@functools.lru_cache(maxsize=None)
def _cached_split(base: str, embedding: str) -> tuple[tuple[str, Path], ...]:
    return tuple(build_split(Path(base) / f"qi-split-{embedding}", embedding).items())


def shared_split(tmp_path_factory, embedding: str = "deterministic") -> dict[str, Path]:
    """The three split libraries, built once per test session (read-only)."""
    return dict(_cached_split(str(tmp_path_factory.getbasetemp()), embedding))
