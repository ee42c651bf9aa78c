"""``ragspine bench --serve``: the real HTTP service under load, with a publish and a rollback mid-run.

On a copy of a library's data root (raw documents, glossary, embedding cache, artifacts;
the original is never touched), the benchmark first builds a second snapshot without one
document (``--withdraw``, the real pipeline, :func:`ragspine_index.pipeline.build_library`,
with the library's embedding model) and points ``current`` back at the first. It then
starts ``ragspine serve`` on a free loopback port (a child process, an INTERNAL key) and
drives it with bounded concurrent clients (an async ``httpx`` loop), for every mode in
``--modes`` and every client count in ``--clients``: ``--requests`` searches per level, the
queries of ``data/eval/<library>/queries.jsonl`` in turn, every fourth one a query for the
withdrawn document. During each mode's largest level, after a third of the requests it
publishes (``current`` → the second snapshot, the publication's last step) and, once a
sixth of the requests sent after the publish have been answered, it rolls back
(:func:`ragspine_index.publish.rollback`).

Checked on every response: HTTP 200; the snapshot it names is one of the two; every
chunk it returns belongs to that snapshot (no answer mixes two snapshots); a request
sent after the publish and answered before the rollback began was answered on the second
snapshot and never returns the withdrawn document (a request sent before the rollback
may be answered after it, on the first snapshot, rightly). Reported: queries/s and p50/p95/p99 latency per
mode and client count, errors, the checks, and — after the load, in ``--rounds`` rounds, each
query asked by every path in turn so that a shared machine's background load falls on all
alike — the warm p50 of the same queries in-process (the same service object, one caller)
and over HTTP (one caller on a kept-alive connection: :class:`Wire`, the request's bytes sent to the
answer's bytes received, the service's latency; the standard library's ``http.client``; ``httpx``),
with their ratios, twice: **repeated** questions (every path answered them
before: each process holds their query vectors, as a warm service does for a repeated
question) and **new** ones (each measured query with a tag of its own per path, so each path
embeds it, as for a new question). The 1-minute load average before and after is reported
with them, and each request's CPU time (the in-process search; the service worker's threads and
the client over HTTP). ``--latency-only`` runs that comparison alone, on the library as it is.

Usage::

    ragspine bench --serve [LIBRARY_DIR] [--modes bm25,auto] [--clients 1,4,16] [--requests 64]
                           [--withdraw investor-faq.md] [--workers 1] [--rounds 4] [--inline-ms MS] [--latency-only]
                           [--json] [--report PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

FALLBACK_QUERIES = ("Acme Group revenue 2024", "gross margin by business unit", "supply chain risk battery",
                    "product launch China 2024", "anti-bribery policy gifts")


@dataclass
class Level:
    mode: str
    clients: int
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0

    def row(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float | None:
            if not lat:
                return None
            return round(lat[min(len(lat) - 1, max(0, int(round(p / 100 * len(lat) + 0.5)) - 1))] * 1000, 1)

        return {"mode": self.mode, "clients": self.clients, "requests": len(lat) + self.errors, "errors": self.errors,
                "qps": round(len(lat) / self.wall_s, 1) if self.wall_s else None,
                "p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99)}


def _queries(data: Path, library: str, probe: str) -> list[str]:
    path = data / "eval" / library / "queries.jsonl"
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.is_file() else list(FALLBACK_QUERIES)
    out: list[str] = []
    for i, q in enumerate(texts):
        out.append(q)
        if i % 3 == 2:
            out.append(probe)
    return out


def _prepare(library_dir: Path, workdir: Path, withdraw: str) -> tuple[Path, str, str, str, dict[str, set[str]]]:
    """A copy of the data root with two snapshots (the second without ``withdraw``); current on the first."""
    from ragspine_core.errors import ConfigError
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_index.publish import current_snapshot_id, rollback
    from ragspine_query.library import open_library

    library_dir = library_dir.resolve()
    data, lib_id = library_dir.parents[1], library_dir.name
    raw = data / "raw" / lib_id
    if not (raw / withdraw).is_file():
        raise ConfigError(f"--withdraw {withdraw!r}: no such file in {raw}; name a document file of the library")
    copy = workdir / "data"
    (copy / "raw").mkdir(parents=True)
    shutil.copytree(raw, copy / "raw" / lib_id)
    shutil.copytree(library_dir, copy / "artifacts" / lib_id, symlinks=True,
                    ignore=shutil.ignore_patterns(".ingest.lock", ".publish.lock"))
    for name in ("glossary.toml",):
        if (data / name).is_file():
            shutil.copy2(data / name, copy / name)
    if (data / "eval" / lib_id).is_dir():
        shutil.copytree(data / "eval" / lib_id, copy / "eval" / lib_id)
    (copy / "cache").mkdir()
    if (data / "cache" / "embeddings.sqlite").is_file():  # the embeddings of unchanged chunks are not recomputed
        shutil.copy2(data / "cache" / "embeddings.sqlite", copy / "cache" / "embeddings.sqlite")
    paths = LibraryPaths(lib_id, copy / "raw" / lib_id, copy / "artifacts" / lib_id)
    old = current_snapshot_id(paths)
    with open_library(paths.root) as lib:
        emb = (lib.manifest.get("embedding") or {}).get("backend") or "none"
        withdrawn = {str(d) for d, loc in zip(lib.column("doc_id"), lib.column("source_locator"))
                     if Path(str(loc)).name == withdraw or str(d) == Path(withdraw).stem}
    if not withdrawn:
        withdrawn = {Path(withdraw).stem}
    (paths.raw / withdraw).unlink()
    t0 = time.perf_counter()
    build_library(paths, embedding=emb, cache_path=copy / "cache" / "embeddings.sqlite",
                  glossary_path=copy / "glossary.toml" if (copy / "glossary.toml").is_file() else None)
    print(f"built the second snapshot (without {withdraw}, embedding {emb}) in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    new = current_snapshot_id(paths)
    if not old or not new or new == old:
        raise ConfigError(f"withdrawing {withdraw} did not publish a new snapshot of {lib_id}")
    rollback(paths, old, pin=False)
    chunk_ids: dict[str, set[str]] = {}
    for sid in (old, new):
        with open_library(paths.snapshots / sid) as lib:
            chunk_ids[sid] = set(lib.chunk_ids())
    return paths.root, old, new, next(iter(sorted(withdrawn))), chunk_ids


async def _drive(base: str, key: str, mode: str, clients: int, queries: Sequence[str], n: int,
                 swap: Any, checks: dict[str, Any], level: Level) -> None:
    import httpx

    counter = iter(range(n))
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                                 limits=httpx.Limits(max_connections=clients)) as client:
        async def one_client() -> None:
            for i in counter:
                if swap is not None:
                    await swap(i)
                started = time.monotonic()
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/search", json={"query": queries[i % len(queries)], "mode": mode, "top_k": 10})
                except Exception:
                    level.errors += 1
                    continue
                dt = time.perf_counter() - t0
                if r.status_code != 200:
                    level.errors += 1
                    continue
                level.latencies.append(dt)
                checks["responses"].append((started, time.monotonic(), r.json()))

        t0 = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        level.wall_s = time.perf_counter() - t0


def _check(checks: dict[str, Any], lib_id: str, old: str, new: str, withdrawn: str, chunk_ids: dict[str, set[str]]) -> dict[str, int]:
    mixed = unknown = stale = withdrawn_after = withdrawn_before = between = 0
    published, rolled = checks.get("published_at"), checks.get("rolled_back_at")
    for started, finished, out in checks["responses"]:
        sid = out["snapshots"].get(lib_id)
        if sid not in chunk_ids:
            unknown += 1
            continue
        if any(s["chunk_id"] not in chunk_ids[sid] for s in out["results"]):
            mixed += 1
        # sent after the publish and answered before the rollback began: the service read current in between
        if sid == old and any(s["doc_id"] == withdrawn for s in out["results"]):
            withdrawn_before += 1  # the check below is meaningful only if the first snapshot serves the document
        if published is not None and rolled is not None and published <= started and finished < rolled:
            between += 1
            if sid != new:
                stale += 1
            if any(s["doc_id"] == withdrawn for s in out["results"]):
                withdrawn_after += 1
    return {"responses": len(checks["responses"]), "mixed_snapshots": mixed, "unknown_snapshot": unknown,
            "old_snapshot_after_publish": stale, "withdrawn_served_after_publish": withdrawn_after,
            "withdrawn_served_on_first_snapshot": withdrawn_before, "answered_between_publish_and_rollback": between}


def _timing(header: str, name: str) -> float:
    """The ``dur`` (ms) of metric ``name`` in a ``Server-Timing`` header (nan when absent)."""
    for part in header.split(","):
        fields = part.strip().split(";")
        if fields[0] == name:
            return next((float(f[4:]) for f in fields[1:] if f.startswith("dur=")), float("nan"))
    return float("nan")


class KeepAlive:
    """A minimal HTTP/1.1 client on one kept-alive loopback connection (the standard library's
    ``http.client``): what the service adds to a search, without a client library's own cost."""

    def __init__(self, base: str, key: str) -> None:
        import http.client
        from urllib.parse import urlsplit

        u = urlsplit(base)
        self._connect = lambda: http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=120)
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.conn = self._connect()
        self.worker: int | None = None  # the process id of the service worker that answered last

    def search(self, body: dict[str, Any] | bytes) -> tuple[bytes, str]:
        """``POST /v1/search``: the answer's bytes and its ``Server-Timing`` header (``body``: a dict, or
        its JSON already encoded, so that a timer around the call holds no client-side encoding)."""
        return self.call("POST", "/v1/search", body if isinstance(body, bytes) else json.dumps(body).encode("utf-8"))

    def call(self, method: str, path: str, data: bytes | None = None) -> tuple[bytes, str]:
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=data, headers=self._headers)
                r = self.conn.getresponse()
                out = r.read()
                break
            except (ConnectionError, OSError) as exc:  # the server closed an idle keep-alive connection
                self.conn.close()
                self.conn = self._connect()
                if attempt == 2:
                    raise RuntimeError(f"{method} {path} failed twice: {exc}") from None
        if r.status != 200:
            raise RuntimeError(f"{method} {path} answered {r.status}: {out[:200]!r}")
        worker = r.getheader("x-ragspine-worker") or ""
        self.worker = int(worker) if worker.isdigit() else None
        return out, r.getheader("server-timing") or ""

    def close(self) -> None:
        self.conn.close()


