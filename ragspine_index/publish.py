"""Assemble an immutable snapshot and publish it atomically (pointer swap).

Readers resolve ``<library>/current`` once when they open; every file of a snapshot is
written and fsynced in a hidden staging directory, the directory is renamed into
``snapshots/<id>``, and only then is ``current`` replaced (``rename(2)`` of a symlink),
so a reader sees either the old complete snapshot or the new complete one.

Publishers of one library take an exclusive lock (``<library>/.publish.lock``, ``flock``)
for the whole publication or rollback. With the lock held no other publisher of that
library is mid-way, so every ``snapshots/.staging-*`` folder and ``.current-*`` /
``.PINNED-*`` temp file found then was left by a crashed process and is removed first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ragspine_core import schema
from ragspine_core.errors import IndexCorruptError, IndexNotFoundError, RagspineError
from ragspine_core.integrity import (BLOCK_BYTES, BLOCKS_KEY, FILE_SHA256, HASH_AT_OPEN_MAX_FILE_BYTES, content_snapshot_id,
                                    quarantine_reason, sha256_with_blocks, verify_snapshot)

from ragspine_index.artifacts import (LibraryPaths, dir_files, link_or_copy, discard_work_output, fsync_dir, remove_stale_tmp_dirs, sha256_file,
                        sha256_json, work_record)
from ragspine_index.chunk_store import CACHE_KIB, init_schema
from ragspine_index.locks import CHUNK_STATE_KEY, check_chunk_state, flock_within
from ragspine_index.repair import read_history, repair_history
from ragspine_index.reclassification import (clear_interrupted_removals, open_documents, quarantine_unservable, remove_unservable,
                                             unservable_count, was_quarantined)

HISTORY_FILE = schema.HISTORY_FILE
PIN_FILE = "PINNED"  # holds a snapshot id: publication writes snapshots but keeps current
DEFAULT_KEEP_SNAPSHOTS = 5
LOCK_FILE = ".publish.lock"
STAGING_PREFIX = ".staging-"
CURRENT_TMP_PREFIX = ".current-"
#: How long a publisher waits for another publisher of the same library (a publication
#: itself takes seconds: links, one SQLite copy, fsyncs).
LOCK_TIMEOUT_S = 600.0
#: The artifact written from the chunk store's active rows (every other one is copied from a source).
CHUNKS_ARTIFACT = "chunks"


@dataclass(frozen=True, slots=True)
class PublishResult:
    snapshot_id: str
    snapshot_dir: Path
    previous_snapshot_id: str | None
    changed: bool
    pinned_to: str | None = None  # set when a pin kept ``current`` where it was


def write_snapshot_chunks(db_path: Path, chunk_store: Path) -> str:
    """Copy the store's active chunk rows into a fresh SQLite file, ``row_idx`` = position.

    Rows go in ``chunk_id`` order, copied by SQLite itself (``ATTACH`` + ``INSERT …
    SELECT``), never through Python objects: at a million chunks that was a minute and
    gigabytes of row objects. Returns the logical content hash published in the manifest,
    ``sha256_json`` of ``[chunk_id, version]`` in row order.
    """
    table = schema.CHUNK_TABLE
    cols = schema.CHUNK_COLUMN_NAMES
    select = ", ".join("ROW_NUMBER() OVER (ORDER BY chunk_id) - 1" if c == "row_idx" else c for c in cols)
    conn = sqlite3.connect(db_path)
    try:
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        init_schema(conn)
        conn.execute("ATTACH DATABASE ? AS src", (str(chunk_store),))
        with conn:
            conn.execute(f"INSERT INTO main.{table} ({', '.join(cols)}) "
                         f"SELECT {select} FROM src.{table} WHERE active = 1 ORDER BY chunk_id")
        ids = conn.execute(f"SELECT chunk_id, version FROM main.{table} ORDER BY row_idx").fetchall()
        conn.execute("DETACH DATABASE src")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    return sha256_json(ids)


@contextlib.contextmanager
def publication_lock(paths: LibraryPaths, *, timeout: float = LOCK_TIMEOUT_S):
    """Hold the library's publication lock (exclusive ``flock``; released if the process dies).

    Raises:
        RagspineError: another publisher of this library held it for ``timeout`` seconds.
    """
    paths.root.mkdir(parents=True, exist_ok=True)
    lock_path = paths.root / LOCK_FILE
    with open(lock_path, "a+b") as fh:
        if not flock_within(fh, timeout, poll_s=0.1):
            raise RagspineError(
                f"another process has been publishing library {paths.library_id!r} for over {timeout:.0f} s "
                f"(it holds {lock_path}); wait for it to finish, or stop it, then run again")
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def remove_stale_publication_files(paths: LibraryPaths) -> list[Path]:
    """Remove what a killed publisher left behind; call with :func:`publication_lock` held.

    * ``snapshots/.staging-*`` and the ``.current-*`` / ``.PINNED-*`` temp files: all of
      them (the lock guarantees that no other publisher of this library is running);
    * ``work/**/.tmp-*`` folders of :func:`~.artifacts.write_once`: those whose owning
      process is dead (steps write them outside the publication lock).
    """
    removed: list[Path] = []
    if paths.snapshots.is_dir():
        for d in paths.snapshots.glob(STAGING_PREFIX + "*"):
            if d.is_dir() and not d.is_symlink():
                shutil.rmtree(d, ignore_errors=True)
            else:
                d.unlink(missing_ok=True)
            removed.append(d)
    if paths.root.is_dir():
        for f in [*paths.root.glob(CURRENT_TMP_PREFIX + "*"), *paths.root.glob(f".{PIN_FILE}-*")]:
            if f.is_symlink() or f.is_file():
                f.unlink(missing_ok=True)
                removed.append(f)
    removed += remove_stale_tmp_dirs(paths.work)
    return removed


def pointed_snapshot_id(paths: LibraryPaths) -> str | None:
    """The snapshot id ``current`` names, whether or not that folder exists (None: no pointer)."""
    if not paths.current.is_symlink():
        return None
    return Path(os.readlink(paths.current)).name


def current_snapshot_id(paths: LibraryPaths) -> str | None:
    """The snapshot ``current`` serves (None: no pointer, or it names a folder that is gone)."""
    if not paths.current.exists():
        return None
    return Path(os.readlink(paths.current)).name


def serving_now(paths: LibraryPaths) -> str:
    """What a run that published nothing leaves serving, for its message: ``the previous
    snapshot keeps serving (<id>)``, or why the library serves nothing (its snapshot was
    withdrawn: :func:`withdraw_reclassified`, or never published)."""
    sid = current_snapshot_id(paths)
    if sid is not None:
        return f"the previous snapshot keeps serving ({sid})"
    name = pointed_snapshot_id(paths)
    if name is None:
        return "the library serves nothing (never published)"
    reason = quarantine_reason(paths.root, name)  # never raises: it completes another error's message
    return (f"the library serves nothing until a snapshot is published (its snapshot {name} was "
            + (f"quarantined: {reason})" if reason else "deleted)"))


def swap_pointer(paths: LibraryPaths, snapshot_id: str) -> None:
    """Atomically point ``current`` at ``snapshots/<snapshot_id>``."""
    target = paths.snapshots / snapshot_id
    if not (target / schema.MANIFEST_FILE).is_file():
        raise IndexNotFoundError(f"snapshot {snapshot_id!r} does not exist under {paths.snapshots}")
    tmp = paths.root / f"{CURRENT_TMP_PREFIX}{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(Path(schema.SNAPSHOTS_DIR) / snapshot_id, tmp)
    os.replace(tmp, paths.current)
    fsync_dir(paths.root)


def publish_snapshot(
    paths: LibraryPaths,
    *,
    manifest: dict[str, Any],
    chunk_store: Path,
    artifacts: Mapping[str, Path],
    keep: int = DEFAULT_KEEP_SNAPSHOTS,
) -> PublishResult:
    """Write a snapshot (if its content is new) and swap ``current`` to it.

    ``artifacts`` maps artifact names of :data:`ragspine_core.schema.ARTIFACT_REGISTRY`
    to a source directory or file; each is linked (or copied) to its registered path in
    the snapshot. The ``chunks`` artifact is written from the active rows of ``chunk_store``. ``manifest`` is
    completed here with ``artifact_sets`` (``{name: {"path", "asset"}}`` of the artifacts
    present), ``artifacts`` (sha256 + bytes of every file) and ``snapshot_id`` (a hash of
    the content, so identical inputs give the same id). Runs under
    :func:`publication_lock`, after removing what a killed publisher left.

    Raises:
        RagspineError: an unregistered artifact name, a missing source, or a required
            artifact that is absent (the message names the asset to re-materialize);
            nothing is published.
    """
    sources = resolve_artifacts(artifacts)
    with publication_lock(paths):
        remove_stale_publication_files(paths)
        repair_history(paths.root / HISTORY_FILE)  # never append to (or prune by) damaged records
        return _publish_locked(paths, manifest=manifest, chunk_store=chunk_store, artifacts=sources, keep=keep)


def resolve_artifacts(artifacts: Mapping[str, Path]) -> dict[str, Path]:
    """Validate ``artifacts`` against the registry; returns ``{name: source}`` sorted by name."""
    out: dict[str, Path] = {}
    for name in sorted(artifacts):
        spec = schema.ARTIFACT_REGISTRY.get(name)
        if spec is None:
            raise RagspineError(f"unknown artifact {name!r}: register it with ragspine_core.schema.register_artifact "
                                f"(registered: {', '.join(sorted(schema.ARTIFACT_REGISTRY))})")
        if name == CHUNKS_ARTIFACT:
            raise RagspineError(f"artifact {name!r} is written from the chunk rows; do not pass it as a source")
        src = Path(artifacts[name])
        if not (src.is_dir() or src.is_file()):
            raise RagspineError(f"artifact {name!r} has no source at {src}; re-materialize {spec.asset}")
        out[name] = src
    for spec in schema.ARTIFACT_REGISTRY.values():
        if spec.required and spec.name != CHUNKS_ARTIFACT and spec.name not in out:
            raise RagspineError(f"required artifact {spec.name!r} is missing; materialize {spec.asset} first")
    return out


def _publish_locked(
    paths: LibraryPaths,
    *,
    manifest: dict[str, Any],
    chunk_store: Path,
    artifacts: Mapping[str, Path],
    keep: int,
) -> PublishResult:
    paths.snapshots.mkdir(parents=True, exist_ok=True)
    previous = current_snapshot_id(paths)
    staging = paths.snapshots / f"{STAGING_PREFIX}{os.getpid()}-{manifest.get('run_id', '') or 'local'}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        chunks_spec = schema.ARTIFACT_REGISTRY[CHUNKS_ARTIFACT]
        chunks_hash = write_snapshot_chunks(staging / chunks_spec.path, chunk_store)
        check_chunk_state(paths, manifest.get(CHUNK_STATE_KEY), chunks_hash)  # never a mixed snapshot (locks.py)
        sets = {CHUNKS_ARTIFACT: {"path": chunks_spec.path, "asset": chunks_spec.asset}}
        for name, src in artifacts.items():
            spec = schema.ARTIFACT_REGISTRY[name]
            if src.is_dir():
                for f in dir_files(src):
                    link_or_copy(f, staging / spec.path / f.relative_to(src))
            else:
                link_or_copy(src, staging / spec.path)
            sets[name] = {"path": spec.path, "asset": spec.asset}
        files: dict[str, dict[str, Any]] = {}
        for f in dir_files(staging):
            rel = f.relative_to(staging).as_posix()
            # the SQLite file is not byte-stable across builds; hash its logical content
            size = f.stat().st_size
            digest, blocks = sha256_with_blocks(f, BLOCK_BYTES) if size > HASH_AT_OPEN_MAX_FILE_BYTES else (sha256_file(f), [])
            files[rel] = {"bytes": size, "sha256": digest if not rel.endswith(".sqlite") else None}
            if rel.endswith(".sqlite"):  # its bytes too, for the reader's check (not part of the snapshot id)
                files[rel][FILE_SHA256] = digest
            if blocks:  # verified per block after open (integrity.verify_blocks; not part of the snapshot id)
                files[rel][BLOCKS_KEY] = {"bytes": BLOCK_BYTES, "sha256": blocks}
        files[chunks_spec.path]["sha256"] = chunks_hash
        _check_sources_unchanged(artifacts, files)
        manifest = dict(manifest)
        manifest[schema.MANIFEST_ARTIFACT_SETS] = dict(sorted(sets.items()))
        manifest["artifacts"] = files
        snapshot_id = content_snapshot_id(manifest)
        manifest["snapshot_id"] = snapshot_id
        (staging / schema.MANIFEST_FILE).write_text(json.dumps(manifest, ensure_ascii=False, sort_keys=True, indent=1), encoding="utf-8")
        for f in dir_files(staging):
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        target = paths.snapshots / snapshot_id
        changed = snapshot_id != previous
        if target.exists() and _snapshot_damaged(target) is None:
            shutil.rmtree(staging)
        elif target.exists():  # same content, but its files were damaged: replace them (new inodes)
            aside = paths.snapshots / f"{STAGING_PREFIX}damaged-{os.getpid()}-{snapshot_id}"
            os.replace(target, aside)
            os.replace(staging, target)
            fsync_dir(paths.snapshots)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(staging, target)
            fsync_dir(paths.snapshots)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    pin = pinned_snapshot(paths)
    released = None
    if pin is not None and (not (paths.snapshots / pin).is_dir() or unservable_count(paths.snapshots / pin, paths.chunk_store)):
        # a pin never keeps serving as open what became RESTRICTED since (reclassification.py)
        (paths.root / PIN_FILE).unlink(missing_ok=True)
        released, pin = pin, None
    if pin is None:
        swap_pointer(paths, snapshot_id)
    with open(paths.root / HISTORY_FILE, "a", encoding="utf-8") as fh:
        record = {"snapshot_id": snapshot_id, "created_at": manifest.get("created_at"), "run_id": manifest.get("run_id"),
                  "previous": previous, "held_by_pin": pin}
        if released:
            record["pin_released"] = {"snapshot_id": released, "reason": "it serves documents that are RESTRICTED now"}
        fh.write(json.dumps(record) + "\n")
    # no retained snapshot may serve as open what became RESTRICTED since it was built
    quarantine_unservable(paths.snapshots, paths.chunk_store, paths.root / HISTORY_FILE,
                          skip={snapshot_id, current_snapshot_id(paths) or snapshot_id}, previous=previous)
    quarantine_damaged_snapshots(paths, skip={snapshot_id, current_snapshot_id(paths) or snapshot_id}, keep=keep,
                                 memo=_known_hashes(target, files))
    prune_snapshots(paths, keep=keep)
    return PublishResult(snapshot_id, target, previous, changed, pin)


def _known_hashes(snapshot_dir: Path, files: Mapping[str, Mapping[str, Any]]) -> dict:
    """(device, inode, size, mtime) -> sha256 of the files just published (hashed while
    publishing), for :func:`quarantine_damaged_snapshots`: files that older snapshots share
    by hard link are not read again."""
    out: dict = {}
    for rel, entry in files.items():
        if rel.endswith(".sqlite"):  # written per publication, never shared; its bytes differ between runs
            continue
        digest = entry.get("sha256")
        try:
            st = (snapshot_dir / rel).stat()
        except OSError:
            continue
        if isinstance(digest, str) and st.st_size == entry.get("bytes"):
            out[(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)] = digest
    return out


def _check_sources_unchanged(artifacts: Mapping[str, Path], files: Mapping[str, Mapping[str, Any]]) -> None:
    """Every file linked from a ``work/`` output still has the bytes recorded when it was
    built (``artifacts.write_once``); a changed one is discarded (the next run rebuilds it).

    Raises:
        IndexCorruptError: a source file changed since it was built; nothing is published.
    """
    for name, src in artifacts.items():
        spec = schema.ARTIFACT_REGISTRY[name]
        root, recorded = next(((a, r) for a in [src, *list(src.parents)[:3]] if (r := work_record(a))), (None, None))
        if root is None or recorded is None:
            continue
        inside = src.relative_to(root).as_posix()
        for rel, (size, digest) in recorded.items():
            if inside == ".":
                target = f"{spec.path}/{rel}"
            elif rel == inside:
                target = spec.path
            elif rel.startswith(inside + "/"):
                target = f"{spec.path}/{rel[len(inside) + 1:]}"
            else:
                continue
            published = files.get(target)
            if published is not None and (published.get("bytes") != size or published.get("sha256") != digest):
                discard_work_output(root)
                raise IndexCorruptError(
                    f"{root / rel} changed after it was built (a damaged file, or a process writing into work/); "
                    f"nothing was published and it was removed: run the ingest again to rebuild it")


def _snapshot_damaged(snapshot_dir: Path, memo: dict | None = None, *, full: bool = True) -> str | None:
    """Why a published snapshot folder fails its check (:func:`verify_snapshot`; ``full``:
    every file hashed, else sizes and the small files): a damaged or a missing file (both
    are repairs to make), or None when it is intact."""
    try:
        verify_snapshot(snapshot_dir, full=full, memo=memo)
    except (IndexCorruptError, IndexNotFoundError) as exc:
        return " ".join(str(exc).split(";")[0].split())
    return None


#: Where damaged retained snapshots are moved (never served, rolled back to or listed).
QUARANTINE_DIR = "quarantine"
#: The ``run_id`` of the history record of such a move.
QUARANTINE_DAMAGED_RUN_ID = "quarantine-damaged"


def withdraw_reclassified(paths: LibraryPaths) -> list[str]:
    """Quarantine at once every retained snapshot, the **current one included**, that serves as
    open what the chunk store now holds RESTRICTED (:mod:`.reclassification`); returns their ids.

    The chunks step calls it as soon as the store has recorded the documents' new
    sensitivities, so a library stops serving such text before the rest of its build runs,
    and also when the run then fails without publishing (a partial Dagster run blocked on
    stale upstream, a crash): until a snapshot is published again the library has no
    servable snapshot and every query fails with a located error naming why (fail closed),
    rather than serving as open what is RESTRICTED now. Publication does the same for the
    snapshots it keeps (:func:`publish`).
    """
    if not paths.snapshots.is_dir() or not Path(paths.chunk_store).is_file():
        return []
    with publication_lock(paths):
        return quarantine_unservable(paths.snapshots, paths.chunk_store, paths.root / HISTORY_FILE, skip=set(),
                                     previous=current_snapshot_id(paths))


#: Where snapshots wait that serve a document whose sensitivity a run could not read
#: (never served, rolled back to or listed), each with ``<id>.json``: the doc ids in doubt.
WITHHELD_DIR = "withheld"
#: The ``run_id`` of the history records of a withholding and of a release.
WITHHOLD_RUN_ID = "withhold"
RELEASE_RUN_ID = "release"
WITHHOLD_REASON = ("it serves a document whose file failed to parse with its sensitivity in doubt (it may be "
                   "RESTRICTED now), so its sensitivity is unknown; fix the file and run its ingest: once a run reads "
                   "the file's sensitivity as open the snapshot serves again")


def _append_history(paths: LibraryPaths, record: dict[str, Any]) -> None:
    with open(paths.root / HISTORY_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def withhold_unclassified(paths: LibraryPaths, doc_ids: set[str], *, keep: int = DEFAULT_KEEP_SNAPSHOTS) -> list[str]:
    """Move every retained snapshot, the **current one included**, that serves one of
    ``doc_ids`` as open to ``<library>/withheld/``; returns their ids.

    ``doc_ids`` are documents whose file failed to parse this run with its sensitivity in
    doubt (``ChunkUpdate.in_doubt``: an error about its sensitivity, or a marking word in it):
    the chunk store has withdrawn their chunks, but a published snapshot still holds them
    under their old, lower sensitivity.
    Classification fails closed: until a run reads the file's sensitivity again no snapshot
    serves them (a query fails with a located error naming why, as after a reclassification:
    :func:`withdraw_reclassified`); the run's own publication serves the library without
    them. Unlike a reclassification the move is reversible: :func:`release_withheld` puts
    the snapshot back once the doubt is gone, or removes it for good when the document is
    RESTRICTED now. The ``keep`` newest withheld snapshots are kept.
    """
    if not doc_ids or not paths.snapshots.is_dir():
        return []
    moved: list[str] = []
    wdir = paths.root / WITHHELD_DIR
    with publication_lock(paths):
        previous = current_snapshot_id(paths)
        for d in sorted(paths.snapshots.iterdir()):
            if d.name.startswith(".") or not d.is_dir() or d.is_symlink():
                continue
            try:
                served = open_documents(d) & doc_ids
            except sqlite3.DatabaseError:
                continue  # damaged: no reader serves it, and publication quarantines it
            if not served:
                continue
            wdir.mkdir(exist_ok=True)
            dest = wdir / d.name
            if dest.exists():
                shutil.rmtree(dest, ignore_errors=True)
            tmp = wdir / f".{d.name}.json-{os.getpid()}"
            tmp.write_text(json.dumps(sorted(served)), encoding="utf-8")  # first: a crash leaves it withheld
            os.replace(tmp, wdir / f"{d.name}.json")
            os.replace(d, dest)
            moved.append(d.name)
            _append_history(paths, {"snapshot_id": d.name, "created_at": None, "run_id": WITHHOLD_RUN_ID,
                                    "previous": previous, "quarantined": WITHHOLD_REASON})
        if moved:
            fsync_dir(paths.snapshots)
            for old in _keep_newest(wdir, keep):
                (wdir / f"{old.name}.json").unlink(missing_ok=True)
    return moved


def withheld_snapshots(paths: LibraryPaths) -> list[str]:
    """Ids of the snapshots withheld while a document's sensitivity is unknown (:func:`withhold_unclassified`)."""
    wdir = paths.root / WITHHELD_DIR
    if not wdir.is_dir():
        return []
    return sorted(d.name for d in wdir.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.startswith("."))


