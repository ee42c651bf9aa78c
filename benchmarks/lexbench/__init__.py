"""Helpers for ``bench_lexical.py``: corpus generator, reference BM25, engines, report."""
