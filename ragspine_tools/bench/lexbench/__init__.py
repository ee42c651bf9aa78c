"""Helpers for the benchmark scripts: corpus generator, reference BM25, engines, report.

Importing this package pins the numeric libraries to one thread (single-thread
benchmarks), so the scripts import it before numpy; :func:`unpin_threads` undoes that
for the scripts that measure the library's own thread settings.
"""

import os

SINGLE_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS")
#: the variables as they were before this package pinned them (None: unset)
_BEFORE = {_var: os.environ.get(_var) for _var in SINGLE_THREAD_VARS}
for _var in SINGLE_THREAD_VARS:
    os.environ.setdefault(_var, "1")


def unpin_threads() -> None:
    """Put the thread variables back as they were before this package was imported.

    For the scripts that measure the library's (or a backend's) own thread settings
    rather than single-thread figures: call it right after ``import lexbench`` and
    before numpy or any numeric library is imported (they read the variables once).
    """
    for var, value in _BEFORE.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
