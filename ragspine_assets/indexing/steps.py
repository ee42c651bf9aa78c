"""The pipeline's plain functions: each Dagster asset body calls exactly one of these.

No Dagster import here, so every step is testable (and usable from a notebook or the
evaluation harness) without an orchestrator.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ragspine_query import schema
from ragspine_query.errors import DocumentError, RagspineError
from ragspine_query.lexical.bm25 import BM25Params
from ragspine_query.records import METADATA_FIELDS
from ragspine_query.text.tokenize import cjk_share, make_analyzer, resolve_auto_analyzer

from .artifacts import LibraryPaths, sha256_json, write_once
from .chunk_store import ChunkStore
from .chunking import CHUNKER_VERSIONS, build_chunks, make_chunker
from .lexical import build_library_bm25
from .parsing import LibraryConfig, ParseResult, SourceDocument, load_library_config, parse_library


# --------------------------------------------------------------------------- documents
@dataclass(frozen=True, slots=True)
class DocumentSet:
    """Parsed documents of one library plus everything that went wrong."""

    library_id: str
    raw_dir: str
    config: LibraryConfig
    documents: tuple[SourceDocument, ...]
    errors: tuple[str, ...]
    error_paths: tuple[str, ...]
    skipped: tuple[str, ...]
    #: Failing files that may now be RESTRICTED (a sensitivity error, or the word
    #: "restricted" anywhere in them): their previous chunks are withdrawn, not kept.
    withdraw_paths: tuple[str, ...] = ()
    #: Set by :meth:`save`: the file the documents are read back from after pickling.
    saved_path: str = ""

    @property
    def content_hash(self) -> str:
        return sha256_json([[d.doc_id, d.content_hash] for d in self.documents] + [self.config_id]
                           + [["withdraw", p] for p in self.withdraw_paths])

    @property
    def config_id(self) -> str:
        return json.dumps(dataclasses.asdict(self.config), sort_keys=True)

    # -- between processes: a reference, never the text --------------------------------
    def save(self, paths: LibraryPaths) -> "DocumentSet":
        """Write the parsed documents under the library's ``work/documents/`` and return a
        set that pickles as a reference to that file.

        Dagster's IO manager pickles step outputs under ``DAGSTER_HOME`` (or
        ``RAGSPINE_IO_DIR``); a saved set's pickle carries no document text, so neither a
        RESTRICTED body nor its title is ever copied out of the library's own folder.
        """
        records = [{f.name: getattr(d, f.name) for f in dataclasses.fields(SourceDocument)} for d in self.documents]
        payload = json.dumps(records, ensure_ascii=False, sort_keys=True).encode("utf-8")
        target = paths.work_dir("documents", hashlib.sha256(payload).hexdigest())
        write_once(target, lambda tmp: (tmp / _DOCUMENTS_FILE).write_bytes(payload))
        return dataclasses.replace(self, saved_path=str(target / _DOCUMENTS_FILE))

    def __reduce__(self):
        if not self.saved_path:
            return object.__reduce__(self)
        state = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "documents"}
        return (_load_saved_document_set, (state,))


_DOCUMENTS_FILE = "documents.json"


def _load_saved_document_set(state: dict[str, Any]) -> DocumentSet:
    path = Path(state["saved_path"])
    try:
        records = json.loads(path.read_bytes())
    except OSError as exc:
        raise RagspineError(
            f"the parsed documents of library {state['library_id']!r} are gone ({exc.strerror}); "
            "re-materialize the documents asset") from exc
    docs = tuple(SourceDocument(**{**r, "extra": tuple(tuple(p) for p in r["extra"])}) for r in records)
    return DocumentSet(documents=docs, **state)


def load_documents(raw_dir: Path, library_id: str | None = None) -> DocumentSet:
    raw_dir = Path(raw_dir)
    config = load_library_config(raw_dir)
    result: ParseResult = parse_library(raw_dir, library_id)
    lib = library_id or raw_dir.name
    error_paths = sorted({_error_path(e, raw_dir) for e in result.errors})
    return DocumentSet(
        library_id=lib,
        raw_dir=str(raw_dir),
        config=config,
        documents=tuple(result.documents),
        errors=tuple(str(e) for e in result.errors),
        error_paths=tuple(error_paths),
        skipped=tuple(result.skipped),
        withdraw_paths=tuple(p for p in error_paths if _may_be_restricted(raw_dir, p, result.errors)),
    )


def _may_be_restricted(raw_dir: Path, rel: str, errors: Sequence[DocumentError]) -> bool:
    """Whether a file that failed to parse could be trying to become RESTRICTED.

    Fail closed: a sensitivity error in the file, an unreadable file, or the word
    "restricted" anywhere in its text (after Unicode NFKC and case folding, with
    whitespace removed, so ``R E S T R I C T E D`` and full-width letters count) means
    yes. Any other broken file keeps its previous chunks (bad input loses nothing). Such a file's previously indexed chunks are withdrawn
    instead of kept serving under their old, lower sensitivity.
    """
    for err in errors:
        if _error_path(err, raw_dir) == rel and (err.field or "").casefold() in _SENSITIVITY_ERROR_FIELDS:
            return True
    path = raw_dir / rel
    try:
        if path.is_symlink() or not path.is_file():
            return True  # never follow a link (it may leave the library); unreadable: fail closed
        data = path.read_bytes()
    except OSError:
        return True
    text = unicodedata.normalize("NFKC", data.decode("utf-8", errors="replace")).casefold()
    return "restricted" in "".join(text.split())


_SENSITIVITY_ERROR_FIELDS = frozenset({"sensitivity"})


def _error_path(err: DocumentError, raw_dir: Path) -> str:
    p = Path(str(err.path).split("#", 1)[0])
    try:
        return p.relative_to(raw_dir).as_posix()
    except ValueError:
        return p.as_posix()


# ------------------------------------------------------------------------------ chunks
@dataclass(frozen=True, slots=True)
class ChunkUpdate:
    """What an incremental chunking pass did, and a hash of the resulting active set."""

    library_id: str
    store_path: str
    chunker: str
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    unchanged: int
    kept_on_error: tuple[str, ...]
    rechunked_identical: int
    chunks_written: int
    n_active_chunks: int
    n_active_docs: int
    active_hash: str
    #: Documents of failing files that may now be RESTRICTED: withdrawn, not kept.
    withdrawn_on_error: tuple[str, ...] = ()
    #: Which of the doc ids above are (or were, before this pass) RESTRICTED: reports
    #: show them as a count only.
    restricted: tuple[str, ...] = ()

    def shown(self, doc_ids: Sequence[str]) -> list[str]:
        """``doc_ids`` without the RESTRICTED ones (for the UI and logs)."""
        hidden = set(self.restricted)
        return [d for d in doc_ids if d not in hidden]


def update_chunk_store(docs: DocumentSet, store_path: Path, *, run_id: str = "") -> ChunkUpdate:
    """Re-chunk only documents whose content hash (or chunker) changed; withdraw removed ones.

    A document whose source file failed to parse this time keeps its previous chunks
    (bad input loses nothing) — unless the file may now be RESTRICTED
    (:attr:`DocumentSet.withdraw_paths`): then its chunks are withdrawn (fail closed).
    """
    cfg = docs.config
    params: dict[str, Any] = {}
    if getattr(cfg, "max_chars", None):
        params["max_chars"] = cfg.max_chars
    if getattr(cfg, "overlap_chars", None) is not None:
        params["overlap_chars"] = cfg.overlap_chars
    chunker = make_chunker(cfg.chunker, **params)
    chunker_id = f"{chunker.name}@{chunker.version}"
    added: list[str] = []
    changed: list[str] = []
    removed: list[str] = []
    kept: list[str] = []
    withdrawn: list[str] = []
    unchanged = 0
    rechunked_identical = 0
    written = 0
    with ChunkStore(store_path) as store:
        known = store.document_hashes()
        known_chunkers = store.document_chunkers()
        source_paths = {r["doc_id"]: r["source_path"] for r in store.execute_read(
            f"SELECT doc_id, source_path FROM {schema.DOCUMENT_TABLE} WHERE active = 1")}
        restricted = {r[0] for r in store.execute_read(
            f"SELECT DISTINCT doc_id FROM {schema.CHUNK_TABLE} WHERE active = 1 AND upper(sensitivity) = 'RESTRICTED'")}
        restricted |= {d.doc_id for d in docs.documents if d.sensitivity.upper() == "RESTRICTED"}
        seen = set()
        for doc in docs.documents:
            seen.add(doc.doc_id)
            if known.get(doc.doc_id) == doc.content_hash and known_chunkers.get(doc.doc_id) == chunker_id:
                unchanged += 1
                continue
            chunks = build_chunks(doc, chunker, contextual=getattr(cfg, "contextual", True))
            n = store.replace_doc_chunks(
                doc.doc_id, chunks, doc.valid_as_of, content_hash=doc.content_hash,
                source_path=doc.source_path, run_id=run_id, chunker=chunker.name, chunker_version=chunker.version,
            )
            if n == 0 and doc.doc_id in known:
                # a new chunker version produced byte-identical chunks: nothing changes downstream
                rechunked_identical += 1
                unchanged += 1
                continue
            written += n
            (changed if doc.doc_id in known else added).append(doc.doc_id)
        failing = set(docs.error_paths)
        withdraw = set(docs.withdraw_paths)
        for doc_id in sorted(set(known) - seen):
            src = source_paths.get(doc_id, "").split("#", 1)[0]
            if src in failing and src not in withdraw:
                kept.append(doc_id)
                continue
            store.replace_doc_chunks(doc_id, [], run_id=run_id)
            (withdrawn if src in withdraw else removed).append(doc_id)
        rows = store.execute_read(
            f"SELECT chunk_id, version FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
        n_docs = store.execute_read(f"SELECT COUNT(DISTINCT doc_id) FROM {schema.CHUNK_TABLE} WHERE active = 1")[0][0]
    return ChunkUpdate(
        library_id=docs.library_id,
        store_path=str(store_path),
        chunker=chunker_id,
        added=tuple(added),
        changed=tuple(changed),
        removed=tuple(removed),
        unchanged=unchanged,
        kept_on_error=tuple(kept),
        withdrawn_on_error=tuple(withdrawn),
        restricted=tuple(sorted(restricted)),
        rechunked_identical=rechunked_identical,
        chunks_written=written,
        n_active_chunks=len(rows),
        n_active_docs=int(n_docs),
        active_hash=sha256_json([[r[0], r[1]] for r in rows]),
    )


def verify_chunks(docs: DocumentSet, store_path: Path) -> dict[str, list[str]]:
    """Check the chunk invariants; returns problems by check name (empty lists = pass)."""
    bodies = {d.doc_id: d.body for d in docs.documents}
    restricted = {d.doc_id for d in docs.documents if d.sensitivity.upper() == "RESTRICTED"}
    problems: dict[str, list[str]] = {"substring": [], "unique_ids": [], "locators": []}
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, text, start_char, end_char FROM {schema.CHUNK_TABLE} WHERE active = 1")
    seen: set[str] = set()
    for r in rows:
        if r["chunk_id"] in seen:
            problems["unique_ids"].append(r["chunk_id"])
        seen.add(r["chunk_id"])
        body = bodies.get(r["doc_id"])
        if body is None:
            continue  # kept from an earlier run while its file is unreadable
        if r["start_char"] < 0 or r["end_char"] > len(body) or r["start_char"] >= r["end_char"]:
            owner = "a RESTRICTED document" if r["doc_id"] in restricted else r["doc_id"]
            problems["locators"].append(f"{r['chunk_id']} span {r['start_char']}-{r['end_char']} outside {owner}")
        elif body[r["start_char"]:r["end_char"]] != r["text"]:
            owner = "a RESTRICTED document" if r["doc_id"] in restricted else r["doc_id"]
            problems["substring"].append(f"{r['chunk_id']} ({owner} {r['start_char']}-{r['end_char']})")
    return problems


# -------------------------------------------------------------------------- index text
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


def export_index_text(paths: LibraryPaths, store_path: Path) -> IndexTextRef:
    """Active chunks' contextual index text as Parquet, one row per chunk in chunk_id order."""
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT chunk_id, doc_id, sensitivity, index_text FROM {schema.CHUNK_TABLE} WHERE active = 1 ORDER BY chunk_id")
    cols = {n: [r[n] for r in rows] for n in INDEX_TEXT_SCHEMA.names}
    h = sha256_json([cols["chunk_id"], cols["index_text"], cols["sensitivity"]])
    target = paths.work_dir("index_text", h)

    def build(tmp: Path) -> None:
        pq.write_table(pa.table(cols, schema=INDEX_TEXT_SCHEMA), tmp / "index_text.parquet")

    write_once(target, build)
    n_restricted = sum(1 for s in cols["sensitivity"] if str(s).upper() == "RESTRICTED")
    return IndexTextRef(str(target / "index_text.parquet"), h, len(rows), n_restricted)


