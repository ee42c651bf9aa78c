"""The Dagster code location: wiring only.

Environment variables are read here and nowhere deeper:

* ``RAGSPINE_DATA_ROOT`` (default ``data``), and optionally ``RAGSPINE_RAW_ROOT``,
  ``RAGSPINE_ARTIFACTS_ROOT``, ``RAGSPINE_CACHE_ROOT``, ``RAGSPINE_GLOSSARY_PATH`` —
  every path of :class:`RagspineConfig`; point them at shared storage on a cluster.
* ``RAGSPINE_EMBEDDING`` (default ``auto``), ``RAGSPINE_KEEP_SNAPSHOTS`` (default 5).
* ``RAGSPINE_REINGEST_CRON`` (default ``0 3 * * *``), ``RAGSPINE_REINGEST_TIMEZONE``
  (default ``UTC``).
* ``RAGSPINE_MAX_CONCURRENT``: steps the multiprocess executor runs at once within one
  run (default 0 = one per CPU). Parallelism *across* libraries is one run per partition,
  bounded by the run coordinator (see docs/operations.md).
"""

from __future__ import annotations

import os
from typing import Mapping

import dagster as dg

from .assets import ALL_ASSETS
from .partitions import libraries_partitions
from .resources import RagspineConfig
from .schedules import DEFAULT_REINGEST_CRON, build_reingest_schedule
from .sensors import raw_files_sensor

ingest_job = dg.define_asset_job(
    "ingest_job", selection=dg.AssetSelection.assets(*ALL_ASSETS), partitions_def=libraries_partitions,
    description="Parse, chunk, index, embed and publish one library (partition).",
)


def make_resources(environ: Mapping[str, str] | None = None) -> dict:
    """Resources from the environment (read here and nowhere deeper)."""
    env = os.environ if environ is None else environ
    return {
        "ragspine": RagspineConfig(
            data_root=env.get("RAGSPINE_DATA_ROOT", "data"),
            raw_root=env.get("RAGSPINE_RAW_ROOT", ""),
            artifacts_root=env.get("RAGSPINE_ARTIFACTS_ROOT", ""),
            cache_root=env.get("RAGSPINE_CACHE_ROOT", ""),
            glossary_path=env.get("RAGSPINE_GLOSSARY_PATH", ""),
            embedding=env.get("RAGSPINE_EMBEDDING", "auto"),
            keep_snapshots=int(env.get("RAGSPINE_KEEP_SNAPSHOTS", "5")),
        )
    }


def make_executor(environ: Mapping[str, str] | None = None) -> dg.ExecutorDefinition:
    """The multiprocess executor, ``max_concurrent`` from ``RAGSPINE_MAX_CONCURRENT``."""
    env = os.environ if environ is None else environ
    config: dict = {"max_concurrent": int(env.get("RAGSPINE_MAX_CONCURRENT", "0"))}
    start = env.get("RAGSPINE_START_METHOD", "forkserver")
    if start == "forkserver":
        # one warm server process imports Dagster and this code location once; each step
        # forks from it instead of paying a fresh interpreter start (~4 s) per step
        config["start_method"] = {"forkserver": {"preload_modules": ["dagster", "ragspine_assets.definitions"]}}
    elif start != "spawn":
        raise ValueError(f"RAGSPINE_START_METHOD must be 'forkserver' or 'spawn', got {start!r}")
    return dg.multiprocess_executor.configured(config)


def build_definitions(environ: Mapping[str, str] | None = None) -> dg.Definitions:
    """Assets, ``ingest_job``, ``raw_files_sensor``, ``reingest_schedule``, executor, resources."""
    env = os.environ if environ is None else environ
    schedule = build_reingest_schedule(
        env.get("RAGSPINE_REINGEST_CRON", DEFAULT_REINGEST_CRON),
        timezone=env.get("RAGSPINE_REINGEST_TIMEZONE", "UTC"),
    )
    return dg.Definitions(
        assets=ALL_ASSETS,
        jobs=[ingest_job],
        sensors=[raw_files_sensor],
        schedules=[schedule],
        executor=make_executor(env),
        resources=make_resources(env),
    )


def load_ingest_job(**environ: str) -> dg.JobDefinition:
    """``ingest_job`` resolved against ``environ`` (merged over ``os.environ``).

    The reconstructor for ``dg.build_reconstructable_job("ragspine_assets.definitions",
    "load_ingest_job", reconstructable_kwargs={...})``: every step subprocess of the
    multiprocess executor rebuilds the job from these JSON-able settings.
    """
    return build_definitions({**os.environ, **environ}).resolve_job_def("ingest_job")


defs = build_definitions()
