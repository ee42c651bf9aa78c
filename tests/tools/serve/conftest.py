"""A served library with two snapshots (the second withdraws a PUBLIC document) and keys.

Built once per package from the session's ``built_sample`` (embedding ``none``): the copy's
``current`` is left on the first snapshot; a test that swaps puts it back."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the service needs the 'serve' extra")
pytest.importorskip("uvicorn", reason="the service needs the 'serve' extra")
pytest.importorskip("httpx", reason="the tests' client needs the 'serve' extra")

from tests.conftest import REPO_ROOT, SAMPLE_LIBRARY, copy_data_root, python_env  # noqa: E402

WITHDRAWN = "investor-faq"  # PUBLIC; the second snapshot no longer holds it


@dataclass(frozen=True)
class Served:
    library: Path  # data/artifacts/sample of the copy
    old: str  # the snapshot holding WITHDRAWN
    new: str  # the snapshot without it
    public_key: str
    internal_key: str
    other_key: str  # may read only a library that is not served

    def env(self, **extra: str) -> dict[str, str]:
        from ragspine_tools.serve.access import hash_key

        keys = [{"name": "public-bot", "sha256": hash_key(self.public_key), "libraries": [SAMPLE_LIBRARY], "max_sensitivity": "PUBLIC"},
                {"name": "analyst", "sha256": hash_key(self.internal_key), "libraries": ["*"], "max_sensitivity": "INTERNAL"},
                {"name": "elsewhere", "sha256": hash_key(self.other_key), "libraries": ["hr"], "max_sensitivity": "INTERNAL"}]
        return python_env(PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                          RAGSPINE_API_KEYS=json.dumps(keys), **extra)


@pytest.fixture(scope="package")
def served(built_sample, tmp_path_factory) -> Served:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_index.publish import current_snapshot_id, rollback
    from ragspine_tools.serve.access import new_key

    data = copy_data_root(built_sample.parents[1], tmp_path_factory.mktemp("served") / "data")
    art = data / "artifacts" / SAMPLE_LIBRARY
    paths = LibraryPaths(SAMPLE_LIBRARY, data / "raw" / SAMPLE_LIBRARY, art)
    old = current_snapshot_id(paths)
    (data / "raw" / SAMPLE_LIBRARY / f"{WITHDRAWN}.md").unlink()
    build_library(paths, embedding="none", cache_path=data / "cache" / "embeddings.sqlite", glossary_path=data / "glossary.toml")
    new = current_snapshot_id(paths)
    assert old and new and old != new
    rollback(paths, old, pin=False)
    return Served(art, old, new, new_key(), new_key(), new_key())
