"""The ``dagster.yaml`` RAGSpine writes into a new ``DAGSTER_HOME`` (no Dagster import:
``scripts/dagster_dev.sh`` calls this before it starts ``dagster dev``)."""

from __future__ import annotations

from pathlib import Path

#: The ``dagster.yaml`` written into a new ``DAGSTER_HOME`` (by ``ragspine ingest`` and
#: ``scripts/dagster_dev.sh``): one run per library partition at a time (two runs of one
#: library share its chunk store), and run monitoring (runs stuck STARTING are failed;
#: killed STARTED runs are failed by ``raw_files_sensor``'s sweep, see runs.py).
DEFAULT_INSTANCE_CONFIG = """\
# Written by RAGSpine for a new DAGSTER_HOME (edit freely; see docs/operations.md).
concurrency:
  runs:
    max_concurrent_runs: 4
    tag_concurrency_limits:
      - key: "dagster/partition"
        value:
          applyLimitPerUniqueValue: true
        limit: 1
run_monitoring:
  enabled: true
telemetry:
  enabled: false
"""


def write_default_instance_config(home: Path) -> Path:
    """Write :data:`DEFAULT_INSTANCE_CONFIG` as ``home/dagster.yaml`` unless one exists."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text(DEFAULT_INSTANCE_CONFIG, encoding="utf-8")
    return cfg
