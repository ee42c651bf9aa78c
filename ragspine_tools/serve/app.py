"""``ragspine serve``: the HTTP edge (FastAPI on uvicorn; the OpenAPI schema at ``/openapi.json``).

``POST /v1/search``, ``GET /v1/libraries``, ``GET /healthz``, ``GET /metrics`` (Prometheus).
Each uvicorn worker builds its app with :func:`app_from_env` (the configuration travels in
``RAGSPINE_SERVE_CONFIG``, JSON written by the CLI), opens the libraries and warms the
default pipelines once, then answers from memory. A key is read from ``Authorization:
Bearer <key>`` or ``X-API-Key``; no key, an unknown key, a library or feature the key may
not use are 401/403 with one sentence, never the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

import anyio
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError
from starlette.routing import Route

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_tools.serve.access import AccessDenied, Caller, KeyStore
from ragspine_tools.serve.metrics import Metrics
from ragspine_tools.serve.schemas import ErrorResponse, SearchBody, SearchResponse
from ragspine_tools.serve.service import Limits, RequestError, SearchService

CONFIG_ENV = "RAGSPINE_SERVE_CONFIG"
#: the largest request body accepted (a query is at most 4,096 characters)
MAX_BODY_BYTES = 64 * 1024
#: which worker process answered (``--workers N``): its process id, on every search and health answer
WORKER_HEADER = "X-Ragspine-Worker"
#: with ``--inline-ms``: a lone request whose identical predecessor's search used less than this CPU time
#: (seconds, its thread's) runs on the event loop instead of the worker pool (a repeated question: its
#: query vectors are held). CPU time, not wall time: a loaded machine's waits do not move the decision.
#: 25 ms by default: a repeated question's search (5–10 ms of CPU on the sample) qualifies, a new one's
#: (it embeds: tens of ms and more) does not. 0 turns it off (docs/serving.md has the measurements)
INLINE_BELOW_S = 0.025
log = logging.getLogger("ragspine.serve")
#: the ASGI scope key where :class:`BoundedBody` notes when a request reached the app
ARRIVED = "ragspine.arrived"


class BoundedBody:
    """A request whose declared body is over :data:`MAX_BODY_BYTES` is a 413 before anything
    reads it. Plain ASGI (not ``BaseHTTPMiddleware``, which runs each request in a task of its
    own): it adds no measurable time to a search."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope[ARRIVED] = time.perf_counter()  # the request reached the app (Server-Timing's `route`)
            size = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), b"")
            if size.isdigit() and int(size) > MAX_BODY_BYTES:
                await JSONResponse({"error": {"status": 413, "kind": "request", "message":
                                    f"the request body has {int(size):,} bytes, more than the limit of {MAX_BODY_BYTES:,}"}},
                                   status_code=413)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def encode(obj: Any) -> bytes:
    """``obj`` as compact UTF-8 JSON, in one pass (orjson; numpy scalars and arrays as numbers)."""
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def invalid_fields(errors: list) -> str:
    """pydantic's validation errors as one line naming each field (at most five)."""
    where = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())) or 'body'}: {e.get('msg')}" for e in errors[:5])
    return where or "invalid request body"


_ERRORS = {413: "the body or the query is over its limit", 401: "no key, or an unknown one", 403: "a library the key may not read",
           404: "a library not served here", 422: "a field out of bounds (names it)",
           503: "the library cannot serve this key now (the log says what to do)", 504: "the search took longer than the limit"}
#: the OpenAPI description of POST /v1/search: the answer (not validated at run time; a test keeps it true) and the errors
SEARCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": SearchResponse, "description": "cited snippets, the snapshot of each library read, the mode"},
    **{status: {"model": ErrorResponse, "description": what} for status, what in _ERRORS.items()}}
#: its request body (read and validated by the handler itself, so FastAPI does not document it on its own)
SEARCH_REQUEST: dict[str, Any] = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": SearchBody.model_json_schema(ref_template="#/components/schemas/{model}")}}}}


class RecentCosts:
    """The CPU time each recent request's search took in this worker, by (caller, snapshots, body digest):
    a bounded LRU touched only on the event loop thread. Holds no text: a 16-byte digest of the body."""

    def __init__(self, size: int = 4096, quick_s: float = INLINE_BELOW_S) -> None:
        self.size = size
        self.quick_s = quick_s
        self._last: OrderedDict[tuple, float] = OrderedDict()

    def quick(self, key: tuple) -> bool:
        """Whether the same request's search used under ``quick_s`` of CPU the last time."""
        seconds = self._last.get(key)
        return seconds is not None and seconds < self.quick_s

    def record(self, key: tuple, seconds: float) -> None:
        self._last[key] = seconds
        self._last.move_to_end(key)
        if len(self._last) > self.size:
            self._last.popitem(last=False)


