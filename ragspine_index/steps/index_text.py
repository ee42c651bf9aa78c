"""Stage 3, ``index_text``: the contextual index text of every active chunk, as Parquet."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_core import schema
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.step_api import StepContext, StepResult

@dataclass(frozen=True, slots=True)
class IndexTextRef:
    path: str
    content_hash: str
    n_rows: int
    n_restricted: int


INDEX_TEXT_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("doc_id", pa.string()), ("sensitivity", pa.string()),
    ("index_text", pa.string()),
])


def _index_text_columns(store_path: Path) -> tuple[dict[str, list], str]:
    """The active chunks' index text columns (chunk_id order) and their content hash."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, sensitivity, index_text FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
    cols = {n: [r[n] for r in rows] for n in INDEX_TEXT_SCHEMA.names}
    return cols, sha256_json([cols["chunk_id"], cols["index_text"], cols["sensitivity"]])


def index_text_hash(store_path: Path) -> str:
    """The content hash :func:`export_index_text` would give the chunk store now (nothing written)."""
    return _index_text_columns(store_path)[1]


def export_index_text(paths: LibraryPaths, store_path: Path) -> IndexTextRef:
    """Active chunks' contextual index text as Parquet, one row per chunk in chunk_id order."""
    cols, h = _index_text_columns(store_path)
    rows = cols["chunk_id"]
    target = paths.work_dir("index_text", h)

    def build(tmp: Path) -> None:
        pq.write_table(pa.table(cols, schema=INDEX_TEXT_SCHEMA), tmp / "index_text.parquet")

    write_once(target, build)
    n_restricted = sum(1 for s in cols["sensitivity"] if is_restricted(s))
    return IndexTextRef(str(target / "index_text.parquet"), h, len(rows), n_restricted)


def read_index_text(ref: IndexTextRef) -> pa.Table:
    return pq.read_table(ref.path)


# --------------------------------------------------------------------------------- step
def index_text_step(ctx: StepContext, chunks: ChunkUpdate) -> StepResult:
    return StepResult(export_index_text(ctx.paths, Path(chunks.store_path)))
