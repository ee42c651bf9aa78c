import dataclasses

import dagster as dg

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingRef
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_index.step_api import BlockingCheckError
from ragspine_index.steps.summary_tree import SummaryTreeRef
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import check_results, check_specs, md_table, step_context

STEP = STEP_BY_NAME["summary_tree"]
SUMMARY_TREE_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=SUMMARY_TREE_CODE_VERSION,
    group_name="indexing",
    kinds={"numpy", "parquet"},
    check_specs=check_specs(STEP),
    description="RAPTOR summary tree over the non-RESTRICTED chunks: seeded PCA + BIC-chosen Gaussian mixture "
                "clusters within a token budget, summarized (extractive by default, or the llm resource when the "
                "library's _library.toml sets summarizer = \"llm\": the ragspine resource's summarizer_llm; cached by member texts) and embedded like the chunks. "
                "Node texts are syntheses: retrieval answers a node with the leaf chunks it covers.",
)
def summary_tree(context: dg.AssetExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef,
                 chunk_embeddings: EmbeddingRef, documents: DocumentSet):
    llm = ragspine.summarizer_llm
    ctx = dataclasses.replace(step_context(context, ragspine), make_llm=llm.make if llm is not None else None)
    try:
        result = STEP.function(ctx, index_text=index_text, chunk_embeddings=chunk_embeddings, documents=documents)
    except BlockingCheckError as exc:
        raise dg.Failure(str(exc)) from exc
    ref: SummaryTreeRef = result.value
    per_level = ", ".join(f"L{i}: {n}" for i, n in enumerate(ref.nodes_per_level, start=1)) or "-"
    # node texts never hold RESTRICTED text (blocking check below); the preview shows the top level only
    preview = md_table(["node", "leaves", "summary (synthesis)"], [list(t) for t in ref.top_level], limit=8,
                       note=ref.note or f"{ref.restricted_skipped} RESTRICTED chunk(s) are never clustered")
    yield dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
            "levels": ref.levels,
            "nodes_per_level": per_level,
            "nodes": sum(ref.nodes_per_level),
            "leaves": ref.n_leaves,
            "mean_cluster_size": round(ref.mean_cluster_size, 3),
            "compression_ratio": round(ref.compression_ratio, 3),
            "summarizer_id": ref.summarizer_id,
            "vector_kind": ref.vector_kind,
            "llm_calls_made": ref.llm_calls,
            "llm_calls_cached": ref.llm_cached,
            "reused_unchanged_tree": ref.reused,
            "build_seconds": round(ref.seconds, 3),
            "restricted_chunks_excluded": ref.restricted_skipped,
            "top_level_preview": preview,
            "directory": dg.MetadataValue.path(ref.directory or "-"),
        },
    )
    yield from check_results(result)
