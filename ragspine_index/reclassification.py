"""Reclassification is retroactive: a snapshot never serves as open what became RESTRICTED.

A document whose sensitivity rose to RESTRICTED after a snapshot was published is still
open (PUBLIC or INTERNAL) inside that older snapshot. Rolling back to it, keeping
``current`` pinned to it, or opening its folder directly would serve the text again as
open. The guard is keyed by **content and history**, not by ``doc_id`` alone, so moving
or renaming a file while marking it RESTRICTED (a new ``doc_id``), or marking it and then
deleting it, does not get past it.

A snapshot created at time *T* is **unservable** when it serves as open (not RESTRICTED):

* a document (``doc_id``) of which the chunk store holds a RESTRICTED version that was
  still RESTRICTED after *T* (it is RESTRICTED now, it was withdrawn while RESTRICTED, or
  a later version superseded it after *T*); or
* a chunk whose text, or one of whose sentences (normalised,
  :mod:`~ragspine_index.fingerprints`), is text of such a RESTRICTED version
  and occurs in no chunk that is open now; or a chunk that is a near duplicate of such
  text (at least half of its word shingles are RESTRICTED-only shingles:
  :func:`~ragspine_index.fingerprints.derived_from_restricted`, the one rule shared with
  :mod:`~ragspine_index.purge` and the ANN rebuild), so an edit that touches every
  sentence while marking the document (a bullet added, a comma per sentence, a header
  cell renamed) is caught too.

The chunk store keeps every version with its sensitivity and ingestion time, so this is
decided from the store's history. Only snapshot chunks that differ from the store's open
active rows are read (an unchanged chunk serves nothing that is not open now), so the
check is cheap after a small change. Callers report conflicts by count only: no id,
path or text is shown.

:func:`quarantine_unservable` removes such snapshots (``rollback`` names why, from
``history.jsonl``); publication runs it, so an old snapshot folder cannot be opened
directly either.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ragspine_core import schema
from ragspine_core.chunk_rows import connect_read_only

from ragspine_index.chunk_store import ChunkStore
from ragspine_index.fingerprints import derived_from_restricted

#: ``history.jsonl`` records of removed snapshots carry this run id.
QUARANTINE_RUN_ID = "quarantine"
QUARANTINE_PREFIX = ".quarantine-"
QUARANTINE_REASON = "it served as open text that became RESTRICTED after it was built"

_T = schema.CHUNK_TABLE
_IS_RESTRICTED = "upper(trim(sensitivity)) = 'RESTRICTED'"


def restricted_now(store_path: Path) -> set[str]:
    """Doc ids the chunk store's active rows mark RESTRICTED (empty when there is no store)."""
    if not Path(store_path).is_file():
        return set()
    with ChunkStore(store_path) as store:
        return store.restricted_doc_ids()


def open_documents(snapshot_dir: Path) -> set[str]:
    """Doc ids a published snapshot serves as open (not RESTRICTED)."""
    conn = connect_read_only(Path(snapshot_dir) / schema.SNAPSHOT_CHUNKS_FILE, immutable=True)
    try:
        rows = conn.execute(f"SELECT DISTINCT doc_id FROM {_T} WHERE NOT {_IS_RESTRICTED}").fetchall()
    finally:
        conn.close()
    return {r[0] for r in rows}


@dataclass(frozen=True, slots=True)
class RestrictedSince:
    """What was RESTRICTED at some point after a given time: doc ids and their texts."""

    doc_ids: frozenset[str]
    texts: tuple[str, ...]


def restricted_since(store_path: Path, created_at: str) -> RestrictedSince:
    """Documents and texts of every RESTRICTED version still RESTRICTED after ``created_at``.

    A version's RESTRICTED period ends when a later version of the document is ingested;
    a version with no later one (active, or withdrawn while RESTRICTED) never ends. An
    empty or missing ``created_at`` counts every RESTRICTED version.
    """
    if not Path(store_path).is_file():
        return RestrictedSince(frozenset(), ())
    sql = (f"SELECT c.doc_id, c.text, (SELECT MIN(x.ingested_at) FROM {_T} x WHERE x.doc_id = c.doc_id "
           f"AND x.version > c.version) AS ended FROM {_T} c WHERE upper(trim(c.sensitivity)) = 'RESTRICTED'")
    with ChunkStore(store_path) as store:
        rows = store.execute_read(sql)
    keep = [r for r in rows if r["ended"] is None or not created_at or r["ended"] > created_at]
    return RestrictedSince(frozenset(r["doc_id"] for r in keep), tuple(sorted({r["text"] for r in keep})))


