"""Where a library's artifacts live, and small helpers for immutable work outputs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ragspine_query import schema


@dataclass(frozen=True, slots=True)
class LibraryPaths:
    """Paths of one library (``raw`` input folder, ``root`` artifact folder)."""

    library_id: str
    raw: Path
    root: Path

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


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_once(target: Path, build: "callable[[Path], None]") -> Path:
    """Build a directory atomically: into a temp sibling, then rename. Reuses an existing one."""
    if target.is_dir():
        return target
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
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if target.is_dir():  # lost a race with an identical build
            return target
        raise
    return target


def dir_files(directory: Path) -> Iterable[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())
