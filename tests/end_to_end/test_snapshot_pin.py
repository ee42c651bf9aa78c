"""A rollback pins `current`: later runs keep publishing snapshots but do not move it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster")

from ragspine_assets.ingest import ingest_library  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _snapshots_cli(artifacts: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "snapshots", str(artifacts), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_rollback_pins_current_until_unpinned(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(REPO / "data" / "raw" / "sample", data / "raw" / "sample")
    shutil.copy(REPO / "data" / "glossary.toml", data / "glossary.toml")
    raw, artifacts = data / "raw" / "sample", data / "artifacts" / "sample"
    current = artifacts / "current"
    instance = dg.DagsterInstance.ephemeral()
    doc = raw / "initech-company-profile.md"

    first = ingest_library(raw, embedding="none", instance=instance)
    doc.write_text(doc.read_text(encoding="utf-8") + "\nInitech opened an office in Osaka.\n", encoding="utf-8")
    second = ingest_library(raw, embedding="none", instance=instance)
    assert current.resolve().name == second.snapshot_id != first.snapshot_id

    out = _snapshots_cli(artifacts, "--rollback")
    assert first.snapshot_id in out and "pinned" in out
    assert current.resolve().name == first.snapshot_id

    # a new run (e.g. the schedule re-ingesting the same files) builds but does not move current
    doc.write_text(doc.read_text(encoding="utf-8") + "\nInitech also opened an office in Seoul.\n", encoding="utf-8")
    third = ingest_library(raw, embedding="none", instance=instance)
    assert third.snapshot_id not in (first.snapshot_id, second.snapshot_id)
    assert (artifacts / "snapshots" / third.snapshot_id / "manifest.json").is_file()
    assert current.resolve().name == first.snapshot_id
    assert third.metadata["pinned_to"] == first.snapshot_id
    assert f"pinned to {first.snapshot_id}" in _snapshots_cli(artifacts)

    assert "released pin" in _snapshots_cli(artifacts, "--unpin")
    fourth = ingest_library(raw, embedding="none", instance=instance)
    assert fourth.snapshot_id == third.snapshot_id  # same content, same id
    assert current.resolve().name == third.snapshot_id
