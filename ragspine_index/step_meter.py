"""What each indexing step costs: wall and CPU seconds, and the memory high-water mark.

``ragspine bench --ingest`` opens a :func:`metering` block around a real ingest; every step
run inside it (the Dagster assets through ``run_asset_step``, :func:`~ragspine_index.pipeline.build_library`
through ``run_step``) is timed by :func:`measure_step`. Outside such a block
:func:`measure_step` only checks one module variable (nothing is measured or kept).

CPU seconds are the process's user + system time (every thread: onnxruntime's and BLAS's
pools included) plus that of child processes that ended during the step, from
``getrusage``. A child still running when the step ends (the isolated converter process
lives on) is not counted: conversion CPU is left out. Memory is the kernel's high-water
mark of the process's resident set (``ru_maxrss``): after a step, the peak so far; ``rss_growth_mib`` is how much the step
raised it (0 when an earlier step had already reached more).
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True, slots=True)
class StepCost:
    """One step's measured cost."""

    name: str
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    rss_growth_mib: float


def _maxrss_mib() -> float:
    raw = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return raw / 2**20 if sys.platform == "darwin" else raw / 1024.0  # bytes on macOS, KiB on Linux


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


_LOCK = threading.Lock()
_ACTIVE: list[StepCost] | None = None


@contextmanager
def metering() -> Iterator[list[StepCost]]:
    """Record the cost of every step run in this process until the block ends (the list
    fills as steps finish, in order). Blocks do not nest."""
    global _ACTIVE
    costs: list[StepCost] = []
    with _LOCK:
        if _ACTIVE is not None:
            raise RuntimeError("step metering is already on in this process")
        _ACTIVE = costs
    try:
        yield costs
    finally:
        with _LOCK:
            _ACTIVE = None


@contextmanager
def measure_step(name: str) -> Iterator[None]:
    """Time the step ``name`` when a :func:`metering` block is open (else do nothing)."""
    costs = _ACTIVE
    if costs is None:
        yield
        return
    rss0, cpu0, t0 = _maxrss_mib(), _cpu_s(), time.perf_counter()
    try:
        yield
    finally:
        wall, cpu, rss = time.perf_counter() - t0, _cpu_s() - cpu0, _maxrss_mib()
        costs.append(StepCost(name, wall, cpu, rss, max(0.0, rss - rss0)))


__all__ = ["StepCost", "measure_step", "metering"]
