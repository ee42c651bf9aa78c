"""The Dagster code location: wiring only."""

from __future__ import annotations

import os

import dagster as dg

from .assets import ALL_ASSETS
from .partitions import libraries_partitions
from .resources import RagspineConfig

ingest_job = dg.define_asset_job(
    "ingest_job", selection=dg.AssetSelection.assets(*ALL_ASSETS), partitions_def=libraries_partitions,
    description="Parse, chunk, index, embed and publish one library (partition).",
)


def make_resources() -> dict:
    """Resources from the environment (read here and nowhere deeper)."""
    return {
        "ragspine": RagspineConfig(
            data_root=os.environ.get("RAGSPINE_DATA_ROOT", "data"),
            embedding=os.environ.get("RAGSPINE_EMBEDDING", "auto"),
            keep_snapshots=int(os.environ.get("RAGSPINE_KEEP_SNAPSHOTS", "5")),
        )
    }


defs = dg.Definitions(assets=ALL_ASSETS, jobs=[ingest_job], resources=make_resources())
