"""``chunk_embeddings`` as a graph: plan -> one step per shard (dynamic) -> merge.

The same asset key, inputs, checks, code version and output value as the one-step asset
(:mod:`.factory`); the definitions use this one when ``RAGSPINE_EMBEDDING_SHARDS`` >= 2.
Each ``embed_shard`` step is a separate step of the run, so the Celery (or k8s, dask)
executor sends it to whichever worker is free; ``ragspine`` resource field
``embedding_shards`` (from that variable; also settable in a run's resource config) caps
the shards of one library. The plain functions are in
:mod:`ragspine_index.steps.embedding_shards`.
"""

import dagster as dg

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.embedding_shards import (EmbeddingShard, ShardPlan, ShardResult, embed_shard as embed_shard_step,
                                         fanout_metadata, merge_embedding_shards as merge_step,
                                         plan_embedding_shards, shard_summary)
from ragspine_index.steps.chunk_embeddings import EmbeddingRef
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_index.step_api import BlockingCheckError
from ragspine_assets.partitions import libraries_partitions
from ragspine_assets.resources import RagspineConfig
from ragspine_assets.assets._util import tag_run_host, check_results, check_specs, md_table, step_context
from ragspine_assets.assets.factory import embedding_metadata

STEP = STEP_BY_NAME["chunk_embeddings"]
CHECK_SPECS = check_specs(STEP)
#: The graph's output per check (Dagster names them after the asset and check).
CHECK_OUTPUTS = {spec.name: spec.get_python_identifier() for spec in CHECK_SPECS}


@dg.op(out={"plan": dg.Out(ShardPlan), "shards": dg.DynamicOut(EmbeddingShard)},
       description="Purge RESTRICTED vectors from the cache, find the texts it lacks, deal their blocks to shards.")
def plan_embedding_shards_op(context: dg.OpExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef,
                             documents: DocumentSet):
    tag_run_host(context)
    plan = plan_embedding_shards(step_context(context, ragspine), index_text, documents, shards=ragspine.embedding_shards)
    yield dg.Output(plan, "plan", metadata={
        "shards": len(plan.shards), "vectors": plan.rows, "distinct_texts": plan.texts,
        "cached_texts": plan.cached, "texts_to_embed": plan.missing,
        "restricted_skipped": plan.skipped_restricted,
        "restricted_vectors_purged_from_cache": plan.purged_restricted,
    })
    for shard in plan.shards:
        yield dg.DynamicOutput(shard, mapping_key=f"shard_{shard.index}", output_name="shards",
                               metadata={"shard": f"{shard.index + 1}/{shard.of}", "blocks": shard.blocks,
                                         "texts": len(shard.rows)})


@dg.op(out=dg.Out(ShardResult), description="Embed one shard's blocks into the shared embedding cache.")
def embed_shard(context: dg.OpExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef,
                shard: EmbeddingShard):
    result = embed_shard_step(step_context(context, ragspine), index_text, shard)
    return dg.Output(result, metadata={
        "shard": f"{shard.index + 1}/{shard.of}", "texts_embedded": result.texts, "blocks": result.blocks,
        "seconds": round(result.seconds, 3), "host": result.host, "pid": result.pid,
        "celery_worker": result.worker or "-",
    })


@dg.op(out={"result": dg.Out(EmbeddingRef), **{name: dg.Out(is_required=False) for name in CHECK_OUTPUTS.values()}},
       description="Write the one embeddings artifact (and the ANN index) from the cache the shards filled.")
def merge_embedding_shards(context: dg.OpExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef,
                           documents: DocumentSet, plan: ShardPlan, results: list[ShardResult]):
    try:
        result = merge_step(step_context(context, ragspine), index_text, documents, plan, results)
    except BlockingCheckError as exc:
        raise dg.Failure(str(exc)) from exc
    ref: EmbeddingRef = result.value
    yield dg.Output(ref, "result", data_version=dg.DataVersion(ref.content_hash[:32]), metadata={
        **embedding_metadata(ref), **fanout_metadata(plan, results),
        "shard_table": md_table(("shard", "blocks", "texts", "seconds", "ran on"), shard_summary(plan, results),
                                limit=50),
    })
    yield from check_results(result)


@dg.graph_asset(
    key="chunk_embeddings",
    partitions_def=libraries_partitions,
    code_version=STEP.code_version,
    group_name="indexing",
    kinds={"onnx", "numpy"},
    check_specs=CHECK_SPECS,
    description="float32 L2-normalised vectors of non-RESTRICTED chunks' index text, cached by (model id, text hash), "
                "embedded in shards (one step each, on any worker) and merged into one artifact, byte-identical to "
                "the one-step build; RAGSPINE_EMBEDDING_SHARDS sets the shard count.",
)
def chunk_embeddings_sharded(index_text: IndexTextRef, documents: DocumentSet):
    plan, shards = plan_embedding_shards_op(index_text, documents)
    results = shards.map(lambda shard: embed_shard(index_text, shard))
    merged = merge_embedding_shards(index_text, documents, plan, results.collect())
    return {"result": merged.result, **{out: getattr(merged, out) for out in CHECK_OUTPUTS.values()}}
