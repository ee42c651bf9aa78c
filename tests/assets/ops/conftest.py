"""Fixtures: a temp data root with real library folders and an ephemeral instance."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig

from tests.assets.ops.helpers import make_dagster_home


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "raw").mkdir(parents=True)
    return root


@pytest.fixture
def ragspine(data_root: Path) -> RagspineConfig:
    return RagspineConfig(data_root=str(data_root), embedding_backend=EmbeddingBackendResource(spec="none"))


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()


@pytest.fixture
def local_instance() -> dg.DagsterInstance:
    """A persistent SQLite instance (what ``dagster dev`` uses), removed afterwards.

    Not entered as a context manager: entering installs Dagster's process-wide defs-state
    storage, which outlives the instance and breaks later Definitions loads in the session.
    """
    home = make_dagster_home()
    inst = dg.DagsterInstance.local_temp(str(home))
    yield inst
    inst.dispose()
    shutil.rmtree(home, ignore_errors=True)
