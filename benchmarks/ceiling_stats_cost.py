"""What per-ceiling BM25 statistics (``bm25_public``, docs/serving.md) cost.

* ``query``: warm in-process p50 of the service's pipelines (``SearchService``) for a PUBLIC
  and an INTERNAL caller over the first ``--queries`` judged questions of the library, in
  ``--rounds`` alternating rounds (alternating order), modes ``bm25`` and ``auto``; every
  question is answered once by both callers first (query vectors cached alike);
* ``open``: loading ``bm25_public`` (once per snapshot, when a PUBLIC pipeline is built);
* ``build``: :func:`ragspine_index.steps.bm25_index.build_library_bm25` over the library's
  chunk texts repeated ``--repeat`` times, with and without the PUBLIC statistics (median of 3).

Usage::

    python benchmarks/ceiling_stats_cost.py [data/artifacts/sample] [--queries 40] [--rounds 4] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path


def query_cost(library: str, queries: list[str], rounds: int) -> dict[str, dict[str, float]]:
    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import Caller
    from ragspine_tools.serve.service import SearchService

    svc = SearchService([library], settings=Settings.from_env({}))
    out: dict[str, dict[str, float]] = {}
    for mode in ("bm25", "auto"):
        callers = {c: Caller("bench", frozenset({"*"}), c) for c in ("INTERNAL", "PUBLIC")}
        for c in callers.values():
            for q in queries:
                svc.search(c, q, mode=mode, top_k=5)
        times: dict[str, list[float]] = {c: [] for c in callers}
        for r in range(rounds):
            for name in (("INTERNAL", "PUBLIC") if r % 2 == 0 else ("PUBLIC", "INTERNAL")):
                for q in queries:
                    t0 = time.perf_counter()
                    svc.search(callers[name], q, mode=mode, top_k=5)
                    times[name].append((time.perf_counter() - t0) * 1000)
        out[mode] = {k: round(statistics.median(v), 2) for k, v in times.items()}
    return out


def build_cost(library: str, repeat: int) -> dict[str, float]:
    from ragspine_index.steps.bm25_index import build_library_bm25
    from ragspine_query.library import LexicalStats, open_library

    lib = open_library(library)
    rows = lib.execute_read("SELECT text, doc_id, sensitivity FROM narrative_chunk ORDER BY row_idx")
    docs = sorted({r[1] for r in rows})
    row_of = {d: i for i, d in enumerate(docs)}
    doc_sens = {r[1]: str(r[2]).upper() for r in rows}
    texts = [r[0] for r in rows] * repeat
    sens = [str(r[2]).upper() for r in rows] * repeat
    chunk_doc = [k * len(docs) + row_of[r[1]] for k in range(repeat) for r in rows]
    doc_ids = [f"{k}-{d}" for k in range(repeat) for d in docs]
    doc_texts = ["\n".join(r[0] for r in rows if r[1] == d) for d in docs] * repeat
    dsens = [doc_sens[d] for d in docs] * repeat
    common = dict(chunk_texts=texts, chunk_doc_rows=chunk_doc, doc_ids=doc_ids, doc_texts=doc_texts, analyzer=lib.analyzer,
                  open_chunks=[s != "RESTRICTED" for s in sens], open_docs=[s != "RESTRICTED" for s in dsens])
    public = dict(public_chunks=[s == "PUBLIC" for s in sens], public_docs=[s == "PUBLIC" for s in dsens])
    out: dict[str, float] = {"chunks": len(texts)}
    for label, extra in (("open_stats_s", {}), ("open_and_public_stats_s", public)):
        ts = []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                build_library_bm25(Path(d), **common, **extra)  # type: ignore[arg-type]
                ts.append(time.perf_counter() - t0)
        out[label] = round(statistics.median(ts), 2)
    d = lib.artifact_path("bm25_public")
    if d is not None:
        t0 = time.perf_counter()
        LexicalStats.load(d, lib)
        out["open_bm25_public_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("library", nargs="?", default="data/artifacts/sample")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    lib_id = Path(args.library).name
    qfile = Path(args.library).parents[1] / "eval" / lib_id / "queries.jsonl"
    queries = [json.loads(line)["text"] for line in qfile.read_text(encoding="utf-8").splitlines() if line.strip()][: args.queries]
    print(json.dumps({"query_p50_ms": query_cost(args.library, queries, args.rounds),
                      "build": build_cost(args.library, args.repeat)}, indent=2))


if __name__ == "__main__":
    main()
