"""THE artifact contract shared by the writer (ragspine_assets) and the reader.

File names, the SQLite DDL, array names and the schema version all live here. The
writer validates against it; :func:`ragspine_query.library.open_library` checks it on
open and fails fast with an error naming the asset to re-materialize.

Layout of one library's artifacts (``<artifacts_root>/<library_id>/``)::

    chunk_store.sqlite            versioned chunk store (all versions, lineage)
    snapshots/<snapshot_id>/      one immutable published index
        manifest.json             MANIFEST_FILE: versions, counts, sha256 of every file
        chunks.sqlite             active chunks only, ``row_idx`` = BM25 row
        bm25/                     chunk-level BM25 (CSC-like: term -> postings)
        bm25_doc/                 document-level BM25 field (same arrays, one row per doc)
        bm25_public/              bm25/, bm25_doc/, bm25_blend/ again, statistics over the PUBLIC
                                  rows (only when some open row is INTERNAL; a PUBLIC caller's)
        embeddings/               float32 L2-normalised vectors (non-RESTRICTED only)
    current                       symlink -> snapshots/<snapshot_id> (swapped atomically)
"""

from __future__ import annotations

#: Bump when a reader of the previous version could misread a new snapshot.
SCHEMA_VERSION = 1

CHUNK_STORE_FILE = "chunk_store.sqlite"
SNAPSHOTS_DIR = "snapshots"
CURRENT_POINTER = "current"
#: The publication history of a library folder (one JSON record per publication, rollback,
#: quarantine): written by the publisher, read by readers for why a snapshot was quarantined.
HISTORY_FILE = "history.jsonl"
MANIFEST_FILE = "manifest.json"
SNAPSHOT_CHUNKS_FILE = "chunks.sqlite"
BM25_DIR = "bm25"
BM25_DOC_DIR = "bm25_doc"
EMBEDDINGS_DIR = "embeddings"

# BM25 arrays (inside BM25_DIR / BM25_DOC_DIR)
BM25_VOCAB = "vocab.json"  # {"tokens": [...]} sorted; token id = position
BM25_INDPTR = "indptr.npy"  # int64[V+1]: postings of term t are [indptr[t], indptr[t+1])
BM25_POSTINGS = "postings.npy"  # int32[nnz]: row ids, ascending within a term
BM25_IMPACTS = "impacts.npy"  # float32[nnz]: precomputed BM25 term weight for (term,row)
BM25_MAX_IMPACT = "max_impact.npy"  # float32[V]: max impact per term (for pruning)
BM25_PARAMS = "params.json"  # k1, b, avgdl, n_rows, tokenizer id
BM25_ROW_DOC = "row_doc.npy"  # int32[n_chunks]: chunk row -> document row (in BM25_DIR)
BM25_DOC_IDS = "doc_ids.json"  # document row -> doc_id (in BM25_DOC_DIR)

# Embedding arrays (inside EMBEDDINGS_DIR)
EMB_VECTORS = "vectors.npy"  # float32[n, dim], L2-normalised
EMB_ROWS = "rows.npy"  # int32[n]: chunk row of each vector, ascending

# ----------------------------------------------------------------- the artifact registry
from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True, slots=True)
class ArtifactSpec:
    """One named artifact of a snapshot: where it lives inside the snapshot and which
    asset produces it. A writer step declares the name it writes; publication copies it
    to ``path``; the manifest lists it under ``MANIFEST_ARTIFACT_SETS``; the reader finds
    it there and names ``asset`` when it is missing."""

    name: str
    path: str
    asset: str
    required: bool = False


#: Manifest key: ``{name: {"path": ..., "asset": ...}}`` of the artifacts a snapshot holds.
MANIFEST_ARTIFACT_SETS = "artifact_sets"

ARTIFACT_REGISTRY: dict[str, ArtifactSpec] = {}


