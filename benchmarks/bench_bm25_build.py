"""Peak memory and time of the ``bm25_index`` step's build at N synthetic chunks.

Builds ``N`` seeded synthetic passages (:mod:`lexbench.corpus`), three chunks to a
document, and calls :func:`ragspine_index.steps.bm25_index.build_library_bm25` (what the
asset runs: chunk, document and blended indexes) with the English analyzer, in this
process. Prints one JSON line: seconds, CPU seconds, RSS before, peak RSS (``ru_maxrss``,
so run one size per process) and its growth, postings, blended index size.

Usage::

    python benchmarks/bench_bm25_build.py 200000
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from lexbench.corpus import SyntheticConfig, synthetic_corpus  # noqa: E402

from ragspine_index.steps.bm25_index import build_library_bm25  # noqa: E402
from ragspine_core import schema  # noqa: E402
from ragspine_core.text.tokenize import make_analyzer  # noqa: E402

CHUNKS_PER_DOC = 3


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 100_000
    texts = list(synthetic_corpus(SyntheticConfig(n_passages=n, n_queries=0, seed=7)).texts)
    row_doc = [i // CHUNKS_PER_DOC for i in range(n)]
    n_docs = row_doc[-1] + 1
    doc_texts = [f"Synthetic document {d}\n" + "\n\n".join(texts[d * CHUNKS_PER_DOC:(d + 1) * CHUNKS_PER_DOC])
                 for d in range(n_docs)]
    before = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as d:
        stats = build_library_bm25(Path(d), chunk_texts=texts, chunk_doc_rows=row_doc,
                                   doc_ids=[f"d{i}" for i in range(n_docs)], doc_texts=doc_texts,
                                   analyzer=make_analyzer("english"))
        blend_mb = sum(f.stat().st_size for f in (Path(d) / schema.BM25_BLEND_DIR).iterdir()) / 1e6
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB on Linux, to MB like _rss_mb
    print(json.dumps({"chunks": n, "documents": n_docs, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
                      "rss_before_mb": round(before), "peak_rss_mb": round(peak), "growth_mb": round(peak - before),
                      "postings": stats["postings"], "blend_mb": round(blend_mb, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
