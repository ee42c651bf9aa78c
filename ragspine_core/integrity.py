"""Verify a published snapshot before anything reads it: sizes, hashes, array bounds.

The publisher records every file's size and sha256 in ``manifest.json`` (the SQLite
chunk file: the hash of its logical content, plus ``file_sha256`` of its bytes since
this module exists). :func:`verify_snapshot_files` checks them:

* at open (:class:`~ragspine_query.library.Library`): every file exists and has its
  recorded size; files of at most :data:`HASH_AT_OPEN_MAX_FILE_BYTES` are hashed too,
  smallest first, until :data:`HASH_AT_OPEN_BUDGET_BYTES` have been read (a small
  library is hashed whole at every open; a large one pays a bounded cost);
* in full (every file's sha256) with ``ragspine snapshots <library> --verify`` and
  before a publication reuses a snapshot folder or a rollback points ``current`` at one.

Whatever is not hashed at open is still safe to read: :func:`check_csr` and the other
``check_*`` functions bound-check the index arrays once at open (row ids within the
rows, offsets monotone and inside their arrays, the expected dtypes and shapes), so no
kernel — numpy or the compiled BM25 loop — can index outside an array.

Every failure is an :class:`~ragspine_core.errors.IndexCorruptError` whose message is
one line naming the file, what is wrong, and what to do.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, cast

import numpy as np

from ragspine_core import schema
from ragspine_core.errors import IndexCorruptError, IndexNotFoundError

#: Files up to this size are hashed at every open.
HASH_AT_OPEN_MAX_FILE_BYTES = 8 << 20
#: At most this many bytes are hashed at one open (the smallest files first).
HASH_AT_OPEN_BUDGET_BYTES = 64 << 20
#: The manifest key of a SQLite file's byte hash (its ``sha256`` is of the logical content).
FILE_SHA256 = "file_sha256"
#: Files larger than this also get per-block sha256 in the manifest (``artifacts[rel]["blocks"]``),
#: verified in a background pass after open (:func:`verify_blocks`) before the first query.
BLOCKS_KEY = "blocks"
BLOCK_BYTES = 4 << 20
#: Threads of the background pass (hashlib releases the GIL on large buffers).
VERIFY_THREADS = 4
#: Manifest keys left out of the snapshot id (they change between runs of the same content).
#: ``chunk_store_state`` (written since issue #29) is left out too, so snapshot ids stay as they were.
RUN_KEYS = ("created_at", "run_id", "snapshot_id", "timings", "chunk_store_state")


def sha256_json(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_path(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def content_snapshot_id(manifest: Mapping[str, Any]) -> str:
    """The snapshot id: a hash of the manifest's content, without run metadata.

    A SQLite file is represented by its logical ``sha256`` only (its bytes and size differ
    between runs of identical content: its rows carry the run id and ingestion time), so
    ``build_library`` and a Dagster run of the same input agree.
    """
    stable = {k: v for k, v in manifest.items() if k not in RUN_KEYS}
    stable["artifacts"] = {rel: ({"sha256": a.get("sha256")} if rel.endswith(".sqlite")
                                 else {k: v for k, v in a.items() if k != BLOCKS_KEY} if isinstance(a, dict) else a)
                           for rel, a in manifest.get("artifacts", {}).items()}
    return sha256_json(stable)[:16]


def _fix_hint(snapshot_dir: Path) -> str:
    if snapshot_dir.parent.name != "snapshots":
        return "publish it again with `ragspine ingest` for its library (it rebuilds damaged files)"
    library = snapshot_dir.parent.parent
    raw = library.parent.parent / "raw" / library.name  # <data>/artifacts/<library> is built from <data>/raw/<library>
    return (f"repair it with `ragspine ingest {raw}` (it rebuilds every damaged file and publishes a verified snapshot, "
            f"even when no source changed), or roll back with `ragspine snapshots {library} --rollback`; check all files "
            f"with `ragspine snapshots {library} --verify`")


def _missing(snapshot_dir: Path, rel: str) -> IndexNotFoundError:
    from ragspine_core.schema import ARTIFACT_REGISTRY

    asset = next((spec.asset for spec in ARTIFACT_REGISTRY.values()
                  if rel == spec.path or rel.startswith(spec.path.rstrip("/") + "/")), "index_manifest")
    return IndexNotFoundError(f"{snapshot_dir / rel} is missing: materialize the {asset} asset for this library "
                              f"(the snapshot is incomplete); {_fix_hint(snapshot_dir)}")


def corrupt(snapshot_dir: Path, rel: str, problem: str) -> IndexCorruptError:
    """The one-line error for a damaged snapshot file ``rel``."""
    return IndexCorruptError(f"snapshot file {snapshot_dir / rel} {problem}: the snapshot is damaged; "
                             f"{_fix_hint(snapshot_dir)}")


def quarantine_reason(library_root: Path, snapshot_id: str) -> str | None:
    """Why the library folder's ``history.jsonl`` says ``snapshot_id`` was quarantined (its files
    were damaged, it served text that is RESTRICTED now, or it is withheld while a document's
    sensitivity is unknown), or None (not recorded, or released since). Unreadable or damaged
    lines are skipped: this only names a reason, it never raises."""
    try:
        lines = (Path(library_root) / schema.HISTORY_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("snapshot_id") == snapshot_id:
            if rec.get("released"):  # a withheld snapshot put back
                return None
            if rec.get("quarantined"):
                return str(rec["quarantined"])
    return None


def check_manifest_id(snapshot_dir: Path, manifest: Mapping[str, Any]) -> None:
    """The manifest's content hashes to its ``snapshot_id`` (so no value in it was altered)."""
    sid = manifest.get("snapshot_id")
    if not isinstance(manifest.get("artifacts"), dict) or not sid:
        return  # a hand-made manifest without the publisher's records: nothing to compare
    if content_snapshot_id(manifest) != sid:
        raise corrupt(snapshot_dir, "manifest.json", f"does not match its snapshot id {sid!r} (its content was altered)")


