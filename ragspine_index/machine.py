"""The settings of the machine a step runs on, set once per process by an edge.

Two settings act where the work runs, not where a run was launched: the worker
processes a step's parsing, chunking and BM25 counting use (``Settings.ingest_workers``,
``RAGSPINE_INGEST_WORKERS``; :mod:`ragspine_index.workers`) and the Tesseract languages
OCR reads with (``Settings.ocr_langs``, ``RAGSPINE_OCR_LANGS``;
:mod:`ragspine_index.converters.ocr`). They are deep in the converters and steps, so
they are not threaded through every call: the edge that loads this process's
configuration — the Dagster code location's ``build_definitions`` (which every step
process of the multiprocess executor runs, so a step on a Dagster or Celery worker gets
that worker's own values), the ``ragspine`` CLI — calls :func:`configure_machine` with its
:class:`~ragspine_core.settings.Settings`. Until one does, the defaults hold. Nothing here
reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragspine_core.settings import Settings


@dataclass(frozen=True, slots=True)
class MachineSettings:
    """``ingest_workers`` (0 = one per CPU up to 8, 1 = serial) and ``ocr_langs`` (empty:
    eng and chi_sim, those installed)."""

    ingest_workers: int = 0
    ocr_langs: str = ""


_current = MachineSettings()


def configure_machine(settings: Settings) -> MachineSettings:
    """Set this process's machine settings from ``settings`` (built at an edge); returns them."""
    return adopt_machine(MachineSettings(ingest_workers=settings.ingest_workers, ocr_langs=settings.ocr_langs.strip()))


def adopt_machine(machine: MachineSettings) -> MachineSettings:
    """Set this process's machine settings to ``machine`` (a converter child process takes
    its parent's this way); returns them."""
    global _current
    _current = machine
    return _current


def machine_settings() -> MachineSettings:
    """This process's machine settings (the defaults until an edge configured them)."""
    return _current


__all__ = ["MachineSettings", "adopt_machine", "configure_machine", "machine_settings"]
