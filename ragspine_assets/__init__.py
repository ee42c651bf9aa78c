"""RAGSpine build side: Dagster assets over plain build functions."""

import warnings as _warnings

# Output(data_version=...) is marked beta in Dagster; we rely on it on purpose.
_warnings.filterwarnings("ignore", message=r".*data_version.*beta.*")
