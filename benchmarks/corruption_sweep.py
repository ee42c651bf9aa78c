"""Corruption sweep: damage every file of a library, six ways, and check readers and repair.

For every file of the serving snapshot, of ``work/``, the chunk store, the embedding cache
and ``history.jsonl``, and each damage kind — ``trunc_half``, ``trunc_zero``,
``flip_mid`` (32 bytes in the middle), ``flip_head`` (the first 32 bytes), ``flip_spread``
(one byte in every 1/16th), ``delete`` — on a fresh copy of a built library:

1. **fresh reader**: ``ragspine query`` in every mode (``auto``, ``bm25``, ``hybrid``,
   ``graph``, ``--tree collapsed``), each in a child process; the outcome is ``same``
   (the answer of the undamaged library), ``error`` (exit 2, one located line),
   ``DIFF`` (exit 0 with another answer: silent) or ``CRASH`` (a signal, a traceback,
   another exit code);
2. **long-lived reader**: a child opens the library once and answers in ``bm25``,
   ``hybrid`` and ``graph`` *before* the damage, waits, and answers again after it (the
   damage written in place into files it has mapped): ``same`` / ``error`` / ``DIFF``
   (another ranking, exit 0) / ``CRASH`` (the process died: SIGBUS, SIGSEGV, a traceback);
3. **repair**: one ingest of the unchanged sources (``build_library``, what ``ragspine
   ingest`` runs), after the repair command the error names when the damaged file is an
   input of the build (chunk store, cache); ``ok`` when the serving snapshot then
   passes ``--verify``, answers as before and has the undamaged library's snapshot id
   (the sources did not change, so neither may the content), else ``FAIL``.

Prints one line per case and a tally; exit 1 when any ``DIFF``/``CRASH``/``FAIL``.

Usage::

    python benchmarks/corruption_sweep.py --workdir /tmp/sweep               # every file, every kind
    python benchmarks/corruption_sweep.py --workdir /tmp/sweep --kinds flip_mid,delete --max-files 20
    # a synthetic library of >= 40,000 chunks (the scale bench's generator), a seeded sample of
    # cases that damages every file once and uses every kind (kinds cycle over the shuffled files)
    nice python benchmarks/corruption_sweep.py --workdir /tmp/sweep40k --synthetic 40000 --embedding none \
        --sample files --seed 43 --time-budget 2100

With ``--synthetic N`` the library is ``synthetic``: ``ceil(N / 3.26)`` documents of the
scale bench's seeded synthetic passages (:func:`ragspine_tools.bench.bench_scale.write_library`,
``summarizer = "none"``: no summary tree) built with ``--embedding`` (default the
``deterministic`` test backend; at 40k synthetic chunks its blocking check refuses two
passages whose signed hash counts cancel to a zero vector, so the 40k sweep uses ``none``,
as the scale bench does: no vectors, no ``hybrid`` mode), queried with the generator's
first query. Modes the baseline cannot answer (exit code not
0) are left out and named. ``--sample files`` runs one case per file (shuffled with
``--seed``, then the build's inputs and the snapshot files over 8 MiB first, the other
snapshot files, ``work/`` last; the kinds cycle, so each kind is used too), ``--sample N`` N random (file,
kind) pairs, all cases by default; ``--time-budget`` stops starting new cases after that
many seconds and says how many ran.

Resuming and slicing: ``--results FILE`` appends one JSON line per finished case (file,
kind, outcomes, seconds) and skips the files a line already names (with ``--sample all`` or
``N``: the (file, kind) pairs), so a second run with
the same file continues where a budget or a kill stopped the first; file names are
compared with their 24-hex-digit ``work/`` hashes (folders and ``.records`` names) replaced by ``<hash>``, so the lines
still match after a rebuild changed a hash. ``--only PREFIX[,PREFIX...]`` keeps the cases whose
(normalised) path starts with one of them (e.g. ``artifacts/synthetic/work/``), ``--cases
FROM:TO`` a slice of the ordered list. The tally at the end counts the cases of this run
and, with ``--results``, of the whole file::

    nice python benchmarks/corruption_sweep.py --workdir /tmp/sweep40k --synthetic 40000 --embedding none \
        --sample files --seed 43 --results benchmarks/reports/corruption_sweep_40k.jsonl --only artifacts/synthetic/work/
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KINDS = ("trunc_half", "trunc_zero", "flip_mid", "flip_head", "flip_spread", "delete")
MODES: tuple[tuple[str, list[str]], ...] = (("auto", []), ("bm25", ["--mode", "bm25"]), ("hybrid", ["--mode", "hybrid"]), ("graph", ["--mode", "graph"]),
         ("tree", ["--tree", "collapsed"]))
QUERY = "Acme product launch history"
DOCS = ("acme-cn-hr-faq.md", "acme-cn-product-launch-2024.md", "acme-eu-distributor-review.md", "acme-group-history-en.md")
TIMEOUT_S = 600
#: the library under test: ``tiny`` (four sample documents) or ``synthetic`` (--synthetic)
LIB: dict[str, Any] = {"name": "tiny", "embedding": "deterministic", "modes": MODES, "query": QUERY}


HASH_PART = re.compile(r"(?<![0-9a-f])[0-9a-f]{24}(?![0-9a-f])")


def case_name(rel: Path) -> str:
    """A case's file as ``--results`` records it: its ``work/`` hash parts as ``<hash>``."""
    return "/".join(HASH_PART.sub("<hash>", part) for part in rel.parts)


