"""Prometheus metrics of the service (prometheus_client): requests, latency, errors, snapshots.

With several workers (``--workers N``) the CLI sets ``PROMETHEUS_MULTIPROC_DIR`` and every
worker writes its samples there; ``/metrics`` then aggregates all workers
(:class:`prometheus_client.multiprocess.MultiProcessCollector`).
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: latency buckets (seconds): a warm BM25 query is milliseconds, a cold dense one up to seconds
BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    def __init__(self, *, multiprocess: bool = False) -> None:
        # several workers: prometheus_client writes every sample under PROMETHEUS_MULTIPROC_DIR (set by `ragspine serve`)
        self.multiprocess = multiprocess
        self.registry = CollectorRegistry() if not self.multiprocess else None
        reg = self.registry
        kw = {"registry": reg} if reg is not None else {}
        self.requests = Counter("ragspine_requests", "requests answered, by endpoint and HTTP status",
                                ["endpoint", "status"], **kw)  # type: ignore[arg-type]
        self.latency = Histogram("ragspine_request_seconds", "time to answer, by endpoint and retrieval mode",
                                 ["endpoint", "mode"], buckets=BUCKETS, **kw)  # type: ignore[arg-type]
        self.errors = Counter("ragspine_errors", "requests that failed, by endpoint and kind (access, request, timeout, internal)",
                              ["endpoint", "kind"], **kw)  # type: ignore[arg-type]
        gauge_kw = dict(kw, multiprocess_mode="livemax") if self.multiprocess else kw
        self.snapshot = Gauge("ragspine_library_snapshot", "1 for the snapshot each library serves now",
                              ["library", "snapshot"], **gauge_kw)  # type: ignore[arg-type]
        self.swaps = Counter("ragspine_snapshot_swaps", "times a library's served snapshot changed (publish, rollback, quarantine)",
                             ["library"], **kw)  # type: ignore[arg-type]

    def observe(self, endpoint: str, status: int, seconds: float, *, mode: str = "", error: str | None = None) -> None:
        self.requests.labels(endpoint, str(status)).inc()
        if error is not None:
            self.errors.labels(endpoint, error).inc()
        else:
            self.latency.labels(endpoint, mode).observe(seconds)

    def swapped(self, library: str, old: str | None, new: str) -> None:
        if old is not None:
            self.snapshot.labels(library, old).set(0)
            self.swaps.labels(library).inc()
        self.snapshot.labels(library, new).set(1)

    def render(self) -> tuple[bytes, str]:
        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        assert self.registry is not None
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