def read_index_text(ref: IndexTextRef) -> pa.Table:
    return pq.read_table(ref.path)


# -------------------------------------------------------------------------------- bm25
@dataclass(frozen=True, slots=True)
class Bm25Ref:
    directory: str
    content_hash: str
    analyzer: str
    stats: dict = field(default_factory=dict)


def resolve_analyzer(docs: DocumentSet) -> str:
    spec = (getattr(docs.config, "analyzer", "auto") or "auto").lower()
    if spec == "auto":
        return resolve_auto_analyzer(d.body for d in docs.documents)
    return spec


def build_bm25(paths: LibraryPaths, ref: IndexTextRef, docs: DocumentSet, *, params: BM25Params = BM25Params()) -> Bm25Ref:
    """Chunk-level and document-level BM25 arrays, content-addressed under work/bm25."""
    analyzer = make_analyzer(resolve_analyzer(docs))
    table = read_index_text(ref)
    chunk_ids = table.column("chunk_id").to_pylist()
    doc_of_chunk = table.column("doc_id").to_pylist()
    texts = table.column("index_text").to_pylist()
    doc_ids = sorted(set(doc_of_chunk))
    doc_row = {d: i for i, d in enumerate(doc_ids)}
    by_id = {d.doc_id: d for d in docs.documents}
    fallback: dict[str, list[str]] = {}
    for d, t in zip(doc_of_chunk, texts):
        if d not in by_id:
            fallback.setdefault(d, []).append(t)
    doc_texts = [
        (by_id[d].title + "\n" + by_id[d].body) if d in by_id else "\n".join(fallback.get(d, []))
        for d in doc_ids
    ]
    h = sha256_json([ref.content_hash, analyzer.id, params.k1, params.b, [sha256_json(t) for t in doc_texts]])
    target = paths.work_dir("bm25", h)
    stats: dict = {}

    def build(tmp: Path) -> None:
        built = build_library_bm25(
            tmp, chunk_texts=texts, chunk_doc_rows=[doc_row[d] for d in doc_of_chunk],
            doc_ids=doc_ids, doc_texts=doc_texts, analyzer=analyzer, params=params)
        (tmp / "stats.json").write_text(json.dumps(built, sort_keys=True), encoding="utf-8")

    write_once(target, build)
    # read back what the build recorded, so a reused directory reports identical stats
    stats = json.loads((target / "stats.json").read_text(encoding="utf-8"))
    assert len(chunk_ids) == stats["chunk_rows"]
    return Bm25Ref(str(target), h, analyzer.id, stats)


