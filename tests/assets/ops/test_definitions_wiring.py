"""definitions.py wiring: sensor, schedule and executor, all chosen by environment variables."""

from __future__ import annotations

import importlib.util

import dagster as dg
import pytest

from ragspine_assets.definitions import build_definitions, make_executor, make_resources
from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.schedules import DEFAULT_REINGEST_CRON
from ragspine_core.errors import ConfigError


def test_definitions_load_with_sensor_schedule_and_multiprocess_executor() -> None:
    defs = build_definitions({})
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_sensor_def("raw_files_sensor").job_name == "ingest_job"
    assert defs.resolve_schedule_def("reingest_schedule").job_name == "ingest_job"
    job = defs.resolve_job_def("ingest_job")
    assert job.executor_def.name == "multiprocess"
    assert job.partitions_def is not None and job.partitions_def.name == LIBRARIES_PARTITION


def test_cron_comes_from_the_environment() -> None:
    assert build_definitions({"RAGSPINE_REINGEST_CRON": "*/15 * * * *"}).resolve_schedule_def(
        "reingest_schedule").cron_schedule == "*/15 * * * *"
    assert build_definitions({}).resolve_schedule_def("reingest_schedule").cron_schedule == DEFAULT_REINGEST_CRON


def executor_config(executor: dg.ExecutorDefinition) -> dict:
    return executor.config_schema.resolve_config({}).value["config"]


def test_max_concurrent_and_start_method_configure_the_multiprocess_executor() -> None:
    config = executor_config(make_executor({"RAGSPINE_MAX_CONCURRENT": "3"}))
    assert config["max_concurrent"] == 3
    assert config["start_method"] == {"forkserver": {"preload_modules": ["dagster", "ragspine_assets.definitions"]}}
    assert executor_config(make_executor({}))["max_concurrent"] == 0, "0 = one step per CPU"
    assert "start_method" not in executor_config(make_executor({"RAGSPINE_START_METHOD": "spawn"}))
    with pytest.raises(ConfigError, match="RAGSPINE_START_METHOD=.fork. is invalid: it must be one of forkserver, spawn"):
        make_executor({"RAGSPINE_START_METHOD": "fork"})


def test_executor_is_chosen_by_name() -> None:
    assert make_executor({"RAGSPINE_EXECUTOR": "in_process"}).name == "in_process"
    with pytest.raises(ConfigError, match="RAGSPINE_EXECUTOR=.ray. is invalid: it must be one of multiprocess, in_process, k8s, celery, dask"):
        make_executor({"RAGSPINE_EXECUTOR": "ray"})


@pytest.mark.parametrize(("name", "module", "package"), [
    ("k8s", "dagster_k8s", "dagster-k8s"), ("celery", "dagster_celery", "dagster-celery"), ("dask", "dagster_dask", "dagster-dask"),
])
def test_distributed_executor_names_the_package_to_install(name: str, module: str, package: str) -> None:
    if importlib.util.find_spec(module) is not None:
        assert make_executor({"RAGSPINE_EXECUTOR": name}) is not None
        return
    with pytest.raises(ConfigError, match=f"pip install {package}"):
        make_executor({"RAGSPINE_EXECUTOR": name})


def test_every_path_is_configurable_from_the_environment(tmp_path) -> None:
    env = {
        "RAGSPINE_DATA_ROOT": str(tmp_path / "shared"),
        "RAGSPINE_RAW_ROOT": str(tmp_path / "inbox"),
        "RAGSPINE_ARTIFACTS_ROOT": str(tmp_path / "published"),
        "RAGSPINE_CACHE_ROOT": str(tmp_path / "cache"),
        "RAGSPINE_GLOSSARY_PATH": str(tmp_path / "terms.toml"),
        "RAGSPINE_IO_DIR": str(tmp_path / "io"),
    }
    resources = make_resources(env)
    cfg = resources["ragspine"]
    assert cfg.raw_dir() == tmp_path / "inbox"
    assert cfg.artifacts_dir() == tmp_path / "published"
    assert cfg.cache_dir() == tmp_path / "cache"
    assert cfg.glossary_file() == tmp_path / "terms.toml"
    assert resources["io_manager"].base_dir == str(tmp_path / "io")
    assert make_resources({})["io_manager"].base_dir == "", "default: the step-output IO manager under DAGSTER_HOME"
