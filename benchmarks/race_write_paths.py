"""Race two write paths of one library, with a file edited mid-run; count mixed snapshots.

Each trial starts two writers of the same library at once — any pair of ``ingest``
(``ragspine ingest``), ``materialize`` (``dagster asset materialize --select '*'``, its
own instance) and ``build`` (``build_library``) — edits one source file while they run,
waits for both, and then checks every snapshot published during the trial:

* it passes the full check (``verify_snapshot``);
* it is of one chunk-store state: every document of its own ``chunks.sqlite`` is in its
  manifest and the manifest's chunk count is its row count, BM25 has one row per chunk
  row, and its summary-tree leaves are exactly its open chunk rows.

A writer refused because the other held the library ("is being written by run", "another
ingest … is running") is the expected outcome of a race, not a failure. Prints one line
per trial and the tally; exit 1 on any mixed snapshot.

Usage::

    python benchmarks/race_write_paths.py --workdir /tmp/race --trials 20
    python benchmarks/race_write_paths.py --workdir /tmp/race --trials 6 --pairs ingest:materialize
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
PATHS = ("ingest", "materialize", "build")


def env(home: Path, data: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")}
    out.update(PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]), DAGSTER_HOME=str(home), RAGSPINE_DATA_ROOT=str(data),
               RAGSPINE_EMBEDDING="none")
    return out


def writer(kind: str, data: Path, home: Path) -> subprocess.Popen:
    raw = data / "raw" / "lib"
    if kind == "ingest":
        cmd = [sys.executable, "-m", "ragspine_tools.cli", "ingest", str(raw), "--embedding", "none"]
    elif kind == "materialize":
        cmd = [str(Path(sys.executable).with_name("dagster")), "asset", "materialize", "-m", "ragspine_assets.definitions",
               "--select", "*", "--partition", "lib"]
    else:
        code = ("import pathlib,sys; from ragspine_index.artifacts import LibraryPaths; "
                "from ragspine_index.pipeline import build_library; d=pathlib.Path(sys.argv[1]); "
                "build_library(LibraryPaths('lib', d/'raw'/'lib', d/'artifacts'/'lib'), embedding='none', "
                "cache_path=d/'cache'/'embeddings.sqlite')")
        cmd = [sys.executable, "-c", code, str(data)]
    if not (home / "dagster.yaml").is_file():
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
        if kind == "materialize":  # the library's partition, as the sensor adds it
            subprocess.run([sys.executable, "-c", "import dagster as dg; from ragspine_assets.partitions import "
                            "LIBRARIES_PARTITION as P; dg.DagsterInstance.get().add_dynamic_partitions(P, ['lib'])"],
                           check=True, timeout=300, env=env(home, data))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(home, data),
                            cwd=str(data.parent))


def mixed(snapshot: Path) -> str | None:
    """Why ``snapshot`` is not of one chunk-store state (None: it is)."""
    from ragspine_core.integrity import verify_snapshot

    try:
        verify_snapshot(snapshot, full=True)
    except Exception as exc:  # noqa: BLE001 - any failure of the check is reported
        return f"verify: {exc}"
    manifest = json.loads((snapshot / "manifest.json").read_text())
    conn = sqlite3.connect(f"file:{snapshot / 'chunks.sqlite'}?mode=ro", uri=True)
    try:
        docs = {r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM narrative_chunk")}
        n_rows = conn.execute("SELECT COUNT(*) FROM narrative_chunk").fetchone()[0]
        open_rows = [r[0] for r in conn.execute(
            "SELECT row_idx FROM narrative_chunk WHERE upper(trim(sensitivity)) != 'RESTRICTED' ORDER BY row_idx")]
    finally:
        conn.close()
    if not docs <= set(manifest["documents"]) or manifest["counts"]["chunks"] != n_rows:
        return (f"manifest (documents, {manifest['counts']['chunks']} chunks) and chunks.sqlite ({n_rows} rows, "
                f"{sorted(docs - set(manifest['documents']))[:3]}) are of different states")
    if len(np.load(snapshot / "bm25" / "row_doc.npy")) != n_rows:
        return "bm25 rows differ from chunk rows"
    leaf_rows = snapshot / "summary_tree" / "leaf_rows.npy"
    if leaf_rows.is_file() and np.load(leaf_rows).tolist() != open_rows:
        return "summary-tree leaves are not the open chunk rows"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--pairs", default="", help="comma list of a:b (default: every pair of ingest, materialize, build)")
    p.add_argument("--edit-after", type=float, default=2.0, help="seconds after the start to edit a file")
    args = p.parse_args()
    pairs = [tuple(x.split(":")) for x in args.pairs.split(",")] if args.pairs else \
        list(itertools.combinations_with_replacement(PATHS, 2))
    data = args.workdir / "data"
    shutil.rmtree(args.workdir, ignore_errors=True)
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for name in sorted((REPO / "data" / "raw" / "sample").glob("*.md")):
        shutil.copy2(name, raw / name.name)
    sys.path.insert(0, str(REPO))
    tally = {"trials": 0, "published": 0, "refused": 0, "mixed": 0, "failed": 0}
    for trial in range(args.trials):
        a, b = pairs[trial % len(pairs)]
        before = set((data / "artifacts" / "lib" / "snapshots").glob("[!.]*"))
        procs = [writer(a, data, args.workdir / f"home-{a}"), writer(b, data, args.workdir / f"home-{b}-2")]
        time.sleep(args.edit_after)
        victims = sorted(raw.glob("*.md"))
        victim = victims[trial % len(victims)]
        with open(victim, "a", encoding="utf-8") as fh:
            fh.write(f"\n\nRevision {trial}: the figures were restated in trial {trial}.\n")
        outs = [pr.communicate(timeout=1800)[0] for pr in procs]
        for pr, out in zip(procs, outs):
            if pr.returncode == 0:
                tally["published"] += 1
            elif "is being written by run" in out or "another ingest of library" in out or "in flight" in out \
                    or "changed while this run built" in out:
                tally["refused"] += 1
            else:
                tally["failed"] += 1
                print(f"  unexpected failure ({a}/{b}):\n{out[-1500:]}")
        new = sorted(set((data / "artifacts" / "lib" / "snapshots").glob("[!.]*")) - before)
        problems = [(s.name, why) for s in new if (why := mixed(s))]
        tally["mixed"] += len(problems)
        tally["trials"] += 1
        print(f"trial {trial + 1:2d} {a:11s} vs {b:11s} rc {[pr.returncode for pr in procs]} "
              f"new snapshots {len(new)} mixed {problems or 0}", flush=True)
    print(json.dumps(tally))
    return 1 if tally["mixed"] or tally["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
