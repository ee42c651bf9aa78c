"""What verifying a snapshot costs a reader: open time and first-query time at N chunks.

Builds (or reuses, ``--reuse``) a synthetic library of about ``--chunks`` chunks through
:func:`ragspine_index.pipeline.build_library` (the assets' steps; seeded synthetic
passages of ``ragspine bench --scale``; by default no embedding, no summary tree: the large
files are the BM25 arrays, the relation graph and chunks.sqlite; verification cost is per
byte), then measures, each in a fresh Python process, the median of
``--rounds`` runs (warm page cache: the figures are CPU cost, not disk reads):

* ``open``: :func:`ragspine_query.open_library` (every file's size, sha256 of the files up
  to 8 MiB within 64 MiB, array bounds);
* ``background``: the pass over what open did not hash (every 4 MiB block of the large
  files), on its own thread, measured from the end of open until it finishes;
* ``first_query``: open → the first ``HybridRetriever.search`` returns (it waits for the
  pass), and the same with the pass switched off, i.e. what the pass adds;
* ``verify_full``: ``ragspine snapshots --verify`` (every file hashed, single thread).

With ``--embedding deterministic`` the library carries vectors (the 64-d test backend, the
real embedding step and exact dense scan; no ANN index), and ``--flip`` adds one case: one
bit flipped in the middle of ``embeddings/vectors.npy`` (in place, flipped back after), a
fresh reader's first ``hybrid`` query must fail with a located ``IndexCorruptError``.

Usage::

    python benchmarks/verify_cost.py --chunks 100000 --workdir /tmp/verify100k
    python benchmarks/verify_cost.py --chunks 100000 --workdir /tmp/verify100k --reuse
    python benchmarks/verify_cost.py --chunks 1000000 --workdir /tmp/v1m --embedding deterministic --flip
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
from ragspine_core import integrity
if sys.argv[2] == "off":
    integrity.verify_blocks = lambda *a, **k: {"files": 0, "blocks": 0, "bytes": 0}
from ragspine_query import HybridRetriever, open_library
t_import = time.perf_counter()
lib = open_library(sys.argv[1])
t_open = time.perf_counter()
lib.ensure_verified()
t_bg = time.perf_counter()
r = HybridRetriever(lib)
hits = r.search("synthetic clause revenue", top_k=10)
t_q = time.perf_counter()
print(json.dumps({"open_s": t_open - t_import, "background_s": t_bg - t_open, "first_query_s": t_q - t_import,
                  "stats": lib.verify_stats, "hits": len(hits)}))
'''


def build(workdir: Path, chunks: int, embedding: str) -> Path:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_tools.bench.bench_scale import write_library

    raw = workdir / "raw" / "synthetic"
    # no ANN index: at 1M vectors it is a ~27-minute single-thread build, and what is measured
    # here is the hashing of the files (the exact scan reads the same vectors file)
    write_library(raw, math.ceil(chunks / 3.26), 20240601, 'summarizer = "none"\nann_min_vectors = 0\n')
    paths = LibraryPaths("synthetic", raw, workdir / "artifacts" / "synthetic")
    t0 = time.perf_counter()
    build_library(paths, embedding=embedding, cache_path=workdir / "cache" / "embeddings.sqlite")
    print(f"built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return paths.root


FLIP_CHILD = r'''
import json, sys
from ragspine_query import HybridRetriever, RetrievalConfig, open_library
try:
    lib = open_library(sys.argv[1])
    hits = HybridRetriever(lib, config=RetrievalConfig(mode=sys.argv[2])).search("synthetic clause revenue", top_k=10)
    print(json.dumps({"outcome": "answered", "hits": len(hits)}))
except Exception as exc:
    print(json.dumps({"outcome": "error", "type": type(exc).__name__, "message": " ".join(str(exc).split())[:300]}))
'''


def flip_case(root: Path, env: dict[str, str]) -> dict:
    """One bit flipped in the middle of the largest vectors file (in place, then flipped back):
    does a fresh reader's first hybrid query fail with a located error instead of ranking?"""
    snap = (root / "current").resolve()
    manifest = json.loads((snap / "manifest.json").read_text())
    vectors = [rel for rel in manifest["artifacts"] if rel.endswith(".npy") and "vector" in rel]
    if not vectors:
        return {"skipped": "the library has no vectors file"}
    rel = max(vectors, key=lambda r: manifest["artifacts"][r]["bytes"])
    path = snap / rel
    at = path.stat().st_size // 2
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([byte ^ 0x10]))
    try:
        t0 = time.perf_counter()
        got = json.loads(subprocess.run([sys.executable, "-c", FLIP_CHILD, str(root), "hybrid"], capture_output=True,
                                        text=True, check=True, timeout=1800, env=env).stdout)
        got["seconds"] = round(time.perf_counter() - t0, 2)
    finally:
        with open(path, "r+b") as fh:
            fh.seek(at)
            fh.write(bytes([byte]))
    subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "snapshots", str(root), "--verify"], check=True,
                   capture_output=True, timeout=1800, env=env)  # restored: the library verifies again
    return {"file": rel, "file_bytes": manifest["artifacts"][rel]["bytes"], "byte": at, **got}


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path])}


def measure(root: Path, rounds: int) -> dict:
    env = child_env()
    out: dict = {}
    for mode in ("on", "off"):
        runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD, str(root), mode], capture_output=True, text=True,
                                          check=True, timeout=1800, env=env).stdout) for _ in range(rounds)]
        out[mode] = {k: statistics.median(r[k] for r in runs) for k in ("open_s", "background_s", "first_query_s")}
        out[mode]["stats"] = runs[-1]["stats"]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "snapshots", str(root), "--verify"], check=True,
                   capture_output=True, timeout=1800, env=env)
    out["verify_full_s"] = time.perf_counter() - t0
    snap = (root / "current").resolve()
    manifest = json.loads((snap / "manifest.json").read_text())
    out["chunks"] = manifest["counts"]["chunks"]
    out["snapshot_bytes"] = sum(a["bytes"] for a in manifest["artifacts"].values())
    out["large_files"] = {rel: a["bytes"] for rel, a in manifest["artifacts"].items() if "blocks" in a}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--reuse", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--embedding", default="none",
                   help="embedding backend of the build (default none; deterministic: the 64-d test backend)")
    p.add_argument("--flip", action="store_true",
                   help="also flip one bit in the middle of the vectors file and run a fresh reader's hybrid query")
    args = p.parse_args()
    root = args.workdir / "artifacts" / "synthetic"
    if not args.reuse:
        root = build(args.workdir, args.chunks, args.embedding)
    out = measure(root, args.rounds)
    if args.flip:
        out["flip"] = flip_case(root, child_env())
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
