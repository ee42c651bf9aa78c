"""``ragspine bench --ingest LIBRARY`` (or ``--synthetic N``): what each indexing step costs.

A copy of the library folder (``data/raw/<library>``, with the ``glossary.toml`` of its data
root when there is one) goes through :func:`ragspine_assets.ingest.ingest_library` — every
Dagster asset, in process, as ``ragspine ingest`` runs them — into a fresh data root (no
embedding cache: every chunk is embedded, every summary written), on an ephemeral Dagster
instance. ``--synthetic N`` ingests N seeded synthetic documents (three passages each, the
corpus of ``ragspine bench --scale``) instead.

Per step (:mod:`ragspine_index.step_meter`): wall and CPU seconds (user + system of every
thread of the process, plus child processes that ended; the isolated converter process
lives on and is not counted), CPU ms per chunk and chunks per wall second (over the library's chunk count), and the process's peak RSS after the step
(the kernel's high-water mark) with how much the step raised it. The total line sums the
steps; ``summary_tree_share`` is the summary tree's share of the total CPU seconds.
Threads are the product's own (nothing is pinned); the machine's load average before and
after is reported because the figures move with it.

Usage::

    ragspine bench --ingest data/raw/sample [--embedding auto] [--json] [--workdir DIR]
    ragspine bench --ingest --synthetic 1000 [--embedding auto] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from ragspine_tools.bench import lexbench  # noqa: E402  (pins thread variables on import…)

lexbench.unpin_threads()  # …put back: an ingest is measured with the product's own threads

PASSAGES_PER_DOC = 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ragspine bench --ingest", description=__doc__.split("\n\n")[0])
    p.add_argument("library", nargs="?", default=None, help="a library folder, e.g. data/raw/sample")
    p.add_argument("--synthetic", type=int, default=0, metavar="N", help="ingest N synthetic documents instead")
    p.add_argument("--seed", type=int, default=13, help="seed of the synthetic corpus (default 13)")
    p.add_argument("--embedding", default="auto", help="embedding backend, as `ragspine ingest --embedding` (default auto)")
    p.add_argument("--workdir", default=None, help="where the copy is ingested (default: a temporary folder, removed)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def prepare(args: argparse.Namespace, data: Path) -> Path:
    """The raw library folder to ingest under ``data/raw/``."""
    if args.synthetic:
        from ragspine_tools.bench.lexbench.corpus import SyntheticConfig, synthetic_corpus

        n = args.synthetic
        raw = data / "raw" / "synthetic"
        raw.mkdir(parents=True)
        corpus = synthetic_corpus(SyntheticConfig(n_passages=n * PASSAGES_PER_DOC, n_queries=1, seed=args.seed))
        with open(raw / "docs.jsonl", "w", encoding="utf-8") as f:
            for i in range(n):
                body = "\n\n".join(corpus.texts[i * PASSAGES_PER_DOC:(i + 1) * PASSAGES_PER_DOC])
                f.write(json.dumps({"doc_id": f"doc-{i:07d}", "title": f"Synthetic document {i}", "text": body}) + "\n")
        return raw
    from ragspine_core.errors import ConfigError

    src = Path(args.library)
    if not src.is_dir():
        raise ConfigError(f"--ingest {args.library!r} is not a folder: pass a library folder such as data/raw/sample, "
                          "or --synthetic N")
    raw = data / "raw" / src.resolve().name
    shutil.copytree(src, raw, symlinks=True)
    glossary = src.resolve().parent.parent / "glossary.toml"
    if glossary.is_file():
        shutil.copy2(glossary, data / "glossary.toml")
    return raw


def run(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    import dagster as dg

    from ragspine_core.settings import Settings
    from ragspine_assets.ingest import ingest_library
    from ragspine_index.step_meter import metering

    raw = prepare(args, data)
    load_before = [round(x, 2) for x in os.getloadavg()]
    with metering() as costs, redirect_stdout(sys.stderr):
        t0 = time.perf_counter()
        summary = ingest_library(raw, embedding=args.embedding, instance=dg.DagsterInstance.ephemeral(),
                                 data_root=data, settings=Settings.from_env(), progress=False)
        wall = time.perf_counter() - t0
    meta = summary.metadata
    chunks = int(meta.get("chunks") or 0)
    steps: dict[str, dict[str, float | None]] = {}
    for c in costs:
        steps[c.name] = {
            "wall_s": round(c.wall_s, 2), "cpu_s": round(c.cpu_s, 2),
            "cpu_ms_per_chunk": round(1000 * c.cpu_s / chunks, 2) if chunks else None,
            "chunks_per_s": round(chunks / c.wall_s, 1) if chunks and c.wall_s > 0 else None,
            "peak_rss_mib": round(c.peak_rss_mib, 1), "rss_growth_mib": round(c.rss_growth_mib, 1),
        }
    step_wall, step_cpu = sum(c.wall_s for c in costs), sum(c.cpu_s for c in costs)
    tree = next((c for c in costs if c.name == "summary_tree"), None)
    return {
        "benchmark": "ingest", "library": summary.library_id, "embedding": args.embedding,
        "embedding_model": meta.get("embedding_model"), "documents": meta.get("documents"), "chunks": chunks,
        "cpu_count": os.cpu_count(), "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "steps": steps,
        "total": {"wall_s": round(step_wall, 2), "cpu_s": round(step_cpu, 2),
                  "cpu_ms_per_chunk": round(1000 * step_cpu / chunks, 2) if chunks else None,
                  "chunks_per_s": round(chunks / step_wall, 1) if chunks and step_wall > 0 else None,
                  "peak_rss_mib": round(max((c.peak_rss_mib for c in costs), default=0.0), 1)},
        "run_wall_s": round(wall, 2),  # the steps plus Dagster's own work between them
        "summary_tree_share": round(tree.cpu_s / step_cpu, 3) if tree is not None and step_cpu > 0 else None,
        "snapshot_id": summary.snapshot_id,
    }


def table(rep: dict[str, Any]) -> str:
    lines = [f"{rep['library']}: {rep['documents']} documents, {rep['chunks']} chunks, embedding {rep['embedding_model']} "
             f"(load average {rep['load_average_before'][0]} -> {rep['load_average_after'][0]}, {rep['cpu_count']} CPUs)",
             "| step | wall s | CPU s | CPU ms/chunk | chunks/s | peak RSS MiB (+step) |", "|---|---:|---:|---:|---:|---:|"]
    rows = list(rep["steps"].items()) + [("**total**", rep["total"])]
    for name, s in rows:
        growth = f" (+{s['rss_growth_mib']:g})" if "rss_growth_mib" in s else ""
        lines.append(f"| {name} | {s['wall_s']:g} | {s['cpu_s']:g} | {s['cpu_ms_per_chunk']} | {s['chunks_per_s']} | "
                     f"{s['peak_rss_mib']:g}{growth} |")
    if rep["summary_tree_share"] is not None:
        lines.append(f"summary tree: {100 * rep['summary_tree_share']:.1f}% of the ingest's CPU seconds")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.synthetic and not args.library:
        raise SystemExit("ragspine bench --ingest needs a library folder (e.g. data/raw/sample) or --synthetic N")
    if args.workdir:
        work = Path(args.workdir)
        if work.exists() and any(work.iterdir()):
            raise SystemExit(f"--workdir {work} is not empty; pass an empty or new folder")
        rep = run(args, work / "data")
    else:
        with tempfile.TemporaryDirectory(prefix="ragspine-bench-ingest-") as tmp:
            rep = run(args, Path(tmp) / "data")
    print(json.dumps(rep, indent=2) if args.json else table(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
