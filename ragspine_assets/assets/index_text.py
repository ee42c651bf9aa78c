
import dagster as dg

from ..build.steps import ChunkUpdate, IndexTextRef, export_index_text, read_index_text
from ..partitions import libraries_partitions
from ..resources import RagspineConfig
from ._util import md_table
from pathlib import Path

INDEX_TEXT_CODE_VERSION = "1"


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=INDEX_TEXT_CODE_VERSION,
    group_name="indexing",
    kinds={"parquet"},
    description="Contextual index text (title · entity · period · heading + chunk text) of every active chunk; what BM25 and the embedder see.",
)
def index_text(context: dg.AssetExecutionContext, ragspine: RagspineConfig, chunks: ChunkUpdate):
    paths = ragspine.library_paths(context.partition_key)
    ref: IndexTextRef = export_index_text(paths, Path(chunks.store_path))
    table = read_index_text(ref)
    preview = list(zip(table.column("chunk_id").to_pylist()[:5], table.column("index_text").to_pylist()[:5]))
    return dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
            "path": dg.MetadataValue.path(ref.path),
            "rows": ref.n_rows,
            "restricted_rows": ref.n_restricted,
            "content_hash": ref.content_hash,
            "preview": md_table(["chunk_id", "index_text"], [(c[:12], t) for c, t in preview]),
        },
    )
