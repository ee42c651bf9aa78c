"""The service both edges share (HTTP, :mod:`.app`; MCP, :mod:`.mcp_server`): warm pipelines
per snapshot, hot swap, per-caller access and request bounds.

**Warm.** A worker opens each library once per snapshot and keeps one query pipeline per
``(snapshots, caller ceiling, mode)`` — built by the CLI's own builder,
:func:`ragspine_query.agent_api.build_narrative_retriever`, so ``POST /v1/search`` runs the
stage list ``ragspine query`` runs — and one embedding backend per model.

**Hot swap.** Every request resolves each library's ``current`` pointer (one ``readlink``)
and takes the pipeline of the snapshot it names, built on first use under a lock. A publish,
a rollback or a quarantine moves ``current``; the next request to start runs on the new
snapshot, a request in flight keeps the objects it took (the old snapshot's files stay
mapped even if retention prunes them). A document withdrawn by the new snapshot is not in
its rows, so no request started after the move can return it. Every answer names the
snapshot of each library it read (``snapshots``). A snapshot whose files were damaged under
the worker fails its requests with the located error until a repair (``ragspine ingest``)
republishes it: the next request opens the repaired files, without a restart.

**Access.** A caller's ceiling is the retriever's ``max_sensitivity``: rows above it leave
the candidate mask before any channel ranks (:meth:`~ragspine_query.retriever.HybridRetriever.hidden_mask`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ragspine_core.errors import ConfigError, RagspineError
from ragspine_core.records import SENSITIVITIES
from ragspine_core.schema import CURRENT_POINTER
from ragspine_core.settings import Settings
from ragspine_query.library import Library, open_library, resolve_snapshot_dir, snapshot_identity
from ragspine_query.limits import MAX_QUERY_CHARS, check_query
from ragspine_query.modes import normalize_mode
from ragspine_query.retriever import check_top_k
from ragspine_tools.serve.access import AccessDenied, Caller

log = logging.getLogger("ragspine.serve")

#: the modes a request may ask for (``ragspine query --mode``)
MODES = ("auto", "hybrid", "vector", "bm25", "lexical", "economy", "graph")


@dataclass(frozen=True)
class Limits:
    """What one request may ask: ``max_top_k`` results, ``max_query_chars``, ``timeout_s`` seconds,
    ``max_filters`` predicates."""

    max_top_k: int = 50
    max_query_chars: int = MAX_QUERY_CHARS
    timeout_s: float = 10.0
    max_filters: int = 16


class RequestError(Exception):
    """A bad request (``status`` 400/404/422) with a message that names the field and what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class SearchService:
    """The libraries a worker serves (by id), their current snapshots and the warm pipelines."""

    def __init__(self, library_dirs: Sequence[str | Path], *, settings: Settings | None = None,
                 limits: Limits = Limits(), max_pipelines: int = 32,
                 on_swap: Callable[[str, str | None, str], None] | None = None) -> None:
        if not library_dirs:
            raise ConfigError("serve needs at least one library: ragspine serve data/artifacts/<library>")
        self.settings = settings or Settings.from_env()
        self.limits = limits
        self.on_swap = on_swap
        self._roots: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._build_locks: dict[tuple, threading.Lock] = {}
        self._snapshots: dict[tuple[str, str], Library] = {}  # (library, snapshot) -> opened, shared by its pipelines
        self._current: dict[str, str] = {}
        self._pipelines: OrderedDict[tuple, Any] = OrderedDict()
        self._backends: dict[tuple[str, str], Any] = {}
        self._max_pipelines = max_pipelines
        self._unwarmable: set[tuple[str, str, str, str]] = set()  # (library, snapshot, mode, ceiling) that failed to build
        for d in library_dirs:
            snap = resolve_snapshot_dir(d)  # raises a clear error for a folder with nothing published
            lib_root = Path(d)
            if (lib_root / "manifest.json").is_file():
                raise ConfigError(f"{d} is one snapshot: serve the library's folder data/artifacts/<library>, "
                                  "whose `current` the service follows")
            if lib_root.parent.name == "raw":
                lib_root = lib_root.parent.parent / "artifacts" / lib_root.name
            lib = self._open(lib_root.name, snap)
            if lib.library_id in self._roots:
                raise ConfigError(f"library {lib.library_id!r} is given twice ({self._roots[lib.library_id]} and {d})")
            self._roots[lib.library_id] = lib_root
            self._served(lib, lib_root)

    # -- snapshots --------------------------------------------------------------------
    @property
    def library_ids(self) -> list[str]:
        return sorted(self._roots)

    def _open(self, library_id: str, snap: Path) -> Library:
        """The opened snapshot ``snap`` of a library (opened once, then held)."""
        key = (library_id, snap.name)
        with self._lock:
            held = self._snapshots.get(key)
            if held is not None and held.trouble() is not None and snapshot_identity(snap) != held.identity:
                # its files were damaged and a repair republished the same snapshot id (new
                # files): forget the damaged one and its pipelines, open the repaired one
                del self._snapshots[key]
                for old in [k for k in self._pipelines if (held.library_id, held.snapshot_id) in k[0]]:
                    del self._pipelines[old]
                held = None
        if held is None:
            lib = open_library(snap)
            with self._lock:
                held = self._snapshots.setdefault((lib.library_id, snap.name), lib)
        return held

    def _served(self, lib: Library, root: Path) -> None:
        """Record ``lib`` as the snapshot its library serves, if ``current`` still names it (a
        request that read the pointer just before it moved does not move the record back)."""
        with self._lock:
            previous = self._current.get(lib.library_id)
        if previous == lib.snapshot_id or resolve_snapshot_dir(root).name != lib.snapshot_dir.name:
            return
        with self._lock:
            previous = self._current.get(lib.library_id)
            if previous == lib.snapshot_id:
                return
            self._current[lib.library_id] = lib.snapshot_id
            # the previous snapshot stays open (a rollback is then instant), older ones are
            # forgotten here; a request in flight still holds its objects
            keep = {lib.snapshot_dir.name, previous}
            for old in [k for k in self._snapshots if k[0] == lib.library_id and k[1] not in keep]:
                del self._snapshots[old]
            for old in [k for k in self._pipelines if any(lid == lib.library_id and sid not in keep for lid, sid in k[0])]:
                del self._pipelines[old]
        if self.on_swap is not None:
            self.on_swap(lib.library_id, previous, lib.snapshot_id)

    def current(self, library_id: str) -> Library:
        """The library's snapshot that ``current`` names now (opened on first use)."""
        root = self._roots[library_id]
        lib = self._open(library_id, resolve_snapshot_dir(root))
        self._served(lib, root)
        return lib

    def pointers(self) -> tuple[tuple[str, str | None], ...]:
        """What each library's ``current`` names at this instant (one ``readlink`` each; None when it
        cannot be read), without opening anything: a key that changes the moment a publish, a rollback
        or a quarantine moves a pointer, before any request has run on the new snapshot."""
        out: list[tuple[str, str | None]] = []
        for lib_id, root in sorted(self._roots.items()):
            try:
                out.append((lib_id, os.readlink(root / CURRENT_POINTER)))
            except OSError:
                out.append((lib_id, None))
        return tuple(out)

    def snapshot_ids(self) -> dict[str, str]:
        with self._lock:
            return dict(self._current)

    # -- pipelines ----------------------------------------------------------------------
    def _backend(self, lib: Library, mode: str) -> Any:
        from ragspine_query.backends import backend_for_library

        emb = lib.manifest.get("embedding") or {}
        key = (json.dumps(emb, sort_keys=True, default=str), normalize_mode(mode))
        with self._lock:
            if key in self._backends:
                return self._backends[key]
        backend = backend_for_library(lib, mode, settings=self.settings)
        with self._lock:
            return self._backends.setdefault(key, backend)

    def _pipeline(self, libs: Sequence[Library], ceiling: str, mode: str) -> Any:
        from ragspine_query.agent_api import build_narrative_retriever
        from ragspine_query.builder import FROM_SPEC

        key = (tuple((lib.library_id, lib.snapshot_id) for lib in libs), ceiling, mode)
        with self._lock:
            found = self._pipelines.get(key)
            if found is not None:
                self._pipelines.move_to_end(key)
                return found
            build_lock = self._build_locks.setdefault(key, threading.Lock())
        with build_lock:  # one build per key; concurrent first requests wait for it
            with self._lock:
                found = self._pipelines.get(key)
            if found is not None:
                return found
            backends = {id(b): b for b in (self._backend(lib, mode) for lib in libs)}
            backend: Any = next(iter(backends.values())) if len(backends) == 1 else FROM_SPEC
            pipeline = build_narrative_retriever(list(libs), mode=mode,
                                                 embedding_backend=backend, settings=self.settings,
                                                 max_sensitivity=ceiling)
            with self._lock:
                self._pipelines[key] = pipeline
                while len(self._pipelines) > self._max_pipelines:
                    self._pipelines.popitem(last=False)
                self._build_locks.pop(key, None)
            return pipeline

    def warm(self, modes: Sequence[str] = ("auto",), ceilings: Sequence[str] = ("PUBLIC", "INTERNAL")) -> None:
        """Build every library's pipelines for ``modes`` × ``ceilings`` now (a worker's start)."""
        for lib_id in self.library_ids:
            lib = self.current(lib_id)
            for mode in modes:
                for ceiling in ceilings:
                    key = (lib_id, lib.snapshot_id, mode, ceiling)
                    if key in self._unwarmable:
                        continue
                    try:
                        self._pipeline([lib], ceiling, mode)
                    except RagspineError as exc:  # this ceiling's requests get the error themselves (search)
                        self._unwarmable.add(key)  # said once per snapshot, not at every watch tick
                        log.warning("not warmed: the %s %s pipeline of %s: %s", ceiling, mode, lib_id, exc)

    def watch(self, interval_s: float = 0.5, modes: Sequence[str] = ("auto",),
              ceilings: Sequence[str] = ("PUBLIC", "INTERNAL")) -> threading.Event:
        """Follow every library's ``current`` in a daemon thread every ``interval_s`` seconds and build
        the new snapshot's pipelines (``modes`` × ``ceilings``) as soon as it moves, so the first
        requests after a publish find them warm. (Requests do not wait for it: each one reads
        ``current`` itself.) Set the returned event to stop."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(interval_s):
                try:
                    self.warm(modes, ceilings)
                except Exception:  # a half-published or damaged snapshot: requests report it themselves
                    continue

        threading.Thread(target=loop, name="ragspine-serve-watch", daemon=True).start()
        return stop

    # -- the verbs ------------------------------------------------------------------------
    def readable(self, caller: Caller, requested: Sequence[str] | None) -> list[str]:
        """The libraries a request reads: those named (each must be served and allowed), else every
        library the caller may read."""
        if not requested:
            ids = [i for i in self.library_ids if caller.may_read(i)]
            if not ids:
                raise AccessDenied(403, f"the key {caller.name!r} may read none of the libraries served here")
            return ids
        out: list[str] = []
        for lib_id in requested:
            if not isinstance(lib_id, str) or lib_id not in self._roots:
                raise RequestError(404, f"libraries: {lib_id!r} is not served here; served: {', '.join(self.library_ids)}")
            if not caller.may_read(lib_id):
                raise AccessDenied(403, f"libraries: the key {caller.name!r} may not read {lib_id!r}")
            if lib_id not in out:
                out.append(lib_id)
        return out

    def check_request(self, query: Any, top_k: Any, mode: Any, filters: Any) -> tuple[str, int, str]:
        """Validate the bounded fields; a :class:`RequestError` names the field and the limit."""
        if not isinstance(query, str):
            raise RequestError(422, "query: must be a string")
        if len(query) > self.limits.max_query_chars:
            raise RequestError(413, f"query: {len(query):,} characters, more than this service's limit of "
                                    f"{self.limits.max_query_chars:,}; send the question itself")
        try:
            check_query(query)
        except RagspineError as exc:
            raise RequestError(422, f"query: {exc}") from None
        try:
            k = check_top_k(top_k)
        except RagspineError as exc:
            raise RequestError(422, f"top_k: {exc}") from None
        if k > self.limits.max_top_k:
            raise RequestError(422, f"top_k: {k} is more than this service's limit of {self.limits.max_top_k}")
        mode = (mode or self.settings.retrieval_mode or "auto")
        if not isinstance(mode, str) or mode.strip().lower() not in MODES:
            raise RequestError(422, f"mode: {mode!r} is not one of {', '.join(MODES)}")
        if filters is not None:
            if not isinstance(filters, Mapping):
                raise RequestError(422, "filters: must be an object {field: value | {op: value}}")
            n = sum(len(v) if isinstance(v, Mapping) else 1 for v in filters.values())
            if n > self.limits.max_filters:
                raise RequestError(422, f"filters: {n} predicates, more than this service's limit of {self.limits.max_filters}")
        return query, k, mode.strip().lower()

    def search(self, caller: Caller, query: Any, *, libraries: Sequence[str] | None = None, filters: Any = None,
               mode: Any = None, top_k: Any = 5, explain: bool = False) -> dict[str, Any]:
        """The ``ragspine query --json --explain``-shaped object, plus ``snapshots`` and ``caller``.

        Raises:
            RequestError, AccessDenied: a bad or forbidden request (nothing was searched).
        """
        from ragspine_tools.query_command import result_object

        query, k, mode = self.check_request(query, top_k, mode, filters)
        ids = self.readable(caller, libraries)
        libs = [self.current(i) for i in ids]  # one snapshot per library for the whole request
        try:
            pipeline = self._pipeline(libs, caller.max_sensitivity, mode)
        except ConfigError as exc:  # a mode this caller or library cannot run (e.g. graph above the ceiling)
            raise RequestError(422, str(exc)) from None
        except RagspineError as exc:  # e.g. a snapshot without the per-ceiling BM25 statistics (fails closed)
            log.warning("cannot build the %s pipeline for %s: %s", caller.max_sensitivity, ", ".join(ids), exc)
            raise RequestError(503, f"libraries {', '.join(ids)} cannot serve a {caller.max_sensitivity} key now "
                                    "(the snapshot needs re-indexing; the service log says what to do)") from None
        try:
            snippets = pipeline.retrieve(query, filters=filters or None, top_k=k, explain=bool(explain))
        except RagspineError as exc:  # a filter on an unknown field, a bad operator, ...
            raise RequestError(422, str(exc)) from None
        out = result_object(snippets, bool(explain))
        out["snapshots"] = {lib.library_id: lib.snapshot_id for lib in libs}
        out["mode"] = mode
        return out

    def describe(self, caller: Caller) -> list[dict[str, Any]]:
        """``GET /v1/libraries``: per library the caller may read, its snapshot and what the caller can see
        of it (counts and languages under the caller's ceiling)."""
        seen = SENSITIVITIES[: SENSITIVITIES.index(caller.max_sensitivity) + 1]
        out = []
        for lib_id in self.library_ids:
            if not caller.may_read(lib_id):
                continue
            lib = self.current(lib_id)
            visible = np.isin(np.char.upper(lib.column("sensitivity")), np.asarray(seen))
            docs = lib.column("doc_id")[visible]
            langs = lib.column("language")[visible]
            emb = lib.manifest.get("embedding") or {}
            out.append({
                "library_id": lib_id,
                "snapshot_id": lib.snapshot_id,
                "created_at": lib.manifest.get("created_at"),
                "counts": {"chunks": int(np.count_nonzero(visible)), "documents": int(np.unique(docs).size)},
                "embedding": emb.get("model_id") or None,
                "languages": {str(k): int(v) for k, v in zip(*np.unique(np.where(langs == "", "en", langs), return_counts=True))},
                "max_sensitivity": caller.max_sensitivity,
            })
        return out