def release_withheld(paths: LibraryPaths, known: Iterable[str]) -> tuple[list[str], list[str]]:
    """Settle the withheld snapshots: one that serves what is RESTRICTED now is removed for
    good (as :func:`withdraw_reclassified` would have), whatever it waits for; one whose
    documents in doubt were all read this run (``known``: the doc ids the run parsed, with
    their sensitivity) moves back to ``snapshots/``. A snapshot whose document is still
    failing, or is gone, stays withheld (fail closed). Returns ``(released, removed)``."""
    wdir = paths.root / WITHHELD_DIR
    released: list[str] = []
    removed: list[str] = []
    if not wdir.is_dir():
        return released, removed
    known = set(known)
    with publication_lock(paths):
        clear_interrupted_removals(wdir)
        for name in withheld_snapshots(paths):
            d = wdir / name
            record = wdir / f"{name}.json"
            dest = paths.snapshots / name
            try:
                unservable = unservable_count(d, paths.chunk_store)
            except sqlite3.DatabaseError:
                continue  # damaged: never served again; it stays until the cap removes it
            if unservable:  # RESTRICTED now, whatever it waits for: gone for good
                remove_unservable(d, paths.root / HISTORY_FILE, previous=current_snapshot_id(paths))
                record.unlink(missing_ok=True)
                removed.append(name)
                continue
            if dest.exists():  # the same snapshot was published again: this copy is not needed
                shutil.rmtree(d, ignore_errors=True)
                record.unlink(missing_ok=True)
                continue
            try:
                in_doubt = set(json.loads(record.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                continue  # which documents it waits for is unknown: it stays withheld
            if not in_doubt <= known:
                continue
            paths.snapshots.mkdir(parents=True, exist_ok=True)
            os.replace(d, dest)
            record.unlink(missing_ok=True)
            released.append(name)
            _append_history(paths, {"snapshot_id": name, "created_at": None, "run_id": RELEASE_RUN_ID,
                                    "released": "a run read the sensitivity of every document it was withheld for"})
        if released:
            fsync_dir(paths.snapshots)
    return released, removed


def quarantine_damaged_snapshots(paths: LibraryPaths, *, skip: set[str], keep: int = DEFAULT_KEEP_SNAPSHOTS,
                                 memo: dict | None = None) -> list[str]:
    """Move every retained snapshot (but those in ``skip``: current and the one just
    published) that fails its full check to ``<library>/quarantine/``; call with the
    publication lock held.

    A damaged old snapshot can never be served again (rollback verifies first) and
    cannot be rebuilt (its inputs are gone), but left in ``snapshots/`` it kept
    ``ragspine snapshots --verify`` failing after every repair. Cost: every retained
    snapshot gets the check of an open (sizes, files up to 8 MiB hashed within 64 MiB);
    those that ``--verify`` or the verification sensor found damaged (:func:`mark_suspect`)
    get the full check — files shared by hard link with the one just published are not
    read again. Each move is recorded in ``history.jsonl``; the quarantine keeps the
    ``keep`` newest.
    """
    if not paths.snapshots.is_dir():
        return []
    moved: list[str] = []
    memo = {} if memo is None else memo
    suspects = suspect_snapshots(paths)
    for d in sorted(paths.snapshots.iterdir()):
        if d.name.startswith(".") or d.name in skip or not d.is_dir():
            continue
        problem = _snapshot_damaged(d, memo, full=d.name in suspects)
        if problem is None:
            continue
        qdir = paths.root / QUARANTINE_DIR
        qdir.mkdir(exist_ok=True)
        dest = qdir / d.name
        if dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(d, dest)
        moved.append(d.name)
        _append_history(paths, {"snapshot_id": d.name, "created_at": None, "run_id": QUARANTINE_DAMAGED_RUN_ID,
                                "quarantined": f"damaged: {problem}"})
    (paths.root / SUSPECT_FILE).unlink(missing_ok=True)  # each suspect was checked in full above
    if moved:
        fsync_dir(paths.snapshots)
        _keep_newest(paths.root / QUARANTINE_DIR, keep)
    return moved


def _keep_newest(folder: Path, keep: int) -> list[Path]:
    """Delete all but the ``keep`` most recently moved snapshot folders in ``folder`` (a
    quarantine); returns the deleted ones."""
    held = sorted((q for q in folder.iterdir() if q.is_dir()), key=lambda q: q.stat().st_mtime, reverse=True)
    for old in held[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return held[keep:]


#: Snapshot ids a full check found damaged, one a line: the next publication checks them in
#: full and quarantines them (``ragspine snapshots --verify`` and the verification sensor write it).
SUSPECT_FILE = ".suspect-snapshots"


def mark_suspect(paths: LibraryPaths, snapshot_ids: list[str]) -> None:
    """Record snapshots found damaged for the next publication (best effort: a read-only
    library folder is left as it is)."""
    try:
        with open(paths.root / SUSPECT_FILE, "a", encoding="utf-8") as fh:
            fh.write("".join(f"{sid}\n" for sid in snapshot_ids))
    except OSError:
        pass


def suspect_snapshots(paths: LibraryPaths) -> set[str]:
    try:
        return {x.strip() for x in (paths.root / SUSPECT_FILE).read_text(encoding="utf-8").splitlines() if x.strip()}
    except (OSError, UnicodeDecodeError):
        return set()


def pinned_snapshot(paths: LibraryPaths) -> str | None:
    """The snapshot ``current`` is pinned to, or None."""
    f = paths.root / PIN_FILE
    return f.read_text(encoding="utf-8").strip() or None if f.is_file() else None


def unpin(paths: LibraryPaths) -> str | None:
    """Release a pin (the next publication moves ``current`` again); returns the old pin."""
    pin = pinned_snapshot(paths)
    (paths.root / PIN_FILE).unlink(missing_ok=True)
    return pin


def list_snapshots(paths: LibraryPaths) -> list[dict[str, Any]]:
    """Published snapshots still on disk, newest first (from the publication history)."""
    seen: dict[str, dict[str, Any]] = {}
    for rec in read_history(paths.root / HISTORY_FILE):  # a damaged line: a located error (repair.py)
        if rec["snapshot_id"]:
            seen.pop(rec["snapshot_id"], None)
            seen[rec["snapshot_id"]] = rec
    current = current_snapshot_id(paths)
    out = []
    for sid, rec in reversed(list(seen.items())):
        if (paths.snapshots / sid / schema.MANIFEST_FILE).is_file():
            out.append({**rec, "current": sid == current})
    return out


def prune_snapshots(paths: LibraryPaths, *, keep: int) -> list[str]:
    """Delete snapshots beyond the ``keep`` most recent (never the current one)."""
    if keep < 1:
        raise RagspineError(f"keep must be >= 1 snapshot, got {keep}")
    current = current_snapshot_id(paths)
    listed = list_snapshots(paths)
    keep_ids = {r["snapshot_id"] for r in listed[:keep]} | ({current} if current else set())
    pin = pinned_snapshot(paths)
    if pin:
        keep_ids.add(pin)
    removed = []
    for d in sorted(paths.snapshots.iterdir()):
        if d.name.startswith("."):
            continue
        if d.name not in keep_ids:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


def rollback(paths: LibraryPaths, snapshot_id: str | None = None, *, pin: bool = True) -> str:
    """Point ``current`` back at ``snapshot_id`` (default: the previous snapshot).

    With ``pin`` (the default) the rollback holds: later runs still build and keep their
    snapshots, but ``current`` stays here until :func:`unpin` — or until a publication
    finds that the pinned snapshot serves as open a document that is RESTRICTED now,
    which releases the pin. Holds :func:`publication_lock`.

    Raises:
        RagspineError: the target serves as open a document that is RESTRICTED now (its
            sensitivity rose after the snapshot was published); ``current`` is unchanged.
    """
    if not paths.root.is_dir():
        return _rollback_locked(paths, snapshot_id, pin=pin)  # nothing to lock: reports what is missing
    with publication_lock(paths):
        return _rollback_locked(paths, snapshot_id, pin=pin)


def _rollback_locked(paths: LibraryPaths, snapshot_id: str | None, *, pin: bool) -> str:
    if paths.root.is_dir():
        repair_history(paths.root / HISTORY_FILE)
    listed = list_snapshots(paths)
    current = current_snapshot_id(paths)
    if snapshot_id is None:
        older = [r["snapshot_id"] for r in listed if r["snapshot_id"] != current]
        if not older:
            raise IndexNotFoundError(f"no earlier snapshot of {paths.library_id!r} is retained to roll back to")
        snapshot_id = older[0]
    if not snapshot_id or Path(snapshot_id).name != snapshot_id or snapshot_id.startswith("."):
        raise IndexNotFoundError(
            f"{ascii(snapshot_id)} is not a snapshot id; list them with `ragspine snapshots {paths.root}`")
    target = paths.snapshots / snapshot_id
    if not (target / schema.MANIFEST_FILE).is_file() and (paths.root / QUARANTINE_DIR / snapshot_id).is_dir():
        raise RagspineError(
            f"refusing to roll {paths.library_id!r} back to snapshot {snapshot_id}: its files were found damaged and "
            f"it was moved to {paths.root / QUARANTINE_DIR} (history.jsonl says which file); roll back to another "
            "snapshot, or rebuild the current one with `ragspine ingest`; current is unchanged")
    if not (target / schema.MANIFEST_FILE).is_file() and (paths.root / WITHHELD_DIR / snapshot_id).is_dir():
        raise RagspineError(
            f"refusing to roll {paths.library_id!r} back to snapshot {snapshot_id}: it is withheld ({WITHHOLD_REASON}); "
            "roll back to another snapshot; current is unchanged")
    if not (target / schema.MANIFEST_FILE).is_file() and was_quarantined(paths.root / HISTORY_FILE, snapshot_id):
        raise RagspineError(
            f"refusing to roll {paths.library_id!r} back to snapshot {snapshot_id}: it was removed because it served "
            "as open text that is RESTRICTED now (reclassified since). Roll back to a later snapshot, or fix the "
            "problem with a new ingest; current is unchanged")
    if (target / schema.MANIFEST_FILE).is_file():
        verify_snapshot(target, full=True)  # never point current at damaged files
        risky = unservable_count(target, paths.chunk_store)
        if risky:
            raise RagspineError(
                f"refusing to roll {paths.library_id!r} back to snapshot {snapshot_id}: it serves {risky} "
                f"document{'' if risky == 1 else 's'} or passage{'' if risky == 1 else 's'} as open that "
                f"{'is' if risky == 1 else 'are'} RESTRICTED now (reclassified since). Roll back to a later snapshot, or fix the problem with a "
                "new ingest; current is unchanged")
    swap_pointer(paths, snapshot_id)
    if pin:
        tmp = paths.root / f".{PIN_FILE}-{os.getpid()}"
        tmp.write_text(snapshot_id + "\n", encoding="utf-8")
        os.replace(tmp, paths.root / PIN_FILE)
    with open(paths.root / HISTORY_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"snapshot_id": snapshot_id, "created_at": None, "run_id": "rollback", "previous": current}) + "\n")
    return snapshot_id
