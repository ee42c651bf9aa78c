
import time

import dagster as dg

from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.steps.bm25_index import Bm25Ref
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import run_asset_step

STEP = STEP_BY_NAME["bm25_index"]
BM25_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=BM25_CODE_VERSION,
    group_name="indexing",
    kinds={"numpy"},
    description="Okapi BM25 (k1 1.5, b 0.75) with impacts precomputed into memory-mappable CSC arrays, chunk and document fields.",
)
def bm25_index(context: dg.AssetExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef, documents: DocumentSet):
    t0 = time.perf_counter()
    ref: Bm25Ref = run_asset_step(STEP, context, ragspine, index_text=index_text, documents=documents).value
    return dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
            "directory": dg.MetadataValue.path(ref.directory),
            "analyzer": ref.analyzer,
            "seconds": round(time.perf_counter() - t0, 3),
            **{k: v for k, v in ref.stats.items()},
        },
    )
