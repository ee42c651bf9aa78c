
import dagster as dg

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingRef
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import check_results, check_specs, run_asset_step

STEP = STEP_BY_NAME["chunk_embeddings"]
EMBEDDINGS_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=EMBEDDINGS_CODE_VERSION,
    group_name="indexing",
    kinds={"onnx", "numpy"},
    check_specs=check_specs(STEP),
    description="float32 L2-normalised vectors of non-RESTRICTED chunks' index text, cached by (model id, text hash); "
                "the backend comes from the ragspine resource's embedding_backend (a library's _library.toml wins).",
)
def chunk_embeddings(context: dg.AssetExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef, documents: DocumentSet):
    result = run_asset_step(STEP, context, ragspine, index_text=index_text, documents=documents)
    ref: EmbeddingRef = result.value
    yield dg.Output(ref, data_version=dg.DataVersion(ref.content_hash[:32]), metadata=embedding_metadata(ref))
    yield from check_results(result)


def embedding_metadata(ref: EmbeddingRef) -> dict:
    """The asset's materialization metadata (the one-step and the fanned-out asset alike)."""
    return {
        "backend": ref.backend or "none",
        "model_id": ref.model_id or "none (BM25 only)",
        "dim": ref.dim,
        "vectors": ref.count,
        "embedded": ref.embedded,
        "reused_from_cache": ref.reused,
        "restricted_skipped": ref.skipped_restricted,
        "restricted_vectors_purged_from_cache": ref.purged_restricted,
        "seconds": round(ref.seconds, 3),
        "directory": dg.MetadataValue.path(ref.directory or "-"),
    }
