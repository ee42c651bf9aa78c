"""Stage 6, ``index_manifest``: the glossary file, the manifest, the row-count guard and publication."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ragspine_core import schema
from ragspine_core.lexical.bm25_format import BM25Params
from ragspine_core.records import METADATA_FIELDS

from ragspine_index.artifact_freshness import verify_upstream
from ragspine_index.artifacts import LibraryPaths, sha256_bytes, write_once
from ragspine_index.chunk_store import ChunkStore, utc_now
from ragspine_index.chunking import CHUNKER_VERSIONS
from ragspine_index.steps.chunks import ChunkUpdate
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.chunk_embeddings import EmbeddingRef
from ragspine_index.steps.index_text import IndexTextRef
from ragspine_index.steps.bm25_index import Bm25Ref
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.locks import CHUNK_STATE_KEY
from ragspine_index.publish import publish_snapshot, serving_now
from ragspine_index.purge import purge_derived
from ragspine_index.step_api import BlockingCheckError, StepContext, StepResult

GLOSSARY_FILE = "glossary.json"

def build_manifest(docs: DocumentSet, chunks: ChunkUpdate, text: IndexTextRef, bm25: Bm25Ref, emb: EmbeddingRef, *, run_id: str, code_versions: Mapping[str, str], created_at: str) -> dict[str, Any]:
    with ChunkStore(Path(chunks.store_path)) as store:
        doc_rows = store.execute_read(
            f"SELECT doc_id, content_hash FROM {schema.DOCUMENT_TABLE} WHERE active = 1 ORDER BY doc_id")
        # open documents' keys only: a key only RESTRICTED documents use is never named (in the
        # manifest, or in a filter error listing the filterable fields)
        extra_rows = store.execute_read(
            f"SELECT DISTINCT extra_json FROM {schema.CHUNK_TABLE} WHERE active = 1 "
            "AND upper(trim(sensitivity)) != 'RESTRICTED'")
        # a RESTRICTED document's content hash is listed as null: an unsalted hash of a
        # templated text is an oracle (guess the amount, hash, compare)
        restricted = {r[0] for r in store.execute_read(
            f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE} WHERE active = 1 "
            "AND upper(trim(sensitivity)) = 'RESTRICTED'")}
    extra_fields = sorted({k for r in extra_rows for k in json.loads(r[0] or "{}")} - set(METADATA_FIELDS))
    name, _, version = chunks.chunker.partition("@")
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "library_id": docs.library_id,
        "snapshot_id": "",
        "created_at": created_at,
        "run_id": run_id,
        "tokenizer": {"analyzer": bm25.analyzer},
        "bm25": {"k1": BM25Params().k1, "b": BM25Params().b, **{k: v for k, v in bm25.stats.items() if k != "reused"}},
        "chunker": {"name": name, "version": version, "versions": dict(CHUNKER_VERSIONS)},
        "embedding": None if emb.model_id is None else {
            "model_id": emb.model_id, "backend": emb.backend, "dim": emb.dim, "count": emb.count,
            **({"ann": emb.ann} if getattr(emb, "ann", None) else {}),
        },
        "counts": {
            "documents": chunks.n_active_docs,
            "chunks": chunks.n_active_chunks,
            "restricted_chunks": text.n_restricted,
            "embedded_chunks": emb.count,
            "parse_errors": len(docs.errors),
        },
        "documents": {r["doc_id"]: None if r["doc_id"] in restricted else r["content_hash"] for r in doc_rows},
        "extra_fields": extra_fields,
        "errors": list(docs.errors),
        "code_versions": dict(code_versions),
        "artifacts": {},
    }


# ----------------------------------------------------------------------------- glossary
@dataclass(frozen=True, slots=True)
class GlossaryRef:
    """The glossary published with a snapshot, as a file under ``work/glossary``."""

    path: str

    def artifact_paths(self) -> dict[str, Path]:
        return {"glossary": Path(self.path)}


def write_glossary(paths: LibraryPaths, glossary_toml: Path | None) -> GlossaryRef | None:
    """Validate the glossary TOML and write it as JSON, content-addressed under ``work/glossary``."""
    if glossary_toml is None:
        return None
    from ragspine_core.glossary import Glossary

    payload = json.dumps(Glossary.load(glossary_toml).to_dict(), ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8")
    target = write_once(paths.work_dir("glossary", sha256_bytes(payload)),
                        lambda tmp: (tmp / GLOSSARY_FILE).write_bytes(payload))
    return GlossaryRef(str(target / GLOSSARY_FILE))


# --------------------------------------------------------------------------------- step
#: The guard checked before anything is published (a failure raises BlockingCheckError).
ROW_COUNTS_AGREE = "row_counts_agree"


def manifest_step(ctx: StepContext, documents: DocumentSet, chunks: ChunkUpdate, index_text: IndexTextRef,
                  bm25_index: Bm25Ref, chunk_embeddings: EmbeddingRef, **more: Any) -> StepResult:
    """Write the manifest and publish the snapshot of every upstream artifact.

    Artifacts come from the upstream values' ``artifact_paths()`` (``more`` takes the
    values of steps added later), so a new artifact needs no change here.

    Raises:
        StaleUpstreamError: an upstream artifact is not the one of these chunks (the
            message and ``stale`` name the assets to re-materialize); nothing is published.
        BlockingCheckError: the chunk store, the index text and BM25 disagree on the
            number of rows; nothing is published and the previous snapshot keeps serving.
    """
    paths = ctx.paths
    settings = resolve_library_settings(documents, embedding=ctx.embedding, glossary_path=ctx.glossary_path)
    glossary = write_glossary(paths, settings.glossary_path)
    # whether or not they ran in this run, every artifact must be current; a stale one is
    # re-materialized by Dagster in a run of its own, never rebuilt here (artifact_freshness.py)
    verify_upstream(ctx, documents=documents, chunks=chunks, index_text=index_text, bm25_index=bm25_index,
                    chunk_embeddings=chunk_embeddings, more=more, glossary_path=settings.glossary_path)
    with ChunkStore(Path(chunks.store_path)) as store:
        n_rows = store.execute_read(f"SELECT COUNT(*) FROM {schema.CHUNK_TABLE} WHERE active = 1")[0][0]
    if n_rows != index_text.n_rows or n_rows != bm25_index.stats.get("chunk_rows"):
        raise BlockingCheckError(
            f"blocking check index_manifest.{ROW_COUNTS_AGREE} failed: row counts disagree (chunk store {n_rows}, "
            f"index_text {index_text.n_rows}, bm25 {bm25_index.stats.get('chunk_rows')}); re-materialize chunks and "
            f"downstream; nothing was published, {serving_now(paths)}",
            step="index_manifest", check=ROW_COUNTS_AGREE)
    manifest = build_manifest(documents, chunks, index_text, bm25_index, chunk_embeddings,
                              run_id=ctx.run_id, code_versions=ctx.code_versions, created_at=utc_now())
    manifest[CHUNK_STATE_KEY] = chunks.active_hash  # checked against the published rows (locks.py)
    artifacts: dict[str, Path] = {}
    for value in (bm25_index, chunk_embeddings, glossary, *more.values()):
        if value is not None and hasattr(value, "artifact_paths"):
            artifacts.update(value.artifact_paths())
    result = publish_snapshot(paths, manifest=manifest, chunk_store=Path(chunks.store_path), artifacts=artifacts,
                              keep=ctx.keep)
    # reclassification purges what was derived from now-RESTRICTED text (purge.py)
    purge_derived(paths, Path(ctx.cache_path).parent, keep=artifacts.values())
    return StepResult(PublishedSnapshot(result.snapshot_id, str(result.snapshot_dir), result.changed,
                                        result.previous_snapshot_id, result.pinned_to, _read_manifest(result.snapshot_dir)))


@dataclass(frozen=True, slots=True)
class PublishedSnapshot:
    snapshot_id: str
    snapshot_dir: str
    changed: bool
    previous_snapshot_id: str | None
    pinned_to: str | None
    manifest: Mapping[str, Any]


def _read_manifest(snapshot_dir: Path) -> dict[str, Any]:
    return json.loads((Path(snapshot_dir) / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
