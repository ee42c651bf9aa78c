
import dagster as dg

from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.index_text import IndexTextRef, read_index_text
from ragspine_index.pipeline import STEP_BY_NAME
from ragspine_dagster.partitions import libraries_partitions
from ragspine_dagster.resources import RagspineConfig
from ragspine_dagster.assets._util import is_restricted, md_table, run_asset_step, withheld_note

STEP = STEP_BY_NAME["index_text"]
INDEX_TEXT_CODE_VERSION = STEP.code_version


@dg.asset(
    partitions_def=libraries_partitions,
    code_version=INDEX_TEXT_CODE_VERSION,
    group_name="indexing",
    kinds={"parquet"},
    description="Contextual index text (title · entity · period · heading + chunk text) of every active chunk; what BM25 and the embedder see.",
)
def index_text(context: dg.AssetExecutionContext, ragspine: RagspineConfig, chunks: ChunkUpdate):
    ref: IndexTextRef = run_asset_step(STEP, context, ragspine, chunks=chunks).value
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
