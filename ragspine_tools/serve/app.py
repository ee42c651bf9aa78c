"""``ragspine serve``: the HTTP edge (FastAPI on uvicorn; the OpenAPI schema at ``/openapi.json``).

``POST /v1/search``, ``GET /v1/libraries``, ``GET /healthz``, ``GET /metrics`` (Prometheus).
Each uvicorn worker builds its app with :func:`app_from_env` (the configuration travels in
``RAGSPINE_SERVE_CONFIG``, JSON written by the CLI), opens the libraries and warms the
default pipelines once, then answers from memory. A key is read from ``Authorization:
Bearer <key>`` or ``X-API-Key``; no key, an unknown key, a library or feature the key may
not use are 401/403 with one sentence, never the key.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_tools.serve.access import AccessDenied, Caller, KeyStore
from ragspine_tools.serve.metrics import Metrics
from ragspine_tools.serve.service import Limits, RequestError, SearchService

CONFIG_ENV = "RAGSPINE_SERVE_CONFIG"
#: the largest request body accepted (a query is at most 4,096 characters)
MAX_BODY_BYTES = 64 * 1024
#: which worker process answered (``--workers N``): its process id, on every search and health answer
WORKER_HEADER = "X-Ragspine-Worker"
log = logging.getLogger("ragspine.serve")


class SearchBody(BaseModel):
    """A search request (the fields of ``ragspine query``)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the question or keywords")
    libraries: list[str] | None = Field(default=None, max_length=64,
                                        description="library ids to search (fused by RRF); default: every library the key may read")
    filters: dict[str, Any] | None = Field(default=None, description="metadata predicates {field: value | {op: value}}, "
                                                                     "as ragspine_query.filters (a preference the pipeline may drop when nothing matches)")
    mode: str | None = Field(default=None, description="auto|hybrid|vector|bm25|lexical|economy|graph (default: the service's)")
    top_k: int = Field(default=5, description="results to return (0..the service's max_top_k)")
    explain: bool = Field(default=False, description="also return the per-stage trace (counted over the rows the key may see)")


class BoundedBody:
    """A request whose declared body is over :data:`MAX_BODY_BYTES` is a 413 before anything
    reads it. Plain ASGI (not ``BaseHTTPMiddleware``, which runs each request in a task of its
    own): it adds no measurable time to a search."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            size = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), b"")
            if size.isdigit() and int(size) > MAX_BODY_BYTES:
                await JSONResponse({"error": {"status": 413, "kind": "request", "message":
                                    f"the request body has {int(size):,} bytes, more than the limit of {MAX_BODY_BYTES:,}"}},
                                   status_code=413)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _key_of(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return request.headers.get("x-api-key") or None


def create_app(service: SearchService, keys: KeyStore, *, metrics: Metrics | None = None, threads: int = 8) -> FastAPI:
    metrics = metrics or Metrics()
    service.on_swap = metrics.swapped
    for lib_id, sid in service.snapshot_ids().items():
        metrics.swapped(lib_id, None, sid)
    app = FastAPI(title="RAGSpine", version="1", description="Cited, RESTRICTED-free search over published RAGSpine libraries.")
    limiter = anyio.CapacityLimiter(threads)

    def caller_of(request: Request) -> Caller:
        return keys.authenticate(_key_of(request))

    def fail(endpoint: str, status: int, kind: str, message: str, t0: float) -> JSONResponse:
        metrics.observe(endpoint, status, time.perf_counter() - t0, error=kind)
        return JSONResponse({"error": {"status": status, "kind": kind, "message": message}}, status_code=status)

    @app.post("/v1/search", summary="search published libraries; cited snippets as `ragspine query --json`",
              response_model=None)
    async def search(body: SearchBody, request: Request) -> Any:
        t0 = time.perf_counter()
        try:
            caller = caller_of(request)

            def run() -> dict:
                t1 = time.perf_counter()
                found = service.search(caller, body.query, libraries=body.libraries, filters=body.filters,
                                       mode=body.mode, top_k=body.top_k, explain=body.explain)
                timing["search"] = time.perf_counter() - t1
                return found

            timing: dict[str, float] = {}

            with anyio.fail_after(service.limits.timeout_s):
                out = await anyio.to_thread.run_sync(run, limiter=limiter, abandon_on_cancel=True)
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
        metrics.observe("search", 200, time.perf_counter() - t0, mode=out["mode"])
        # plain dicts and lists: no re-encoding pass; Server-Timing: the search itself, and the whole request
        return JSONResponse(out, headers={"Server-Timing": f"search;dur={timing['search'] * 1000:.1f}, "
                                                           f"total;dur={(time.perf_counter() - t0) * 1000:.1f}",
                                          WORKER_HEADER: str(os.getpid())})

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
        return JSONResponse({"status": "ok", "libraries": len(service.library_ids)}, headers={WORKER_HEADER: str(os.getpid())})

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def prometheus() -> Any:
        body, content_type = metrics.render()
        return PlainTextResponse(body, media_type=content_type)

    app.add_middleware(BoundedBody)

    @app.exception_handler(RequestValidationError)
    async def unprocessable(request: Request, exc: Any) -> JSONResponse:  # FastAPI's validation error: say which field
        errors: list = getattr(exc, "errors", lambda: [])()
        where = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}" for e in errors[:5])
        metrics.observe(request.url.path.rsplit("/", 1)[-1] or "request", 422, 0.0, error="request")
        return JSONResponse({"error": {"status": 422, "kind": "request", "message": where or "invalid request body"}}, status_code=422)

    app.state.service = service
    app.state.metrics = metrics
    return app


def serve_config(libraries: list[str], *, keys_file: str | None, limits: Limits, warm_modes: list[str], workers: int = 1,
                 threads: int = 8) -> str:
    return json.dumps({"libraries": libraries, "keys_file": keys_file, "limits": asdict(limits), "warm_modes": warm_modes,
                       "workers": workers, "threads": threads})


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
                      threads=int(cfg.get("threads", 8)))
