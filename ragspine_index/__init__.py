"""Plain build functions (no Dagster import): parsing, chunking, stores, publishing."""
