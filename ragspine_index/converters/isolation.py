"""Convert files in a child process with a hard time limit and a memory limit.

The converters check their time budget between pages, blocks, slides and rows; a single
page that loops inside a parser library, a decompression that eats memory, or a crash in
native code (lxml) would still stop or kill the build. :class:`ConverterProcess` runs
them in one long-lived child process (``forkserver``, as ``workers.py``: never ``fork``
inside Dagster) with ``RLIMIT_AS`` set to :attr:`~.base.ConversionLimits.memory_bytes`.
A file that passes :attr:`~.base.ConversionLimits.hard_seconds` has its child killed and
becomes one located error; the next file gets a fresh child. Where no child can start (a
daemonic process; ``RAGSPINE_INGEST_WORKERS=1`` is *not* a reason: isolation is about
safety, not speed) conversion runs in-process with the cooperative limits only. The child
starts without importing the caller's ``__main__`` (:func:`_without_main`): a calling
script without an ``if __name__ == "__main__"`` guard is never run twice.
"""

from __future__ import annotations

import multiprocessing
import sys
import types
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from ragspine_index.converters.converted import ConversionError, ConversionLimits, Converted
from ragspine_index.machine import MachineSettings, machine_settings


def _serve(conn, limits: ConversionLimits, machine: MachineSettings | None = None) -> None:
    """The child: take the parent's machine settings (OCR languages), apply the memory
    limit, then convert what the parent sends until EOF."""
    if machine is not None:
        from ragspine_index import machine as machine_module

        machine_module.adopt_machine(machine)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not on this platform
        pass
    from ragspine_index.converters.converter_registry import convert_bytes

    while True:
        try:
            data, suffix = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", convert_bytes(data, suffix, limits)))
        except ConversionError as exc:
            conn.send(("error", (exc.problem, exc.hint, exc.field)))
        except MemoryError:
            conn.send(("error", ("ran out of memory while converting", "split the file", "limits")))


class ConverterProcess:
    """One child process that converts files one at a time (see the module docstring)."""

    def __init__(self, limits: ConversionLimits) -> None:
        self.limits = limits
        self._proc: Any = None
        self._conn: Any = None
        self._finalizer: Any = None

    @staticmethod
    def available() -> bool:
        """Whether a child process can be started here (not from a daemonic process; the
        caller's ``__main__`` is never needed, see :func:`_without_main`)."""
        from ragspine_index.workers import daemonic_process

        return not daemonic_process()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("forkserver")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.limits, machine_settings()), daemon=True, name="ragspine-convert")
        with _without_main():
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        self._finalizer = weakref.finalize(self, _stop, proc, parent)

    def convert(self, data: bytes, suffix: str) -> Converted:
        """Convert in the child; raises :class:`ConversionError` (also for a timeout or a
        child that died)."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        try:
            self._conn.send((data, suffix))
            ready = self._conn.poll(self.limits.hard_seconds)
            if ready:
                kind, payload = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            ready, kind = True, "died"
        if not ready:
            self.close()
            raise ConversionError(f"conversion did not finish within {self.limits.hard_seconds:g} s and was stopped",
                                  "split the file or re-export it; a normal document converts in seconds",
                                  field="limits")
        if kind == "died":
            # no exit code in the message: read before the child is reaped it is None, after
            # it 1 — and the message lands in the manifest, whose bytes make the snapshot id
            self.close()
            raise ConversionError(f"the converter process ended while reading it (out of memory "
                                  f"past {self.limits.memory_bytes // (1 << 20):,} MiB, or a crash in the parser)",
                                  "re-export the file; if it is large, split it", field="limits")
        if kind == "error":
            problem, hint, field = payload
            raise ConversionError(problem, hint, field=field)
        return payload

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._conn = self._finalizer = None


@contextmanager
def _without_main() -> Iterator[None]:
    """The caller's ``__main__`` hidden while the child starts. ``spawn`` and ``forkserver``
    otherwise import the calling script in the child (and the forkserver) to rebuild its
    ``__main__``, running a script that lacks an ``if __name__ == "__main__"`` guard again;
    the child runs :func:`_serve` only, which needs nothing from it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _stop(proc, conn) -> None:
    try:
        conn.close()
    except OSError:  # pragma: no cover
        pass
    proc.join(timeout=2)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5)
