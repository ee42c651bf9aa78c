
import dagster as dg

from ragspine_index.artifacts import sha256_json
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingRef
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.steps.bm25_index import Bm25Ref
from ragspine_index.steps.index_manifest import PublishedSnapshot
from ragspine_index.steps.summary_tree import SummaryTreeRef
from ragspine_index.steps.relation_graph import RelationGraphRef
from ragspine_index.pipeline import CODE_VERSIONS, STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import run_asset_step

STEP = STEP_BY_NAME["index_manifest"]
MANIFEST_CODE_VERSION = STEP.code_version
__all__ = ["CODE_VERSIONS", "MANIFEST_CODE_VERSION", "index_manifest"]


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=MANIFEST_CODE_VERSION,
    group_name="publishing",
    kinds={"json"},
    description="Validates the artifacts, writes the manifest and atomically publishes an immutable snapshot (current pointer swap).",
)
def index_manifest(
    context: dg.AssetExecutionContext,
    ragspine: RagspineConfig,
    documents: DocumentSet,
    chunks: ChunkUpdate,
    index_text: IndexTextRef,
    bm25_index: Bm25Ref,
    chunk_embeddings: EmbeddingRef,
    summary_tree: SummaryTreeRef,
    relation_graph: RelationGraphRef,
):
    published: PublishedSnapshot = run_asset_step(
        STEP, context, ragspine, documents=documents, chunks=chunks, index_text=index_text, bm25_index=bm25_index,
        chunk_embeddings=chunk_embeddings, summary_tree=summary_tree, relation_graph=relation_graph).value
    manifest = published.manifest
    return dg.Output(
        {"snapshot_id": published.snapshot_id, "snapshot_dir": published.snapshot_dir, "changed": published.changed},
        data_version=dg.DataVersion(published.snapshot_id),
        metadata={
            "snapshot_id": published.snapshot_id,
            "previous_snapshot_id": published.previous_snapshot_id or "-",
            "changed": published.changed,
            "pinned_to": published.pinned_to or "-",
            "snapshot_dir": dg.MetadataValue.path(published.snapshot_dir),
            "documents": manifest["counts"]["documents"],
            "chunks": manifest["counts"]["chunks"],
            "restricted_chunks": manifest["counts"]["restricted_chunks"],
            "embedded_chunks": manifest["counts"]["embedded_chunks"],
            "analyzer": manifest["tokenizer"]["analyzer"],
            "chunker": f"{manifest['chunker']['name']}@{manifest['chunker']['version']}",
            "embedding_model": (manifest["embedding"] or {}).get("model_id", "none"),
            "artifact_sets": ", ".join(sorted(manifest.get("artifact_sets", {}))),
            "bytes": sum(a["bytes"] for a in manifest["artifacts"].values()),
            "manifest_hash": sha256_json(manifest)[:16],
        },
    )