def _key_of(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def create_app(service: SearchService, keys: KeyStore, *, metrics: Metrics | None = None, threads: int = 8,
               inline_below_s: float = INLINE_BELOW_S) -> FastAPI:
    metrics = metrics or Metrics()
    swaps = [0]  # snapshot swaps this worker has seen: a memo of quick searches is never reused across one

    def swapped(library: str, old: str | None, new: str) -> None:  # called on the watcher's or a search's thread
        swaps[0] += 1
        metrics.swapped(library, old, new)

    service.on_swap = swapped
    for lib_id, sid in service.snapshot_ids().items():
        metrics.swapped(lib_id, None, sid)
    app = FastAPI(title="RAGSpine", version="1", description="Cited, RESTRICTED-free search over published RAGSpine libraries.")
    limiter = anyio.CapacityLimiter(threads)
    costs = RecentCosts(quick_s=inline_below_s)
    searching = [0]  # search requests this worker is answering now (touched on the event loop only)
    worker = str(os.getpid())  # this worker process (the app is built in it: uvicorn's factory)

    def caller_of(request: Request) -> Caller:
        return keys.authenticate(_key_of(request))

    def fail(endpoint: str, status: int, kind: str, message: str, t0: float) -> JSONResponse:
        metrics.observe(endpoint, status, time.perf_counter() - t0, error=kind)
        return JSONResponse({"error": {"status": status, "kind": kind, "message": message}}, status_code=status)

    @app.post("/v1/search", summary="search published libraries; cited snippets as `ragspine query --json`",
              response_model=None, responses=SEARCH_RESPONSES, openapi_extra=SEARCH_REQUEST)
    async def search(request: Request) -> Response:
        searching[0] += 1
        try:
            return await parse_and_answer(request)
        finally:
            searching[0] -= 1

    async def parse_and_answer(request: Request) -> Response:
        t0 = time.perf_counter()
        # the body: read (bounded even without a Content-Length) and validated in one pass by
        # pydantic-core, instead of FastAPI's parse, dependency solving and re-validation
        raw = b""
        async for part in request.stream():
            raw += part
            if len(raw) > MAX_BODY_BYTES:
                return fail("search", 413, "request", f"the request body is more than the limit of {MAX_BODY_BYTES:,} bytes", t0)
        try:
            body = SearchBody.model_validate_json(raw)
        except ValidationError as exc:
            return fail("search", 422, "request", invalid_fields(exc.errors()), t0)
        timing: dict[str, float] = {"parsed": time.perf_counter()}
        try:
            caller = caller_of(request)

            def run() -> dict:
                t1, c1 = time.perf_counter(), time.thread_time()
                found = service.search(caller, body.query, libraries=body.libraries, filters=body.filters,
                                       mode=body.mode, top_k=body.top_k, explain=body.explain)
                timing["started"] = t1
                timing["ended"] = time.perf_counter()
                timing["cpu"] = time.thread_time() - c1  # its own cost, whatever else the machine runs
                return found

            # the same request (caller, body, snapshots) answered quickly before, and no other search
            # in this worker: run it here, on the event loop, sparing the two thread hand-offs; anything
            # else in the pool, under the timeout (concurrent searches overlap there)
            # keyed by what `current` names now and by the swaps seen: after a publish or a rollback the first
            # request runs in the pool, where building a snapshot's pipeline (if the watcher has not yet)
            # cannot hold the event loop
            pointers, digest = service.pointers(), hashlib.blake2b(raw, digest_size=16).digest()
            seen = (caller, pointers, swaps[0], digest)
            where = "pool"
            if costs.quick(seen):
                await anyio.sleep(0)  # one turn of the loop: requests already received reach their handler
                where = "loop" if searching == [1] else "pool"
            timing["handed"] = time.perf_counter()
            if where == "loop":
                out = run()
            else:
                with anyio.fail_after(service.limits.timeout_s):
                    out = await anyio.to_thread.run_sync(run, limiter=limiter, abandon_on_cancel=True)
            timing["back"] = time.perf_counter()
            costs.record((caller, pointers, swaps[0], digest), timing["cpu"])  # a swap this search noticed counts
        except AccessDenied as exc:
            return fail("search", exc.status, "access", exc.message, t0)
        except RequestError as exc:
            return fail("search", exc.status, "request", exc.message, t0)
        except TimeoutError:
            return fail("search", 504, "timeout", f"the search took longer than this service's limit of "
                                                  f"{service.limits.timeout_s:g} s; narrow it (fewer libraries, a smaller top_k, mode bm25)", t0)
        except Exception as exc:  # never a traceback or a chunk's text in the answer
            log.error("search failed: %s", type(exc).__name__)
            return fail("search", 500, "internal", f"internal error ({type(exc).__name__}); see the service log", t0)
        try:  # encoded once (orjson, plain dicts and lists), not validated against SearchResponse at run time
            content = encode(out)
        except TypeError as exc:  # orjson.JSONEncodeError: a value JSON cannot hold (the type only, never the value)
            log.error("search answer not encodable: %s", type(exc).__name__)
            return fail("search", 500, "internal", "internal error (an answer that cannot be encoded); see the service log", t0)
        encoded = time.perf_counter()
        metrics.observe("search", 200, encoded - t0, mode=out["mode"])
        # Server-Timing (ms): the search itself (where it ran); the app to the handler; the body read and
        # checked; the key's lookup and the snapshots; the wait for a pool thread; the hand-back to the
        # event loop; the encoding; the whole handler
        phases = ((t0 - request.scope.get(ARRIVED, t0), "route"), (timing["parsed"] - t0, "parse"), (timing["handed"] - timing["parsed"], "access"),
                  (timing["started"] - timing["handed"], "queue"),
                  (timing["back"] - timing["ended"], "resume"), (encoded - timing["back"], "encode"))
        return Response(content, media_type="application/json",
                        headers={"Server-Timing": f"search;dur={(timing['ended'] - timing['started']) * 1000:.2f};desc={where}, "
                                                  + "".join(f"{name};dur={dt * 1000:.2f}, " for dt, name in phases)
                                                  + f"total;dur={(time.perf_counter() - t0) * 1000:.2f}",
                                 WORKER_HEADER: worker})

    # Served by a plain Starlette route in front of FastAPI's: the handler takes the request itself,
    # so FastAPI's per-request work (dependency solving, its exit stacks) bought nothing and cost
    # ~0.1 ms. FastAPI's route stays behind it, never reached by a POST, so that /openapi.json
    # documents the endpoint (its body and answers) from the same function.
    app.router.routes.insert(0, Route("/v1/search", search, methods=["POST"], include_in_schema=False))

    @app.get("/v1/libraries", summary="the libraries this key may read: snapshot, counts, embedding, languages")
    async def libraries(request: Request) -> Any:
        t0 = time.perf_counter()
        try:
            caller = caller_of(request)
            out = await anyio.to_thread.run_sync(service.describe, caller, limiter=limiter)
        except AccessDenied as exc:
            return fail("libraries", exc.status, "access", exc.message, t0)
        metrics.observe("libraries", 200, time.perf_counter() - t0)
        return {"libraries": out}

    @app.get("/healthz", summary="liveness: the libraries are open")
    async def healthz() -> Any:
        return JSONResponse({"status": "ok", "libraries": len(service.library_ids)}, headers={WORKER_HEADER: worker})

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def prometheus() -> Any:
        body, content_type = metrics.render()
        return PlainTextResponse(body, media_type=content_type)

    app.add_middleware(BoundedBody)

    @app.exception_handler(RequestValidationError)
    async def unprocessable(request: Request, exc: Any) -> JSONResponse:  # FastAPI's validation error: say which field
        errors: list = getattr(exc, "errors", lambda: [])()
        where = invalid_fields([{**e, "loc": tuple(e.get("loc", ()))[1:]} for e in errors])  # loc[0]: body, query, header
        metrics.observe(request.url.path.rsplit("/", 1)[-1] or "request", 422, 0.0, error="request")
        return JSONResponse({"error": {"status": 422, "kind": "request", "message": where}}, status_code=422)

    app.state.service = service
    app.state.metrics = metrics
    return app


def serve_config(libraries: list[str], *, keys_file: str | None, limits: Limits, warm_modes: list[str], workers: int = 1,
                 threads: int = 8, inline_below_s: float = INLINE_BELOW_S) -> str:
    return json.dumps({"libraries": libraries, "keys_file": keys_file, "limits": asdict(limits), "warm_modes": warm_modes,
                       "workers": workers, "threads": threads, "inline_below_s": inline_below_s})


def app_from_env() -> FastAPI:
    """A worker's app (uvicorn ``factory=True``): the configuration the CLI put in ``RAGSPINE_SERVE_CONFIG``."""
    settings = Settings.from_env()  # this worker's one read of the environment
    if not settings.serve_config:
        raise ConfigError(f"{CONFIG_ENV} is not set: start the service with `ragspine serve LIBRARY…`")
    cfg = json.loads(settings.serve_config)
    keys = KeyStore.load(cfg.get("keys_file") or settings.api_keys_file or None, settings.api_keys or None)
    service = SearchService(cfg["libraries"], settings=settings, limits=Limits(**cfg.get("limits", {})))
    modes = cfg.get("warm_modes") or ["auto"]
    service.warm(modes)
    service.watch(float(cfg.get("watch_s", 0.5)), modes)
    return create_app(service, keys, metrics=Metrics(multiprocess=int(cfg.get("workers", 1)) > 1),
                      threads=int(cfg.get("threads", 8)), inline_below_s=float(cfg.get("inline_below_s", INLINE_BELOW_S)))
