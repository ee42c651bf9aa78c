"""The ``ragspine`` console script.

``query`` works without Dagster installed (it only imports ``ragspine_query``);
``ingest`` runs the real Dagster assets in-process; ``eval`` and ``bench`` measure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from ragspine_tools.query_command import add_graph_parser, add_query_parser, run_graph, run_query
from ragspine_core.errors import RagspineError
from ragspine_core.failure import describe_unexpected

#: ``ragspine ingest``'s exit status when it published but one or more files failed to parse
#: (each listed in the summary); 2 is an error that stopped the run, 0 a clean run.
INGEST_FILES_FAILED = 1


def _ingest(args: argparse.Namespace) -> int:
    from ragspine_core.settings import Settings

    from ragspine_assets.ingest import ingest_library
    from ragspine_index.machine import configure_machine

    settings = Settings.from_env()  # the environment is read here, once
    configure_machine(settings)  # ingest workers and OCR languages of this process's steps
    failed = False
    for raw in args.raw_dirs:  # a string: an empty argument is an error, not the current folder
        summary = ingest_library(raw, embedding=args.embedding, keep_snapshots=args.keep, data_root=args.data_root,
                                 settings=settings)
        print(summary.describe(), flush=True)
        failed = failed or bool(summary.errors or summary.error_paths)
    # 0: every file published; 1: published, but some file failed (listed above); 2: an error stopped it
    return INGEST_FILES_FAILED if failed else 0


def _snapshots(args: argparse.Namespace) -> int:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.publish import (WITHHOLD_REASON, current_snapshot_id, list_snapshots, pinned_snapshot,
                                        pointed_snapshot_id, rollback, serving_now, unpin, withheld_snapshots)

    root = Path(args.library_dir)
    if not root.is_dir():
        raise RagspineError(f"{root} is not a folder: pass a library's artifact folder, data/artifacts/<library>")
    paths = LibraryPaths(root.name, Path(), root)
    if args.verify:
        return _verify(paths)
    if args.unpin:
        old = unpin(paths)
        print(f"{paths.library_id}: {'released pin on ' + old if old else 'was not pinned'}; the next run publishes normally")
        return 0
    if args.rollback is not None:
        sid = rollback(paths, args.rollback or None, pin=not args.no_pin)
        held = "" if args.no_pin else " (pinned: later runs keep their snapshots but current stays; release with --unpin)"
        print(f"{paths.library_id}: current -> {sid}{held}")
        return 0
    pin = pinned_snapshot(paths)
    if pin:
        print(f"pinned to {pin} (release with --unpin)")
    if current_snapshot_id(paths) is None and pointed_snapshot_id(paths) is not None:  # withdrawn or deleted: say why
        print(f"current: {serving_now(paths)}")
    for rec in list_snapshots(paths):
        mark = "*" if rec["current"] else " "
        print(f"{mark} {rec['snapshot_id']}  created {rec.get('created_at') or '-'}  run {rec.get('run_id') or '-'}")
    withheld = withheld_snapshots(paths)
    if withheld:
        print(f"withheld (not served, no rollback): {', '.join(withheld)}: {WITHHOLD_REASON}")
    return 0


def _verify(paths) -> int:
    """Check every file of every retained snapshot against its manifest (sizes and sha256)."""
    from ragspine_core.errors import IndexCorruptError, IndexNotFoundError
    from ragspine_core.integrity import verify_snapshot

    from ragspine_index.publish import pointed_snapshot_id, serving_now

    current = pointed_snapshot_id(paths)  # even when the folder it names is gone
    found = sorted(d for d in paths.snapshots.iterdir() if d.is_dir() and not d.name.startswith(".")) \
        if paths.snapshots.is_dir() else []
    if not found:
        if current is not None:  # every snapshot was withdrawn: say why, not "never published"
            raise RagspineError(f"{paths.root} holds no servable snapshot: {serving_now(paths)}; publish one with "
                                f"`ragspine ingest data/raw/{paths.library_id}`")
        raise RagspineError(f"{paths.root} holds no snapshots: publish one with `ragspine ingest data/raw/{paths.library_id}`")
    damaged = 0
    suspects: list[str] = []
    for d in found:
        mark = "*" if d.name == current else " "
        try:
            stats = verify_snapshot(d, full=True)
        except (IndexCorruptError, IndexNotFoundError) as exc:
            damaged += 1
            suspects.append(d.name)
            print(f"{mark} {d.name}  DAMAGED: {exc}")
            continue
        print(f"{mark} {d.name}  ok ({stats['files']} files, {stats['hashed_bytes']} bytes hashed)")
    withdrawn = bool(current and not (paths.snapshots / current).is_dir())
    if withdrawn:
        print(f"current points to {current}, which does not exist: {serving_now(paths)}; ingest again, or roll back "
              "with --rollback", file=sys.stderr)
    if damaged:
        from ragspine_index.publish import mark_suspect

        mark_suspect(paths, suspects)  # the next ingest checks these in full (quarantined unless current)
        print(f"error: {damaged} snapshot(s) of {paths.library_id!r} are damaged; ingest the library again "
              "(it rebuilds damaged files) or roll back to an intact one", file=sys.stderr)
        return 2
    return 2 if withdrawn else 0


def _eval(args: argparse.Namespace) -> int:
    from ragspine_core.settings import Settings
    from ragspine_index.machine import configure_machine
    from ragspine_tools.evaluate import run_eval_cli

    configure_machine(Settings.from_env())  # ingest workers and OCR languages of the libraries it builds
    return run_eval_cli(args)


def _bench(args: argparse.Namespace) -> int:
    # the benchmarks are modules of this package (ragspine_tools.bench), imported on demand:
    # importing one pins numeric libraries' thread pools for the measurement
    if "--serve" in args.rest:  # the HTTP service under load, with a publish and a rollback mid-run
        from ragspine_tools.bench.bench_serve import main as serve_main

        return serve_main([a for a in args.rest if a not in ("--", "--serve")])
    if any(a == "--scale" or a.startswith("--scale=") for a in args.rest):  # ingest + query at N chunks
        from ragspine_tools.bench.bench_scale import main as scale_main

        return scale_main([a for a in args.rest if a != "--"])
    ingest = _ingest_bench_args(args.rest)
    if ingest is not None:  # per-step wall/CPU/memory of one real ingest (pins no thread pool)
        from ragspine_tools.bench.bench_ingest import main as ingest_main

        return ingest_main(ingest)
    if any(a == "--documents" or a.startswith("--documents=") for a in args.rest):  # converters on real files
        from ragspine_tools.bench.bench_documents import main as documents_main

        return documents_main([a for a in args.rest if a != "--"])
    if "--embedding" in args.rest:  # passages/s of each embedding backend (pins no thread pool)
        from ragspine_tools.bench.bench_embedding import main as embedding_main

        return embedding_main([a for a in args.rest if a not in ("--", "--embedding")])
    from ragspine_tools.bench.bench_lexical import main as bench_main

    return bench_main(args.rest)


def _ingest_bench_args(rest: list[str]) -> list[str] | None:
    """``--ingest LIBRARY`` (a folder) or ``--ingest --synthetic N``: the ingest benchmark's
    arguments; None otherwise (the lexical benchmark's own ``--ingest`` flag)."""
    if "--ingest" not in rest:
        return None
    i = rest.index("--ingest")
    after = rest[i + 1] if i + 1 < len(rest) else ""
    if any(a == "--synthetic" or a.startswith("--synthetic=") for a in rest) or (after and not after.startswith("-")
                                                                              and Path(after).is_dir()):
        return [a for j, a in enumerate(rest) if j != i and a != "--"]
    return None


def _serve(args: argparse.Namespace) -> int:
    from ragspine_tools.serve.cli import run_serve

    return run_serve(args)


def _mcp(args: argparse.Namespace) -> int:
    from ragspine_tools.serve.cli import run_mcp

    return run_mcp(args)


def _llm(args: argparse.Namespace) -> int:
    from ragspine_tools.llm_serve import run_llm

    return run_llm(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragspine", description="RAGSpine: build and query retrieval indexes")
    sub = parser.add_subparsers(dest="command", required=True)
    add_query_parser(sub)
    add_graph_parser(sub)
    from ragspine_tools.serve.cli import add_mcp_parser, add_serve_parser

    add_serve_parser(sub)
    add_mcp_parser(sub)

    p = sub.add_parser("ingest", help="materialize libraries through the Dagster assets (in-process)",
                       description="Materialize each library through the Dagster assets in this process. Dagster's "
                                   "logs go to the run's event log (DAGSTER_HOME, the Dagster UI); this prints a summary.")
    p.add_argument("raw_dirs", nargs="+", help="library folders <data>/raw/<library>, e.g. data/raw/sample")
    p.add_argument("--embedding", default=None, help="none|auto|onnx|multilingual|e5|minilm+e5|minilm+e5+multilingual|deterministic|openai (default RAGSPINE_EMBEDDING or auto)")
    p.add_argument("--keep", type=int, default=None, help="snapshots to retain (default 5)")
    p.add_argument("--data-root", default=None, metavar="DATA",
                   help="write artifacts/ and cache/ under DATA (and read glossary.toml there); "
                        "default: the folder above raw/ (library folders must then be DATA/raw/<library>)")

    p = sub.add_parser("snapshots", help="list published snapshots, or roll back")
    p.add_argument("library_dir", help="data/artifacts/<library>")
    p.add_argument("--rollback", nargs="?", const="", default=None, metavar="SNAPSHOT_ID",
                   help="point current at SNAPSHOT_ID (default: the previous snapshot) and pin it there")
    p.add_argument("--no-pin", action="store_true", help="with --rollback: do not pin (the next run moves current)")
    p.add_argument("--unpin", action="store_true", help="release a pin left by --rollback")
    p.add_argument("--verify", action="store_true",
                   help="check every file of every retained snapshot against the sizes and sha256 in its manifest "
                        "(exit 2 when one is damaged)")

    p = sub.add_parser("eval", help="evaluate retrieval on a BEIR-format dataset")
    from ragspine_tools.evaluate import add_eval_arguments

    add_eval_arguments(p)

    from ragspine_tools.llm_serve import add_llm_parser

    add_llm_parser(sub)

    p = sub.add_parser("bench", help="benchmark the lexical index side by side with bm25s and tantivy "
                                      "(--hybrid: hybrid latency; --scale N: ingest + query at N chunks; --embedding: passages/s per embedding backend; "
                                      "--ingest LIBRARY or --ingest --synthetic N: per-step wall/CPU/memory of one ingest; "
                                      "--serve: the HTTP service under load with a publish and a rollback; "
                                      "--documents DIR: the converters on real files)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader went away (``poll`` reports an error
    on a pipe without readers); if so it is pointed at /dev/null, so the interpreter's last
    flush does not complain either."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not any(ev & select.POLLERR for _, ev in poller.poll(0)):
            return False
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in a test, closed)
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command != "bench":
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.rest = extra + list(args.rest)
    handlers = {"query": run_query, "graph": run_graph, "ingest": _ingest, "snapshots": _snapshots, "eval": _eval, "bench": _bench,
                "serve": _serve, "mcp": _mcp, "llm": _llm}
    try:
        return handlers[args.command](args)
    except RagspineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "dagster":
            print("error: this command needs Dagster: pip install 'ragspine[pipeline]'", file=sys.stderr)
            return 2
        print(f"error: {describe_unexpected(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if _stdout_closed():  # `ragspine query … | head`: the reader has all it wanted; say nothing
            return 141  # what a shell reports for a process ended by SIGPIPE
        print(f"error: {describe_unexpected(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # never a traceback: one located line (ragspine_core.failure)
        print(f"error: {describe_unexpected(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
