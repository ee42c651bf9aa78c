"""``ragspine mcp`` with an MCP client from the official SDK: tools listed with typed schemas and
called over stdio and streamable HTTP, under the same access rules as the HTTP service."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("mcp", reason="ragspine mcp needs the 'serve' extra")

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from ragspine_query.library import open_library  # noqa: E402
from ragspine_tools.serve.launch import running  # noqa: E402

QUERY = "Acme revenue gross margin 2024"


def _visible(library_dir, *levels):
    with open_library(library_dir) as lib:
        keep = np.isin(np.char.upper(lib.column("sensitivity")), levels)
        return set(np.asarray(lib.chunk_ids())[keep].tolist())


async def _session_calls(session: ClientSession, calls):
    await session.initialize()
    out = [await session.list_tools()]
    for name, args in calls:
        out.append(await session.call_tool(name, args))
    return out


def test_stdio_tools_are_typed_cited_and_public_only(served):
    public = _visible(served.library / "current", "PUBLIC")
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragspine_tools.cli", "mcp", str(served.library)],
                                   env=served.env(RAGSPINE_API_KEY=served.public_key, RAGSPINE_RETRIEVAL_MODE="bm25"))

    async def go():
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    return await _session_calls(session, [("search", {"query": QUERY, "top_k": 8}),
                                                          ("list_libraries", {}),
                                                          ("search", {"query": QUERY, "libraries": ["hr"]}),
                                                          ("search", {"query": ""})])

    tools, found, libs, unknown, empty = anyio.run(go)
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"search", "list_libraries"}
    schema = by_name["search"].input_schema
    assert schema["required"] == ["query"] and schema["properties"]["top_k"]["type"] == "integer"
    assert "citation" in str(by_name["search"].output_schema)
    assert not found.is_error
    results = found.structured_content["results"]
    assert results and {r["citation"]["chunk_id"] for r in results} <= public
    assert all(r["sensitivity"] == "PUBLIC" and r["citation"]["snapshot_id"] == served.old and r["citation"]["locator"]
               for r in results)
    assert libs.structured_content["libraries"][0]["counts"]["chunks"] == len(public)
    assert unknown.is_error and "not served" in unknown.content[0].text
    assert empty.is_error and "query" in empty.content[0].text


def test_streamable_http_applies_each_requests_key(served):
    httpx2 = pytest.importorskip("httpx2")
    from mcp.client.streamable_http import streamable_http_client

    public = _visible(served.library / "current", "PUBLIC")
    internal = _visible(served.library / "current", "INTERNAL")
    with running("mcp", [str(served.library), "--transport", "http"], env=served.env(RAGSPINE_RETRIEVAL_MODE="bm25"),
                 health_path="/mcp") as base:
        async def as_key(key, calls):
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            with anyio.fail_after(120):
                async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
                    async with streamable_http_client(base + "/mcp", http_client=client) as (read, write):
                        async with ClientSession(read, write) as session:
                            return await _session_calls(session, calls)

        search = ("search", {"query": QUERY, "top_k": 10})
        _, as_public = anyio.run(as_key, served.public_key, [search])
        _, as_analyst = anyio.run(as_key, served.internal_key, [search])
        _, as_nobody, listing = anyio.run(as_key, None, [search, ("list_libraries", {})])
        _, as_other = anyio.run(as_key, served.other_key, [search])
    ids = {r["citation"]["chunk_id"] for r in as_public.structured_content["results"]}
    assert ids and ids <= public
    assert {r["citation"]["chunk_id"] for r in as_analyst.structured_content["results"]} & internal
    assert as_nobody.is_error and "API key is required" in as_nobody.content[0].text
    assert listing.is_error
    assert as_other.is_error and "none of the libraries" in as_other.content[0].text