def register_artifact(spec: ArtifactSpec) -> ArtifactSpec:
    """Declare an artifact (a new one is one call here, plus the step that writes it)."""
    existing = ARTIFACT_REGISTRY.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"artifact {spec.name!r} is already registered as {existing}")
    ARTIFACT_REGISTRY[spec.name] = spec
    return spec


register_artifact(ArtifactSpec("chunks", SNAPSHOT_CHUNKS_FILE, "index_manifest", required=True))
register_artifact(ArtifactSpec("bm25", BM25_DIR, "bm25_index", required=True))
register_artifact(ArtifactSpec("bm25_doc", BM25_DOC_DIR, "bm25_index", required=True))
#: chunk + doc_weight x document field, precomputed per (term, chunk row): the fast lexical path
BM25_BLEND_DIR = "bm25_blend"
BM25_BLEND_OWN = "own.npy"  # uint8[nnz]: 1 where the posting's term is in the chunk's own text
register_artifact(ArtifactSpec("bm25_blend", BM25_BLEND_DIR, "bm25_index"))
#: the same three BM25 indexes (bm25/, bm25_doc/, bm25_blend/) with statistics over the PUBLIC
#: rows alone, for callers whose ceiling is PUBLIC; written only when some open row is INTERNAL
BM25_PUBLIC_DIR = "bm25_public"
register_artifact(ArtifactSpec("bm25_public", BM25_PUBLIC_DIR, "bm25_index"))
register_artifact(ArtifactSpec("embeddings", EMBEDDINGS_DIR, "chunk_embeddings"))
#: HNSW index over embeddings/vectors.npy (label = vector row), only above the size threshold
#: (``ragspine_core.dense.ann``: ``params.json`` + ``index.bin``)
ANN_DIR = "ann"
register_artifact(ArtifactSpec("ann", ANN_DIR, "chunk_embeddings"))
register_artifact(ArtifactSpec("glossary", "glossary.json", "index_manifest"))
#: entity/chunk relation graph (nodes/edges Parquet + CSR arrays; contract in ragspine_core/graph/artifact.py)
register_artifact(ArtifactSpec("relation_graph", "relation_graph", "relation_graph"))
#: RAPTOR summary tree (asset ``summary_tree``; read by ``ragspine_query.tree``)
SUMMARY_TREE_DIR = "summary_tree"
TREE_META = "tree.json"  # version, params, summarizer id, vector kind, per-level counts
TREE_NODES = "nodes.parquet"  # node_id, level, text (a synthesis, never citable), n_leaves, doc_ids, member_ids
TREE_NODE_VECTORS = "node_vectors.npy"  # float32[n_nodes, dim], L2-normalised
TREE_CHILDREN_INDPTR = "children_indptr.npy"  # int64[n_nodes+1]
TREE_CHILDREN = "children.npy"  # int32: level-1 node -> leaf chunk rows; higher -> node indices
TREE_LEAVES_INDPTR = "leaves_indptr.npy"  # int64[n_nodes+1]
TREE_LEAVES = "leaves.npy"  # int32: the leaf chunk rows each node covers (its provenance), ascending
TREE_LEAF_ROWS = "leaf_rows.npy"  # int32: every leaf (non-RESTRICTED chunk row), ascending
TREE_LEAF_VECTORS = "leaf_vectors.npy"  # float32[n_leaves, dim]: only when the tree has its own vector space
register_artifact(ArtifactSpec("summary_tree", SUMMARY_TREE_DIR, "summary_tree"))

# The asset that produces each artifact, named in reader errors.
ASSET_FOR_ARTIFACT = {
    MANIFEST_FILE: "index_manifest",
    SNAPSHOT_CHUNKS_FILE: "chunks",
    BM25_DIR: "bm25_index",
    BM25_DOC_DIR: "bm25_index",
    EMBEDDINGS_DIR: "chunk_embeddings",
}

CHUNK_TABLE = "narrative_chunk"
DOCUMENT_TABLE = "source_document"

