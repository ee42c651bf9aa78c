"""The benchmarks (``ragspine bench``; ``python -m ragspine_tools.bench.<name>``).

Each module is a command with its own ``main(argv)``: ``bench_lexical`` (BM25 beside bm25s
and tantivy), ``bench_hybrid``, ``bench_scale``, ``bench_embedding``, ``bench_concurrency``,
``bench_ann``, ``bench_bm25_build``, ``bench_convert``, ``bench_parse_files``, plus the
evaluation helpers ``tune_fusion``, ``split_by_language``, ``graph_hotpot``, ``tree_bench``
and ``behaviour_fingerprint``; :mod:`.lexbench` holds their shared corpus, engines and
report code. They read the sample library, the evaluation sets and the shared datasets of a
source checkout (:func:`checkout_root`) and write reports to ``benchmarks/reports/`` there.
"""

from __future__ import annotations

from pathlib import Path


def checkout_root() -> Path:
    """The source checkout the benchmarks read from and write reports to: the current
    directory when it holds the sample library (``data/raw/sample``), else the checkout
    this package sits in (an editable install), else the current directory."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / "data" / "raw" / "sample").is_dir():
            return candidate
    return Path.cwd()


#: where the benchmarks write their reports (``--out`` overrides it)
REPORTS_DIR = checkout_root() / "benchmarks" / "reports"
