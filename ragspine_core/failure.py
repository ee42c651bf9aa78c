"""Turn an exception nobody planned for into one located line for the command line.

The ``ragspine`` commands print :class:`~ragspine_core.errors.RagspineError` messages as
they are (each already says what happened and what to do). Anything else — a full disk,
a permission problem, a bug — must not reach the user as a traceback either:
:func:`describe_unexpected` says what it was, where it happened (the innermost frame of
RAGSpine's own code) and what to do, in one line.
"""

from __future__ import annotations

import errno
import os
import traceback

#: Packages whose frames locate an error (the innermost one is named).
_OWN_PACKAGES = ("ragspine_core", "ragspine_index", "ragspine_query", "ragspine_assets",
                 "ragspine_tools")

#: What to free when a disk is full (the places RAGSpine writes to).
DISK_FULL_HINT = ("free space there and run again (safe to delete: the caches under <data>/cache, old Dagster runs "
                  "under DAGSTER_HOME, and older snapshots: ingest with a lower --keep)")


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is a full disk or quota: ENOSPC / EDQUOT, or
    numpy's "N requested and M written" short write."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError):
            if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
                return True
            text = str(exc)
            if exc.errno is None and "requested and" in text and "written" in text:
                return True
        if "database or disk is full" in str(exc):  # sqlite3.OperationalError
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def where(exc: BaseException) -> str:
    """``package/module.py:line in function`` of the innermost frame of RAGSpine's code, or ""."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    for frame in reversed(frames):
        parts = frame.filename.replace(os.sep, "/").split("/")
        for i, part in enumerate(parts):
            if part in _OWN_PACKAGES:
                return f"{'/'.join(parts[i:])}:{frame.lineno} in {frame.name}"
    return ""


def describe_unexpected(exc: BaseException) -> str:
    """One line for an exception that is not a ``RagspineError``: what, where, what to do."""
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "…"
    if is_disk_full(exc):
        name = getattr(exc, "filename", None)
        located = where(exc)
        return (f"the disk is full{f' (writing {name})' if name else ''}{f' at {located}' if located else ''}: "
                f"{text or 'no space left on device'}; {DISK_FULL_HINT}")
    if isinstance(exc, MemoryError):
        return ("out of memory: the input or the index is larger than this machine's memory allows; "
                "use a machine with more memory, or split the library")
    if isinstance(exc, BrokenPipeError):
        return ("the other end of a pipe or connection closed it while RAGSpine was writing (broken pipe)"
                + (f" at {where(exc)}" if where(exc) else "") + "; run again once the reader is back")
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return (f"{exc.strerror or text} ({exc.filename}): check that the path exists and is readable/writable, "
                "then run again")
    if isinstance(exc, OSError):  # no file named: a connection, a device, the system
        located = where(exc)
        return (f"operating-system error {type(exc).__name__}: {exc.strerror or text}"
                + (f" at {located}" if located else "") + "; run again, and report it if it persists")
    located = where(exc)
    return (f"unexpected {type(exc).__name__}: {text or '(no message)'}"
            + (f" at {located}" if located else "")
            + "; if a published index may be damaged, check it with `ragspine snapshots <data>/artifacts/<library> --verify`"
              ", otherwise please report this with the command you ran")