def verify_snapshot_files(snapshot_dir: Path, manifest: Mapping[str, Any], *, full: bool = False,
                          max_file_bytes: int | None = None, budget_bytes: int | None = None,
                          memo: dict[tuple[int, int, int, int], str] | None = None, hashed_files: set[str] | None = None) -> dict[str, int]:
    """Check the files the manifest lists against their recorded size and sha256.

    ``full``: hash every file (``ragspine snapshots --verify``); otherwise only files of at
    most ``max_file_bytes`` within ``budget_bytes`` (default: the module constants).
    ``memo``: shared by several calls, (device, inode, size, mtime) -> sha256, so
    a file hard-linked into several snapshots is read once.
    Returns ``{"files": n, "hashed": n, "hashed_bytes": n}``.

    Raises:
        IndexCorruptError: a missing file, a size or hash mismatch (one line naming the file).
    """
    max_file = HASH_AT_OPEN_MAX_FILE_BYTES if max_file_bytes is None else max_file_bytes
    budget = HASH_AT_OPEN_BUDGET_BYTES if budget_bytes is None else budget_bytes
    files = manifest.get("artifacts")
    if not isinstance(files, dict):
        return {"files": 0, "hashed": 0, "hashed_bytes": 0}
    to_hash: list[tuple[int, str, str]] = []
    for rel, entry in files.items():
        path = snapshot_dir / rel
        if not isinstance(entry, dict):
            raise corrupt(snapshot_dir, "manifest.json", f"has no size record for {rel!r}")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise _missing(snapshot_dir, rel) from None
        except OSError as exc:
            raise corrupt(snapshot_dir, rel, f"cannot be read ({exc.strerror or exc})") from None
        want = entry.get("bytes")
        if isinstance(want, int) and size != want:
            raise corrupt(snapshot_dir, rel, f"has {size} bytes, the manifest records {want}")
        digest = entry.get(FILE_SHA256) if rel.endswith(".sqlite") else entry.get("sha256")
        if isinstance(digest, str) and digest:
            to_hash.append((size, rel, digest))
    hashed = hashed_bytes = 0
    for size, rel, digest in sorted(to_hash):
        if not full and (size > max_file or hashed_bytes + size > budget):
            continue
        try:
            got = _hash_once(snapshot_dir / rel, memo)
        except OSError as exc:
            raise corrupt(snapshot_dir, rel, f"cannot be read ({exc.strerror or exc})") from None
        if got != digest:
            raise corrupt(snapshot_dir, rel, "does not match its sha256 in the manifest (its bytes changed)")
        hashed += 1
        hashed_bytes += size
        if hashed_files is not None:
            hashed_files.add(rel)
    return {"files": len(files), "hashed": hashed, "hashed_bytes": hashed_bytes}


