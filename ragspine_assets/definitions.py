"""The Dagster code location: wiring only.

Environment variables are read here and nowhere deeper, through
:meth:`ragspine_core.settings.Settings.from_env` (the one table of them):

* ``RAGSPINE_DATA_ROOT`` (default ``data``), and optionally ``RAGSPINE_RAW_ROOT``,
  ``RAGSPINE_ARTIFACTS_ROOT``, ``RAGSPINE_CACHE_ROOT``, ``RAGSPINE_GLOSSARY_PATH`` —
  every path of :class:`RagspineConfig`; point them at shared storage on a cluster.
* ``RAGSPINE_EMBEDDING`` (default ``auto``; with ``RAGSPINE_EMBEDDING_MODEL_DIR``,
  ``RAGSPINE_EMBEDDING_MODEL``, ``RAGSPINE_EMBEDDING_DIM``, ``RAGSPINE_OPENAI_BASE_URL``:
  the :class:`EmbeddingBackendResource`), ``RAGSPINE_KEEP_SNAPSHOTS`` (default 5).
* ``RAGSPINE_LLM_BASE_URL``, ``RAGSPINE_LLM_MODEL``, ``RAGSPINE_LLM_API_KEY``: the ``llm``
  resource (:class:`LLMProviderResource`); the key is bound as ``dg.EnvVar``, never held
  as a field value (``resources.secret``).
* ``RAGSPINE_REINGEST_CRON`` (default ``0 3 * * *``), ``RAGSPINE_REINGEST_TIMEZONE``
  (default ``UTC``).
* ``RAGSPINE_EXECUTOR`` (default ``multiprocess``; or ``in_process``, ``k8s``, ``celery``,
  ``dask``), ``RAGSPINE_MAX_CONCURRENT`` (steps at once within one run; default 0 = one per
  CPU), ``RAGSPINE_START_METHOD`` (``forkserver`` default, or ``spawn``).
  Parallelism *across* libraries is one run per partition, bounded by the run
  coordinator (see docs/operations.md).
* ``RAGSPINE_IO_DIR``: where step outputs are stored (default: under ``DAGSTER_HOME``);
  shared storage when steps run on different machines. They are stored by
  :class:`~.io_manager.StepOutputIOManager`: references, never document text.
* ``RAGSPINE_EMBEDDING_SHARDS`` (default 1): >= 2 makes ``chunk_embeddings`` the graph of
  :mod:`.assets.embeddings_fanout` (plan -> one step per shard -> merge), so one library's
  embedding spreads over workers; set it alike on every worker and the run launcher.
"""

from __future__ import annotations

import importlib
import os
from typing import Mapping

import dagster as dg

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_index.machine import configure_machine

from ragspine_assets.assets import ALL_ASSETS
from ragspine_assets.resources import build_resources
from ragspine_assets.schedules import DEFAULT_REINGEST_CRON, build_reingest_schedule
from ragspine_assets.sensors import raw_files_sensor
from ragspine_assets.stale import stale_upstream_sensor
from ragspine_assets.verification import snapshot_verification_sensor

ingest_job = dg.define_asset_job(
    "ingest_job", selection=dg.AssetSelection.assets(*ALL_ASSETS),
    description="Parse, chunk, index, embed and publish one library (partition).",
)


def _settings(environ: Mapping[str, str] | Settings | None) -> Settings:
    if isinstance(environ, Settings):
        return environ
    return Settings.from_env(environ)


def make_resources(environ: Mapping[str, str] | Settings | None = None) -> dict:
    """Resources from the environment (read here, through :class:`Settings`, and nowhere
    deeper), wired by :func:`~ragspine_assets.resources.build_resources`, the one wiring
    ``ragspine ingest`` uses too."""
    return build_resources(_settings(environ))


EXECUTORS = ("multiprocess", "in_process", "k8s", "celery", "dask")
# name -> (module, executor attribute, package to install); imported only when chosen
_DISTRIBUTED_EXECUTORS = {
    "k8s": ("dagster_k8s", "k8s_job_executor", "dagster-k8s"),
    "celery": ("dagster_celery", "celery_executor", "dagster-celery"),
    "dask": ("dagster_dask", "dask_executor", "dagster-dask"),
}
START_METHODS = ("forkserver", "spawn")


