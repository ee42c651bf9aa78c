"""Progress of long work: counts, rate and ETA, on a terminal or in a step's log.

``ragspine eval`` and ``ragspine ingest`` draw a live line on stderr only when stderr is a
terminal (never in ``--json`` output or a CI log, which are not terminals); the Dagster
steps report structured counts (``indexing.step_api.Progress``) that their run logs show
with the same rate and ETA (``assets/_util.step_log``).
"""

from __future__ import annotations

import time
from typing import Callable, TextIO


def wants_terminal_progress(stream: TextIO, *, quiet: bool = False) -> bool:
    """Whether to draw a live progress line on ``stream``: only a terminal, never when quiet."""
    if quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def format_duration(seconds: float) -> str:
    """``0:07``, ``3:05``, ``1:02:03``."""
    s = max(0, int(round(seconds)))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class RateMeter:
    """Counts against a clock: ``describe(done, total)`` → ``"64/243 (52.1/s, ETA 0:03)"``."""

    __slots__ = ("_t0", "_clock", "unit")

    def __init__(self, unit: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._t0 = clock()
        self.unit = unit

    def elapsed(self) -> float:
        return self._clock() - self._t0

    def describe(self, done: int, total: int, *, unit: str | None = None) -> str:
        """``"done/total unit (rate/s, ETA m:ss)"``; ``unit`` overrides the meter's."""
        elapsed = self.elapsed()
        unit = self.unit if unit is None else unit
        unit = f" {unit}" if unit else ""
        if done <= 0 or elapsed <= 0:
            return f"{done}/{total}{unit}"
        rate = done / elapsed
        tail = f"ETA {format_duration((total - done) / rate)}" if done < total else f"in {format_duration(elapsed)}"
        return f"{done}/{total}{unit} ({rate:.1f}/s, {tail})"


class TerminalProgress:
    """A live ``label done/total (rate, ETA)`` line on a terminal, redrawn at most 5× a second.

    Disabled (every call a no-op) unless ``enabled``; use :func:`wants_terminal_progress`.
    """

    def __init__(self, label: str, total: int, stream: TextIO, *, enabled: bool, unit: str = "",
                 min_interval_s: float = 0.2) -> None:
        self.label, self.total, self.stream, self.enabled = label, total, stream, enabled
        self.meter = RateMeter(unit)
        self._last = -1.0
        self._min = min_interval_s
        self._width = 0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = self.meter.elapsed()
        if done < self.total and now - self._last < self._min:
            return
        self._last = now
        line = f"{self.label} {self.meter.describe(done, self.total)}"
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        """End the line (the last drawn state stays visible)."""
        if self.enabled and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
