"""One dynamic partition per library folder under ``data/raw/``."""

import dagster as dg

LIBRARIES_PARTITION = "libraries"
libraries_partitions = dg.DynamicPartitionsDefinition(name=LIBRARIES_PARTITION)
