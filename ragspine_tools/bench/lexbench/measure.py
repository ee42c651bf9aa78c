"""Measuring helpers: machine description, peak memory, sizes on disk, latency stats."""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Iterator

import numpy as np

MB = 1024 * 1024


def machine_description() -> dict:
    """CPU model, core count, RAM, OS, Python and library versions."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import psutil

        ram_gb = round(psutil.virtual_memory().total / 1024**3, 1)
        physical = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a bench dependency
        ram_gb, physical = None, None
    versions: dict[str, str | None] = {}
    for dist in ("numpy", "bm25s", "numba", "tantivy", "psutil", "dagster"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "physical_cores": physical,
        "ram_gb": ram_gb,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "versions": versions,
    }


def dir_size_mb(path: str | Path) -> float:
    """Bytes of every regular file below ``path``, in MiB."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                total += os.path.getsize(p)
    return total / MB


def latency_stats(seconds: list[float]) -> dict:
    """QPS (queries / summed time) and p50/p99 latency in milliseconds."""
    arr = np.asarray(seconds, dtype=np.float64)
    if arr.size == 0:
        return {"qps": None, "p50_ms": None, "p99_ms": None, "n": 0}
    return {
        "qps": round(float(arr.size / arr.sum()), 1),
        "p50_ms": round(float(np.percentile(arr, 50)) * 1e3, 4),
        "p99_ms": round(float(np.percentile(arr, 99)) * 1e3, 4),
        "n": int(arr.size),
    }


def _rss() -> int:
    try:
        import psutil
    except ImportError:  # fall back to /proc (Linux) when the bench extra is absent
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


def _reset_hwm() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) for this process, if allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _hwm() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class PeakMemory:
    """Result of :func:`peak_rss`: the growth of resident memory over a block, in MiB."""

    delta_mb: float = 0.0
    method: str = ""
    _samples: list[int] = field(default_factory=list, repr=False)


@contextmanager
def peak_rss() -> Iterator[PeakMemory]:
    """Peak RSS above the starting RSS while the block runs (MiB).

    Uses the kernel's high-water mark after resetting it (exact, includes memory held by
    Rust or numba code); falls back to a psutil sampling thread where /proc is read-only.
    Memory that an earlier phase freed but the allocator kept is reused without growing
    RSS, so this is a lower bound; build memory is also reported by ``tracemalloc``.
    """
    result = PeakMemory()
    base = _rss()
    if _reset_hwm() and _hwm() is not None:
        result.method = "VmHWM (kernel peak RSS, reset before the phase)"
        yield result
        result.delta_mb = max(0, (_hwm() or base) - base) / MB
        return
    result.method = "psutil RSS sampled every 2 ms"
    stop = threading.Event()
    peak = [base]

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        peak[0] = max(peak[0], _rss())
        result.delta_mb = (peak[0] - base) / MB


@contextmanager
def traced_peak() -> Iterator[list[float]]:
    """Peak of Python + numpy allocations (``tracemalloc``) inside the block, MiB."""
    out: list[float] = [0.0]
    tracemalloc.start()
    try:
        yield out
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out[0] = peak / MB