#: (name, SQL type, default) — additive migrations add any column missing from an
#: older file, so this list only ever grows.
CHUNK_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("chunk_id", "TEXT NOT NULL", "''"),
    ("library_id", "TEXT NOT NULL", "''"),
    ("doc_id", "TEXT NOT NULL", "''"),
    ("ordinal", "INTEGER NOT NULL", "0"),
    ("text", "TEXT NOT NULL", "''"),
    ("start_char", "INTEGER NOT NULL", "0"),
    ("end_char", "INTEGER NOT NULL", "0"),
    ("title", "TEXT NOT NULL", "''"),
    ("source_locator", "TEXT NOT NULL", "''"),
    ("entity", "TEXT NOT NULL", "''"),
    ("topic", "TEXT NOT NULL", "''"),
    ("geography", "TEXT NOT NULL", "''"),
    ("period", "TEXT NOT NULL", "''"),
    ("language", "TEXT NOT NULL", "''"),
    ("sensitivity", "TEXT NOT NULL", "'INTERNAL'"),
    ("valid_as_of", "TEXT NOT NULL", "''"),
    ("chunker", "TEXT NOT NULL", "'paragraph'"),
    ("chunker_version", "TEXT NOT NULL", "'1'"),
    ("heading", "TEXT NOT NULL", "''"),
    ("parent_id", "TEXT NOT NULL", "''"),
    ("parent_text", "TEXT NOT NULL", "''"),
    ("extra_json", "TEXT NOT NULL", "'{}'"),
    ("index_text", "TEXT NOT NULL", "''"),
    ("doc_content_hash", "TEXT NOT NULL", "''"),
    ("version", "INTEGER NOT NULL", "1"),
    ("active", "INTEGER NOT NULL", "1"),
    ("ingested_at", "TEXT NOT NULL", "''"),
    ("run_id", "TEXT NOT NULL", "''"),
    ("row_idx", "INTEGER", "NULL"),
)

DOCUMENT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("doc_id", "TEXT NOT NULL", "''"),
    ("content_hash", "TEXT NOT NULL", "''"),
    ("source_path", "TEXT NOT NULL", "''"),
    ("chunker", "TEXT NOT NULL", "''"),
    ("chunker_version", "TEXT NOT NULL", "''"),
    ("version", "INTEGER NOT NULL", "1"),
    ("active", "INTEGER NOT NULL", "1"),
    ("ingested_at", "TEXT NOT NULL", "''"),
    ("run_id", "TEXT NOT NULL", "''"),
)


def _create_table(name: str, cols: tuple[tuple[str, str, str], ...], pk: str) -> str:
    body = ",\n  ".join(
        f"{c} {t}" + (f" DEFAULT {d}" if d != "NULL" else "") for c, t, d in cols
    )
    return f"CREATE TABLE IF NOT EXISTS {name} (\n  {body},\n  PRIMARY KEY ({pk})\n)"


CHUNK_DDL: tuple[str, ...] = (
    _create_table(CHUNK_TABLE, CHUNK_COLUMNS, "chunk_id, version"),
    f"CREATE INDEX IF NOT EXISTS ix_chunk_doc ON {CHUNK_TABLE}(doc_id, active)",
    f"CREATE INDEX IF NOT EXISTS ix_chunk_row ON {CHUNK_TABLE}(row_idx)",
    _create_table(DOCUMENT_TABLE, DOCUMENT_COLUMNS, "doc_id, version"),
    "CREATE TABLE IF NOT EXISTS schema_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

CHUNK_COLUMN_NAMES = tuple(c for c, _, _ in CHUNK_COLUMNS)

#: Keys every manifest must carry (the reader refuses a manifest without them).
MANIFEST_REQUIRED_KEYS = (
    "schema_version",
    "library_id",
    "snapshot_id",
    "created_at",
    "tokenizer",
    "bm25",
    "chunker",
    "counts",
    "artifacts",
    "documents",
)
