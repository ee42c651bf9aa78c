"""Damage an ingest cannot rebuild by itself: located errors that name a repair that works.

An ingest rebuilds every damaged file of a snapshot or of ``work/`` on its own
(``artifacts.write_once`` / ``reusable_work_output``, ``publish``). Three files are
inputs of the build rather than outputs, so they are named instead:

* ``chunk_store.sqlite`` — the chunk store (every chunk version). Moved aside, the next
  ingest rebuilds it from the source files (the version history starts again);
* the caches under ``<data>/cache`` (embeddings, summaries, OpenIE triples) — deleted,
  they are recomputed;
* ``history.jsonl`` — the publication history: :func:`repair_history` keeps its readable
  records (a copy of the damaged file is kept beside it); publication runs it.

SQLite reports damage without a file name ("file is not a database", "database disk
image is malformed"). :func:`call_step` runs a step and, when one of those escapes, checks
each of the library's SQLite files (``PRAGMA quick_check``, read only) to name the one
that is damaged and how to repair it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Mapping

from ragspine_core.errors import IndexCorruptError

from ragspine_index.artifacts import LibraryPaths

#: Where the repair the error names moves a damaged chunk store (``<library>/damaged``).
DAMAGED_DIR = "damaged"
#: The cache files of a data root (``<data>/cache``) an ingest reads.
CACHE_FILES = ("embeddings.sqlite", "summaries.sqlite", "openie.sqlite", "semantic_chunking.sqlite")


def sqlite_problem(path: Path) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with the SQLite file ``path`` (None: intact or absent)."""
    if not Path(path).is_file():
        return None
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=10)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "locked" in text or "busy" in text or "unable to open" in text:
            return None  # in use or not readable: not a judgement on its content
        return text
    except sqlite3.DatabaseError as exc:
        return str(exc)
    found = [str(r[0]) for r in rows]
    return None if found == ["ok"] else "; ".join(found[:3])


def damaged_sqlite_error(paths: LibraryPaths, cache_dir: Path | None) -> IndexCorruptError | None:
    """The located error for the first damaged SQLite file of the library (None: none is)."""
    raw = paths.raw
    problem = sqlite_problem(paths.chunk_store)
    if problem:
        aside = paths.root / DAMAGED_DIR
        return IndexCorruptError(
            f"the chunk store {paths.chunk_store} of library {paths.library_id!r} is damaged ({problem}); move it "
            f"aside (with its -wal/-shm files) and ingest again, which rebuilds it from the source files (the chunk "
            f"version history starts again): `mkdir -p {aside} && mv {paths.chunk_store}* {aside}/ && ragspine ingest "
            f"{raw}`; the serving snapshot is unchanged")
    for name in CACHE_FILES:
        if cache_dir is None:
            break
        path = Path(cache_dir) / name
        problem = sqlite_problem(path)
        if problem:
            return IndexCorruptError(
                f"the cache {path} is damaged ({problem}); it only saves recomputation: delete it and ingest again "
                f"(`rm {path}* && ragspine ingest {raw}`); the serving snapshot is unchanged")
    return None


def call_step(step: Any, ctx: Any, inputs: Mapping[str, Any]) -> Any:
    """``step.function(ctx, **inputs)``. Whatever escapes it carries the step's name as
    ``exc.step`` (the ingest's error names library, step and file); a SQLite damage error
    is replaced by the located error of :func:`damaged_sqlite_error` (kept as it is when
    no file is found damaged)."""
    try:
        return step.function(ctx, **inputs)
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        located = None
        if not (isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)):
            cache = getattr(ctx, "cache_path", None)
            located = damaged_sqlite_error(ctx.paths, Path(cache).parent if cache else None)
        if located is None:
            _name_step(exc, step.name)
            raise
        _name_step(located, step.name)
        raise located from exc
    except Exception as exc:
        _name_step(exc, step.name)
        raise


def _name_step(exc: BaseException, name: str) -> None:
    if not getattr(exc, "step", ""):
        try:
            exc.step = name  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # an exception type that takes no attributes
            pass


# ------------------------------------------------------------------------------ history
def read_history(path: Path) -> list[dict[str, Any]]:
    """The records of ``history.jsonl``.

    Raises:
        IndexCorruptError: a line is not a JSON object (naming the file, the line and the
            command that repairs it).
    """
    records, bad = _parse_history(path)
    if bad:
        line, why = bad[0]
        raw = path.parent.parent.parent / "raw" / path.parent.name
        raise IndexCorruptError(
            f"{path} line {line} is damaged ({why}); `ragspine ingest {raw}` repairs it (it keeps the "
            f"readable records and a copy of the damaged file beside it)")
    return records


def _parse_history(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    if not Path(path).is_file():
        return [], []
    records: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
            if not isinstance(rec, dict) or not isinstance(rec.get("snapshot_id"), str):
                raise ValueError("not a history record")
        except (UnicodeDecodeError, ValueError) as exc:
            bad.append((i, " ".join(str(exc).split())[:120]))
            continue
        records.append(rec)
    if data and not data.endswith(b"\n"):  # a torn last write: the next append would join it
        bad.append((len(lines), "the last record is not terminated"))
    return records, bad


def repair_history(path: Path) -> int:
    """Rewrite a damaged ``history.jsonl`` with its readable records (atomically), keeping
    the damaged file as ``history.jsonl.damaged-<unix time>``; returns the lines dropped.
    Call with the publication lock held."""
    records, bad = _parse_history(path)
    if not bad:
        return 0
    stamp = int(time.time())
    copy = path.with_name(f"{path.name}.damaged-{stamp}")
    if not copy.exists():
        os.link(path, copy)  # the damaged bytes stay for inspection; the rewrite below gets a new inode
    records.append({"snapshot_id": "", "created_at": None, "run_id": "history-repair",
                    "dropped_lines": [n for n, _ in bad], "damaged_copy": copy.name})
    tmp = path.with_name(f".{path.name}-{os.getpid()}")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return len(bad)