class Wire:
    """The service's latency as the wire sees it: one kept-alive loopback socket, the request's bytes
    built beforehand, timed from handing them to the socket to the answer's last body byte received
    (the only parsing inside the window: finding the end of the headers and ``Content-Length``, to know
    where the body ends). No client library's own cost (``http.client`` parses headers with the
    ``email`` package: ~0.3-0.5 ms of CPU per call here), no JSON decoding."""

    def __init__(self, base: str, key: str) -> None:
        from urllib.parse import urlsplit

        u = urlsplit(base)
        self._addr = (u.hostname or "127.0.0.1", int(u.port or 80))
        self._head = (f"POST /v1/search HTTP/1.1\r\nHost: {self._addr[0]}:{self._addr[1]}\r\nAuthorization: Bearer {key}\r\n"
                      "Content-Type: application/json\r\n").encode("ascii")
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self._addr, timeout=120)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def request(self, payload: bytes) -> bytes:
        """The whole request for a JSON body ``payload`` (build it before the timer)."""
        return self._head + f"Content-Length: {len(payload)}\r\n\r\n".encode("ascii") + payload

    def send(self, request: bytes) -> tuple[bytes, dict[str, str]]:
        """Send ``request`` and read the answer: its body and its headers (lower-case names)."""
        try:
            return self._exchange(request)
        except (ConnectionError, OSError):  # the server closed an idle keep-alive connection: once more
            self.sock.close()
            self.sock = self._connect()
            return self._exchange(request)

    def _exchange(self, request: bytes) -> tuple[bytes, dict[str, str]]:
        self.sock.sendall(request)
        buf = b""
        while (end := buf.find(b"\r\n\r\n")) < 0:
            part = self.sock.recv(65536)
            if not part:
                raise ConnectionError("the service closed the connection")
            buf += part
        lines = buf[:end].decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        size = int(headers.get("content-length", "-1"))
        if size < 0:
            raise RuntimeError(f"answer without a Content-Length: {lines[0]}")
        body = buf[end + 4:]
        while len(body) < size:
            part = self.sock.recv(65536)
            if not part:
                raise ConnectionError("the service closed the connection")
            body += part
        if lines[0].split(" ")[1] != "200":
            raise RuntimeError(f"POST /v1/search answered {lines[0]}: {body[:200]!r}")
        return body, headers

    def close(self) -> None:
        self.sock.close()


