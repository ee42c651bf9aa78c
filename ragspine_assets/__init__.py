"""RAGSpine's Dagster code location: assets over ``ragspine_index.pipeline.STEPS``,
resources, sensors, schedules and the ``Definitions`` ``workspace.yaml`` names."""

import warnings as _warnings

# Output(data_version=...) is marked beta in Dagster; we rely on it on purpose.
_warnings.filterwarnings("ignore", message=r".*data_version.*beta.*")
