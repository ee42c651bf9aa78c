"""``raw_files_sensor``: new library folders become partitions; changed files trigger runs.

Each tick scans ``RagspineConfig.raw_dir()``. A library's *fingerprint* is a sha256 over
its files' relative paths and content hashes (``_library.toml`` included, since it steers
parsing and chunking). Content is hashed only for files whose size or mtime differ from
the cursor, so an idle tick costs one ``stat`` per file.

Run keys are ``<library>:<fingerprint[:16]>:<generation>``, where ``generation`` counts
the content changes the cursor has seen for that library. Re-evaluating a tick from the
same cursor (a retried tick, a second daemon) yields the same keys, so Dagster never
launches two runs for one change; a revert to older content is a new change and gets a
new generation, so it is re-ingested rather than deduplicated against the old run.

One run of a library at a time: a change of a library with a run in flight is not
requested yet (the cursor keeps the library's previous state, so the next tick after the
run sees it again). Each tick first marks failed the runs whose worker process is gone
(:func:`ragspine_assets.runs.fail_dead_runs`: ``dagster dev`` stopped mid-run), and a
library whose latest run failed is requested again, run key ``…:retry-N``, at most
:data:`ragspine_assets.runs.MAX_AUTOMATIC_RETRIES` times per content (unless its publication
failed on stale upstream assets: ``stale_upstream_sensor`` then runs exactly those).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import dagster as dg

from ragspine_index.artifacts import sha256_file, sha256_json
from ragspine_index.library_config import LIBRARY_CONFIG_FILE
from ragspine_assets.partitions import LIBRARIES_PARTITION, libraries_partitions
from ragspine_assets.resources import RagspineConfig
from ragspine_assets.stale import stale_upstream_request

CURSOR_VERSION = 1
DEFAULT_SENSOR_INTERVAL_SECONDS = 30


@dataclass(frozen=True, slots=True)
class FileState:
    """What the cursor remembers of one raw file."""

    size: int
    mtime_ns: int
    sha256: str

    def to_json(self) -> list[Any]:
        return [self.size, self.mtime_ns, self.sha256]

    @classmethod
    def from_json(cls, value: list[Any]) -> "FileState":
        size, mtime_ns, sha = value
        return cls(int(size), int(mtime_ns), str(sha))


@dataclass(frozen=True, slots=True)
class LibraryState:
    """A library's files, the fingerprint of their content and its change generation."""

    files: Mapping[str, FileState]
    fingerprint: str
    generation: int

    def to_json(self) -> dict[str, Any]:
        return {"files": {k: v.to_json() for k, v in sorted(self.files.items())},
                "fingerprint": self.fingerprint, "generation": self.generation}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> "LibraryState":
        return cls({k: FileState.from_json(v) for k, v in value["files"].items()},
                   str(value["fingerprint"]), int(value["generation"]))


@dataclass(frozen=True, slots=True)
class LibraryChange:
    """One library whose content differs from the cursor."""

    library_id: str
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    state: LibraryState

    @property
    def run_key(self) -> str:
        return f"{self.library_id}:{self.state.fingerprint[:16]}:{self.state.generation}"

    def describe(self) -> str:
        parts = [f"{len(self.added)} added", f"{len(self.changed)} changed", f"{len(self.removed)} removed"]
        return f"{self.library_id}: {', '.join(parts)} (fingerprint {self.state.fingerprint[:16]})"


def load_cursor(cursor: str | None) -> dict[str, LibraryState]:
    """Decode the sensor cursor; an empty or older-format cursor means "nothing seen yet"."""
    if not cursor:
        return {}
    data = json.loads(cursor)
    if data.get("version") != CURSOR_VERSION:
        return {}
    return {lib: LibraryState.from_json(v) for lib, v in data["libraries"].items()}


def dump_cursor(states: Mapping[str, LibraryState]) -> str:
    return json.dumps({"version": CURSOR_VERSION, "libraries": {k: v.to_json() for k, v in sorted(states.items())}},
                      sort_keys=True, separators=(",", ":"))


def library_files(library_dir: Path) -> list[tuple[str, Path]]:
    """The files that can affect a library's index, as sorted ``(posix relative path, path)``.

    Mirrors the parser's rule: names starting with ``.`` or ``_`` are ignored at any depth,
    except the library config ``_library.toml`` at the top.
    """
    out: list[tuple[str, Path]] = []
    for path in library_dir.rglob("*"):
        rel = path.relative_to(library_dir)
        if not path.is_file():
            continue
        if rel.as_posix() != LIBRARY_CONFIG_FILE and any(p.startswith((".", "_")) for p in rel.parts):
            continue
        out.append((rel.as_posix(), path))
    return sorted(out)


def fingerprint(files: Mapping[str, FileState]) -> str:
    """sha256 over (relative path, content hash) pairs: mtime-only changes do not count."""
    return sha256_json(sorted([rel, st.sha256] for rel, st in files.items()))