def _cpu_ns(pid: int | None) -> int | None:
    """The CPU time (ns) every thread of process ``pid`` has run, from the kernel's scheduler statistics
    (``/proc/PID/task/*/schedstat``: ns, not clock ticks); None where they cannot be read (not Linux, another
    machine)."""
    if pid is None:
        return None
    try:
        return sum(int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]) for tid in os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError, IndexError):
        return None


#: the paths the latency comparison times, in the order each query visits them
PATHS = ("in_process", "wire", "http", "httpx")
#: the phases of a search request inside the service, as its ``Server-Timing`` names them (ms): from the
#: request reaching the app to the handler, the body read and checked, the key's lookup, the wait for a
#: pool thread, the search itself, the hand-back to the event loop, the encoding; ``total``: the handler
PHASES = ("route", "parse", "access", "queue", "search", "resume", "encode", "total")


def _ratio(base: str, key: str, library: Path, mode: str, queries: Sequence[str], n: int,
           rounds: int, base_b: str | None = None) -> dict[str, Any]:
    """Warm p50s of the same queries by four paths, interleaved query by query in ``rounds`` rounds of
    ``n``, the order of the paths turning from query to query (so a shared machine's load, and the
    warmth a path leaves behind, fall on all alike), one caller: ``in_process`` (the same
    service object, in this process), ``wire`` (:class:`Wire`), ``http`` (:class:`KeepAlive`) and
    ``httpx`` (an ``httpx.Client``, keep-alive too). Twice: ``repeated``, queries every path answered before (each process then
    holds their query vectors, and the service knows the search is quick); ``new``, each text asked
    for the first time on every path (the query plus a tag of its own per path, a token no index
    holds), so each path embeds it.

    What is timed: in-process, the ``SearchService.search`` call (it returns the answer object); over
    HTTP, from the request's bytes handed to the connection to the answer's body bytes received (the
    request body is encoded before the timer starts). Decoding the answer's JSON is the client's work,
    not the service's: it is timed apart (``json.loads`` of the ``http`` path's bytes) and reported as
    ``decode``. Returns ``{kind: {path: p50 seconds}, kind_on_loop: (HTTP searches the service ran on
    its event loop, HTTP searches), kind_phases: {phase: p50 ms} (the ``http`` path's Server-Timing,
    plus ``outside``: its wall time less the handler's ``total``), kind_decode: p50 seconds, "load":
    [1-min load average before, after]}``. With ``base_b`` (a second service, started with other
    options), a fourth path ``http_b`` asks it the same way as ``http``, interleaved with the others,
    so that two service options meet the same load."""
    import httpx

    from ragspine_tools.serve.access import ANONYMOUS
    from ragspine_tools.serve.service import SearchService

    service = SearchService([library])
    service.warm([mode], ceilings=["INTERNAL"])
    measured = list(dict.fromkeys(queries[(r * n + i) % len(queries)] for r in range(rounds) for i in range(n)))
    out: dict[str, Any] = {"load": [round(os.getloadavg()[0], 2)]}
    raw = KeepAlive(base, key)
    wire = Wire(base, key)
    raw_b = KeepAlive(base_b, key) if base_b else None
    paths = PATHS + (("http_b",) if raw_b is not None else ())
    json_headers = {"Content-Type": "application/json"}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        def ask(path: str, q: str) -> tuple[float, str]:
            """Ask ``q`` by ``path``: the seconds it took and the service's Server-Timing ("" in-process)."""
            if path == "in_process":
                c0 = time.process_time_ns()
                t0 = time.perf_counter()
                service.search(ANONYMOUS, q, mode=mode, top_k=10)
                dt = time.perf_counter() - t0
                cpu["in_process"].append(time.process_time_ns() - c0)
                return dt, ""
            payload = json.dumps({"query": q, "mode": mode, "top_k": 10}).encode("utf-8")
            if path == "http":
                s0, c0 = _cpu_ns(raw.worker), time.process_time_ns()
                t0 = time.perf_counter()
                body, timing = raw.search(payload)
                dt = time.perf_counter() - t0
                c1, s1 = time.process_time_ns(), _cpu_ns(raw.worker)
                cpu["http_client"].append(c1 - c0)
                if s0 is not None and s1 is not None:
                    cpu["http_service"].append(s1 - s0)
                t1 = time.perf_counter()
                json.loads(body)
                decode.append(time.perf_counter() - t1)
                return dt, timing
            if path == "wire":
                request = wire.request(payload)
                t0 = time.perf_counter()
                headers = wire.send(request)[1]
                return time.perf_counter() - t0, headers.get("server-timing", "")
            if path == "http_b" and raw_b is not None:
                t0 = time.perf_counter()
                timing = raw_b.search(payload)[1]
                return time.perf_counter() - t0, timing
            t0 = time.perf_counter()
            r = client.post("/v1/search", content=payload, headers=json_headers)
            r.read()
            dt = time.perf_counter() - t0
            r.raise_for_status()
            return dt, r.headers.get("server-timing", "")

        decode: list[float] = []
        cpu: dict[str, list[int]] = {"in_process": [], "http_service": [], "http_client": []}
        # warm every path on every measured query: each process keeps the query vectors it embedded
        # (ragspine_core.dense.query_vectors), and the service has already seen them during the load
        for q in measured:
            for path in paths:
                ask(path, q)
        for kind in ("repeated", "new"):
            times: dict[str, list[float]] = {p: [] for p in paths}
            on_loop = 0
            floor: list[float] = []
            decode = []
            cpu = {k: [] for k in cpu}  # ns per request: in this process, and the service worker's threads
            phases: dict[str, list[float]] = {p: [] for p in (*PHASES, "outside")}  # the http path's, ms
            for r in range(rounds):
                for i in range(n):
                    q = queries[(r * n + i) % len(queries)]
                    turn = (r * n + i) % len(paths)  # each path goes first, second, ... equally often
                    for j, path in enumerate(paths[turn:] + paths[:turn]):
                        text = f"{q} zq{r}x{i}{'abcde'[j]}qz" if kind == "new" else q
                        dt, timing = ask(path, text)
                        times[path].append(dt)
                        on_loop += path != "http_b" and "desc=loop" in timing
                        if path == "http":
                            for phase in PHASES:
                                phases[phase].append(_timing(timing, phase))
                            phases["outside"].append(dt * 1000 - _timing(timing, "total"))
                    if kind == "repeated":  # the floor of any call now: an empty request on the same connection
                        t0 = time.perf_counter()
                        raw.call("GET", "/healthz")
                        floor.append(time.perf_counter() - t0)
            out[kind] = {p: statistics.median(t) for p, t in times.items()}
            out[f"{kind}_on_loop"] = (on_loop, len(times["wire"]) + len(times["http"]) + len(times["httpx"]))
            out[f"{kind}_phases"] = {p: round(statistics.median(v), 3) for p, v in phases.items()
                                     if v and not any(x != x for x in v)}  # a phase an older service does not report: left out
            out[f"{kind}_decode"] = statistics.median(decode)
            out[f"{kind}_cpu"] = {k: statistics.median(v) / 1e9 for k, v in cpu.items() if v}
            if floor:
                out["healthz"] = statistics.median(floor)
    raw.close()
    wire.close()
    if raw_b is not None:
        raw_b.close()
    out["load"].append(round(os.getloadavg()[0], 2))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from ragspine_index.publish import rollback, swap_pointer
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_tools.serve.launch import running

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    levels = [int(c) for c in args.clients.split(",") if c.strip()]
    if args.latency_only:
        return _latency_only(args, modes)
    with tempfile.TemporaryDirectory(prefix="ragspine-bench-serve-") as tmp:
        library, old, new, withdrawn, chunk_ids = _prepare(Path(args.library_dir), Path(tmp), args.withdraw)
        lib_id = library.name
        paths = LibraryPaths(lib_id, library.parents[1] / "raw" / lib_id, library)
        probe = f"{withdrawn.replace('-', ' ')}"
        queries = _queries(library.parents[1], lib_id, probe)
        key, env = _bench_key()
        rows: list[dict[str, Any]] = []
        swaps: list[dict[str, Any]] = []
        checks_all: dict[str, int] = {}
        inline = ["--inline-ms", f"{args.inline_ms:g}"] if args.inline_ms is not None else []
        with running("serve", [str(library), "--warm", ",".join(modes), "--workers", str(args.workers),
                               "--max-top-k", "10", "--timeout", "60", *inline], env=env, startup_s=600,
                     log_path=os.path.join(tmp, "serve.log")) as base:
            for mode in modes:
                for clients in levels:
                    asyncio.run(_drive(base, key, mode, min(clients, 2), queries, 2 * min(clients, 2), None,
                                       {"responses": []}, Level(mode, clients)))  # warm the connection pool and the caches
                    checks: dict[str, Any] = {"responses": []}
                    swap = None
                    if clients == max(levels):
                        state = {"step": 0}

                        async def swap(i: int, state=state, checks=checks) -> None:
                            if state["step"] == 0 and i >= args.requests // 3:
                                state["step"] = 1
                                swap_pointer(paths, new)  # the publication's last step: current -> the new snapshot
                                checks["published_at"] = time.monotonic()
                            elif state["step"] == 1 and sum(1 for st, _, _ in checks["responses"]
                                                             if st >= checks["published_at"]) >= max(1, args.requests // 6):
                                # rolled back once a sixth of the requests, all sent after the publish, were answered
                                state["step"] = 2
                                checks["rolled_back_at"] = time.monotonic()
                                rollback(paths, old, pin=False)

                    level = Level(mode, clients)
                    asyncio.run(_drive(base, key, mode, clients, queries, args.requests, swap, checks, level))
                    mid_run = swap is None or state["step"] == 2
                    if not mid_run:  # too few requests left for the rollback to happen under load: do it now
                        checks["rolled_back_at"] = time.monotonic()
                        rollback(paths, old, pin=False)
                    rows.append(level.row())
                    result = _check(checks, lib_id, old, new, withdrawn, chunk_ids)
                    for k, v in result.items():
                        checks_all[k] = checks_all.get(k, 0) + v
                    if swap is not None:
                        swaps.append({"mode": mode, "clients": clients, "rollback_under_load": mid_run, **result})
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            default = "auto" if "auto" in modes else modes[0]
            ratios = _ratio(base, key, library, default, queries, args.requests // args.rounds or 1, args.rounds)
    return {"library": lib_id, "snapshots": {"first": old, "second": new}, "withdrawn": withdrawn, "workers": args.workers,
            "requests_per_level": args.requests, "levels": rows, "swaps": swaps, "checks": checks_all,
            "errors": sum(r["errors"] for r in rows), **_comparison(args, default, ratios)}


def _bench_key() -> tuple[str, dict[str, str]]:
    """A fresh API key for the bench's one caller (every library, up to INTERNAL), and the
    environment that gives the service its hash."""
    from ragspine_tools.serve.access import hash_key, new_key

    key = new_key()
    return key, dict(os.environ, RAGSPINE_API_KEYS=json.dumps([{"name": "bench", "sha256": hash_key(key), "libraries": ["*"],
                                                                "max_sensitivity": "INTERNAL"}]))


def _ms(x: float) -> float:
    return round(x * 1000, 2)


def _comparison(args: argparse.Namespace, default: str, ratios: dict[str, Any]) -> dict[str, Any]:
    """The report's fields of the in-process / HTTP comparison (:func:`_ratio`'s result)."""
    def ratio(kind: str, path: str) -> float:
        return round(ratios[kind][path] / ratios[kind]["in_process"], 2)

    compare = {kind: {"in_process_p50_ms": _ms(ratios[kind]["in_process"]), "http_p50_ms": _ms(ratios[kind]["http"]),
                      "http_over_in_process": ratio(kind, "http"),
                      # request bytes sent -> answer bytes received (Wire): the service's latency on the wire
                      "wire_p50_ms": _ms(ratios[kind]["wire"]), "wire_over_in_process": ratio(kind, "wire"),
                      "httpx_p50_ms": _ms(ratios[kind]["httpx"]),
                      "httpx_over_in_process": ratio(kind, "httpx"), "http_searches_on_event_loop": ratios[f"{kind}_on_loop"][0],
                      "http_searches": ratios[f"{kind}_on_loop"][1],
                      # inside the service, from each HTTP answer's Server-Timing: the search itself, and the whole request
                      "service_search_p50_ms": ratios[f"{kind}_phases"].get("search"),
                      "service_request_p50_ms": ratios[f"{kind}_phases"].get("total"),
                      # each phase's p50 (ms), and the time outside the handler (uvicorn, loopback, the client)
                      "service_phases_p50_ms": ratios[f"{kind}_phases"],
                      # the client's json.loads of the answer: client work, not in the HTTP times above
                      "client_decode_p50_ms": _ms(ratios[f"{kind}_decode"]),
                      # CPU time per request (p50, ms), which a loaded machine's waits do not move: the in-process
                      # search; over HTTP the service worker's threads (its kernel's schedstat) and the client's
                      "cpu_p50_ms": {k: _ms(v) for k, v in ratios[f"{kind}_cpu"].items()},
                      # --ab-inline-ms: the second service's http.client p50, asked in the same interleaving
                      **({"http_b_p50_ms": _ms(ratios[kind]["http_b"]), "http_b_over_in_process": ratio(kind, "http_b")}
                         if "http_b" in ratios[kind] else {})} for kind in ("repeated", "new")}
    rep = compare["repeated"]
    return {"inline_ms": args.inline_ms, "ratio_mode": default, "ratio_rounds": args.rounds,
            "ratio_queries_per_round": args.requests // args.rounds or 1, "load_average": ratios["load"],
            "healthz_p50_ms": _ms(ratios["healthz"]),
            "repeated_queries": compare["repeated"], "new_queries": compare["new"],
            # the headline figures (repeated questions, the keep-alive stdlib client), as before
            "in_process_p50_ms": {default: rep["in_process_p50_ms"]}, "http_p50_ms": {default: rep["http_p50_ms"]},
            "http_over_in_process": rep["http_over_in_process"], "wire_over_in_process": rep["wire_over_in_process"]}


def _latency_only(args: argparse.Namespace, modes: Sequence[str]) -> dict[str, Any]:
    """``--latency-only``: the in-process / HTTP comparison alone, on the library as it is (no copy, no
    second snapshot, no load levels; the service only reads it)."""
    from ragspine_index.publish import current_snapshot_id
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_tools.serve.launch import running

    library = Path(args.library_dir).resolve()
    lib_id = library.name
    queries = _queries(library.parents[1], lib_id, Path(args.withdraw).stem.replace("-", " "))
    key, env = _bench_key()
    default = "auto" if "auto" in modes else modes[0]
    inline = ["--inline-ms", f"{args.inline_ms:g}"] if args.inline_ms is not None else []
    common = [str(library), "--warm", default, "--workers", str(args.workers), "--max-top-k", "10", "--timeout", "60"]
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ragspine-bench-serve-"))
        base = stack.enter_context(running("serve", [*common, *inline], env=env, startup_s=600,
                                           log_path=os.path.join(tmp, "serve.log")))
        base_b = None
        if args.ab_inline_ms is not None:  # the same service with another --inline-ms, asked in the same interleaving
            base_b = stack.enter_context(running("serve", [*common, "--inline-ms", f"{args.ab_inline_ms:g}"], env=env,
                                                 startup_s=600, log_path=os.path.join(tmp, "serve_b.log")))
        ratios = _ratio(base, key, library, default, queries, args.requests // args.rounds or 1, args.rounds, base_b)
    sid = current_snapshot_id(LibraryPaths(lib_id, library.parents[1] / "raw" / lib_id, library))
    return {"library": lib_id, "snapshots": {"first": sid}, "withdrawn": None, "workers": args.workers,
            "requests_per_level": args.requests, "levels": [], "swaps": [], "checks": {}, "errors": 0, "latency_only": True,
            "ab_inline_ms": args.ab_inline_ms,
            **_comparison(args, default, ratios)}


def format_report(rep: dict[str, Any]) -> str:
    lines = [f"# ragspine bench --serve: {rep['library']}", "",
             f"{rep['workers']} worker(s), {rep['requests_per_level']} requests per level"
             + (f", --inline-ms {rep['inline_ms']:g}" if rep.get("inline_ms") is not None else "")
             + "; publish and rollback during each "
             f"mode's largest level (withdrawn document: {rep['withdrawn']})", "",
             "| mode | clients | requests | errors | qps | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|---|---|"]
    if rep.get("latency_only"):  # no load levels, no publish: the comparison alone
        lines = lines[:2] + [f"{rep['workers']} worker(s), --latency-only (no load, no publish; snapshot {rep['snapshots']['first']})"
                             + (f", --inline-ms {rep['inline_ms']:g}" if rep.get("inline_ms") is not None else "")]
    for r in rep["levels"]:
        lines.append(f"| {r['mode']} | {r['clients']} | {r['requests']} | {r['errors']} | {r['qps']} | {r['p50_ms']} | "
                     f"{r['p95_ms']} | {r['p99_ms']} |")
    c = rep["checks"]
    if not rep.get("latency_only"):
        lines += ["", f"checks over {c.get('responses', 0)} responses: {c.get('mixed_snapshots', 0)} mixing snapshots, "
                      f"{c.get('unknown_snapshot', 0)} naming an unknown snapshot, {c.get('old_snapshot_after_publish', 0)} on the old "
                      f"snapshot after the publish and {c.get('withdrawn_served_after_publish', 0)} serving the withdrawn document after it "
                      f"(of {c.get('answered_between_publish_and_rollback', 0)} sent after the publish and answered before the rollback) "
                      f"(it was in {c.get('withdrawn_served_on_first_snapshot', 0)} answers on the first snapshot); "
                      f"{rep['errors']} errors"]
    if "repeated_queries" in rep:
        lines += ["", f"warm {rep['ratio_mode']} p50, one caller, the same queries by each path interleaved query by query "
                      f"({rep['ratio_rounds']} rounds of {rep['ratio_queries_per_round']}; 1-min load average "
                      f"{rep['load_average'][0]} before, {rep['load_average'][-1]} after):", "",
                  "| questions | in-process ms | HTTP ms (wire: request sent → answer received) | wire ÷ in-process "
                  "| HTTP ms (http.client) | http.client ÷ in-process | HTTP ms (httpx) | httpx ÷ in-process "
                  "| HTTP searches on the event loop | inside the service: search / whole request ms |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines.insert(len(lines) - 2, f"(an empty `GET /healthz` on the same kept-alive connection, timed between them: "
                                     f"p50 {rep['healthz_p50_ms']} ms — the floor of any HTTP call on this machine now)")
        lines.insert(len(lines) - 2, "")
        for kind, what in (("repeated_queries", "repeated (query vectors held)"), ("new_queries", "new (each path embeds)")):
            c = rep[kind]
            lines.append(f"| {what} | {c['in_process_p50_ms']} | {c['wire_p50_ms']} | **{c['wire_over_in_process']}** | "
                         f"{c['http_p50_ms']} | {c['http_over_in_process']} | "
                         f"{c['httpx_p50_ms']} | {c['httpx_over_in_process']} | {c['http_searches_on_event_loop']} of {c['http_searches']} | "
                         f"{c['service_search_p50_ms']} / {c['service_request_p50_ms']} |")
        lines.append("")
        for kind, what in (("repeated_queries", "repeated"), ("new_queries", "new")):
            c = rep[kind]
            lines.append(f"{what}, the http.client path, p50 ms per phase (Server-Timing; `outside`: its wall time less the "
                         "handler's `total`: uvicorn, loopback, the client): "
                         + ", ".join(f"{k} {v}" for k, v in c["service_phases_p50_ms"].items())
                         + f"; the client's JSON decode of the answer {c['client_decode_p50_ms']} (not in the HTTP times)")
            if c.get("cpu_p50_ms"):
                cp = c["cpu_p50_ms"]
                lines.append(f"{what}, CPU time per request, p50 ms: in-process search {cp.get('in_process')}; over HTTP the service "
                             f"{cp.get('http_service', 'not readable')}, the http.client client {cp.get('http_client')}")
            if "http_b_p50_ms" in c:
                lines.append(f"{what}, the second service (--inline-ms {rep['ab_inline_ms']:g}), http.client, in the same "
                             f"interleaving: p50 {c['http_b_p50_ms']} ms, **{c['http_b_over_in_process']}** × in-process "
                             f"(the first: {c['http_p50_ms']} ms, {c['http_over_in_process']} ×)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ragspine bench --serve", description=__doc__.split("\n\n")[0])
    p.add_argument("library_dir", nargs="?", default="data/artifacts/sample", help="a published library (default data/artifacts/sample)")
    p.add_argument("--modes", default="bm25,auto", help="comma-separated retrieval modes (default bm25,auto)")
    p.add_argument("--clients", default="1,4,16", help="comma-separated concurrent client counts (default 1,4,16)")
    p.add_argument("--requests", type=int, default=64, help="requests per (mode, clients) level (default 64)")
    p.add_argument("--withdraw", default="investor-faq.md", help="the document file the second snapshot withdraws")
    p.add_argument("--rounds", type=int, default=4, help="alternating rounds of the in-process / HTTP comparison (default 4)")
    p.add_argument("--workers", type=int, default=1, help="service worker processes (default 1)")
    p.add_argument("--inline-ms", type=float, default=None,
                   help="the service's --inline-ms (default: its own, 0: every search in the worker pool)")
    p.add_argument("--latency-only", action="store_true",
                   help="only the warm in-process / HTTP comparison, on the library as it is (no copy, no load levels, no publish)")
    p.add_argument("--ab-inline-ms", type=float, default=None,
                   help="with --latency-only: also start the service with this --inline-ms and ask it in the same "
                        "interleaving (http_b), so two settings meet the same load")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--report", default=None, help="also write the Markdown report here")
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.ab_inline_ms is not None and not args.latency_only:
        p.error("--ab-inline-ms needs --latency-only")
    if args.requests < 6:
        p.error("--requests must be >= 6 (the publish happens after a third, the rollback after a sixth more are answered)")
    rep = run(args)
    text = format_report(rep)
    print(json.dumps(rep, indent=2) if args.json else text)
    if args.report:
        Path(args.report).write_text(text + "\n", encoding="utf-8")
    bad = rep["errors"] + sum(v for k, v in rep["checks"].items() if k not in ("responses", "withdrawn_served_on_first_snapshot",
                                                                                "answered_between_publish_and_rollback"))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
