
import dagster as dg
import numpy as np

from ragspine_query import schema
from ragspine_query.dense.embedding import make_embedding_backend

from ..indexing.steps import DocumentSet, EmbeddingRef, IndexTextRef, build_embeddings, read_index_text, resolve_embedding_spec
from ..partitions import libraries_partitions
from ..resources import RagspineConfig

EMBEDDINGS_CODE_VERSION = "1"


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=EMBEDDINGS_CODE_VERSION,
    group_name="indexing",
    kinds={"onnx", "numpy"},
    check_specs=[dg.AssetCheckSpec("no_restricted_vectors", asset="chunk_embeddings", blocking=True),
                 dg.AssetCheckSpec("vectors_finite_and_normalised", asset="chunk_embeddings", blocking=True)],
    description="float32 L2-normalised vectors of non-RESTRICTED chunks' index text, cached by (model id, text hash).",
)
def chunk_embeddings(context: dg.AssetExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef, documents: DocumentSet):
    paths = ragspine.library_paths(context.partition_key)
    cfg_spec = getattr(documents.config, "embedding", "auto") or "auto"
    spec = resolve_embedding_spec(ragspine.embedding if cfg_spec == "auto" else cfg_spec, documents)
    backend = make_embedding_backend(spec)
    ref: EmbeddingRef = build_embeddings(
        paths, index_text, backend, backend_spec=spec, cache_path=ragspine.cache_dir() / "embeddings.sqlite",
        progress=lambda done, total: context.log.info(f"embedded {done}/{total} new texts"),
        store_path=paths.chunk_store)
    restricted_rows, bad = [], 0
    if ref.directory:
        sens = read_index_text(index_text).column("sensitivity").to_pylist()
        rows = np.load(f"{ref.directory}/{schema.EMB_ROWS}")
        restricted_rows = [int(r) for r in rows if str(sens[int(r)]).upper() == "RESTRICTED"]
        vecs = np.load(f"{ref.directory}/{schema.EMB_VECTORS}", mmap_mode="r")
        norms = np.linalg.norm(vecs, axis=1) if vecs.size else np.zeros(0)
        bad = int((~np.isfinite(norms)).sum() + (np.abs(norms - 1.0) > 1e-3).sum())
    yield dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
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
        },
    )
    yield dg.AssetCheckResult(check_name="no_restricted_vectors", passed=not restricted_rows,
                              metadata={"restricted_rows_with_vectors": len(restricted_rows)})
    yield dg.AssetCheckResult(check_name="vectors_finite_and_normalised", passed=bad == 0, metadata={"bad_vectors": bad})