def scan_library(library_dir: Path, previous: LibraryState | None) -> LibraryState:
    """Stat every file; hash only those whose size or mtime differ from ``previous``."""
    known = previous.files if previous else {}
    files: dict[str, FileState] = {}
    for rel, path in library_files(library_dir):
        try:
            st = path.stat()
        except FileNotFoundError:  # deleted between listing and stat
            continue
        old = known.get(rel)
        if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
            files[rel] = old
            continue
        try:
            files[rel] = FileState(st.st_size, st.st_mtime_ns, sha256_file(path))
        except FileNotFoundError:
            continue
    fp = fingerprint(files)
    if previous is None:
        generation = 1
    elif fp != previous.fingerprint:
        generation = previous.generation + 1
    else:
        generation = previous.generation
    return LibraryState(files, fp, generation)


def diff_libraries(raw_dir: Path, libraries: list[str], previous: Mapping[str, LibraryState]) -> tuple[dict[str, LibraryState], list[LibraryChange]]:
    """Scan ``libraries`` under ``raw_dir``; return the new states and the changed libraries."""
    states: dict[str, LibraryState] = {}
    changes: list[LibraryChange] = []
    for lib in libraries:
        before = previous.get(lib)
        state = scan_library(raw_dir / lib, before)
        states[lib] = state
        if before is not None and before.fingerprint == state.fingerprint:
            continue
        old_files = before.files if before else {}
        changes.append(LibraryChange(
            library_id=lib,
            added=tuple(sorted(set(state.files) - set(old_files))),
            changed=tuple(sorted(r for r in set(state.files) & set(old_files) if state.files[r].sha256 != old_files[r].sha256)),
            removed=tuple(sorted(set(old_files) - set(state.files))),
            state=state,
        ))
    return states, changes


@dg.sensor(
    name="raw_files_sensor",
    job_name="ingest_job",
    minimum_interval_seconds=DEFAULT_SENSOR_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description=(
        "Watches data/raw/: a new library folder becomes a partition; a new, changed or removed "
        "file requests one ingest_job run for its library (run key = library + content fingerprint)."
    ),
)
def raw_files_sensor(context: dg.SensorEvaluationContext, ragspine: RagspineConfig) -> dg.SensorResult:
    previous = load_cursor(context.cursor)
    on_disk, invalid = ragspine.library_folders()
    for name in invalid:
        context.log.warning(
            f"folder {ascii(name)} under {ragspine.raw_dir()} is not a valid library name (1-128 characters "
            "from A-Z a-z 0-9 . _ -, starting with a letter or digit); rename it to index it")
    from ragspine_assets.runs import MAX_AUTOMATIC_RETRIES, fail_dead_runs, in_flight_runs, last_run_failed

    for run_id in fail_dead_runs(context.instance, on_disk):  # killed runs (dagster dev stopped mid-run)
        context.log.warning(f"run {run_id} was left STARTED by a process that is gone; marked it failed")
    states, changes = diff_libraries(ragspine.raw_dir(), on_disk, previous)
    waiting = []
    for change in list(changes):
        busy = in_flight_runs(context.instance, change.library_id)
        if busy:  # one run of a library at a time: ask again once it has finished
            changes.remove(change)
            waiting.append(change.library_id)
            if change.library_id in previous:
                states[change.library_id] = previous[change.library_id]
            else:
                states.pop(change.library_id, None)
            context.log.info(f"{change.describe()}: run {busy[0]} of this library is in flight; "
                             "requesting a run when it has finished")
    changed_ids = {c.library_id for c in changes}
    for gone in sorted(set(previous) - set(on_disk)):
        # The partition and its history stay; delete it in the UI if the library is retired.
        context.log.info(f"library folder {gone!r} disappeared from {ragspine.raw_dir()}; no run requested")
    known = set(context.instance.get_dynamic_partitions(LIBRARIES_PARTITION))
    new_partitions = [lib for lib in on_disk if lib not in known]
    run_requests = []
    for change in changes:
        context.log.info(change.describe())
        run_requests.append(dg.RunRequest(
            run_key=change.run_key,
            partition_key=change.library_id,
            tags={"ragspine/library": change.library_id, "ragspine/fingerprint": change.state.fingerprint[:16]},
        ))
    for lib in on_disk:  # a library whose last run failed (or was killed) is requested again
        state = states.get(lib)
        if state is None or lib in changed_ids or lib in waiting or in_flight_runs(context.instance, lib):
            continue
        failed = last_run_failed(context.instance, lib, state.fingerprint[:16])
        if failed is None or failed > MAX_AUTOMATIC_RETRIES:
            continue
        if stale_upstream_request(context.instance, lib)[0] is not None:  # stale.py's sensor runs exactly those
            continue
        context.log.info(f"{lib}: its last run failed; requesting it again ({failed} failed run(s) of this content so far)")
        run_requests.append(dg.RunRequest(
            run_key=f"{lib}:{state.fingerprint[:16]}:{state.generation}:retry-{failed}",
            partition_key=lib,
            tags={"ragspine/library": lib, "ragspine/fingerprint": state.fingerprint[:16],
                  "ragspine/retry": str(failed)},
        ))
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[libraries_partitions.build_add_request(new_partitions)] if new_partitions else [],
        cursor=dump_cursor(states),
        skip_reason=None if run_requests or new_partitions else dg.SkipReason(
            f"no new, changed or removed files in {len(on_disk)} libraries under {ragspine.raw_dir()}"),
    )