def case_key(file: str, kind: str, sample: str) -> tuple[str, str]:
    """What ``--results`` resumes by: with ``--sample files`` (one case per file) the file, so a
    file any line names is done whatever its kind; otherwise the (file, kind) pair."""
    return (file, "") if sample == "files" else (file, kind)


def done_cases(results: Path | None) -> list[dict[str, Any]]:
    """The cases a ``--results`` file records (none when there is no file)."""
    if results is None or not results.is_file():
        return []
    rows = []
    for n, line in enumerate(results.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise SystemExit(f"{results}:{n}: not a JSON line ({exc}); fix or remove that line, then run again") from None
    return rows


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")},
            "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path]), "PYTHONIOENCODING": "utf-8"}


def damage(path: Path, kind: str) -> None:
    if kind == "delete":
        path.unlink()
        return
    data = bytearray(path.read_bytes())
    if kind == "trunc_half":
        data = data[: len(data) // 2]
    elif kind == "trunc_zero":
        data = bytearray()
    elif kind == "flip_mid":
        for i in range(len(data) // 2, min(len(data), len(data) // 2 + 32)):
            data[i] ^= 0xFF
    elif kind == "flip_head":
        for i in range(min(32, len(data))):
            data[i] ^= 0xFF
    elif kind == "flip_spread":
        for k in range(16):
            if data:
                data[k * len(data) // 16] ^= 0x5A
    with open(path, "r+b") as fh:  # in place: the same inode, as a disk error or a stray writer would
        fh.write(bytes(data))
        fh.truncate(len(data))


FRESH = textwrap.dedent(r'''
    import io, json, sys
    from contextlib import redirect_stderr, redirect_stdout
    from ragspine_tools.cli import main
    lib, query = sys.argv[1], sys.argv[2]
    out = {}
    for name, flags in json.loads(sys.argv[3]):  # each call opens the library afresh
        o, e = io.StringIO(), io.StringIO()
        with redirect_stdout(o), redirect_stderr(e):
            rc = main(["query", lib, query, "--json", *flags])
        out[name] = [rc, o.getvalue() if rc == 0 else e.getvalue()]
    print(json.dumps(out))
''')


def answer_fresh(library: Path) -> dict[str, tuple[int, str]]:
    """Every mode, each through ``ragspine query`` opening the library afresh (one child
    process for all: a crash of it is a crash of every mode)."""
    modes = LIB["modes"]
    done = subprocess.run([sys.executable, "-c", FRESH, str(library), LIB["query"], json.dumps([list(m) for m in modes])],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env=env())
    try:
        return {k: (v[0], v[1]) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    except (ValueError, IndexError):
        return {name: (done.returncode or -1, done.stderr[-300:]) for name, _ in modes}


LONG_LIVED = textwrap.dedent(r'''
    import json, os, sys, time
    from ragspine_core.errors import RagspineError
    from ragspine_query import HybridRetriever, RetrievalConfig, open_library
    lib_dir, query, go = sys.argv[1], sys.argv[2], sys.argv[3]
    lib = open_library(lib_dir)  # opened once, kept open across the damage
    retrievers = {m: HybridRetriever(lib, config=RetrievalConfig(mode=m)) for m in json.loads(sys.argv[4])}
    def answer(m):
        try:
            return [0, [h.chunk_id for h in retrievers[m].search(query, top_k=10)]]
        except RagspineError as exc:
            return [2, " ".join(str(exc).split())]
    before = {m: answer(m) for m in retrievers}
    print(json.dumps(before), flush=True)
    while not os.path.exists(go):
        time.sleep(0.02)
    after = {m: answer(m) for m in retrievers}
    print(json.dumps({m: ("same" if after[m] == before[m] else "error" if after[m][0] == 2 else "DIFF")
                      for m in retrievers}), flush=True)
''')


def classify(base: tuple[int, str], got: tuple[int, str]) -> str:
    rc, text = got
    if rc == 0:
        return "same" if text == base[1] else "DIFF"
    if rc == 2 and len(text.strip().splitlines()) == 1 and "Traceback" not in text and "unexpected" not in text:
        return "error"
    return "CRASH"


def build(data: Path) -> str:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library

    name = LIB["name"]
    paths = LibraryPaths(name, data / "raw" / name, data / "artifacts" / name)
    return build_library(paths, embedding=LIB["embedding"], cache_path=data / "cache" / "embeddings.sqlite").snapshot_id


def targets(data: Path) -> list[Path]:
    lib = data / "artifacts" / LIB["name"]
    snap = (lib / "current").resolve()
    files = sorted(p for p in snap.rglob("*") if p.is_file())
    files += sorted(p for p in (lib / "work").rglob("*") if p.is_file())
    files += [lib / "chunk_store.sqlite", data / "cache" / "embeddings.sqlite", lib / "history.jsonl"]
    return [f for f in files if f.exists()]


def repair(data: Path, error_text: str) -> None:
    """Run the repair the error names for an input of the build (a `mkdir`/`mv`/`rm` command)."""
    for part in error_text.split("`")[1::2]:
        cmd = part.split(" && ragspine ingest")[0]
        if cmd.startswith(("mkdir ", "rm ", "mv ")):
            subprocess.run(["bash", "-c", cmd], check=False, timeout=60)


def prepare(base_data: Path, synthetic: int) -> None:
    """Build the library once (kept in ``base_data`` for later sweeps)."""
    name = LIB["name"]
    raw = base_data / "raw" / name
    if synthetic:
        import math

        from ragspine_tools.bench.bench_scale import write_library

        queries_file = base_data / "queries.json"
        if not queries_file.is_file():
            _, queries = write_library(raw, math.ceil(synthetic / 3.26), 20240601, 'summarizer = "none"\n')
            queries_file.write_text(json.dumps(queries[:10]), encoding="utf-8")
        LIB["query"] = json.loads(queries_file.read_text(encoding="utf-8"))[0]
    if not (base_data / "artifacts" / name / "current").exists():
        if not synthetic:
            shutil.rmtree(base_data, ignore_errors=True)
            raw.mkdir(parents=True)
            for doc in DOCS:
                shutil.copy2(REPO / "data" / "raw" / "sample" / doc, raw / doc)
        t0 = time.perf_counter()
        build(base_data)
        print(f"built {name} in {time.perf_counter() - t0:.0f} s", flush=True)


def cases(files: list[Path], kinds: list[str], sample: str, seed: int, max_files: int) -> list[tuple[Path, str]]:
    """The (file, kind) pairs to run: all, one per file with the kinds cycling (``files``), or N random."""
    import random

    if max_files and len(files) > max_files:  # spread over the list; the build's inputs always
        inputs = [f for f in files if f.name in ("chunk_store.sqlite", "embeddings.sqlite", "history.jsonl")]
        outputs = [f for f in files if f not in inputs]
        step = len(outputs) / max_files
        files = [outputs[int(i * step)] for i in range(max_files)] + inputs
    rng = random.Random(seed)
    if sample == "all":
        return [(f, k) for f in files for k in kinds]
    if sample == "files":
        order = files[:]
        rng.shuffle(order)
        # first what matters most when a budget cuts the run short: the build's inputs and the
        # snapshot files over the 8 MiB open-time hash limit, then the other snapshot files, then work/
        def rank(f: Path) -> int:
            if f.name in ("chunk_store.sqlite", "embeddings.sqlite", "history.jsonl"):
                return 0
            if "/work/" in f.as_posix():
                return 2
            return 0 if f.stat().st_size > 8 << 20 else 1
        order.sort(key=rank)
        start = rng.randrange(len(kinds))
        return [(f, kinds[(start + i) % len(kinds)]) for i, f in enumerate(order)]
    pairs = [(f, k) for f in files for k in kinds]
    return rng.sample(pairs, min(int(sample), len(pairs)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--max-files", type=int, default=0,
                   help="at most this many snapshot/work files (spread over the list; 0: all), plus the chunk store, "
                        "the embedding cache and history.jsonl")
    p.add_argument("--synthetic", type=int, default=0, help="sweep a synthetic library of about this many chunks")
    p.add_argument("--embedding", default="deterministic", help="the embedding backend of the build (default deterministic)")
    p.add_argument("--sample", default="all", help="all | files (one case per file, kinds cycling) | N random cases")
    p.add_argument("--seed", type=int, default=43)
    p.add_argument("--time-budget", type=float, default=0.0, help="start no case after this many seconds (0: no limit)")
    p.add_argument("--no-long-lived", action="store_true")
    p.add_argument("--results", type=Path, help="append one JSON line per case; skip the files it already names (resume)")
    p.add_argument("--only", default="", help="only the cases whose path (relative to the work folder) starts with one of these (comma-separated)")
    p.add_argument("--cases", default="", help="FROM:TO, a slice of the ordered case list (after --only)")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    if args.synthetic:
        LIB["name"] = "synthetic"
    LIB["embedding"] = args.embedding
    name = LIB["name"]
    base_data = args.workdir / "base"
    prepare(base_data, args.synthetic)
    # the sources do not change: a repair must publish the same content, i.e. the same snapshot id
    # (another id with the same answers to one query is a silent repair from damaged inputs); the
    # base is brought to this code first (a no-op when it is current; a base built by older
    # converters gets a new id from their code versions alone)
    before_id = (base_data / "artifacts" / name / "current").resolve().name
    base_id = build(base_data)
    if base_id != before_id:
        print(f"base library republished by this code: {before_id} -> {base_id}", flush=True)
    baseline = answer_fresh(base_data / "artifacts" / name)
    unsupported = [m for m, _ in MODES if baseline[m][0] != 0]
    if unsupported:
        print(f"modes this library cannot answer (left out): {', '.join(unsupported)}", flush=True)
    LIB["modes"] = tuple(m for m in MODES if m[0] not in unsupported)
    long_modes = [m for m in ("bm25", "hybrid", "graph") if m not in unsupported]
    files = targets(base_data)
    todo = cases(files, args.kinds.split(","), args.sample, args.seed, args.max_files)

    def rel_of(f: Path) -> Path:
        rel = f.relative_to(base_data)
        if "/snapshots/" in rel.as_posix():
            rel = Path(f"artifacts/{name}/current") / Path(*f.relative_to(current).parts)
        return rel

    current = (base_data / "artifacts" / name / "current").resolve()
    if args.only:
        prefixes = tuple(p for p in args.only.split(",") if p)
        todo = [(f, k) for f, k in todo if case_name(rel_of(f)).startswith(prefixes)]
    if args.cases:
        lo, _, hi = args.cases.partition(":")
        todo = todo[int(lo) if lo else None:int(hi) if hi else None]
    def key(file: str, kind: str) -> tuple[str, str]:
        return case_key(file, kind, args.sample)

    def done_keys() -> set[tuple[str, str]]:
        return {key(r["file"], r["kind"]) for r in done_cases(args.results)}

    done = done_keys()
    skipped = sum(key(case_name(rel_of(f)), k) in done for f, k in todo)
    todo = [(f, k) for f, k in todo if key(case_name(rel_of(f)), k) not in done]
    if skipped:
        print(f"{skipped} case(s) already in {args.results}: skipped", flush=True)
    print(f"{len(files)} files, {len(todo)} cases (sample {args.sample}, seed {args.seed}); modes "
          f"{', '.join(m for m, _ in LIB['modes'])}; long-lived {', '.join(long_modes)}; query {LIB['query']!r}", flush=True)
    tally: collections.Counter = collections.Counter()
    bad = ran = 0
    ran_kinds: set[str] = set()
    t0 = time.perf_counter()
    for f, kind in todo:
        if args.time_budget and time.perf_counter() - t0 > args.time_budget:
            print(f"time budget spent: {ran} of {len(todo)} cases ran", flush=True)
            break
        rel = rel_of(f)
        if args.results is not None and key(case_name(rel), kind) in done_keys():
            continue  # another run on the same results file did it meanwhile
        case = args.workdir / "case"
        shutil.rmtree(case, ignore_errors=True)
        subprocess.run(["cp", "-a", str(base_data), str(case)], check=True, timeout=600)
        lib = case / "artifacts" / name
        target = case / rel
        if not target.exists():
            continue
        reader = None
        go = case / ".go"
        if not args.no_long_lived:
            reader = subprocess.Popen([sys.executable, "-c", LONG_LIVED, str(lib), LIB["query"], str(go), json.dumps(long_modes)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
            assert reader.stdout is not None
            reader.stdout.readline()  # answered before the damage
        damage(target, kind)
        fresh = answer_fresh(lib)
        outcomes = [classify(baseline[m], fresh[m]) for m, _ in LIB["modes"]]
        if reader is not None:
            go.touch()
            try:
                out, err = reader.communicate(timeout=TIMEOUT_S)
                after = json.loads(out.strip().splitlines()[-1]) if reader.returncode == 0 and out.strip() else None
            except (subprocess.TimeoutExpired, ValueError, IndexError):
                reader.kill()
                reader.wait(timeout=30)
                after, err = None, "timeout"
            if after is None:
                outcomes.append(f"long:CRASH(rc {reader.returncode} {err.strip().splitlines()[-1][:80] if err.strip() else ''})")
            else:
                outcomes += [f"long:{v}" for v in after.values()]
        errors = [fresh[m][1] for m, _ in LIB["modes"] if fresh[m][0] == 2]
        try:
            build(case)
        except Exception as exc:  # an input of the build: run the repair it names, then ingest again
            repair(case, str(exc))
            try:
                build(case)
            except Exception as exc2:
                outcomes.append(f"FAIL({' '.join(str(exc2).split())[:100]})")
        from ragspine_core.integrity import verify_snapshot

        try:
            verify_snapshot((lib / "current").resolve(), full=True)
            again = answer_fresh(lib)
            repaired_id = (lib / "current").resolve().name
            outcomes.append("repair:ok" if all(classify(baseline[m], again[m]) == "same" for m, _ in LIB["modes"])
                            and repaired_id == base_id
                            else "repair:FAIL(answers differ)" if repaired_id == base_id
                            else f"repair:FAIL(snapshot {repaired_id}, not {base_id}: other content)")
        except Exception as exc:
            outcomes.append(f"repair:FAIL({' '.join(str(exc).split())[:100]})")
        for o in outcomes:
            tally[o.split("(")[0]] += 1
        worst = [o for o in outcomes if "DIFF" in o or "CRASH" in o or "FAIL" in o]
        bad += bool(worst)
        ran += 1
        ran_kinds.add(kind)
        if args.results is not None:
            with open(args.results, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"file": case_name(rel), "kind": kind, "outcomes": sorted(outcomes),
                                     "seconds": round(time.perf_counter() - t0), "modes": [m for m, _ in LIB["modes"]],
                                     "long_lived": long_modes}) + "\n")
        print(f"{rel.as_posix():60s} {kind:11s} {' '.join(sorted(set(outcomes)))}"
              + (f"  <- {errors[0][:120]}" if worst and errors else "")
              + f"  [{time.perf_counter() - t0:.0f} s]", flush=True)
    shutil.rmtree(args.workdir / "case", ignore_errors=True)
    print(f"\n{ran} of {len(todo)} cases ran ({len(ran_kinds)} kinds); outcomes: {dict(sorted(tally.items()))}; "
          f"cases with a problem: {bad}; {time.perf_counter() - t0:.0f} s")
    if args.results is not None:
        every = done_cases(args.results)
        total: collections.Counter = collections.Counter(o.split("(")[0] for r in every for o in r["outcomes"])
        problems = sum(any(w in o for o in r["outcomes"] for w in ("DIFF", "CRASH", "FAIL")) for r in every)
        print(f"{args.results}: {len(every)} cases ({len({r['kind'] for r in every})} kinds); outcomes: "
              f"{dict(sorted(total.items()))}; cases with a problem: {problems}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
