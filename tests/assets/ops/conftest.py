"""Fixtures: a temp data root with real library folders and an ephemeral instance."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from ragspine_assets.resources import RagspineConfig


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "raw").mkdir(parents=True)
    return root


@pytest.fixture
def ragspine(data_root: Path) -> RagspineConfig:
    return RagspineConfig(data_root=str(data_root), embedding="none")


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()
