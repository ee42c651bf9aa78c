"""Run the real Dagster assets for one library in-process (what ``ragspine ingest`` does)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from .assets import ALL_ASSETS
from .partitions import LIBRARIES_PARTITION
from .resources import RagspineConfig


@dataclass(frozen=True, slots=True)
class IngestSummary:
    library_id: str
    run_id: str
    snapshot_id: str
    snapshot_dir: str
    changed: bool
    metadata: dict

    def describe(self) -> str:
        m = self.metadata
        return (
            f"{self.library_id}: published snapshot {self.snapshot_id} ({'new' if self.changed else 'unchanged'}) — "
            f"{m.get('documents')} documents, {m.get('chunks')} chunks "
            f"({m.get('restricted_chunks')} RESTRICTED, {m.get('embedded_chunks')} embedded), "
            f"analyzer {m.get('analyzer')}, embedding {m.get('embedding_model')}\n"
            f"  artifacts: {self.snapshot_dir}\n  run: {self.run_id}"
            + (f"\n  current stays pinned to {m['pinned_to']} (ragspine snapshots … --unpin to release)"
               if m.get("pinned_to") not in (None, "-") else "")
        )


def default_instance() -> dg.DagsterInstance:
    """The instance named by ``DAGSTER_HOME`` (so runs show in ``dagster dev``), else a
    project-local one under ``.dagster_home`` in the working directory."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(Path(".dagster_home").resolve())
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    cfg = Path(home) / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.get()


def ingest_library(
    raw_dir: Path,
    *,
    embedding: str | None = None,
    keep_snapshots: int | None = None,
    instance: dg.DagsterInstance | None = None,
    data_root: Path | None = None,
) -> IngestSummary:
    """Materialize every asset for the library at ``raw_dir`` (``<data>/raw/<library>``)."""
    raw_dir = Path(raw_dir).resolve()
    if not raw_dir.is_dir():
        from ragspine_query.errors import RagspineError

        raise RagspineError(f"{raw_dir} is not a directory; pass a library folder such as data/raw/sample")
    library_id = raw_dir.name
    if data_root is None:
        data_root = raw_dir.parent.parent if raw_dir.parent.name == "raw" else raw_dir.parent
    resource = RagspineConfig(
        data_root=str(data_root),
        raw_root=str(raw_dir.parent),
        embedding=embedding or os.environ.get("RAGSPINE_EMBEDDING", "auto"),
        keep_snapshots=keep_snapshots or int(os.environ.get("RAGSPINE_KEEP_SNAPSHOTS", "5")),
    )
    instance = instance or default_instance()
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, [library_id])
    try:
        result = dg.materialize(ALL_ASSETS, instance=instance, resources={"ragspine": resource}, partition_key=library_id)
    except dg.DagsterError as exc:
        from ragspine_query.errors import RagspineError

        current = resource.library_paths(library_id).current
        serving = current.resolve().name if current.exists() else "nothing (never published)"
        raise RagspineError(
            f"ingest of library {library_id!r} stopped before publication: {' '.join(str(exc).split())}. "
            f"The previous snapshot keeps serving ({serving}); see the run's asset checks in the Dagster UI "
            f"(DAGSTER_HOME={os.environ.get('DAGSTER_HOME', '')})"
        ) from exc
    out = result.output_for_node("index_manifest")
    mats = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("index_manifest")]
    meta = {k: v.value for k, v in mats[-1].materialization.metadata.items()} if mats else {}
    return IngestSummary(library_id, result.run_id, out["snapshot_id"], out["snapshot_dir"], out["changed"], meta)
