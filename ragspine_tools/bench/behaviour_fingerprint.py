"""What a refactor must not change: published snapshot ids and ``ragspine eval`` run files.

Run it on the commit before a refactor and on the commit after, then compare the two
JSON files (``--compare A B``). It drives only the user-facing commands, so the same
script measures both sides of a change to the code's layout:

* ``sample`` — ``ragspine ingest`` of the bundled sample library (default embedding,
  i.e. what the README's first command builds), fresh data root: its snapshot id;
* ``synthetic`` — the 100k-chunk synthetic library of the scale benchmark
  (``bench_scale.py --phases ingest``, embedding none): its snapshot id;
* ``eval`` — ``ragspine eval`` on SciFact (test), cmrc2018 (test), xquad-zh-en (test and
  test-monolingual) and the sample's judged set (dev), every mode, fresh output folder:
  the SHA-256 of every TREC run file (scores included, so one changed float shows).

An embedding cache (``--embedding-cache FILE``, an ``embeddings.sqlite``) can be shared
by both sides to save the embedding time: it is keyed by model and text, so it holds the
same vectors either way; the sample library is always built without it.

Usage::

    python -m ragspine_tools.bench.behaviour_fingerprint --work /tmp/fp-before --out before.json
    python -m ragspine_tools.bench.behaviour_fingerprint --work /tmp/fp-after --out after.json
    python -m ragspine_tools.bench.behaviour_fingerprint --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragspine_tools.bench import checkout_root  # noqa: E402
ROOT = checkout_root()
#: the shared datasets beside the checkout (``--datasets`` names another folder)
DATASETS = ROOT.parent / "shared" / "datasets"
MODES = "auto,bm25,hybrid,vector,graph"
def eval_sets(datasets: Path) -> tuple[tuple[str, Path, str, str | None], ...]:
    """(label, dataset folder, split, qrels stem or None) of every evaluation set."""
    return (
        ("scifact", datasets / "scifact", "test", None),
        ("cmrc2018", datasets / "cmrc2018-retrieval", "test", None),
        ("xquad", datasets / "xquad-zh-en", "test", None),
        ("xquad-mono", datasets / "xquad-zh-en", "test", "test-monolingual"),
        ("sample", ROOT / "data" / "eval" / "sample", "dev", None),
    )

def _run(cmd: list[str], log: Path) -> str:
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    with open(log, "a", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=f, text=True)
        f.write(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed (exit {proc.returncode}); see {log}")
    return proc.stdout


def _current_snapshot(artifacts: Path) -> str:
    currents = sorted(artifacts.rglob("current"))
    if len(currents) != 1:
        raise SystemExit(f"expected one published library under {artifacts}, found {len(currents)}")
    return os.readlink(currents[0]).rsplit("/", 1)[-1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sample_snapshot(work: Path, log: Path) -> str:
    data = work / "sample-data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(ROOT / "data" / "raw" / "sample", data / "raw" / "sample")
    if (ROOT / "data" / "glossary.toml").exists():
        shutil.copy(ROOT / "data" / "glossary.toml", data / "glossary.toml")
    env_home = work / "dagster-home"
    env_home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(env_home)
    _run(["ragspine", "ingest", str(data / "raw" / "sample"), "--data-root", str(data)], log)
    return _current_snapshot(data / "artifacts")


def synthetic_snapshot(work: Path, log: Path, scale: int) -> str:
    where = work / f"synthetic-{scale}"
    shutil.rmtree(where, ignore_errors=True)
    _run([sys.executable, "-m", "ragspine_tools.bench.bench_scale", "--scale", str(scale), "--workdir", str(where),
          "--phases", "ingest", "--no-minilm", "--out", str(work / "reports")], log)
    return _current_snapshot(where)


def eval_runs(work: Path, log: Path, cache: Path | None, only: set[str] | None, datasets: Path = DATASETS) -> dict[str, str]:
    out = work / "eval"
    out.mkdir(parents=True, exist_ok=True)
    if cache is not None:
        (out / "cache").mkdir(exist_ok=True)
        target = out / "cache" / "embeddings.sqlite"
        if not target.exists():
            target.symlink_to(cache.resolve())
    for label, folder, split, qrels in eval_sets(datasets):
        if only and label not in only:
            continue
        if not folder.exists():
            print(f"skipping {label}: {folder} is absent", file=sys.stderr)
            continue
        cmd = ["ragspine", "eval", str(folder), "--split", split, "--mode", MODES, "--out", str(out), "--quiet"]
        if qrels:
            cmd += ["--qrels", qrels]
        _run(cmd, log)
    return {str(p.relative_to(out)): _sha256(p) for p in sorted(out.rglob("*.trec"))}


def compare(a: Path, b: Path) -> int:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    diffs = 0
    for key in sorted(set(left) | set(right)):
        lv, rv = left.get(key), right.get(key)
        if isinstance(lv, dict) or isinstance(rv, dict):
            lv, rv = lv or {}, rv or {}
            for name in sorted(set(lv) | set(rv)):
                same = lv.get(name) == rv.get(name)
                diffs += not same
                print(f"{'same' if same else 'DIFF'}  {key}/{name}")
        else:
            same = lv == rv
            diffs += not same
            print(f"{'same' if same else 'DIFF'}  {key}: {lv} / {rv}")
    print(f"{diffs} difference(s)")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="scratch folder (libraries, runs, logs)")
    p.add_argument("--out", type=Path, help="where the fingerprint JSON goes")
    p.add_argument("--parts", default="sample,synthetic,eval", help="which parts (default all)")
    p.add_argument("--eval-sets", default="", help="comma-separated labels of eval_sets() (default all)")
    p.add_argument("--datasets", type=Path, default=DATASETS, help="the shared datasets folder (default ../shared/datasets)")
    p.add_argument("--scale", type=int, default=100_000)
    p.add_argument("--embedding-cache", type=Path, default=None)
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.work is None or args.out is None:
        p.error("--work and --out are needed (or --compare)")
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.work / "fingerprint.log"
    parts = {x.strip() for x in args.parts.split(",") if x.strip()}
    result: dict = json.loads(args.out.read_text()) if args.out.exists() else {}
    if "sample" in parts:
        result["sample_snapshot"] = sample_snapshot(args.work, log)
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    if "eval" in parts:
        only = {x for x in args.eval_sets.split(",") if x} or None
        result.setdefault("eval_runs", {}).update(eval_runs(args.work, log, args.embedding_cache, only, args.datasets))
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    if "synthetic" in parts:
        result[f"synthetic_{args.scale}_snapshot"] = synthetic_snapshot(args.work, log, args.scale)
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
