"""Where a library's artifacts live, and small helpers for immutable work outputs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ragspine_core import schema
from ragspine_core.errors import ConfigError

#: A library name is one path segment: it names ``raw/<library>``, ``artifacts/<library>``
#: and the Dagster partition, so it may never reach outside the data root.
LIBRARY_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_valid_library_id(name: object) -> bool:
    """Whether ``name`` is a valid library name (see :func:`validate_library_id`)."""
    return isinstance(name, str) and bool(LIBRARY_ID_PATTERN.fullmatch(name)) and not name.endswith(".")


def validate_library_id(name: str) -> str:
    """Return ``name`` when it is a valid library name, else raise :class:`ConfigError`.

    Valid: 1–128 characters from ``A-Z a-z 0-9 . _ -``, starting with a letter or digit
    (so never empty, ``.``, ``..``, hidden, or containing a path separator).
    """
    if not is_valid_library_id(name):
        shown = repr(name) if isinstance(name, str) and len(name) <= 64 and name.isprintable() else "given"
        raise ConfigError(
            f"library name {shown} is not allowed: a library name is one folder name of 1-128 characters "
            "from A-Z a-z 0-9 . _ - starting with a letter or digit (e.g. 'sample', 'acme-cn'); "
            "rename the folder under data/raw/ or pass a valid partition key"
        )
    return name


@dataclass(frozen=True, slots=True)
class LibraryPaths:
    """Paths of one library (``raw`` input folder, ``root`` artifact folder)."""

    library_id: str
    raw: Path
    root: Path

    def __post_init__(self) -> None:
        validate_library_id(self.library_id)

    @property
    def chunk_store(self) -> Path:
        return self.root / schema.CHUNK_STORE_FILE

    @property
    def snapshots(self) -> Path:
        return self.root / schema.SNAPSHOTS_DIR

    @property
    def current(self) -> Path:
        return self.root / schema.CURRENT_POINTER

    @property
    def work(self) -> Path:
        """Content-addressed intermediate outputs (index text, BM25 arrays, vectors)."""
        return self.root / "work"

    def work_dir(self, kind: str, content_hash: str) -> Path:
        return self.work / kind / content_hash[:24]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Hard-link ``src`` at ``dst`` (its folders made), or copy it where the file system cannot link."""
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_once(target: Path, build: Callable[[Path], object]) -> Path:
    """Build a directory atomically: into a temp sibling, then rename. Reuses an existing one.

    The size and sha256 of every file built are recorded beside the folder
    (:func:`work_record_path`). An existing folder is reused only while its files still
    match that record; a damaged one (a truncated, flipped or zeroed file — snapshot files
    are hard links to these, so damage to a published file shows here too) is moved aside
    and built again, so a re-ingest never publishes the same broken bytes again.
    """
    if target.is_dir():
        if work_output_intact(target):
            return target
        discard_work_output(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        build(tmp)
        for p in tmp.rglob("*"):
            if p.is_file():
                with open(p, "rb") as fh:
                    os.fsync(fh.fileno())
        record = _files_record(tmp)
        os.replace(tmp, target)
        _write_record(target, record)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if target.is_dir():  # lost a race with an identical build
            return target
        raise
    return target


#: The records of work outputs' files: ``work/.records/<kind>/<name>.json`` (outside the
#: output folders, so publication never links one into a snapshot).
WORK_RECORDS_DIR = ".records"


def work_record_path(target: Path) -> Path:
    return target.parent.parent / WORK_RECORDS_DIR / target.parent.name / f"{target.name}.json"


def _files_record(directory: Path) -> dict[str, list]:
    return {p.relative_to(directory).as_posix(): [p.stat().st_size, sha256_file(p)] for p in dir_files(directory)}


def _write_record(target: Path, record: dict[str, list]) -> None:
    path = work_record_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-record-{target.name}-{os.getpid()}.json"
    tmp.write_text(json.dumps({"files": record}, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def work_record(target: Path) -> dict[str, list] | None:
    """``{relative path: [size, sha256]}`` recorded when ``target`` was built, or None."""
    try:
        recorded = json.loads(work_record_path(target).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def work_output_intact(target: Path) -> bool:
    """Whether a work output folder's files match the record written when it was built.

    A folder without a record (built before records existed) is trusted once: its record
    is written now.
    """
    path = work_record_path(target)
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["files"]
    except FileNotFoundError:
        _write_record(target, _files_record(target))
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False  # a damaged record: rebuild rather than trust the folder
    if not isinstance(recorded, dict):
        return False
    try:
        present = {p.relative_to(target).as_posix(): p for p in dir_files(target)}
        if set(present) != set(recorded):
            return False
        for rel, p in present.items():
            size, digest = recorded[rel]
            if p.stat().st_size != size or sha256_file(p) != digest:
                return False
    except (OSError, ValueError, TypeError):
        return False
    return True


def reusable_work_output(target: Path) -> bool:
    """Whether ``target`` (a :func:`write_once` folder) exists with the bytes recorded when
    it was built, so a step may read it instead of building it; a damaged one is discarded
    (the step builds it again). Nothing under ``work/`` is read as data unchecked."""
    if not target.is_dir():
        return False
    if work_output_intact(target):
        return True
    discard_work_output(target)
    return False


def intact_snapshot_part(snapshot_dir: Path, prefix: str) -> bool:
    """Whether the files under ``prefix`` of a published snapshot all have the size and
    sha256 its manifest records (a step reusing part of the serving snapshot checks it
    first; a damaged or missing part is not reused)."""
    from ragspine_core.errors import IndexCorruptError, IndexNotFoundError
    from ragspine_core.integrity import verify_snapshot_files

    try:
        manifest = json.loads((snapshot_dir / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
        files = {rel: e for rel, e in manifest["artifacts"].items() if rel.startswith(prefix.rstrip("/") + "/")}
        if not files:
            return False
        verify_snapshot_files(snapshot_dir, {"artifacts": files}, full=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexCorruptError, IndexNotFoundError):
        return False
    return True


def discard_work_output(target: Path) -> None:
    """Move a damaged work output aside (a new build gets new inodes; snapshots that link
    the old files keep them) and delete it with its record."""
    aside = target.parent / f".tmp-damaged-{target.name}-{os.getpid()}"
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(target, aside)
    work_record_path(target).unlink(missing_ok=True)
    shutil.rmtree(aside, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (a zombie counts as alive)."""
    if pid <= 0:
        return True  # not a pid we can judge: treat as alive, never delete on a guess
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_tmp_dirs(root: Path) -> list[Path]:
    """Delete the ``.tmp-<name>-<pid>`` folders a :func:`write_once` left under ``root``
    when its process was killed (SIGKILL, OOM, power loss); returns what was removed.

    Only folders whose owning pid is no longer alive on this machine are removed, so a
    build in progress keeps its folder. ``root`` is one library's ``work/`` folder, which
    only runs of that library write (and those never overlap, see docs/operations.md).
    """
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for dirpath, dirnames, _ in os.walk(root):
        for name in list(dirnames):
            if not name.startswith(".tmp-"):
                continue
            dirnames.remove(name)  # never descend into a temp folder
            pid = name.rsplit("-", 1)[-1]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(Path(dirpath) / name, ignore_errors=True)
                removed.append(Path(dirpath) / name)
    return removed


def dir_files(directory: Path) -> Iterable[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())
