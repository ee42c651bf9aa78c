"""``ragspine mcp``: the libraries as Model Context Protocol tools (the official ``mcp`` SDK, 2.x).

Two tools, ``search`` and ``list_libraries``, with typed input and output schemas; every
result carries its citation (library, document, title, locator, chunk, snapshot). They
call the same :class:`~ragspine_tools.serve.service.SearchService` as ``ragspine serve``
under the same access rules: over stdio the caller is the key in ``RAGSPINE_API_KEY``
(anonymous when no keys are configured); over streamable HTTP each request's
``Authorization: Bearer`` / ``X-API-Key`` header.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ragspine_core.settings import Settings
from ragspine_tools.serve.access import AccessDenied, Caller, KeyStore
from ragspine_tools.serve.service import Limits, RequestError, SearchService


class Citation(BaseModel):
    """Where a snippet's text comes from: quote it with these fields."""

    library_id: str
    snapshot_id: str
    doc_id: str
    title: str
    locator: str = Field(description="the span inside the document, e.g. a section or page")
    source_locator: str
    chunk_id: str
    page: int | None = None


class Hit(BaseModel):
    text: str
    citation: Citation
    sensitivity: str
    entity: str = ""
    period: str = ""
    language: str = ""
    score: float = Field(description="the fused score (higher is better; comparable within one answer only)")


class SearchAnswer(BaseModel):
    results: list[Hit]
    snapshots: dict[str, str] = Field(description="the snapshot each library was read at")
    tier: str | None = None
    confidence: dict[str, Any] | None = None
    needs_refinement: bool | None = None
    refusal: dict[str, Any] | None = None


class LibraryInfo(BaseModel):
    library_id: str
    snapshot_id: str
    created_at: str | None = None
    counts: dict[str, int] = Field(description="chunks and documents this key can see")
    embedding: str | None = None
    languages: dict[str, int]


class LibraryList(BaseModel):
    libraries: list[LibraryInfo]


def _hit(s: dict, snapshots: dict[str, str]) -> Hit:
    return Hit(text=s["text"], sensitivity=s["sensitivity"], entity=s.get("entity") or "", period=s.get("period") or "",
               language=s.get("language") or "", score=float(s["scores"]["fused"]),
               citation=Citation(library_id=s["library_id"], snapshot_id=snapshots.get(s["library_id"], ""), doc_id=s["doc_id"],
                                 title=s["title"], locator=s["locator"], source_locator=s["source_locator"],
                                 chunk_id=s["chunk_id"], page=s.get("page")))


def build_server(service: SearchService, keys: KeyStore, *, stdio_key: str | None = None) -> Any:
    stdio_caller = keys.authenticate(stdio_key) if stdio_key or not keys.enabled else None
    server = MCPServer("ragspine", instructions="Search published RAGSpine libraries; every result is cited "
                                                "(library, document, locator, chunk, snapshot). RESTRICTED text is never returned.")

    def caller_of(ctx: Context) -> Caller:
        headers = ctx.headers
        if headers is None:  # stdio: the process's key
            if stdio_caller is None:
                raise ToolError("an API key is required: set RAGSPINE_API_KEY for this MCP server")
            return stdio_caller
        auth = headers.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else headers.get("x-api-key")
        try:
            return keys.authenticate(key or None)
        except AccessDenied as exc:
            raise ToolError(exc.message) from None

    @server.tool(description="Search the libraries for passages that answer `query`; each result is cited.")
    async def search(ctx: Context, query: str, libraries: list[str] | None = None, filters: dict[str, Any] | None = None,
                     mode: str | None = None, top_k: int = 5) -> SearchAnswer:
        caller = caller_of(ctx)

        def run() -> dict:
            return service.search(caller, query, libraries=libraries, filters=filters, mode=mode, top_k=top_k)

        try:
            with anyio.fail_after(service.limits.timeout_s):
                out = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except (AccessDenied, RequestError) as exc:
            raise ToolError(exc.message) from None
        except TimeoutError:
            raise ToolError(f"the search took longer than {service.limits.timeout_s:g} s; narrow it") from None
        snaps = out["snapshots"]
        return SearchAnswer(results=[_hit(s, snaps) for s in out["results"]], snapshots=snaps, tier=out.get("tier"),
                            confidence=out.get("confidence"), needs_refinement=out.get("needs_refinement"),
                            refusal=out.get("refusal"))

    @server.tool(description="The libraries this caller may search: snapshot, counts, embedding model, languages.")
    async def list_libraries(ctx: Context) -> LibraryList:
        caller = caller_of(ctx)
        try:
            infos = await anyio.to_thread.run_sync(service.describe, caller)
        except AccessDenied as exc:
            raise ToolError(exc.message) from None
        return LibraryList(libraries=[LibraryInfo(**{k: v for k, v in i.items() if k != "max_sensitivity"}) for i in infos])

    return server


def run(args: argparse.Namespace, keys: KeyStore, settings: Settings, *, loopback: bool) -> int:
    service = SearchService([os.path.abspath(p) for p in args.libraries], settings=settings,
                            limits=Limits(max_top_k=args.max_top_k, timeout_s=args.timeout))
    modes = [service.settings.retrieval_mode or "auto"]
    service.warm(modes)  # before the first call, as `ragspine serve` does
    service.watch(0.5, modes)
    if args.transport == "stdio":
        server = build_server(service, keys, stdio_key=settings.api_key or None)
        server.run("stdio")
        return 0
    server = build_server(service, keys)
    kwargs: dict[str, Any] = {"host": args.host, "port": args.port}
    if not loopback:
        from mcp.server.transport_security import TransportSecuritySettings

        kwargs["transport_security"] = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.run("streamable-http", **kwargs)
    return 0
