"""A scoped result cache (the Go retrieval seed's ``ScopedCache``): LRU + TTL + purge by
prefix, safe across threads.

Keys start with the *scope* of the libraries searched — ``library_id@snapshot_id`` for
each, joined — so a result is never served across a publish: a retriever over the new
snapshot has a different scope, and :meth:`ScopedCache.purge_prefix` (or
:func:`invalidate_library`) drops the old one's entries. A long-lived
retriever's open snapshot can also have rows withheld by a newer one (a reclassification):
the key carries the libraries' generation (:func:`generation_of`), so no result cached before
that is served after it. The rest of the
key is the normalised query (:func:`~ragspine_core.text.normalize.normalize_query`), the
filters, ``top_k`` and ``include_restricted``.

No module-level cache exists: a :class:`ScopedCache` is made by whoever wires a pipeline
(``build_narrative_retriever(cache=…)``, ``RAGSPINE_QUERY_CACHE``) and lives as long as it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from ragspine_core.errors import ConfigError
from ragspine_query.source import libraries_of

if TYPE_CHECKING:
    from ragspine_query.library import Library

T = TypeVar("T")


class ScopedCache(Generic[T]):
    """A thread-safe LRU cache with a time-to-live per entry.

    Args:
        capacity: most entries kept (the least recently used goes first); >= 1.
        ttl_s: seconds an entry lives (> 0; ``float('inf')`` = no expiry).
        clock: seconds, monotonic (injectable so tests need no sleep).
    """

    def __init__(self, capacity: int = 1024, ttl_s: float = 300.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if capacity < 1:
            raise ConfigError(f"cache capacity must be >= 1 entries, got {capacity}")
        if not ttl_s > 0:
            raise ConfigError(f"cache ttl_s must be > 0 seconds, got {ttl_s}")
        self.capacity = int(capacity)
        self.ttl_s = float(ttl_s)
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> tuple[T | None, bool]:
        """``(value, True)`` when present and not expired, else ``(None, False)``."""
        with self._lock:
            entry = self._data.get(key)
            if entry is not None and entry[0] > self._clock():
                self._data.move_to_end(key)
                self.hits += 1
                return entry[1], True
            if entry is not None:
                del self._data[key]
            self.misses += 1
            return None, False

    def set(self, key: str, value: T) -> None:
        with self._lock:
            self._data[key] = (self._clock() + self.ttl_s, value)
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def purge_prefix(self, prefix: str) -> int:
        """Remove every entry whose key starts with ``prefix``; returns how many."""
        with self._lock:
            gone = [k for k in self._data if k.startswith(prefix)]
            for k in gone:
                del self._data[k]
            return len(gone)

    def purge_where(self, predicate: Callable[[str], bool]) -> int:
        """Remove every entry whose key satisfies ``predicate``; returns how many."""
        with self._lock:
            gone = [k for k in self._data if predicate(k)]
            for k in gone:
                del self._data[k]
            return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    @property
    def hit_rate(self) -> float:
        with self._lock:
            total = self.hits + self.misses
            return self.hits / total if total else 0.0


def _libraries_behind(source: object) -> list[Library] | None:
    """The opened libraries behind a retriever, or a pipeline's source (None: none found)."""
    libs = libraries_of(source)
    if libs:
        return libs
    inner = getattr(source, "source", None) or getattr(source, "pipeline", None)
    return _libraries_behind(inner) if inner is not None else None


def scope_of(source: object) -> str:
    """``lib@snapshot[+lib@snapshot…]`` of the libraries behind a retriever (sorted); a
    pipeline's is its source's."""
    libs = _libraries_behind(source)
    if libs is None:
        return type(source).__name__
    return "+".join(sorted(f"{lib.library_id}@{lib.snapshot_id}" for lib in libs))


def generation_of(source: object) -> str:
    """The snapshots the source reads *now* and their :attr:`~ragspine_query.library.Library.generation`s,
    in scope order (``library@snapshot:generation``): it changes when a newer published snapshot
    withdraws or marks RESTRICTED a document of an open snapshot (issue 37), and when a retriever
    reopened its library's current snapshot (a pipeline's ``scope`` is fixed when it is built, so
    the snapshot read now is part of this half of the key), so a result cached before either is
    not served after it."""
    libs = _libraries_behind(source) or []
    pairs = sorted((f"{lib.library_id}@{lib.snapshot_id}", int(getattr(lib, "generation", 0))) for lib in libs)
    return "+".join(f"{name}:{g}" for name, g in pairs)


def library_prefix(library_id: str) -> str:
    """The key prefix of every entry whose scope starts with ``library_id`` (any snapshot)."""
    return f"{library_id}@"


def invalidate_library(cache: ScopedCache[Any], library_id: str) -> int:
    """Drop every result of ``library_id`` (any snapshot) from ``cache``; returns how many."""
    prefix = library_prefix(library_id)
    return cache.purge_where(lambda k: any(p.startswith(prefix) for p in k.split("\x1f", 1)[0].split("+")))


__all__ = ["ScopedCache", "generation_of", "invalidate_library", "library_prefix", "scope_of"]