def _changed_open_texts(snapshot_db: Path, store_path: Path) -> list[str]:
    """Texts of the snapshot's open chunks that are not an open active row of the store."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("ATTACH DATABASE ? AS snap", (f"file:{snapshot_db.as_posix()}?mode=ro&immutable=1",))
        conn.execute("ATTACH DATABASE ? AS st", (f"file:{Path(store_path).as_posix()}?mode=ro",))
        rows = conn.execute(
            f"SELECT s.text FROM snap.{_T} s WHERE NOT upper(trim(s.sensitivity)) = 'RESTRICTED' AND NOT EXISTS ("
            f"SELECT 1 FROM st.{_T} c WHERE c.chunk_id = s.chunk_id AND c.version = s.version AND c.active = 1 "
            "AND NOT upper(trim(c.sensitivity)) = 'RESTRICTED')").fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def _open_now_texts(store_path: Path) -> list[str]:
    with ChunkStore(store_path) as store:
        return [r[0] for r in store.execute_read(f"SELECT text FROM {_T} WHERE active = 1 AND NOT {_IS_RESTRICTED}")]


def unservable_count(snapshot_dir: Path, store_path: Path) -> int:
    """How many documents and passages ``snapshot_dir`` serves as open that became
    RESTRICTED after it was built (0: servable). Never says which."""
    snapshot_dir = Path(snapshot_dir)
    store_path = Path(store_path)
    db = snapshot_dir / schema.SNAPSHOT_CHUNKS_FILE
    if not store_path.is_file() or not db.is_file():
        return 0
    try:
        created_at = str(json.loads((snapshot_dir / schema.MANIFEST_FILE).read_text(encoding="utf-8")).get("created_at") or "")
    except (OSError, ValueError):
        created_at = ""  # unknown age: every RESTRICTED version counts
    since = restricted_since(store_path, created_at)
    if not since.doc_ids:
        return 0
    documents = len(open_documents(snapshot_dir) & since.doc_ids)
    changed = _changed_open_texts(db, store_path)
    if not changed:
        return documents
    derived = derived_from_restricted(changed, since.texts, lambda: _open_now_texts(store_path))
    return documents + sum(derived)


def removed_rows_touch_restricted(store_path: Path, removed_keys: set[bytes], key_of) -> bool:
    """True when a vector about to be deleted from an ANN index (its row key in
    ``removed_keys``; ``key_of(index_text)`` gives a row's key) came from text of a
    RESTRICTED document, **whatever its doc_id**: a document with a RESTRICTED version, or
    a text sharing a whole normalised sentence with RESTRICTED text that is open nowhere
    now. A deleted node's vector stays in the index file, so then only a full build will do.
    """
    if not removed_keys or not Path(store_path).is_file():
        return False
    since = restricted_since(store_path, "")
    if not since.doc_ids:
        return False
    with ChunkStore(store_path) as store:
        rows = store.execute_read(f"SELECT DISTINCT doc_id, index_text, text FROM {_T}")
    removed = [r for r in rows if key_of(r["index_text"]) in removed_keys]
    if any(r["doc_id"] in since.doc_ids for r in removed):
        return True
    return any(derived_from_restricted([r["text"] for r in removed], since.texts, lambda: _open_now_texts(store_path)))


def reclassified_documents(snapshot_dir: Path, store_path: Path) -> list[str]:
    """Doc ids that ``snapshot_dir`` serves as open although they are RESTRICTED now."""
    return sorted(open_documents(snapshot_dir) & restricted_now(store_path))


def quarantine_unservable(snapshots_dir: Path, store_path: Path, history: Path, *, skip: set[str], previous: str | None) -> list[str]:
    """Remove every snapshot under ``snapshots_dir`` (except ``skip``) that is unservable;
    append one ``history.jsonl`` record per removal. Returns the removed ids.

    A snapshot is first renamed to a hidden ``.quarantine-<id>`` folder (atomic: from then
    on it cannot be opened or rolled back to), then deleted. Call with the publication
    lock held.
    """
    removed: list[str] = []
    snapshots_dir = Path(snapshots_dir)
    if not snapshots_dir.is_dir():
        return removed
    clear_interrupted_removals(snapshots_dir)
    for d in sorted(snapshots_dir.iterdir()):
        if d.name.startswith(".") or d.name in skip or not d.is_dir() or d.is_symlink():
            continue
        try:
            if not unservable_count(d, store_path):
                continue
        except sqlite3.DatabaseError:
            # its chunks file is damaged: no reader serves it (they check what they read), and
            # publication repairs or quarantines it (publish.quarantine_damaged_snapshots)
            continue
        remove_unservable(d, history, previous=previous)
        removed.append(d.name)
    return removed


def remove_unservable(snapshot_dir: Path, history: Path, *, previous: str | None) -> None:
    """Remove one unservable snapshot folder for good and record it in ``history.jsonl``:
    first renamed to a hidden ``.quarantine-<id>`` beside it (atomic: from then on it cannot
    be opened or rolled back to), then deleted. Call with the publication lock held."""
    snapshot_dir = Path(snapshot_dir)
    hidden = snapshot_dir.parent / f"{QUARANTINE_PREFIX}{snapshot_dir.name}"
    os.replace(snapshot_dir, hidden)
    shutil.rmtree(hidden, ignore_errors=True)
    with open(history, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"snapshot_id": snapshot_dir.name, "created_at": None, "run_id": QUARANTINE_RUN_ID,
                             "previous": previous, "quarantined": QUARANTINE_REASON}) + "\n")


def clear_interrupted_removals(folder: Path) -> None:
    """Delete what a :func:`remove_unservable` interrupted after its rename left in ``folder``."""
    for left in Path(folder).glob(QUARANTINE_PREFIX + "*"):
        shutil.rmtree(left, ignore_errors=True)


def was_quarantined(history: Path, snapshot_id: str) -> bool:
    """True when ``history.jsonl`` records that ``snapshot_id`` was removed as unservable."""
    if not Path(history).is_file():
        return False
    for line in Path(history).read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("snapshot_id") == snapshot_id and rec.get("run_id") == QUARANTINE_RUN_ID:
                return True
    return False


__all__ = ["QUARANTINE_REASON", "RestrictedSince", "clear_interrupted_removals", "open_documents", "quarantine_unservable",
           "reclassified_documents", "remove_unservable", "removed_rows_touch_restricted", "restricted_now", "restricted_since", "unservable_count", "was_quarantined"]
