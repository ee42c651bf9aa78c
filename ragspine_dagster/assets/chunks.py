
import dagster as dg

from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.pipeline import CHUNKS_CODE_VERSION, STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import check_results, check_specs, md_list, run_asset_step, withheld_note

STEP = STEP_BY_NAME["chunks"]


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=CHUNKS_CODE_VERSION,
    group_name="indexing",
    kinds={"sqlite"},
    check_specs=check_specs(STEP),
    description="Versioned SQLite chunk store; only documents whose content hash or chunker changed are re-chunked.",
)
def chunks(context: dg.AssetExecutionContext, ragspine: RagspineConfig, documents: DocumentSet):
    paths = ragspine.library_paths(context.partition_key)
    result = run_asset_step(STEP, context, ragspine, documents=documents)
    update: ChunkUpdate = result.value
    yield dg.Output(
        update,
        data_version=dg.DataVersion(update.active_hash[:32]),
        metadata={
            "chunk_store": dg.MetadataValue.path(str(paths.chunk_store)),
            "chunker": update.chunker,
            "documents_added": len(update.added),
            "documents_changed": len(update.changed),
            "documents_removed": len(update.removed),
            "documents_unchanged": update.unchanged,
            "documents_rechunked_identical": update.rechunked_identical,
            "documents_kept_on_parse_error": len(update.kept_on_error),
            "documents_withdrawn_on_parse_error": len(update.withdrawn_on_error),
            "chunks_written": update.chunks_written,
            "active_chunks": update.n_active_chunks,
            "active_documents": update.n_active_docs,
            "active_hash": update.active_hash,
            # the semantic chunker only: which embedder drew the boundaries
            **({"boundary_embedder": update.boundary_embedder, "sentence_windows_embedded": update.sentences_embedded,
                "sentence_windows_from_cache": update.sentences_from_cache} if update.boundary_embedder else {}),
            # RESTRICTED documents are counted, never named
            "changed_documents": md_list(
                update.shown(update.added) + update.shown(update.changed)
                + [f"(removed) {d}" for d in update.shown(update.removed)]
                + [f"(withdrawn: failed to parse and may be RESTRICTED now) {d}" for d in update.shown(update.withdrawn_on_error)]
                + ([withheld_note(n, "document")] if (n := len(set(update.restricted) & set(
                    update.added + update.changed + update.removed + update.withdrawn_on_error))) else [])),
        },
    )
    yield from check_results(result)
