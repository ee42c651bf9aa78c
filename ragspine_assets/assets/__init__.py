"""The Dagster assets: one per step of ``indexing.pipeline.STEPS``, made by :mod:`.factory`."""

from ragspine_assets.assets.factory import assets_for_steps

ALL_ASSETS = assets_for_steps()
#: The asset of each step, by name (a new step's asset is here with no edit).
ASSET_BY_NAME = {a.key.to_user_string(): a for a in ALL_ASSETS}
documents = ASSET_BY_NAME["documents"]
chunks = ASSET_BY_NAME["chunks"]
index_text = ASSET_BY_NAME["index_text"]
bm25_index = ASSET_BY_NAME["bm25_index"]
chunk_embeddings = ASSET_BY_NAME["chunk_embeddings"]
summary_tree = ASSET_BY_NAME["summary_tree"]
relation_graph = ASSET_BY_NAME["relation_graph"]
index_manifest = ASSET_BY_NAME["index_manifest"]

__all__ = ["ALL_ASSETS", "ASSET_BY_NAME", "documents", "chunks", "index_text", "bm25_index", "chunk_embeddings",
           "summary_tree", "relation_graph", "index_manifest"]
