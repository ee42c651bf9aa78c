
from pathlib import Path

import dagster as dg

from ..indexing.chunking import CHUNKER_VERSIONS
from ..indexing.steps import ChunkUpdate, DocumentSet, update_chunk_store, verify_chunks
from ..partitions import libraries_partitions
from ..resources import RagspineConfig
from ._util import md_list, run_id_of, withheld_note

# The chunk asset's code version carries every chunker's version, so changing a chunker
# marks chunks and everything downstream unsynced in the UI.
CHUNKS_CODE_VERSION = "1+" + ",".join(f"{k}@{v}" for k, v in sorted(CHUNKER_VERSIONS.items()))


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=CHUNKS_CODE_VERSION,
    group_name="indexing",
    kinds={"sqlite"},
    check_specs=[
        dg.AssetCheckSpec("chunk_text_is_substring_of_source", asset="chunks", blocking=True),
        dg.AssetCheckSpec("chunk_ids_unique", asset="chunks", blocking=True),
    ],
    description="Versioned SQLite chunk store; only documents whose content hash or chunker changed are re-chunked.",
)
def chunks(context: dg.AssetExecutionContext, ragspine: RagspineConfig, documents: DocumentSet):
    paths = ragspine.library_paths(context.partition_key)
    update: ChunkUpdate = update_chunk_store(documents, paths.chunk_store, run_id=run_id_of(context))
    problems = verify_chunks(documents, paths.chunk_store)
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
            # RESTRICTED documents are counted, never named
            "changed_documents": md_list(
                update.shown(update.added) + update.shown(update.changed)
                + [f"(removed) {d}" for d in update.shown(update.removed)]
                + [f"(withdrawn: failed to parse and may be RESTRICTED now) {d}" for d in update.shown(update.withdrawn_on_error)]
                + ([withheld_note(n, "document")] if (n := len(set(update.restricted) & set(
                    update.added + update.changed + update.removed + update.withdrawn_on_error))) else [])),
        },
    )
    yield dg.AssetCheckResult(
        check_name="chunk_text_is_substring_of_source",
        passed=not (problems["substring"] or problems["locators"]),
        metadata={"violations": md_list(problems["substring"] + problems["locators"])},
    )
    yield dg.AssetCheckResult(
        check_name="chunk_ids_unique",
        passed=not problems["unique_ids"],
        metadata={"duplicates": md_list(problems["unique_ids"])},
    )
