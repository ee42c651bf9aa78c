"""Open a published library read-only: manifest check, mmap arrays, ``mode=ro`` SQLite."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ragspine_core import integrity, schema
from ragspine_core.chunk_rows import connect_read_only, row_to_chunk
from ragspine_core.errors import IndexIncompatibleError, IndexNotFoundError, RagspineError
from ragspine_core.lexical.bm25 import BM25Index
from ragspine_core.records import METADATA_FIELDS, Chunk
from ragspine_core.text.tokenize import Analyzer, analyzer_from_id

_CHUNK_SELECT = ", ".join(schema.CHUNK_COLUMN_NAMES)


def resolve_snapshot_dir(path: str | os.PathLike[str]) -> Path:
    """Find the published snapshot for ``path``.

    ``path`` may be a snapshot directory (has ``manifest.json``), a library artifact
    directory (has a ``current`` pointer), or a raw library folder ``<data>/raw/<lib>``
    (mapped to ``<data>/artifacts/<lib>``).
    """
    p = Path(path)
    if (p / schema.MANIFEST_FILE).is_file():
        return p.resolve()
    for root in [p] + ([p.parent.parent / "artifacts" / p.name] if p.parent.name == "raw" else []):
        current = root / schema.CURRENT_POINTER
        if current.exists():
            return current.resolve()
        if current.is_symlink():  # dangling: the snapshot it names was deleted
            target = os.readlink(current)
            reason = integrity.quarantine_reason(root, Path(target).name)
            if reason is not None:  # withdrawn: damaged, or it served what is RESTRICTED now
                raise IndexNotFoundError(
                    f"{current} points to {target}, which was quarantined ({reason}): this library serves nothing "
                    f"until a snapshot is published again; finish or rerun its ingest (`ragspine ingest "
                    f"data/raw/{root.name}`, or materialize its assets in the Dagster UI)")
            raise IndexNotFoundError(
                f"{current} points to {target}, which does not exist (the snapshot was deleted): "
                f"roll back to a retained snapshot with `ragspine snapshots {root} --rollback`, or publish a new one "
                f"with `ragspine ingest data/raw/{root.name}`")
    raise IndexNotFoundError(
        f"no published index at {p}: materialize the index_manifest asset for this library "
        f"(e.g. `ragspine ingest data/raw/{p.name}`), then pass data/artifacts/{p.name}"
    )


def read_manifest(snapshot_dir: Path) -> dict[str, Any]:
    path = snapshot_dir / schema.MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise IndexNotFoundError(f"{path} is missing: materialize the index_manifest asset") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexIncompatibleError(f"{path} is not valid JSON ({exc}): re-materialize the index_manifest asset") from exc
    if not isinstance(manifest, dict):
        raise IndexIncompatibleError(f"{path} is not a JSON object: re-materialize the index_manifest asset")
    version = manifest.get("schema_version")
    if version != schema.SCHEMA_VERSION:
        raise IndexIncompatibleError(
            f"{path} has schema_version {version!r} but this reader understands {schema.SCHEMA_VERSION}: "
            f"re-materialize the index_manifest asset (and its upstream assets) with this version"
        )
    missing = [k for k in schema.MANIFEST_REQUIRED_KEYS if k not in manifest]
    if missing:
        raise IndexIncompatibleError(f"{path} lacks keys {missing}: re-materialize the index_manifest asset")
    integrity.check_manifest_id(snapshot_dir, manifest)
    return manifest


def _identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of a file, None when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def snapshot_identity(snapshot_dir: Path) -> tuple[str, tuple[int, int, int] | None]:
    """A snapshot folder's name and its manifest's (inode, size, mtime): a repair that
    republishes the same snapshot id replaces the folder, so the identity changes."""
    return snapshot_dir.name, _identity(snapshot_dir / schema.MANIFEST_FILE)


#: How often (seconds) a library opened through its folder checks its ``current`` pointer
#: for a newer snapshot that withdraws documents (one ``stat`` of the link per query at most).
RECHECK_SECONDS = 1.0



@dataclass(frozen=True, slots=True)
class EmbeddingMatrix:
    """Memory-mapped vectors of the non-RESTRICTED chunk rows."""

    model_id: str
    dim: int
    vectors: np.ndarray  # float32[n, dim]
    rows: np.ndarray  # int32[n], ascending chunk rows


class Library:
    """One published, immutable library snapshot opened read-only.

    Thread-safe for reads. Holds open file handles: call :meth:`close` (or use ``with``).
    """

    def __init__(self, snapshot_dir: Path, manifest: dict[str, Any]) -> None:
        self.snapshot_dir = snapshot_dir
        self.manifest = manifest
        # sizes of every file, sha256 of the small ones, then the arrays' bounds (integrity.py)
        hashed: set[str] = set()
        integrity.verify_snapshot_files(snapshot_dir, manifest, hashed_files=hashed)
        # the rest (large files: per block) in a background pass; the first query waits for it
        self._verified = threading.Event()
        self._verify_error: BaseException | None = None
        self.verify_stats: dict[str, int] = {}
        self._verifier = threading.Thread(target=self._verify_rest, args=(frozenset(hashed),), daemon=True,
                                          name=f"ragspine-verify-{manifest.get('snapshot_id', '')}")
        self._verifier.start()
        # files read on demand (mapped arrays over the copy limit, the SQLite chunk file):
        # their identity now, compared before every query (ensure_verified)
        self._watched = {rel: _identity(snapshot_dir / rel) for rel, e in (manifest.get("artifacts") or {}).items()
                         if isinstance(e, dict) and (rel.endswith(".sqlite")
                                                     or int(e.get("bytes") or 0) > integrity.COPY_AT_OPEN_MAX_FILE_BYTES)}
        #: the snapshot folder and its manifest as opened: a repair that republishes the same
        #: snapshot id replaces the folder (new inodes), so this tells the two apart
        self.identity: tuple[str, tuple[int, int, int] | None] = snapshot_identity(snapshot_dir)
        self.library_id: str = manifest["library_id"]
        self.snapshot_id: str = manifest["snapshot_id"]
        self.analyzer: Analyzer = analyzer_from_id(manifest["tokenizer"]["analyzer"])
        bm25_dir: Any = self.artifact_path("bm25")  # a required artifact: verified present above
        self.bm25 = BM25Index.load(bm25_dir)
        self.bm25_doc = BM25Index.load(self.artifact_path("bm25_doc"))  # type: ignore[arg-type]
        blend_dir: Any = self.artifact_path("bm25_blend")
        #: chunk + w x document field in one index (None in snapshots built before it existed)
        self.bm25_blend: BM25Index | None = BM25Index.load(blend_dir) if blend_dir is not None else None
        self.bm25_blend_own: Any = integrity.load_array(blend_dir, schema.BM25_BLEND_OWN) if blend_dir is not None else None
        self.bm25_blend_weight: float | None = _blend_weight(blend_dir) if blend_dir is not None else None
        self.row_doc = integrity.load_array(bm25_dir, schema.BM25_ROW_DOC)
        self.n_chunks = int(manifest["counts"]["chunks"])
        if self.bm25.n_rows != self.n_chunks or self.row_doc.shape[0] != self.n_chunks:
            raise IndexIncompatibleError(
                f"{snapshot_dir}: BM25 rows ({self.bm25.n_rows}) != manifest chunks ({self.n_chunks}); "
                "re-materialize the bm25_index asset"
            )
        integrity.check_ids(bm25_dir, schema.BM25_ROW_DOC, self.row_doc, self.bm25_doc.n_rows)
        if self.bm25_blend is not None:
            if self.bm25_blend.n_rows != self.n_chunks:
                raise integrity.corrupt(snapshot_dir, f"{blend_dir.name}/{schema.BM25_PARAMS}",
                                        f"records {self.bm25_blend.n_rows} rows, the snapshot has {self.n_chunks}")
            integrity.check_array(blend_dir, schema.BM25_BLEND_OWN, self.bm25_blend_own, kind="iub",  # type: ignore[arg-type]
                                  length=self.bm25_blend.postings.shape[0])
        self._conn = connect_read_only(self.artifact_path("chunks"), immutable=True)  # type: ignore[arg-type]
        self._lock = threading.Lock()
        self._columns: dict[str, np.ndarray] = {}
        self._chunk_ids: list[str] | None = None
        self._restricted: np.ndarray | None = None
        #: watching a library folder's ``current`` pointer (open_library): see restricted_mask
        self._root: Path | None = None
        self._seen: Path | None = None
        self._checked_at = -RECHECK_SECONDS
        self._withdrawn: np.ndarray | None = None
        self._generation = 0
        self._watch_lock = threading.Lock()
        self._embeddings: EmbeddingMatrix | None = None
        self._embeddings_loaded = False
        self._summary_tree: Any = None  # loaded on first use (only the tree channel reads it)
        self._public_lexical: LexicalStats | None = None  # see lexical_for
        # map every file now: a snapshot pruned later (retention) stays readable through
        # the open handles, so a long-lived reader never sees a half-deleted snapshot
        self.embeddings()

    # -- verification ----------------------------------------------------------------
    def _verify_rest(self, hashed: frozenset[str]) -> None:
        try:
            self.verify_stats = integrity.verify_blocks(self.snapshot_dir, self.manifest, skip=hashed)
        except BaseException as exc:  # kept for every query to raise (a located IndexCorruptError)
            self._verify_error = exc
        finally:
            self._verified.set()

    def ensure_verified(self, timeout: float | None = None) -> None:
        """Wait for the background check of the files not hashed at open (every block of the
        large ones) and raise what it found: nothing unverified ever ranks.

        Then every file read on demand (the mapped large arrays, the SQLite chunk file) must
        still be the file this reader opened: one written in place or truncated since would
        answer wrongly or crash the process (SIGBUS) when read, so the query fails first.
        A library opened through its folder (:meth:`watch`) also fails once its snapshot
        folder is gone (:meth:`removed` says why); a :class:`~ragspine_query.HybridRetriever`
        then reopens the library's current snapshot itself.

        Raises:
            IndexCorruptError: a block or file whose bytes changed, or a file changed since
                open (named, with what to do).
            IndexNotFoundError: the snapshot folder was removed (retention or quarantine,
                named) under a library opened through its folder.
        """
        self._verified.wait(timeout)
        if self._verify_error is not None:
            raise self._verify_error
        problem = self.changed()
        if problem is not None:
            raise integrity.corrupt(self.snapshot_dir, problem[0], f"{problem[1]} after this reader opened it (a published "
                                    "file must never change); this reader stops serving it: open the library again")
        if self._root is not None:
            why = self.removed()
            if why is not None:
                raise IndexNotFoundError(f"snapshot folder {self.snapshot_dir} {why} after this reader opened it; "
                                         f"this reader stops serving it: open the library again ({self._root})")

    # -- the watcher: this snapshot's files and folder, the library's ``current`` -------------
    def changed(self) -> tuple[str, str] | None:
        """``(file, what happened)`` for the first file read on demand that is no longer the
        file this reader opened (written in place, truncated, replaced), or None. A file that
        is gone with its whole folder is :meth:`removed`, not changed."""
        for rel, seen in self._watched.items():
            now = _identity(self.snapshot_dir / rel)
            if now == seen:
                continue
            if now is None and not self.snapshot_dir.is_dir():
                continue  # the folder went (removed): the mapped bytes stay readable through the open handles
            what = ("appeared" if seen is None else "was removed" if now is None
                    else "was truncated" if now[1] < seen[1] else "was written in place" if now[0] == seen[0]
                    else "was replaced")
            return rel, what
        return None

    def removed(self) -> str | None:
        """None while this snapshot's folder exists; else what removed it, as read from the
        library's ``history.jsonl``: ``"was quarantined (<reason>)"`` (its files were damaged, or
        it served text that is RESTRICTED now) or ``"was pruned by retention"``."""
        if self.snapshot_dir.is_dir():
            return None
        reason = self._quarantine_reason()
        return f"was quarantined ({reason})" if reason is not None else "was pruned by retention"

    def _quarantine_reason(self) -> str | None:
        """Why ``history.jsonl`` says this snapshot was quarantined, or None (not recorded: retention)."""
        return integrity.quarantine_reason(self._root if self._root is not None else self.snapshot_dir.parent.parent,
                                 self.snapshot_id)

    @property
    def root(self) -> Path | None:
        """The library folder whose ``current`` this library watches (:func:`open_library` through
        that folder), or None (opened as one snapshot)."""
        return self._root

    def current_identity(self) -> tuple[str, tuple[int, int, int] | None] | None:
        """:attr:`identity` of the snapshot the watched library's ``current`` names now (None:
        not watched, or ``current`` names nothing)."""
        if self._root is None:
            return None
        try:
            target = (self._root / schema.CURRENT_POINTER).resolve(strict=True)
        except OSError:
            return None
        return snapshot_identity(target)

    def trouble(self) -> str | None:
        """Why this reader must stop serving its snapshot (the background check found damage,
        a file read on demand changed, the folder was removed), or None while it may serve."""
        if self._verified.is_set() and self._verify_error is not None:
            return "failed its check"
        problem = self.changed()
        if problem is not None:
            return f"has a file that {problem[1]} after this reader opened it ({problem[0]})"
        return self.removed()

    # -- artifacts -------------------------------------------------------------------
    def artifact_path(self, name: str) -> Path | None:
        """Where artifact ``name`` (see ``schema.ARTIFACT_REGISTRY``) lives in this snapshot.

        Read from ``manifest["artifact_sets"]``; snapshots published before that key
        existed use the fixed layout. Returns None for a missing optional artifact.

        Raises:
            IndexNotFoundError: a required artifact is missing (names the asset to materialize).
            IndexIncompatibleError: the manifest points outside the snapshot.
        """
        spec = schema.ARTIFACT_REGISTRY.get(name)
        sets = self.manifest.get(schema.MANIFEST_ARTIFACT_SETS)
        asset = spec.asset if spec else "index_manifest"
        required = bool(spec and spec.required)
        if isinstance(sets, dict):
            entry = sets.get(name)
            if not isinstance(entry, dict) or not entry.get("path"):
                if required:
                    raise IndexNotFoundError(
                        f"{self.snapshot_dir}: the manifest lists no {name!r} artifact: materialize the {asset} asset "
                        "(and index_manifest) for this library")
                return None
            asset = str(entry.get("asset") or asset)
            path = (self.snapshot_dir / str(entry["path"])).resolve()
            root = self.snapshot_dir.resolve()
            if path != root and root not in path.parents:
                raise IndexIncompatibleError(f"{self.snapshot_dir}: artifact {name!r} points outside the snapshot; "
                                             "re-materialize the index_manifest asset")
        elif spec is not None:
            path = self.snapshot_dir / spec.path
        else:
            return None
        if not path.exists():
            if required:
                raise IndexNotFoundError(f"{path} is missing: materialize the {asset} asset for this library")
            return None
        return path

    def relation_graph(self) -> "Any | None":
        """The relation graph's memory-mapped walk arrays (:class:`~ragspine_query.graph.GraphArrays`),
        or None when the snapshot has none (materialize the relation_graph asset)."""
        d = self.artifact_path("relation_graph")
        if d is None:
            return None
        from ragspine_core.graph.artifact import load_graph_arrays

        return load_graph_arrays(d, n_rows=self.n_chunks)

    def rows_above(self, max_sensitivity: str | None) -> np.ndarray:
        """Bool per row: open (not RESTRICTED) rows a caller with ceiling ``max_sensitivity``
        may not see — above it, or of a sensitivity it does not know (None: no row)."""
        if max_sensitivity is None:
            return np.zeros(self.n_chunks, dtype=bool)
        from ragspine_core.records import SENSITIVITIES

        level = str(max_sensitivity).strip().upper()
        seen = SENSITIVITIES[: SENSITIVITIES.index(level) + 1] if level in SENSITIVITIES else ()
        sens = np.char.upper(self.column("sensitivity"))
        above: np.ndarray = ~np.isin(sens, np.asarray(seen, dtype=str)) & (sens != "RESTRICTED")
        return above

    def has_rows_above(self, max_sensitivity: str | None) -> bool:
        """Whether the snapshot holds an open row above the ceiling (:meth:`rows_above`)."""
        return bool(self.rows_above(max_sensitivity).any())

    def lexical_for(self, max_sensitivity: str | None) -> "Library | LexicalStats":
        """The BM25 indexes a caller with ceiling ``max_sensitivity`` is scored with: their
        collection statistics (``N``, ``df``, ``avgdl``) cover the rows that caller may see.

        None or ``INTERNAL``: this library's own indexes (statistics over its open rows).
        ``PUBLIC``: the ``bm25_public`` indexes (statistics over the PUBLIC rows alone), or
        this library's own when every open row is PUBLIC (the same statistics).

        Raises:
            IndexIncompatibleError: the snapshot holds INTERNAL rows but no ``bm25_public``
                indexes (built before they existed): a PUBLIC caller's scores would depend on
                INTERNAL text, so it is refused (fails closed) until ``bm25_index`` is re-materialized.
        """
        if max_sensitivity is None or str(max_sensitivity).upper() != "PUBLIC":
            return self
        if self._public_lexical is not None:
            return self._public_lexical
        d = self.artifact_path("bm25_public")
        if d is None:
            if not self.has_rows_above(max_sensitivity):
                return self
            raise IndexIncompatibleError(
                f"{self.snapshot_dir}: this snapshot holds INTERNAL rows but no BM25 statistics over its PUBLIC rows "
                "(bm25_public, added in 0.3), so a PUBLIC caller's scores would depend on INTERNAL text: re-materialize "
                f"the bm25_index asset (and index_manifest) for {self.library_id!r}, e.g. `ragspine ingest data/raw/{self.library_id}`")
        stats = LexicalStats.load(d, self)
        with self._lock:
            self._public_lexical = stats
        return stats

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Library({self.library_id!r}, snapshot={self.snapshot_id!r}, chunks={self.n_chunks})"

    # -- chunks ----------------------------------------------------------------------
    def chunks_by_rows(self, rows: Sequence[int]) -> list[Chunk]:
        """Chunks for BM25 rows, in the order given."""
        rows = [int(r) for r in rows]
        if not rows:
            return []
        out: dict[int, Chunk] = {}
        with self._lock:
            for start in range(0, len(rows), 500):
                part = rows[start : start + 500]
                q = f"SELECT {_CHUNK_SELECT} FROM {schema.CHUNK_TABLE} WHERE row_idx IN ({','.join('?' * len(part))})"
                for r in self._conn.execute(q, part):
                    out[int(r["row_idx"])] = row_to_chunk(r)
        return [out[r] for r in rows]

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read-only SQL statement against the snapshot's chunk table."""
        with self._lock:
            return list(self._conn.execute(sql, params))

    def filter_fields(self) -> tuple[str, ...]:
        return tuple(METADATA_FIELDS) + tuple(self.manifest.get("extra_fields", ()))

    def column(self, field: str) -> np.ndarray:
        """A metadata column as a numpy str array aligned with rows (loaded once, lazily)."""
        col = self._columns.get(field)
        if col is not None:
            return col
        with self._lock:
            if field in METADATA_FIELDS:
                values = [r[0] for r in self._conn.execute(f"SELECT {field} FROM {schema.CHUNK_TABLE} ORDER BY row_idx")]
            else:
                values = [
                    str(json.loads(r[0] or "{}").get(field, ""))
                    for r in self._conn.execute(f"SELECT extra_json FROM {schema.CHUNK_TABLE} ORDER BY row_idx")
                ]
        col = np.asarray(values, dtype=str) if values else np.zeros(0, dtype=str)
        self._columns[field] = col
        return col

    def restricted_mask(self) -> np.ndarray:
        """Bool mask of the rows never served: RESTRICTED rows (computed once), and — for a
        library opened through its ``current`` pointer — the rows of documents that a newer
        published snapshot withdrew or marks RESTRICTED (checked at most every
        :data:`RECHECK_SECONDS`; :meth:`watch`). Read-only."""
        mask = self._restricted
        if mask is None:
            mask = np.char.upper(self.column("sensitivity")) == "RESTRICTED"
            mask.setflags(write=False)
            self._restricted = mask
        if self._root is not None:
            self._recheck()
            if self._withdrawn is not None:
                return self._withdrawn
        return mask

    def watch(self, root: Path) -> None:
        """Watch the library folder ``root``'s ``current`` pointer (see :meth:`restricted_mask`)."""
        self._root = Path(root)

    @property
    def generation(self) -> int:
        """Bumped each time the rows withheld by a newer snapshot change (masks cached on the
        old value are stale)."""
        if self._root is not None:
            self._recheck()
        return self._generation

    def _recheck(self) -> None:
        """The pointer half of the watcher (:meth:`changed` and :meth:`removed` are the file
        half): at most every :data:`RECHECK_SECONDS`, the rows this snapshot must withhold
        because the snapshot ``current`` names now withdrew them or marks them RESTRICTED."""
        now = time.monotonic()
        if now - self._checked_at < RECHECK_SECONDS:
            return
        with self._watch_lock:
            if now - self._checked_at < RECHECK_SECONDS:
                return
            self._checked_at = now
            assert self._root is not None
            try:
                target: Path | None = (self._root / schema.CURRENT_POINTER).resolve(strict=True)
            except OSError:
                target = None
            if not self.snapshot_dir.is_dir() and self._quarantine_reason() is not None:
                # quarantined (damaged, or serving what is RESTRICTED now): serve nothing from it
                # (ensure_verified says so; a HybridRetriever reopens the current snapshot)
                withheld = np.ones(self.n_chunks, dtype=bool)
            elif target is None or target == self.snapshot_dir or target == self._seen:
                return
            else:
                # pruned by retention (its mapped bytes are intact) or still on disk: withhold
                # what the snapshot ``current`` names withdrew
                self._seen = target
                try:
                    newer = json.loads((target / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
                    documents = newer["documents"]
                except (OSError, ValueError, KeyError, TypeError):
                    withheld = np.ones(self.n_chunks, dtype=bool)  # unreadable: fail closed
                else:
                    # absent from the newer snapshot (withdrawn, moved) or RESTRICTED there (no hash)
                    gone = {d for d in self.manifest.get("documents", {}) if documents.get(d) is None}
                    doc_ids = self.column("doc_id")
                    withheld = np.isin(doc_ids, sorted(gone)) if gone else np.zeros(self.n_chunks, dtype=bool)
            base = self._restricted if self._restricted is not None else np.zeros(self.n_chunks, dtype=bool)
            mask = base | withheld
            mask.setflags(write=False)
            if self._withdrawn is None or not np.array_equal(mask, self._withdrawn):
                self._withdrawn = mask
                self._generation += 1

    def chunk_ids(self) -> list[str]:
        """``chunk_id`` of every row, in row order (loaded once, lazily; no text is read)."""
        ids = self._chunk_ids
        if ids is None:
            with self._lock:
                ids = [r[0] for r in self._conn.execute(f"SELECT chunk_id FROM {schema.CHUNK_TABLE} ORDER BY row_idx")]
            if len(ids) != self.n_chunks:
                raise IndexIncompatibleError(f"{self.snapshot_dir}: {len(ids)} chunk rows != manifest chunks ({self.n_chunks}); "
                                             "re-materialize the index_manifest asset")
            self._chunk_ids = ids
        return ids

    # -- embeddings ------------------------------------------------------------------
    @property
    def embedding_model_id(self) -> str | None:
        emb = self.manifest.get("embedding")
        return emb.get("model_id") if emb else None

    def summary_tree(self) -> Any | None:
        """The snapshot's RAPTOR summary tree (:class:`ragspine_query.tree.SummaryTree`), or None
        when it has none; read on first use, then kept."""
        if self._summary_tree is None:
            d = self.artifact_path("summary_tree")
            if d is None or not (d / schema.TREE_META).is_file():
                self._summary_tree = False
            else:
                from ragspine_query.tree.reader import load_summary_tree

                self._summary_tree = load_summary_tree(d)
        return self._summary_tree or None

    def embeddings(self) -> EmbeddingMatrix | None:
        """The memory-mapped embedding matrix, or None when the library has no dense channel."""
        if self._embeddings_loaded:
            return self._embeddings
        emb = self.manifest.get("embedding")
        if emb and emb.get("count", 0) > 0:
            d = self.artifact_path("embeddings")
            if d is None:
                raise IndexNotFoundError(f"{self.snapshot_dir}: the manifest records {emb['count']} vectors but the embeddings "
                                         f"artifact is missing: materialize the {schema.ARTIFACT_REGISTRY['embeddings'].asset} asset")
            vectors = integrity.load_array(d, schema.EMB_VECTORS)
            rows = integrity.load_array(d, schema.EMB_ROWS)
            if vectors.shape != (emb["count"], emb["dim"]) or rows.shape[0] != emb["count"]:
                raise IndexIncompatibleError(
                    f"{d}: vectors {vectors.shape} disagree with the manifest ({emb['count']}, {emb['dim']}); "
                    "re-materialize the chunk_embeddings asset"
                )
            integrity.check_array(d, schema.EMB_VECTORS, vectors, kind="f", ndim=2)
            integrity.check_ids(d, schema.EMB_ROWS, rows, self.n_chunks)
            self._embeddings = EmbeddingMatrix(emb["model_id"], int(emb["dim"]), vectors, rows)
        self._embeddings_loaded = True
        return self._embeddings


@dataclass(frozen=True)
class LexicalStats:
    """BM25 indexes of a library's rows scored with another row set's statistics (the
    attributes :class:`~ragspine_query.pipeline.channels.LexicalChannel` reads from a
    :class:`Library`): the ``bm25_public`` artifact (:meth:`Library.lexical_for`)."""

    analyzer: Analyzer
    bm25: BM25Index
    bm25_doc: BM25Index
    bm25_blend: BM25Index
    bm25_blend_own: np.ndarray
    bm25_blend_weight: float
    row_doc: np.ndarray

    @classmethod
    def load(cls, directory: Path, library: "Library") -> "LexicalStats":
        bm25 = BM25Index.load(directory / schema.BM25_DIR)
        doc = BM25Index.load(directory / schema.BM25_DOC_DIR)
        blend_dir = directory / schema.BM25_BLEND_DIR
        blend = BM25Index.load(blend_dir)
        own = integrity.load_array(blend_dir, schema.BM25_BLEND_OWN)
        where = f"{schema.BM25_PUBLIC_DIR}/"
        if bm25.n_rows != library.n_chunks or blend.n_rows != library.n_chunks or doc.n_rows != library.bm25_doc.n_rows:
            raise integrity.corrupt(library.snapshot_dir, where, f"holds {bm25.n_rows}/{blend.n_rows} chunk rows and "
                                    f"{doc.n_rows} document rows, the snapshot {library.n_chunks} and {library.bm25_doc.n_rows}")
        integrity.check_array(blend_dir, schema.BM25_BLEND_OWN, own, kind="iub", length=blend.postings.shape[0])
        return cls(library.analyzer, bm25, doc, blend, own, _blend_weight(blend_dir), library.row_doc)


def _blend_weight(blend_dir: Path) -> float:
    try:
        weight = float(json.loads((blend_dir / schema.BM25_PARAMS).read_text(encoding="utf-8"))["doc_weight"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise integrity.corrupt(blend_dir.parent, f"{blend_dir.name}/{schema.BM25_PARAMS}",
                                f"is unreadable ({' '.join(str(exc).split())})") from None
    if not (weight >= 0.0 and weight < float("inf")):
        raise integrity.corrupt(blend_dir.parent, f"{blend_dir.name}/{schema.BM25_PARAMS}", f"holds doc_weight {weight}")
    return weight


def open_library(path: str | os.PathLike[str]) -> Library:
    """Open the published snapshot of a library read-only.

    Opened through the library folder (its ``current`` pointer), the library keeps watching
    that pointer (:meth:`Library.restricted_mask`): a newer snapshot that withdraws a
    document or marks it RESTRICTED stops it being served here too.

    Raises:
        IndexNotFoundError: nothing published there (the message names the asset).
        IndexIncompatibleError: a snapshot this reader cannot use.
    """
    snapshot = resolve_snapshot_dir(path)
    library = Library(snapshot, read_manifest(snapshot))
    p = Path(path)
    if not (p / schema.MANIFEST_FILE).is_file():
        for root in [p] + ([p.parent.parent / "artifacts" / p.name] if p.parent.name == "raw" else []):
            if (root / schema.CURRENT_POINTER).exists():
                library.watch(root)
                break
    return library


class Follower:
    """The one way a long-lived holder of a :class:`Library` follows the library's ``current``
    snapshot: :class:`~ragspine_query.HybridRetriever`,
    :class:`~ragspine_query.tree.TreeRetriever` and, through the retrievers, every holder
    whose state is read from one (the tiers' channels, the router's profiles, the confidence
    grader's open-row weights: each keys what it derives on :func:`library_key`).

    :meth:`follow` reopens when the holder's snapshot must stop serving
    (:meth:`Library.trouble`: a file changed, truncated or removed since open, the background
    check found damage, the folder was pruned or quarantined) and ``current`` names another
    snapshot folder than the one opened — a new publication, or a repair that rebuilt the
    same snapshot id (new files). Only for a library opened through its folder
    (:func:`open_library`); one attempt per state of ``current`` (a failed one is raised
    again, without reopening, until ``current`` changes).
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._tried: tuple[Any, RagspineError] | None = None

    def follow(self, held: Callable[[], Library], install: Callable[[Library], None]) -> bool:
        """Reopen ``held()``'s current snapshot when it must stop serving; ``install`` gets the
        new library (under the lock: a query of another thread waits for it). True when it did.

        Raises:
            RagspineError: ``current`` cannot be opened either (its own located error, after
                what happened to the holder's snapshot).
        """
        lib = held()
        if lib.root is None or lib.trouble() is None:
            return False
        with self.lock:
            if held() is not lib:
                return False  # another thread reopened it
            seen = lib.current_identity()
            if seen is not None and seen == lib.identity:
                return False  # current names the damaged files themselves: ensure_verified says which, and the repair
            tried = self._tried
            if tried is not None and tried[0] == seen:
                raise tried[1]
            try:
                install(open_library(lib.root))
            except RagspineError as exc:
                message = (f"snapshot {lib.snapshot_dir} {lib.trouble()}, and the library's current snapshot cannot be "
                           f"opened in its place: {exc}")
                try:
                    error: RagspineError = type(exc)(message)
                except TypeError:  # an error class with its own fields
                    error = RagspineError(message)
                self._tried = (seen, error)
                raise error from None
            return True


def library_key(library: Any) -> tuple[Any, int]:
    """What state derived from ``library`` is valid for: the object (a reopen makes a new one;
    ``==`` on it is identity) and its :attr:`Library.generation` (rows a newer snapshot
    withholds). A holder compares it with the key it computed at, after its retriever
    followed (:class:`Follower`)."""
    return library, int(getattr(library, "generation", 0))
