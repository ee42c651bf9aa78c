"""Fixtures shared by the whole suite.

The expensive one is :func:`built_sample`: the sample library materialized once per
session through the real Dagster assets into a temporary data root. Tests that only
read an index reuse it; tests that change a library copy it first (see
:func:`copy_data_root`), so nothing ever writes into the repository's ``data/`` folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_LIBRARY = "sample"
#: The four RESTRICTED documents of the sample library and the marker each one carries.
RESTRICTED_MARKERS = {
    "board-minutes-2024-11": "RESTRICTED-MARKER-ALPHA",
    "acme-cn-workforce-plan-2025": "RESTRICTED-MARKER-BRAVO",
    "acme-us-pricing-action-2025": "RESTRICTED-MARKER-CHARLIE",
    "acme-eu-distributor-review": "RESTRICTED-MARKER-DELTA",
}
#: Environment variables that change which backend / mode / reranker the factories pick.
RAGSPINE_ENV_VARS = (
    "RAGSPINE_EMBEDDING",
    "RAGSPINE_EMBEDDING_BACKEND",
    "RAGSPINE_RETRIEVAL_MODE",
    "RAGSPINE_RERANKER",
    "RAGSPINE_POSTPROCESSOR",
    "RAGSPINE_DATA_ROOT",
    "RAGSPINE_KEEP_SNAPSHOTS",
)


def pytest_configure(config):
    # Output(data_version=...) is beta in Dagster and used on purpose (see ragspine_assets/__init__.py,
    # whose module-level filter pytest's per-test warning capture does not see).
    config.addinivalue_line("filterwarnings", r"ignore:Parameter `data_version` of initializer:Warning")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def copy_sample_data(dest: Path) -> Path:
    """Copy ``data/raw/sample`` and ``data/glossary.toml`` into a fresh data root ``dest``."""
    (dest / "raw").mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "data" / "raw" / SAMPLE_LIBRARY, dest / "raw" / SAMPLE_LIBRARY)
    shutil.copy2(REPO_ROOT / "data" / "glossary.toml", dest / "glossary.toml")
    return dest


def copy_data_root(src: Path, dest: Path) -> Path:
    """Copy a whole data root, artifacts included (the ``current`` symlink stays relative)."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def sample_data(tmp_path_factory) -> Path:
    """A session-scoped data root holding a copy of the sample library and the glossary.

    Treat it as read-only; copy it (``copy_data_root``) before changing anything.
    """
    return copy_sample_data(tmp_path_factory.mktemp("sample_data") / "data")


def ingest(raw_dir: Path, **kwargs):
    """Materialize every asset of one library into its data root on an ephemeral instance.

    Runs with the RAGSPINE_* variables a developer may have exported removed, so the
    result does not depend on the shell the tests were started from. Without an
    ``instance`` a fresh ephemeral one is entered as a context manager for the run:
    resolving Definitions reads the *current* instance's defs-state storage, which must
    be a live one. A caller passing ``instance`` enters it itself.
    """
    import dagster as dg

    from ragspine_assets.ingest import ingest_library

    instance = kwargs.pop("instance", None)
    with contextlib.ExitStack() as stack:
        if instance is None:
            instance = stack.enter_context(dg.DagsterInstance.ephemeral())
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        for var in RAGSPINE_ENV_VARS:
            mp.delenv(var, raising=False)
        return ingest_library(raw_dir, embedding=kwargs.pop("embedding", "none"), instance=instance, **kwargs)


@pytest.fixture(scope="session")
def built_sample(tmp_path_factory) -> Path:
    """``<data>/artifacts/sample`` after one real materialization (embedding ``none``).

    Shared by every test that only reads the index. Do not modify it.
    """
    pytest.importorskip("dagster", reason="materializing the sample needs the 'pipeline' extra")
    data = copy_sample_data(tmp_path_factory.mktemp("built_sample") / "data")
    summary = ingest(data / "raw" / SAMPLE_LIBRARY)
    artifacts = data / "artifacts" / SAMPLE_LIBRARY
    assert Path(summary.snapshot_dir).resolve() == (artifacts / "current").resolve()
    return artifacts


@pytest.fixture(scope="session")
def shared_datasets(repo_root) -> Path:
    """``../shared/datasets`` beside the repository (may hold only a README)."""
    return repo_root.parent / "shared" / "datasets"


def require_shared_dataset(shared_datasets: Path, *parts: str) -> Path:
    """The path of a shared dataset, or skip the test saying what is missing and where."""
    path = shared_datasets.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared dataset {'/'.join(parts)!r} is not present under {shared_datasets}; "
                    "see ../shared/datasets/README.md")
    return path


def python_env(**extra: str) -> dict[str, str]:
    """Environment for a child Python: this interpreter's, minus RAGSPINE_* knobs."""
    env = {k: v for k, v in os.environ.items() if k not in RAGSPINE_ENV_VARS}
    env["PYTHONIOENCODING"] = "utf-8"
    env.update(extra)
    return env


PYTHON = sys.executable
