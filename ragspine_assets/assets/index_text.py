
import dagster as dg

from ..indexing.steps import ChunkUpdate, IndexTextRef, export_index_text, read_index_text
from ..partitions import libraries_partitions
from ..resources import RagspineConfig
from ._util import is_restricted, md_table, withheld_note
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
    # the first open chunks only: RESTRICTED index text never reaches the event log
    preview = [
        (c, t) for c, t, s in zip(table.column("chunk_id").to_pylist(), table.column("index_text").to_pylist(),
                                  table.column("sensitivity").to_pylist())
        if not is_restricted(s)
    ][:5]
    return dg.Output(
        ref,
        data_version=dg.DataVersion(ref.content_hash[:32]),
        metadata={
            "path": dg.MetadataValue.path(ref.path),
            "rows": ref.n_rows,
            "restricted_rows": ref.n_restricted,
            "content_hash": ref.content_hash,
            "preview": md_table(["chunk_id", "index_text"], [(c[:12], t) for c, t in preview],
                                note=withheld_note(ref.n_restricted, "chunk")),
        },
    )
