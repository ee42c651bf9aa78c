"""Stage 5, ``chunk_embeddings``: vectors of non-RESTRICTED chunks, a shared cache, and their checks."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragspine_core import schema
from ragspine_core.dense.ann import (ANN_INDEX_FILE, ANN_PARAMS_FILE, MAX_UPDATE_SHARE, ROW_KEYS_FILE, AnnConfig,
                                      ann_delta, build_ann_index, engine_available, row_keys, update_ann_index)
from ragspine_core.records import is_restricted

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.chunk_store import ChunkStore
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.steps.index_text import IndexTextRef, read_index_text
from ragspine_index.library_settings import resolve_embedding_spec, resolve_library_settings
from ragspine_index.publish import current_snapshot_id
from ragspine_index.step_api import CheckSpec, Progress, StepContext, StepResult, outcome

__all__ = ["EMBED_BLOCK", "EmbeddingCache", "EmbeddingInput", "EmbeddingRef", "assemble_embeddings", "build_embeddings",
           "embed_block", "embedding_input", "embeddings_step", "missing_hashes", "purge_restricted_vectors",
           "resolve_embedding_spec", "restricted_text_hashes", "text_hash", "verify_embeddings"]

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class EmbeddingRef:
    directory: str | None
    content_hash: str
    model_id: str | None
    backend: str | None
    dim: int
    count: int
    embedded: int
    reused: int
    skipped_restricted: int
    seconds: float = 0.0
    #: Cached vectors deleted because their text belongs to a RESTRICTED document now.
    purged_restricted: int = 0
    #: The ANN index folder (``schema.ANN_DIR``) when the library passed ``AnnConfig.min_vectors``.
    ann_directory: str | None = None
    #: Its parameters (``params.json``), recorded in the manifest's embedding entry.
    ann: dict | None = None

    def artifact_paths(self) -> dict[str, Path]:
        """Artifact name (``schema.ARTIFACT_REGISTRY``) -> what publication copies (none without vectors)."""
        out = {"embeddings": Path(self.directory)} if self.directory else {}
        if self.ann_directory:
            out["ann"] = Path(self.ann_directory)
        return out


def _row_check(model_id: str, text_hash: str, blob: bytes) -> int:
    """CRC-32 of one cache row (its key and its vector's bytes)."""
    return zlib.crc32(blob, zlib.crc32(f"{model_id}\0{text_hash}\0".encode("utf-8")))


class EmbeddingCache:
    """(model id, sha256 of text) -> float32 vector, in one SQLite file shared by libraries.

    Each row carries a CRC-32 of its key and vector (``crc``): SQLite has no page checksums,
    so bytes flipped inside a row that still parses would otherwise be read as a vector and
    published. A row whose check fails is not returned: the caller embeds that text again and
    :meth:`put_many` rewrites the row. A row written before the column has no check: it is
    returned as it is (as before) and its check is written then, so an upgrade does not
    re-embed a whole cache (a real model at 1M chunks: hours).
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embedding_cache (model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
            "dim INTEGER NOT NULL, vector BLOB NOT NULL, crc INTEGER, PRIMARY KEY (model_id, text_hash))")
        if "crc" not in {row[1] for row in self._conn.execute("PRAGMA table_info(embedding_cache)")}:
            try:  # a cache written before the column: each row's check is written when it is first read
                self._conn.execute("ALTER TABLE embedding_cache ADD COLUMN crc INTEGER")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):  # another process added it meanwhile
                    raise
        self._conn.commit()
        #: rows :meth:`get_many` refused (their check failed) / returned and gave a check (they had none)
        self.damaged_rows = 0
        self.unchecked_rows = 0

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        damaged = 0
        backfill: list[tuple[int, str, str]] = []
        for i in range(0, len(hashes), 500):
            part = list(hashes[i:i + 500])
            q = (f"SELECT text_hash, vector, crc FROM embedding_cache WHERE model_id = ? "
                 f"AND text_hash IN ({','.join('?' * len(part))})")
            for h, blob, crc in self._conn.execute(q, [model_id, *part]):
                if len(blob) % 4 or (crc is not None and crc != _row_check(model_id, h, blob)):
                    damaged += 1
                    continue
                if crc is None:
                    backfill.append((_row_check(model_id, h, blob), model_id, h))
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.any():  # a zero vector (kept by a build its check refused) is embedded again
                    out[h] = vector
        if damaged:
            log.warning("embedding cache %s: %d cached vector(s) of model %s failed their checksum (damaged bytes); "
                        "they are embedded again and rewritten", self.path, damaged, model_id)
        if backfill:
            with self._conn:
                self._conn.executemany("UPDATE embedding_cache SET crc = ? WHERE model_id = ? AND text_hash = ? AND crc IS NULL",
                                       backfill)
        self.damaged_rows += damaged
        self.unchecked_rows += len(backfill)
        return out

    def put_many(self, model_id: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        rows = []
        for h, v in items:
            blob = np.asarray(v, dtype=np.float32).tobytes()
            rows.append((model_id, h, int(v.shape[0]), blob, _row_check(model_id, h, blob)))
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache (model_id, text_hash, dim, vector, crc) VALUES (?,?,?,?,?)", rows)

    def purge(self, hashes: Sequence[str]) -> int:
        """Delete every model's vector of these text hashes; returns the rows deleted."""
        deleted = 0
        with self._conn:
            for i in range(0, len(hashes), 500):
                part = list(hashes[i:i + 500])
                cur = self._conn.execute(
                    f"DELETE FROM embedding_cache WHERE text_hash IN ({','.join('?' * len(part))})", part)
                deleted += cur.rowcount
        return deleted

    def close(self) -> None:
        self._conn.close()


def text_hash(text: str) -> str:
    """The embedding cache's key for one index text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ensemble_parts(backend: Any) -> tuple:
    return tuple(getattr(backend, "parts", ())) if hasattr(backend, "assemble") else ()


def cached_vectors(cache: EmbeddingCache, backend: Any, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    """The cached vectors of ``hashes`` for ``backend``: its own entries, and for an ensemble
    also the rows every part model has a vector of (assembled as the ensemble's ``embed``)."""
    found = cache.get_many(backend.model_id, hashes)
    parts = _ensemble_parts(backend)
    rest = [h for h in hashes if h not in found]
    if parts and rest:
        per_part = [cache.get_many(p.backend.model_id, rest) for p in parts]
        complete = [h for h in rest if all(h in got for got in per_part)]
        if complete:
            rows = backend.assemble([np.stack([got[h] for h in complete]) for got in per_part])
            found.update(zip(complete, rows))
    return found


def embed_through_cache(cache: EmbeddingCache, backend: Any, texts: Sequence[str], hashes: Sequence[str], *,
                        batch_size: int) -> np.ndarray:
    """Embed ``texts`` (keys ``hashes``) with ``backend`` and store the vectors in ``cache``.

    An ensemble (a backend with ``parts`` and ``assemble``, e.g. ``minilm+e5+multilingual``)
    is cached per part model: each part embeds only the texts it has no cached vector for,
    and the rows are assembled exactly as the ensemble's own ``embed`` would. A library
    that moves from ``minilm+e5`` to ``minilm+e5+multilingual`` (it gained a language)
    then embeds its existing chunks with the new model alone.
    """
    parts = _ensemble_parts(backend)
    if not parts:
        vecs = np.asarray(backend.embed(list(texts), kind="passage", batch_size=batch_size), dtype=np.float32)
        cache.put_many(backend.model_id, list(zip(hashes, vecs)))
        return vecs
    part_vectors = []
    for p in parts:
        have = cache.get_many(p.backend.model_id, sorted(set(hashes)))
        need = sorted({h for h in hashes if h not in have})
        if need:
            text_of = dict(zip(hashes, texts))
            new = np.asarray(p.backend.embed([text_of[h] for h in need], kind="passage", batch_size=batch_size),
                             dtype=np.float32)
            cache.put_many(p.backend.model_id, list(zip(need, new)))
            have.update(zip(need, new))
        part_vectors.append(np.stack([have[h] for h in hashes]))
    return backend.assemble(part_vectors)


def restricted_text_hashes(store_path: Path) -> list[str]:
    """Hashes of the index text of every version of every document that is RESTRICTED now.

    A document reclassified to RESTRICTED must leave no vector behind, not even of the
    text it had while it was open.
    """
    with ChunkStore(store_path) as store:
        return sorted({text_hash(t) for t in store.restricted_index_texts()})


#: Texts per ``backend.embed`` call. It is also the unit a fanned-out embedding is split
#: by (``embedding_fanout``): a shard embeds whole blocks of the same sorted list of missing
#: texts, so every ``backend.embed`` call receives exactly the texts, in the order, a serial
#: build gives it, and batching (length-sorted, padded within a call) cannot change a bit.
EMBED_BLOCK = 512


@dataclass(frozen=True, slots=True)
class EmbeddingInput:
    """What is embedded: the non-RESTRICTED rows of the index text, their texts' hashes,
    and the hashes whose cached vectors are purged first (RESTRICTED now)."""

    texts: list[str]
    #: Non-RESTRICTED chunk rows, ascending (the embeddings artifact's ``rows``).
    rows: list[int]
    #: ``text_hash`` of each row's index text (same order as ``rows``).
    hashes: list[str]
    skipped: int
    purge: set[str]

    def text_of(self) -> dict[str, str]:
        return {h: self.texts[r] for h, r in zip(self.hashes, self.rows)}


def embedding_input(ref: IndexTextRef, store_path: Path | None = None) -> EmbeddingInput:
    """Read the index text: the rows to embed (never a RESTRICTED one) and the hashes to purge."""
    table = read_index_text(ref)
    sens = table.column("sensitivity").to_pylist()
    texts = table.column("index_text").to_pylist()
    rows = [i for i, s in enumerate(sens) if not is_restricted(s)]
    purge = {text_hash(texts[i]) for i, s in enumerate(sens) if is_restricted(s)}
    if store_path is not None:
        purge.update(restricted_text_hashes(store_path))
    return EmbeddingInput(texts, rows, [text_hash(texts[r]) for r in rows], len(sens) - len(rows), purge)


def purge_restricted_vectors(cache_path: Path, purge: set[str]) -> int:
    """Delete every cached vector (every model) of these RESTRICTED texts; returns the count."""
    if not purge or not Path(cache_path).exists():
        return 0
    cache = EmbeddingCache(cache_path)
    try:
        return cache.purge(sorted(purge))
    finally:
        cache.close()


def missing_hashes(cache: EmbeddingCache, backend: Any, hashes: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
    """``(cached vectors, sorted hashes without one)`` of ``hashes`` for ``backend``
    (an ensemble's rows assembled from its parts' entries, :func:`cached_vectors`)."""
    cached = cached_vectors(cache, backend, sorted(set(hashes)))
    return cached, sorted({h for h in hashes if h not in cached})


def embed_block(backend: Any, cache: EmbeddingCache, texts: Sequence[str], block: Sequence[str], *,
                batch_size: int = 32) -> list[tuple[str, np.ndarray]]:
    """Embed one block (``texts[i]`` has hash ``block[i]``) through the cache
    (:func:`embed_through_cache`: an ensemble per part model)."""
    return list(zip(block, embed_through_cache(cache, backend, texts, block, batch_size=batch_size)))


def no_backend_ref(ref: IndexTextRef, skipped: int, purged: int) -> EmbeddingRef:
    """The embeddings step's value for a library embedded with ``none`` (BM25 only)."""
    return EmbeddingRef(None, sha256_json(["none", ref.content_hash]), None, None, 0, 0, 0, 0, skipped,
                        purged_restricted=purged)


def build_embeddings(paths: LibraryPaths, ref: IndexTextRef, backend: Any | None, *, backend_spec: str, cache_path: Path, batch_size: int = 32, progress=None, store_path: Path | None = None, ann: AnnConfig = AnnConfig()) -> EmbeddingRef:
    """Embed the index text of non-RESTRICTED chunks, reusing cached vectors.

    With at least ``ann.min_vectors`` vectors and the engine installed (the ``ann`` extra),
    also build the ANN index over exactly these vectors (content-addressed like them);
    otherwise the dense channel scans exactly.

    A RESTRICTED chunk is never embedded and never written. Rows are chunk rows
    (chunk_id order), ascending. Before anything is read from the cache, every cached
    vector of a RESTRICTED chunk's text is deleted (for every model), and with
    ``store_path`` also those of every earlier version of a document that is RESTRICTED
    now: reclassification is retroactive.

    The missing texts (sorted by hash) are embedded in blocks of :data:`EMBED_BLOCK`;
    ``embedding_fanout`` runs the same blocks as separate steps and gives the same bytes.
    """
    inp = embedding_input(ref, store_path)
    purged = purge_restricted_vectors(cache_path, inp.purge)
    if backend is None:
        return no_backend_ref(ref, inp.skipped, purged)

    t0 = time.perf_counter()
    cache = EmbeddingCache(cache_path)
    try:
        cached, missing = missing_hashes(cache, backend, inp.hashes)
        text_of = inp.text_of()
        for i in range(0, len(missing), EMBED_BLOCK):
            part = missing[i:i + EMBED_BLOCK]
            cached.update(embed_block(backend, cache, [text_of[h] for h in part], part, batch_size=batch_size))
            if progress:
                progress(min(i + EMBED_BLOCK, len(missing)), len(missing))
    finally:
        cache.close()
    return assemble_embeddings(paths, ref, inp, cached, model_id=backend.model_id, backend_spec=backend_spec,
                               dim=int(backend.dim), embedded=len(missing), purged=purged, ann=ann,
                               store_path=store_path, t0=t0)


def assemble_embeddings(paths: LibraryPaths, ref: IndexTextRef, inp: EmbeddingInput, vectors: dict[str, np.ndarray], *,
                        model_id: str, backend_spec: str, dim: int, embedded: int, purged: int, ann: AnnConfig,
                        store_path: Path | None, t0: float) -> EmbeddingRef:
    """Write the embeddings artifact (one row per ``inp.rows``) from ``vectors`` (hash -> vector),
    and the ANN index when ``ann`` wants one; ``embedded`` of the distinct texts were new."""
    hashes = inp.hashes
    matrix = np.zeros((len(inp.rows), dim), dtype=np.float32)
    for j, h in enumerate(hashes):
        matrix[j] = vectors[h]
    if not np.isfinite(matrix).all():
        raise ValueError(f"embedding backend {model_id!r} produced NaN/inf vectors")
    h = sha256_json([model_id, ref.content_hash, sha256_json(hashes)])
    target = paths.work_dir("embeddings", h)
    rows = inp.rows

    def build(tmp: Path) -> None:
        np.save(tmp / schema.EMB_VECTORS, matrix)
        np.save(tmp / schema.EMB_ROWS, np.asarray(rows, dtype=np.int32))

    write_once(target, build)
    ann_dir, ann_meta = _build_ann(paths, h, matrix, ann, model_id=model_id, text_hashes=hashes,
                                   restricted_hashes=inp.purge, store_path=store_path)
    return EmbeddingRef(str(target), h, model_id, backend_spec, dim, len(rows), embedded,
                        len(set(hashes)) - embedded, inp.skipped, time.perf_counter() - t0, purged_restricted=purged,
                        ann_directory=ann_dir, ann=ann_meta)


def _build_ann(paths: LibraryPaths, vectors_hash: str, matrix: np.ndarray, ann: AnnConfig, *, model_id: str,
               text_hashes: Sequence[str], restricted_hashes: set[str],
               store_path: Path | None = None) -> tuple[str | None, dict | None]:
    """The ANN artifact over ``matrix`` when ``ann`` wants one and its engine is installed.

    When the published snapshot holds a usearch index of the same model and parameters,
    and the rows changed since that index's last full build (this change included) stay
    within ``MAX_UPDATE_SHARE``, that index is *updated* (removed rows deleted, kept rows
    renumbered, new rows inserted) instead of rebuilt: a 1% change of a million-row library
    costs seconds, not the ~27 minutes of a full single-threaded build. Any row whose text is
    RESTRICTED now forces a full build, so no such vector survives as a deleted node —
    judged by content and history, whatever the row's doc_id (:func:`ann_update_allowed`).
    """
    if not ann.wants(matrix.shape[0]) or not engine_available(ann.params.engine):
        return None, None
    keys = row_keys(text_hashes)
    base = _updatable_ann(paths, ann, model_id, int(matrix.shape[1]))
    delta = None
    if base is not None:
        base_dir, base_sha, base_meta = base
        old_keys = np.load(base_dir / ROW_KEYS_FILE)
        delta = ann_delta(old_keys, keys)
        if (int(base_meta.get("rows_changed_since_full", 0)) + delta.changed > MAX_UPDATE_SHARE * matrix.shape[0]
                or not ann_update_allowed(old_keys[delta.removed], restricted_hashes, store_path)):
            delta = None
    if delta is None:
        origin = [ROW_KEYS_FILE]
        make = lambda tmp: build_ann_index(matrix, tmp, ann.params, threads=ann.build_threads)  # noqa: E731
    else:
        origin = ["update", base_sha]
        make = lambda tmp: update_ann_index(base_dir, delta, matrix, tmp, threads=ann.build_threads)  # noqa: E731
    target = paths.work_dir("ann", sha256_json([vectors_hash, asdict(ann.params), ann.build_threads, *origin]))

    def build(tmp: Path) -> None:
        make(tmp)
        np.save(tmp / ROW_KEYS_FILE, keys)

    write_once(target, build)
    meta = json.loads((target / ANN_PARAMS_FILE).read_text(encoding="utf-8"))
    return str(target), meta


def ann_update_allowed(removed_keys: np.ndarray, restricted_hashes: set[str], store_path: Path | None) -> bool:
    """Whether the ANN index may be updated in place after removing rows ``removed_keys``.

    No: a removed row's text is RESTRICTED now (by its hash), or — with the chunk store —
    belongs to a RESTRICTED document whatever its doc_id (moved and renamed while being
    marked), or shares RESTRICTED text (``reclassification.removed_rows_touch_restricted``).
    """
    removed = set(np.asarray(removed_keys).tolist())
    if not removed:
        return True
    restricted = set(row_keys(sorted(restricted_hashes)).tolist()) if restricted_hashes else set()
    if removed & restricted:
        return False
    if store_path is not None and Path(store_path).is_file():
        from ragspine_index.reclassification import removed_rows_touch_restricted

        return not removed_rows_touch_restricted(Path(store_path), removed,
                                                 lambda t: bytes.fromhex(text_hash(t)[:32]))
    return True


def _updatable_ann(paths: LibraryPaths, ann: AnnConfig, model_id: str, dim: int) -> tuple[Path, str, dict] | None:
    """The published snapshot's ANN folder, its index hash and params, if it can be updated."""
    if ann.params.engine != "usearch":
        return None
    snapshot_id = current_snapshot_id(paths)
    if snapshot_id is None:
        return None
    snapshot = paths.snapshots / snapshot_id
    folder = snapshot / schema.ANN_DIR
    try:
        manifest = json.loads((snapshot / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
        meta = json.loads((folder / ANN_PARAMS_FILE).read_text(encoding="utf-8"))
        index_sha = manifest["artifacts"][f"{schema.ANN_DIR}/{ANN_INDEX_FILE}"]["sha256"]
        same_model = (manifest.get("embedding") or {}).get("model_id") == model_id
    except (OSError, KeyError, TypeError, ValueError):
        return None
    wanted = asdict(ann.params)
    if (not same_model or not (folder / ROW_KEYS_FILE).is_file() or int(meta.get("dim", -1)) != dim
            or any(meta.get(k) != v for k, v in wanted.items())):
        return None
    from ragspine_core.errors import IndexCorruptError, IndexNotFoundError
    from ragspine_core.integrity import verify_snapshot_files

    ann_files = {rel: e for rel, e in manifest["artifacts"].items() if rel.startswith(f"{schema.ANN_DIR}/")}
    try:  # never update from damaged files: build afresh instead
        verify_snapshot_files(snapshot, {"artifacts": ann_files}, full=True)
    except (IndexCorruptError, IndexNotFoundError):
        return None
    return folder, str(index_sha), meta


def verify_embeddings(ref: EmbeddingRef, text: IndexTextRef) -> dict[str, int]:
    """``{"restricted_rows": n, "bad_vectors": n}``: vectors of RESTRICTED rows, and
    vectors that are not finite or not unit length (both must be 0)."""
    if not ref.directory:
        return {"restricted_rows": 0, "bad_vectors": 0}
    sens = read_index_text(text).column("sensitivity").to_pylist()
    rows = np.load(Path(ref.directory) / schema.EMB_ROWS)
    restricted = sum(1 for r in rows if is_restricted(sens[int(r)]))
    vecs = np.load(Path(ref.directory) / schema.EMB_VECTORS, mmap_mode="r")
    norms = np.linalg.norm(vecs, axis=1) if vecs.size else np.zeros(0)
    bad = int((~np.isfinite(norms)).sum() + (np.abs(norms - 1.0) > 1e-3).sum())
    return {"restricted_rows": restricted, "bad_vectors": bad}


# --------------------------------------------------------------------------------- step
NO_RESTRICTED_VECTORS = CheckSpec("no_restricted_vectors", blocking=True,
                                  description="no vector of a RESTRICTED chunk is written")
FINITE_NORMALISED = CheckSpec("vectors_finite_and_normalised", blocking=True,
                              description="every vector is finite and L2-normalised")
EMBEDDING_CHECKS = (NO_RESTRICTED_VECTORS, FINITE_NORMALISED)


def library_ann_config(ctx: StepContext, documents: DocumentSet) -> AnnConfig:
    """The run's ANN settings, with the library's ``_library.toml`` ``ann_min_vectors`` winning."""
    ann = ctx.ann or AnnConfig()
    own = getattr(documents.config, "ann_min_vectors", None)
    if own is not None:  # the library's _library.toml wins over the run-level setting
        ann = replace(ann, min_vectors=own)
    return ann


def embedding_step_result(ref: EmbeddingRef, index_text: IndexTextRef) -> StepResult:
    """The step's value with the outcomes of :data:`EMBEDDING_CHECKS` on what was written."""
    found = verify_embeddings(ref, index_text)
    return StepResult(ref, (
        outcome(NO_RESTRICTED_VECTORS, not found["restricted_rows"], {"restricted_rows_with_vectors": found["restricted_rows"]},
                f"{found['restricted_rows']} RESTRICTED row(s) have vectors"),
        outcome(FINITE_NORMALISED, not found["bad_vectors"], {"bad_vectors": found["bad_vectors"]},
                f"{found['bad_vectors']} vector(s) are not finite or not unit length"),
    ))


def embeddings_step(ctx: StepContext, index_text: IndexTextRef, documents: DocumentSet) -> StepResult:
    spec = resolve_library_settings(documents, embedding=ctx.embedding).embedding_spec
    backend = ctx.backend(spec)
    ref = build_embeddings(
        ctx.paths, index_text, backend, backend_spec=spec.backend, cache_path=ctx.cache_path,
        progress=lambda done, total: ctx.progress(Progress("embedded", done, total, "new texts")), store_path=ctx.paths.chunk_store,
        ann=library_ann_config(ctx, documents))
    return embedding_step_result(ref, index_text)
