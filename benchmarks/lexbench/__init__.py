"""Helpers for the benchmark scripts: corpus generator, reference BM25, engines, report.

Importing this package pins the numeric libraries to one thread (single-thread
benchmarks), so the scripts import it before numpy.
"""

import os

SINGLE_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS")
for _var in SINGLE_THREAD_VARS:
    os.environ.setdefault(_var, "1")
