
import time

import dagster as dg

from ..indexing.steps import Bm25Ref, DocumentSet, IndexTextRef, build_bm25
from ..partitions import libraries_partitions
from ..resources import RagspineConfig

BM25_CODE_VERSION = "1"


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=BM25_CODE_VERSION,
    group_name="indexing",
    kinds={"numpy"},
    description="Okapi BM25 (k1 1.5, b 0.75) with impacts precomputed into memory-mappable CSC arrays, chunk and document fields.",
)
def bm25_index(context: dg.AssetExecutionContext, ragspine: RagspineConfig, index_text: IndexTextRef, documents: DocumentSet):
    paths = ragspine.library_paths(context.partition_key)
    t0 = time.perf_counter()
    ref: Bm25Ref = build_bm25(paths, index_text, documents)
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