def make_executor(environ: Mapping[str, str] | Settings | None = None) -> dg.ExecutorDefinition:
    """The executor named by ``RAGSPINE_EXECUTOR`` (default ``multiprocess``).

    ``multiprocess`` runs up to ``RAGSPINE_MAX_CONCURRENT`` steps at once (0 = one per
    CPU), forking them from a warm ``forkserver`` unless ``RAGSPINE_START_METHOD=spawn``.
    ``k8s`` / ``celery`` / ``dask`` hand each step to that cluster; their settings come from
    the run config (launchpad, a RunRequest's run_config), and they need shared storage for the
    data root and the IO manager (``RAGSPINE_IO_DIR``); see docs/operations.md.

    Raises:
        ConfigError: an unknown executor or start method, or a distributed executor whose
            package is not installed (the message names the package).
    """
    settings = _settings(environ)
    kind = settings.executor.strip().lower()
    if kind == "in_process":
        return dg.in_process_executor
    if kind in _DISTRIBUTED_EXECUTORS:
        module, attribute, package = _DISTRIBUTED_EXECUTORS[kind]
        try:
            return getattr(importlib.import_module(module), attribute)
        except ImportError:
            raise ConfigError(
                f"RAGSPINE_EXECUTOR={kind!r} needs the {package} package, which is not installed; "
                f"pip install {package} in the code location's environment, or unset RAGSPINE_EXECUTOR") from None
    if kind != "multiprocess":
        raise ConfigError(f"RAGSPINE_EXECUTOR={kind!r} is not supported; allowed: {', '.join(EXECUTORS)}")
    config: dict = {"max_concurrent": settings.max_concurrent}
    start = settings.start_method.strip().lower()
    if start not in START_METHODS:
        raise ConfigError(f"RAGSPINE_START_METHOD={start!r} is not supported; allowed: {', '.join(START_METHODS)}")
    if start == "forkserver":
        # one warm server process imports Dagster and this code location once; each step
        # forks from it instead of paying a fresh interpreter start (~4 s) per step
        config["start_method"] = {"forkserver": {"preload_modules": ["dagster", "ragspine_assets.definitions"]}}
    return dg.multiprocess_executor.configured(config)


def assets_for(environ: Mapping[str, str] | Settings | None = None) -> list:
    """The asset definitions: :data:`ALL_ASSETS`, with ``chunk_embeddings`` fanned out into
    shards (:mod:`.assets.embeddings_fanout`) when ``RAGSPINE_EMBEDDING_SHARDS`` >= 2."""
    if _settings(environ).embedding_shards < 2:
        return list(ALL_ASSETS)
    from ragspine_assets.assets import chunk_embeddings
    from ragspine_assets.assets.embeddings_fanout import chunk_embeddings_sharded

    return [chunk_embeddings_sharded if a is chunk_embeddings else a for a in ALL_ASSETS]


def build_definitions(environ: Mapping[str, str] | None = None) -> dg.Definitions:
    """Assets, ``ingest_job``, ``raw_files_sensor``, ``reingest_schedule``, executor, resources."""
    settings = _settings(environ)
    configure_machine(settings)  # this process's steps: ingest workers, OCR languages (ragspine_index.machine)
    schedule = build_reingest_schedule(settings.reingest_cron or DEFAULT_REINGEST_CRON,
                                       timezone=settings.reingest_timezone or "UTC")
    return dg.Definitions(
        assets=assets_for(settings),
        jobs=[ingest_job],
        sensors=[raw_files_sensor, snapshot_verification_sensor, stale_upstream_sensor],
        schedules=[schedule],
        executor=make_executor(settings),
        resources=make_resources(settings),
    )


def load_ingest_job(**environ: str) -> dg.JobDefinition:
    """``ingest_job`` resolved against ``environ`` (merged over ``os.environ``).

    The reconstructor for ``dg.build_reconstructable_job("ragspine_assets.definitions",
    "load_ingest_job", reconstructable_kwargs={...})``: every step subprocess of the
    multiprocess executor rebuilds the job from these JSON-able settings.
    """
    return build_definitions({**os.environ, **environ}).resolve_job_def("ingest_job")


defs = build_definitions()