# -- large files: per-block hashes, verified after open -------------------------------------------------

def sha256_with_blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> tuple[str, list[str]]:
    """The file's sha256 and the sha256 of each ``block_bytes`` block, in one read."""
    whole = hashlib.sha256()
    blocks: list[str] = []
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(block_bytes), b""):
            whole.update(block)
            blocks.append(hashlib.sha256(block).hexdigest())
    return whole.hexdigest(), blocks


def _verify_unit(snapshot_dir: Path, rel: str, start: int, length: int, digest: str, label: str) -> None:
    h = hashlib.sha256()
    got = 0
    try:
        with open(snapshot_dir / rel, "rb") as fh:
            fh.seek(start)
            while got < length:
                data = fh.read(min(BLOCK_BYTES, length - got))
                if not data:
                    break
                h.update(data)
                got += len(data)
    except OSError as exc:
        raise corrupt(snapshot_dir, rel, f"cannot be read ({exc.strerror or exc})") from None
    if got != length or h.hexdigest() != digest:
        raise corrupt(snapshot_dir, rel, f"{label} does not match its sha256 in the manifest (its bytes changed)")


def verify_blocks(snapshot_dir: Path, manifest: Mapping[str, Any], *, skip: set[str] | frozenset[str] = frozenset(),
                  threads: int = VERIFY_THREADS) -> dict[str, int]:
    """Hash what the check at open left out (files in ``skip`` were hashed then): each
    block of a file that has block hashes, each other file whole; ``threads`` at a time.

    Returns ``{"files": n, "blocks": n, "bytes": n}``.

    Raises:
        IndexCorruptError: the first block or file whose bytes changed (naming the file,
            the block and its byte range).
    """
    from concurrent.futures import ThreadPoolExecutor

    files = manifest.get("artifacts")
    units: list[tuple[str, int, int, str, str]] = []
    for rel, entry in (files.items() if isinstance(files, dict) else ()):
        if rel in skip or not isinstance(entry, dict):
            continue
        size = entry.get("bytes")
        blocks = entry.get(BLOCKS_KEY)
        if isinstance(blocks, dict) and isinstance(blocks.get("sha256"), list) and isinstance(size, int):
            step = int(blocks.get("bytes") or BLOCK_BYTES)
            for i, digest in enumerate(blocks["sha256"]):
                start = i * step
                length = min(step, size - start)
                units.append((rel, start, length, str(digest),
                              f"block {i} (bytes {start}-{start + length - 1})"))
            continue
        digest = entry.get(FILE_SHA256) if rel.endswith(".sqlite") else entry.get("sha256")
        if isinstance(digest, str) and digest and isinstance(size, int):
            units.append((rel, 0, size, digest, "the file"))
    if not units:
        return {"files": 0, "blocks": 0, "bytes": 0}
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="ragspine-verify") as pool:
        for fut in [pool.submit(_verify_unit, Path(snapshot_dir), *u) for u in units]:
            fut.result()  # the first damage raises (the rest finish; at most one pass)
    return {"files": len({u[0] for u in units}), "blocks": len(units), "bytes": sum(u[2] for u in units)}


def _hash_once(path: Path, memo: dict[tuple[int, int, int, int], str] | None) -> str:
    if memo is None:
        return sha256_path(path)
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in memo:
        memo[key] = sha256_path(path)
    return memo[key]