# -------------------------------------------------------------------------- embeddings
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


def resolve_embedding_spec(spec: str, docs: DocumentSet) -> str:
    """``auto`` picks multilingual for CJK-heavy libraries, MiniLM otherwise (if installed)."""
    s = (spec or "auto").lower()
    if s != "auto":
        return s
    from ragspine_query.dense.embedding import auto_backend_for_languages

    sample = "\n".join(d.body[:2000] for d in docs.documents[:2000])
    return auto_backend_for_languages(cjk_share(sample))


class EmbeddingCache:
    """(model id, sha256 of text) -> float32 vector, in one SQLite file shared by libraries."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embedding_cache (model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
            "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model_id, text_hash))")
        self._conn.commit()

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), 500):
            part = list(hashes[i:i + 500])
            q = f"SELECT text_hash, vector FROM embedding_cache WHERE model_id = ? AND text_hash IN ({','.join('?' * len(part))})"
            for h, blob in self._conn.execute(q, [model_id, *part]):
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model_id: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache (model_id, text_hash, dim, vector) VALUES (?,?,?,?)",
                [(model_id, h, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for h, v in items])

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


def restricted_text_hashes(store_path: Path) -> list[str]:
    """Hashes of the index text of every version of every document that is RESTRICTED now.

    A document reclassified to RESTRICTED must leave no vector behind, not even of the
    text it had while it was open.
    """
    with ChunkStore(store_path) as store:
        rows = store.execute_read(
            f"SELECT DISTINCT index_text FROM {schema.CHUNK_TABLE} WHERE doc_id IN ("
            f"SELECT doc_id FROM {schema.CHUNK_TABLE} WHERE active = 1 AND upper(sensitivity) = 'RESTRICTED')")
    return sorted({text_hash(r[0]) for r in rows})


def build_embeddings(paths: LibraryPaths, ref: IndexTextRef, backend: Any | None, *, backend_spec: str, cache_path: Path, batch_size: int = 32, progress=None, store_path: Path | None = None) -> EmbeddingRef:
    """Embed the index text of non-RESTRICTED chunks, reusing cached vectors.

    A RESTRICTED chunk is never embedded and never written. Rows are chunk rows
    (chunk_id order), ascending. Before anything is read from the cache, every cached
    vector of a RESTRICTED chunk's text is deleted (for every model), and with
    ``store_path`` also those of every earlier version of a document that is RESTRICTED
    now: reclassification is retroactive.
    """
    table = read_index_text(ref)
    sens = table.column("sensitivity").to_pylist()
    texts = table.column("index_text").to_pylist()
    rows = [i for i, s in enumerate(sens) if str(s).upper() != "RESTRICTED"]
    skipped = len(sens) - len(rows)
    purge = {text_hash(texts[i]) for i, s in enumerate(sens) if str(s).upper() == "RESTRICTED"}
    if store_path is not None:
        purge.update(restricted_text_hashes(store_path))
    purged = 0
    if purge and Path(cache_path).exists():
        cache = EmbeddingCache(cache_path)
        try:
            purged = cache.purge(sorted(purge))
        finally:
            cache.close()
    if backend is None:
        return EmbeddingRef(None, sha256_json(["none", ref.content_hash]), None, None, 0, 0, 0, 0, skipped,
                            purged_restricted=purged)

    t0 = time.perf_counter()
    hashes = [text_hash(texts[r]) for r in rows]
    cache = EmbeddingCache(cache_path)
    try:
        cached = cache.get_many(backend.model_id, sorted(set(hashes)))
        missing = sorted({h for h in hashes if h not in cached})
        text_of = {h: texts[r] for h, r in zip(hashes, rows)}
        new_items: list[tuple[str, np.ndarray]] = []
        step = 512
        for i in range(0, len(missing), step):
            part = missing[i:i + step]
            vecs = np.asarray(backend.embed([text_of[h] for h in part], kind="passage", batch_size=batch_size), dtype=np.float32)
            items = list(zip(part, vecs))
            cache.put_many(backend.model_id, items)
            new_items.extend(items)
            if progress:
                progress(min(i + step, len(missing)), len(missing))
        cached.update(dict(new_items))
    finally:
        cache.close()
    dim = int(backend.dim)
    matrix = np.zeros((len(rows), dim), dtype=np.float32)
    for j, h in enumerate(hashes):
        matrix[j] = cached[h]
    if not np.isfinite(matrix).all():
        raise ValueError(f"embedding backend {backend.model_id!r} produced NaN/inf vectors")
    h = sha256_json([backend.model_id, ref.content_hash, sha256_json(hashes)])
    target = paths.work_dir("embeddings", h)

    def build(tmp: Path) -> None:
        np.save(tmp / schema.EMB_VECTORS, matrix)
        np.save(tmp / schema.EMB_ROWS, np.asarray(rows, dtype=np.int32))

    write_once(target, build)
    return EmbeddingRef(str(target), h, backend.model_id, backend_spec, dim, len(rows), len(missing),
                        len(set(hashes)) - len(missing), skipped, time.perf_counter() - t0, purged_restricted=purged)


# ----------------------------------------------------------------------------- publish
def build_manifest(docs: DocumentSet, chunks: ChunkUpdate, text: IndexTextRef, bm25: Bm25Ref, emb: EmbeddingRef, *, run_id: str, code_versions: dict[str, str], created_at: str) -> dict[str, Any]:
    with ChunkStore(Path(chunks.store_path)) as store:
        doc_rows = store.execute_read(
            f"SELECT doc_id, content_hash FROM {schema.DOCUMENT_TABLE} WHERE active = 1 ORDER BY doc_id")
        extra_rows = store.execute_read(
            f"SELECT DISTINCT extra_json FROM {schema.CHUNK_TABLE} WHERE active = 1")
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
        },
        "counts": {
            "documents": chunks.n_active_docs,
            "chunks": chunks.n_active_chunks,
            "restricted_chunks": text.n_restricted,
            "embedded_chunks": emb.count,
            "parse_errors": len(docs.errors),
        },
        "documents": {r["doc_id"]: r["content_hash"] for r in doc_rows},
        "extra_fields": extra_fields,
        "errors": list(docs.errors),
        "code_versions": dict(code_versions),
        "artifacts": {},
    }


# ------------------------------------------------------------------ the whole pipeline
@dataclass(frozen=True, slots=True)
class BuildResult:
    docs: DocumentSet
    chunks: ChunkUpdate
    index_text: IndexTextRef
    bm25: Bm25Ref
    embeddings: EmbeddingRef
    snapshot_id: str
    snapshot_dir: str
    timings: dict


def build_library(paths: LibraryPaths, *, embedding: str = "none", cache_path: Path, run_id: str = "local", code_versions: dict[str, str] | None = None, glossary: dict | None = None, keep: int = 5, progress=None) -> BuildResult:
    """Run documents → chunks → index_text → bm25_index → chunk_embeddings → index_manifest.

    The same functions, in the same order, that the Dagster assets call; used by the
    evaluation harness and benchmarks, which must index exactly like production.
    """
    from ragspine_query.dense.embedding import make_embedding_backend

    from .publish import publish_snapshot

    say = progress or (lambda msg: None)
    t: dict[str, float] = {}
    t0 = time.perf_counter()
    docs = load_documents(paths.raw, paths.library_id)
    t["documents"] = time.perf_counter() - t0
    say(f"parsed {len(docs.documents)} documents ({len(docs.errors)} errors)")
    t0 = time.perf_counter()
    chunks = update_chunk_store(docs, paths.chunk_store, run_id=run_id)
    t["chunks"] = time.perf_counter() - t0
    say(f"chunks: {chunks.n_active_chunks} active ({len(chunks.added)} added, {len(chunks.changed)} changed, {chunks.unchanged} unchanged docs)")
    t0 = time.perf_counter()
    text = export_index_text(paths, paths.chunk_store)
    t["index_text"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    bm25 = build_bm25(paths, text, docs)
    t["bm25_index"] = time.perf_counter() - t0
    say(f"bm25: {bm25.stats.get('vocab_size')} terms, analyzer {bm25.analyzer}")
    t0 = time.perf_counter()
    spec = resolve_embedding_spec(embedding, docs)
    backend = make_embedding_backend(spec)
    emb = build_embeddings(paths, text, backend, backend_spec=spec, cache_path=cache_path,
                           progress=lambda d, n: say(f"embedded {d}/{n} new texts"), store_path=paths.chunk_store)
    t["chunk_embeddings"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    manifest = build_manifest(docs, chunks, text, bm25, emb, run_id=run_id, code_versions=code_versions or {}, created_at=_now())
    with ChunkStore(paths.chunk_store) as store:
        rows = store.active_rows()
    res = publish_snapshot(paths, manifest=manifest, chunk_rows=rows, bm25_dir=Path(bm25.directory),
                           embeddings_dir=Path(emb.directory) if emb.directory else None, glossary=glossary, keep=keep)
    t["index_manifest"] = time.perf_counter() - t0
    return BuildResult(docs, chunks, text, bm25, emb, res.snapshot_id, str(res.snapshot_dir), t)


def _now() -> str:
    from .chunk_store import utc_now

    return utc_now()
