"""The ANN size threshold as a setting: ``RAGSPINE_ANN_MIN_VECTORS`` and ``_library.toml``.

Real Dagster runs (``ingest_library``) of the sample library with deterministic vectors:
the default threshold (200,000) builds no ANN artifact for it; lowering the threshold,
run-wide through the settings or per library through ``_library.toml``, does, and the
library's own key wins over the run-level one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_query import open_library
from ragspine_core.dense.ann import ANN_INDEX_FILE, DEFAULT_MIN_VECTORS, engine_available
from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from tests.conftest import SAMPLE_LIBRARY, copy_sample_data


def test_the_setting_is_read_and_validated() -> None:
    assert Settings().ann_min_vectors == DEFAULT_MIN_VECTORS == Settings.from_env({}).ann_min_vectors
    assert Settings.from_env({"RAGSPINE_ANN_MIN_VECTORS": "10"}).ann_min_vectors == 10
    assert Settings.from_env({"RAGSPINE_ANN_MIN_VECTORS": "0"}).ann_min_vectors == 0
    for bad in ("-1", "many", "1.5"):
        with pytest.raises(ConfigError, match="RAGSPINE_ANN_MIN_VECTORS"):
            Settings.from_env({"RAGSPINE_ANN_MIN_VECTORS": bad})
    assert Settings(ann_min_vectors=10).as_env() == {"RAGSPINE_ANN_MIN_VECTORS": "10"}


@pytest.mark.parametrize("value", ["-1", "true", '"10"', "1.5"])
def test_the_library_key_is_validated(tmp_path: Path, value: str) -> None:
    from ragspine_index.library_config import load_library_config

    (tmp_path / "_library.toml").write_text(f"ann_min_vectors = {value}\n")
    with pytest.raises(ConfigError, match="ann_min_vectors"):
        load_library_config(tmp_path)
    (tmp_path / "_library.toml").write_text("ann_min_vectors = 10\n")
    assert load_library_config(tmp_path).ann_min_vectors == 10


def _ingest(root: Path, toml_line: str | None, env: dict[str, str]) -> Path:
    import dagster as dg

    from ragspine_assets.ingest import ingest_library

    data = copy_sample_data(root / "data")
    raw = data / "raw" / SAMPLE_LIBRARY
    if toml_line:
        cfg = raw / "_library.toml"
        before = cfg.read_text(encoding="utf-8") if cfg.exists() else ""
        cfg.write_text(before + f"\n{toml_line}\n", encoding="utf-8")
    ingest_library(raw, embedding="deterministic", instance=dg.DagsterInstance.ephemeral(),
                   settings=Settings.from_env(env), progress=False)
    return data / "artifacts" / SAMPLE_LIBRARY


@pytest.mark.skipif(not engine_available("usearch"), reason="usearch is not installed (pip install 'ragspine[ann]')")
@pytest.mark.parametrize(("toml_line", "env", "built"), [
    (None, {}, False),  # default threshold: a ~100-vector library gets no ANN
    ("ann_min_vectors = 10", {}, True),  # the library lowers it
    (None, {"RAGSPINE_ANN_MIN_VECTORS": "10"}, True),  # the run lowers it
    ("ann_min_vectors = 0", {"RAGSPINE_ANN_MIN_VECTORS": "10"}, False),  # the library's key wins
], ids=["default", "library-key", "env-var", "library-wins"])
def test_the_threshold_decides_the_ann_artifact(tmp_path: Path, toml_line, env, built) -> None:
    pytest.importorskip("dagster")
    artifacts = _ingest(tmp_path, toml_line, env)
    with open_library(artifacts) as lib:
        count = lib.manifest["embedding"]["count"]
        assert 10 <= count < DEFAULT_MIN_VECTORS  # vectors exist either way; only the threshold differs
        ann_dir = lib.artifact_path("ann")
        assert (ann_dir is not None) is built
        if built:
            assert (ann_dir / ANN_INDEX_FILE).is_file()
            assert lib.manifest["embedding"]["ann"]["count"] == count
        else:
            assert "ann" not in lib.manifest["embedding"]