def verify_snapshot(snapshot_dir: Path, manifest: Mapping[str, Any] | None = None, *, full: bool = True,
                    memo: dict[tuple[int, int, int, int], str] | None = None) -> dict[str, int]:
    """Verify one snapshot folder: its manifest's id, every file's size and (``full``) sha256.

    Raises:
        IndexCorruptError: the first damage found.
    """
    snapshot_dir = Path(snapshot_dir)
    if manifest is None:
        try:
            manifest = json.loads((snapshot_dir / "manifest.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise corrupt(snapshot_dir, "manifest.json", "is missing") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise corrupt(snapshot_dir, "manifest.json", f"is not valid JSON ({exc})") from None
        if not isinstance(manifest, dict):
            raise corrupt(snapshot_dir, "manifest.json", "is not a JSON object")
    if not isinstance(manifest.get("artifacts"), dict) or not manifest.get("snapshot_id"):
        raise corrupt(snapshot_dir, "manifest.json", "lacks the publisher's file records ('artifacts', 'snapshot_id')")
    check_manifest_id(snapshot_dir, manifest)
    return verify_snapshot_files(snapshot_dir, manifest, full=full, memo=memo)


# -- array bounds ------------------------------------------------------------------------------------

def where_in_snapshot(directory: Path, name: str) -> tuple[Path, str]:
    """(snapshot dir, relative path) for a file of an artifact folder, for :func:`corrupt`."""
    for parent in [directory, *directory.parents]:
        if (parent / "manifest.json").is_file():
            return parent, (directory / name).relative_to(parent).as_posix()
    return directory, name


def _bad(directory: Path, name: str, problem: str) -> IndexCorruptError:
    snap, rel = where_in_snapshot(directory, name)
    return corrupt(snap, rel, problem)


def check_array(directory: Path, name: str, a: np.ndarray, *, kind: str, ndim: int = 1,
                length: int | None = None) -> None:
    """``a`` (read from ``directory/name``) has dtype kind in ``kind`` ("i", "iu", "f", ...),
    ``ndim`` dimensions and, when given, ``length`` entries along the first axis."""
    if a.dtype.kind not in kind or a.ndim != ndim:
        raise _bad(directory, name, f"has dtype {a.dtype} and {a.ndim} dimension(s), not the expected kind")
    if length is not None and a.shape[0] != length:
        raise _bad(directory, name, f"has {a.shape[0]} entries where {length} are expected")


def check_ids(directory: Path, name: str, ids: np.ndarray, upper: int, *, lower: int = 0) -> None:
    """Every value of ``ids`` is within ``[lower, upper)``."""
    check_array(directory, name, ids, kind="iu")
    if ids.size and (int(ids.min()) < lower or int(ids.max()) >= upper):
        raise _bad(directory, name, f"holds ids outside [{lower}, {upper}) (min {int(ids.min())}, max {int(ids.max())})")


def check_csr(directory: Path, indptr_name: str, indptr: np.ndarray, values_name: str, values: np.ndarray,
              *, n_ptr: int, upper: int, lower: int = 0) -> None:
    """A CSR pair: ``indptr`` (``n_ptr`` entries, starts at 0, never decreases, ends at
    ``len(values)``) and ``values`` ids within ``[lower, upper)``."""
    check_array(directory, indptr_name, indptr, kind="iu", length=n_ptr)
    check_array(directory, values_name, values, kind="iu")
    if n_ptr and (int(indptr[0]) != 0 or int(indptr[-1]) != values.shape[0]):
        raise _bad(directory, indptr_name, f"does not span {values_name} (first {int(indptr[0])}, last "
                                           f"{int(indptr[-1])}, {values.shape[0]} entries)")
    if n_ptr > 1 and bool((np.diff(indptr) < 0).any()):
        raise _bad(directory, indptr_name, "is not monotone (an offset decreases)")
    check_ids(directory, values_name, values, upper, lower=lower)


#: Arrays up to this size are read into memory at open (they were hashed then): a file
#: written in place or truncated later cannot change or crash a reader that holds them.
#: Larger ones are memory-mapped and watched (``Library.ensure_verified``).
COPY_AT_OPEN_MAX_FILE_BYTES = HASH_AT_OPEN_MAX_FILE_BYTES


def map_or_copy(path: Path) -> np.ndarray:
    """``np.load(path)``: into memory up to :data:`COPY_AT_OPEN_MAX_FILE_BYTES`, else mapped read-only."""
    if path.stat().st_size > COPY_AT_OPEN_MAX_FILE_BYTES:
        return cast("np.ndarray", np.load(path, mmap_mode="r", allow_pickle=False))
    return cast("np.ndarray", np.load(path, allow_pickle=False))


def load_array(directory: Path, name: str) -> np.ndarray:
    """:func:`map_or_copy` of ``directory/name``; an unreadable file is a located error."""
    try:
        return map_or_copy(directory / name)
    except FileNotFoundError:
        raise _bad(directory, name, "is missing") from None
    except (OSError, ValueError, EOFError) as exc:
        raise _bad(directory, name, f"is not a readable array ({' '.join(str(exc).split())})") from None
