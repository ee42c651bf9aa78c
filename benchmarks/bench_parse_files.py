"""Parsing throughput of a library of many small files, and of many bad ones.

    python benchmarks/bench_parse_files.py                      # 100,000 small files, then 10,000 bad files
    python benchmarks/bench_parse_files.py --good 10000 --bad 2000 --json

Each case writes a fresh library folder (small Markdown documents with front matter;
bad files cycle through an empty file, broken front matter, a bad sensitivity, invalid
UTF-8 and a JSONL line with an over-long number) and times the ``documents`` step's work,
:func:`ragspine_index.steps.documents.load_documents` (walk, read, parse, validate,
collect errors and decide which failing files to withdraw), in this process. It reports
files/s and documents/s. Before issue #29 every failing file re-scanned every earlier
error (1k bad files 12.8 s, 4k 213 s); the bookkeeping is linear now.

Set ``RAGSPINE_INGEST_WORKERS=1`` to measure one core (the default uses a worker pool for
large JSONL files only; Markdown files are parsed in the step's process).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragspine_index.steps.documents import load_documents  # noqa: E402

BAD_KINDS = (
    ("empty.md", b""),
    ("front.md", b"---\ndoc_id: broken\ntitle Missing colon\n---\nBody.\n"),
    ("sens.md", b"---\nsensitivity: TOP-SECRET\n---\nClassified.\n"),
    ("utf8.md", b"Revenue \xff\xfe fell.\n"),
    ("num.jsonl", b'{"doc_id": "n", "text": "t", "n": ' + b"9" * 5000 + b"}\n"),
)


def make_library(root: Path, good: int, bad: int) -> Path:
    lib = root / "raw" / "bench"
    for i in range(good):
        d = lib / f"g{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"doc-{i:06d}.md").write_text(
            f"---\ndoc_id: doc-{i:06d}\ntitle: Note {i}\nsensitivity: PUBLIC\n---\n"
            f"Acme note {i}: revenue in region {i % 97} rose {i % 13} percent in quarter {i % 4 + 1}.\n",
            encoding="utf-8")
    for i in range(bad):
        d = lib / f"b{i // 1000:03d}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        name, data = BAD_KINDS[i % len(BAD_KINDS)]
        (d / f"bad-{i:06d}-{name}").write_bytes(data.replace(b"doc_id: broken", f"doc_id: broken-{i}".encode()))
    lib.mkdir(parents=True, exist_ok=True)
    return lib


def measure(good: int, bad: int, workdir: Path) -> dict:
    case = workdir / f"case-{good}-{bad}"
    shutil.rmtree(case, ignore_errors=True)
    t0 = time.perf_counter()
    lib = make_library(case, good, bad)
    made = time.perf_counter() - t0
    t0 = time.perf_counter()
    docs = load_documents(lib, "bench")
    took = time.perf_counter() - t0
    shutil.rmtree(case, ignore_errors=True)
    files = good + bad
    return {"good_files": good, "bad_files": bad, "documents": len(docs.documents), "errors": len(docs.errors),
            "withdrawn_paths": len(docs.withdraw_paths), "parse_s": round(took, 3), "write_s": round(made, 3),
            "files_per_s": round(files / took, 1) if took else None,
            "documents_per_s": round(len(docs.documents) / took, 1) if took else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--good", type=int, default=100_000, help="small good files (default 100,000)")
    ap.add_argument("--bad", type=int, default=10_000, help="bad files in the second case (default 10,000)")
    ap.add_argument("--workdir", default=None, help="where to write the libraries (default: a temp folder)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-parse-"))
    try:
        results = {"machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()[0]},
                   "small_files": measure(args.good, 0, workdir),
                   "bad_files": measure(0, args.bad, workdir)}
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for name in ("small_files", "bad_files"):
            r = results[name]
            print(f"{name}: {r['good_files']:,} good + {r['bad_files']:,} bad files -> {r['documents']:,} documents, "
                  f"{r['errors']:,} errors in {r['parse_s']:.2f} s ({r['files_per_s']:,} files/s, "
                  f"{r['documents_per_s']:,} documents/s)")
        print(f"(load average {results['machine']['load_avg']:.1f} on {results['machine']['cpus']} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
