
from pathlib import Path

import dagster as dg

from ragspine_query.glossary import Glossary

from ..indexing.artifacts import sha256_json
from ..indexing.chunk_store import ChunkStore, utc_now
from ..indexing.publish import publish_snapshot
from ..indexing.steps import Bm25Ref, ChunkUpdate, DocumentSet, EmbeddingRef, IndexTextRef, build_manifest
from ..partitions import libraries_partitions
from ..resources import RagspineConfig
from ._util import run_id_of
from .chunks import CHUNKS_CODE_VERSION
from .documents import DOCUMENTS_CODE_VERSION
from .embeddings import EMBEDDINGS_CODE_VERSION
from .index_text import INDEX_TEXT_CODE_VERSION
from .lexical import BM25_CODE_VERSION

MANIFEST_CODE_VERSION = "1"
CODE_VERSIONS = {
    "documents": DOCUMENTS_CODE_VERSION, "chunks": CHUNKS_CODE_VERSION, "index_text": INDEX_TEXT_CODE_VERSION,
    "bm25_index": BM25_CODE_VERSION, "chunk_embeddings": EMBEDDINGS_CODE_VERSION, "index_manifest": MANIFEST_CODE_VERSION,
}


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
):
    paths = ragspine.library_paths(context.partition_key)
    manifest = build_manifest(documents, chunks, index_text, bm25_index, chunk_embeddings,
                              run_id=run_id_of(context), code_versions=CODE_VERSIONS, created_at=utc_now())
    gfile = ragspine.glossary_file()
    glossary = Glossary.load(gfile).to_dict() if gfile.is_file() else None
    with ChunkStore(Path(chunks.store_path)) as store:
        rows = store.active_rows()
    if len(rows) != index_text.n_rows or len(rows) != bm25_index.stats.get("chunk_rows"):
        raise dg.Failure(
            f"row counts disagree (chunk store {len(rows)}, index_text {index_text.n_rows}, "
            f"bm25 {bm25_index.stats.get('chunk_rows')}): re-materialize chunks and downstream; the previous snapshot keeps serving")
    result = publish_snapshot(paths, manifest=manifest, chunk_rows=rows, bm25_dir=Path(bm25_index.directory),
                              embeddings_dir=Path(chunk_embeddings.directory) if chunk_embeddings.directory else None,
                              glossary=glossary, keep=ragspine.keep_snapshots)
    return dg.Output(
        {"snapshot_id": result.snapshot_id, "snapshot_dir": str(result.snapshot_dir), "changed": result.changed},
        data_version=dg.DataVersion(result.snapshot_id),
        metadata={
            "snapshot_id": result.snapshot_id,
            "previous_snapshot_id": result.previous_snapshot_id or "-",
            "changed": result.changed,
            "pinned_to": result.pinned_to or "-",
            "snapshot_dir": dg.MetadataValue.path(str(result.snapshot_dir)),
            "documents": manifest["counts"]["documents"],
            "chunks": manifest["counts"]["chunks"],
            "restricted_chunks": manifest["counts"]["restricted_chunks"],
            "embedded_chunks": manifest["counts"]["embedded_chunks"],
            "analyzer": manifest["tokenizer"]["analyzer"],
            "chunker": f"{manifest['chunker']['name']}@{manifest['chunker']['version']}",
            "embedding_model": (manifest["embedding"] or {}).get("model_id", "none"),
            "bytes": sum(a["bytes"] for a in manifest["artifacts"].values()),
            "manifest_hash": sha256_json(manifest)[:16],
        },
    )
