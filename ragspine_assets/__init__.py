"""Deprecated: the build side is now ``ragspine_index`` (Dagster-free building),
``ragspine_dagster`` (the code location) and ``ragspine_tools`` (the ``ragspine`` command,
evaluation). Every old module name still imports, with a DeprecationWarning, for one
release (docs/architecture.md has the map)."""

from ragspine_core.compat import install_aliases

#: old module -> new module (anything under an old name maps under the new one)
MOVED = {
    "ragspine_assets.assets": "ragspine_dagster.assets",
    "ragspine_assets.cli": "ragspine_tools.cli",
    "ragspine_assets.definitions": "ragspine_dagster.definitions",
    "ragspine_assets.evaluate": "ragspine_tools.evaluate",
    "ragspine_assets.indexing": "ragspine_index",
    "ragspine_assets.indexing.chunks": "ragspine_index.steps.chunks",
    "ragspine_assets.indexing.communities": "ragspine_index.graph.community_detection",
    "ragspine_assets.indexing.documents": "ragspine_index.steps.documents",
    "ragspine_assets.indexing.embedding_fanout": "ragspine_index.steps.embedding_shards",
    "ragspine_assets.indexing.embeddings": "ragspine_index.steps.chunk_embeddings",
    "ragspine_assets.indexing.entities": "ragspine_index.graph.entities",
    "ragspine_assets.indexing.index_text": "ragspine_index.steps.index_text",
    "ragspine_assets.indexing.lexical": "ragspine_index.steps.bm25_index",
    "ragspine_assets.indexing.manifest": "ragspine_index.steps.index_manifest",
    "ragspine_assets.indexing.relation_graph": "ragspine_index.steps.relation_graph",
    "ragspine_assets.indexing.summarizers": "ragspine_index.raptor.summarizers",
    "ragspine_assets.indexing.summary_tree": "ragspine_index.steps.summary_tree",
    "ragspine_assets.ingest": "ragspine_dagster.ingest",
    "ragspine_assets.instance_config": "ragspine_dagster.instance_config",
    "ragspine_assets.partitions": "ragspine_dagster.partitions",
    "ragspine_assets.progress": "ragspine_dagster.progress",
    "ragspine_assets.resources": "ragspine_dagster.resources",
    "ragspine_assets.runs": "ragspine_dagster.runs",
    "ragspine_assets.schedules": "ragspine_dagster.schedules",
    "ragspine_assets.sensors": "ragspine_dagster.sensors",
}

install_aliases(MOVED)
