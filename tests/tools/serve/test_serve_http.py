"""``ragspine serve`` over real HTTP: the endpoints, the request bounds, and every access rule at the edge.

One real service (uvicorn in a child process on a free loopback port) with three keys;
a real client (httpx)."""

from __future__ import annotations

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")

from ragspine_query.library import open_library  # noqa: E402
from ragspine_tools.cli import main  # noqa: E402
from ragspine_tools.serve.launch import running  # noqa: E402
from tests.conftest import RESTRICTED_MARKERS  # noqa: E402

QUERY = "Acme revenue gross margin 2024"  # INTERNAL chunks rank at the top of it for an INTERNAL key


@pytest.fixture(scope="module")
def service(served, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve_log") / "serve.log"
    # --inline-ms 1000: a repeated search runs on the event loop even on a loaded test machine
    with running("serve", [str(served.library), "--warm", "bm25", "--max-top-k", "20", "--inline-ms", "1000"], env=served.env(),
                 log_path=str(log)) as base:
        yield base, log


def _post(base, key, **body):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(base + "/v1/search", json=body, headers=headers, timeout=60)


def _sensitivity_ids(library_dir, level):
    with open_library(library_dir) as lib:
        sens = np.char.upper(lib.column("sensitivity"))
        ids = np.asarray(lib.chunk_ids())
        return set(ids[sens == level].tolist()), set(lib.column("doc_id")[sens == level].tolist())


def test_search_returns_cited_snippets_like_the_cli(service, served):
    base, _ = service
    r = _post(base, served.internal_key, query=QUERY, mode="bm25", top_k=5)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["snapshots"] == {"sample": served.old} and out["mode"] == "bm25"
    assert len(out["results"]) == 5 and out["confidence"]["grade"] in ("high", "medium", "low")
    for s in out["results"]:  # the --json snippet record: text, provenance, citation, scores
        assert {"text", "doc_id", "title", "locator", "source_locator", "chunk_id", "library_id", "sensitivity", "span",
                "scores", "tier", "confidence"} <= set(s)
    # the same answer as the in-process service (the CLI's stage list, nothing added or lost at the edge)
    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import Caller
    from ragspine_tools.serve.service import SearchService

    local = SearchService([served.library], settings=Settings.from_env({}))
    want = local.search(Caller("x", frozenset({"*"}), "INTERNAL"), QUERY, mode="bm25", top_k=5)
    assert [s["chunk_id"] for s in out["results"]] == [s["chunk_id"] for s in want["results"]]
    assert [s["scores"]["fused"] for s in out["results"]] == pytest.approx([s["scores"]["fused"] for s in want["results"]])


def test_public_key_never_sees_internal_rows(service, served):
    base, _ = service
    internal_ids, internal_docs = _sensitivity_ids(served.library / "current", "INTERNAL")
    full = _post(base, served.internal_key, query=QUERY, mode="bm25", top_k=10).json()
    assert any(s["chunk_id"] in internal_ids for s in full["results"])  # the query does reach INTERNAL text
    for body in ({"query": QUERY, "mode": "bm25", "top_k": 10}, {"query": QUERY, "top_k": 10}):
        r = _post(base, served.public_key, **body)
        assert r.status_code == 200, r.text
        res = r.json()["results"]
        assert res and all(s["sensitivity"] == "PUBLIC" for s in res)
        assert not ({s["chunk_id"] for s in res} & internal_ids) and not ({s["doc_id"] for s in res} & internal_docs)
    # a filter asking for INTERNAL rows matches nothing under the ceiling; the caller's filter is a
    # constraint (issue 36), so nothing is retried without it, and nothing INTERNAL comes back
    r = _post(base, served.public_key, query=QUERY, mode="bm25", top_k=10, filters={"sensitivity": "INTERNAL"})
    assert r.status_code == 200, r.text
    assert r.json()["results"] == []
    # counts and languages: what the key can see, not the library's totals
    libs = httpx.get(base + "/v1/libraries", headers={"X-API-Key": served.public_key}, timeout=30).json()["libraries"]
    public_ids, public_docs = _sensitivity_ids(served.library / "current", "PUBLIC")
    assert libs[0]["counts"] == {"chunks": len(public_ids), "documents": len(public_docs)}
    assert sum(libs[0]["languages"].values()) == len(public_ids)
    # a trace counts the rows the key may see (test_ceiling_statistics.py: equal to a PUBLIC-only build's)
    r = _post(base, served.public_key, query=QUERY, explain=True, mode="bm25")
    assert r.status_code == 200, r.text
    mask = next(row for row in r.json()["explain"] if row["stage"] == "mask")
    assert mask["detail"].endswith(f"of {len(public_ids)} rows allowed")
    assert not ({row["chunk_id"] for row in r.json()["explain"]} & internal_ids)


def test_restricted_text_is_never_served(service, served):
    base, _ = service
    restricted_ids, restricted_docs = _sensitivity_ids(served.library / "current", "RESTRICTED")
    assert restricted_ids
    # the words of the RESTRICTED documents (their markers are not asked: a trace echoes the query)
    for query in ("Nordvolt Storage acquisition enterprise value Leipzig board minutes", "workforce plan headcount reduction 2025",
                  "pricing action price increase distributors", "distributor review termination"):
        for mode in ("bm25", "auto"):
            r = _post(base, served.internal_key, query=query, mode=mode, top_k=20, explain=True)
            assert r.status_code == 200
            text = r.text
            assert not any(marker in text for marker in RESTRICTED_MARKERS.values())
            assert not any(cid in text for cid in restricted_ids)
            assert not any(f'"{d}"' in text for d in restricted_docs)


def test_keys_and_libraries_are_enforced(service, served):
    base, log = service
    assert _post(base, None, query=QUERY).status_code == 401
    assert _post(base, "rsk_not-a-key", query=QUERY).status_code == 401
    assert httpx.get(base + "/v1/libraries", timeout=30).status_code == 401
    r = _post(base, served.other_key, query=QUERY)  # its library is not served: it may read nothing here
    assert r.status_code == 403
    r = _post(base, served.other_key, query=QUERY, libraries=["sample"])
    assert r.status_code == 403 and "may not read 'sample'" in r.json()["error"]["message"]
    r = _post(base, served.public_key, query=QUERY, libraries=["nope"])
    assert r.status_code == 404
    for key in (served.public_key, served.internal_key, served.other_key):  # never logged, nor in a metric
        assert key not in log.read_text(encoding="utf-8", errors="replace")
        assert key not in httpx.get(base + "/metrics", timeout=30).text


@pytest.mark.parametrize("body, status, names", [
    ({"query": ""}, 422, "query"),
    ({"query": "x" * 5000}, 413, "query"),
    ({"query": "a", "top_k": 21}, 422, "top_k"),
    ({"query": "a", "top_k": -1}, 422, "top_k"),
    ({"query": "a", "mode": "fastest"}, 422, "mode"),
    ({"query": "a", "filters": {"colour": "red"}}, 422, "colour"),
    ({"query": "a", "topk": 3}, 422, "topk"),
])
def test_bad_requests_are_clear_4xx(service, served, body, status, names):
    base, _ = service
    r = _post(base, served.internal_key, **body)
    assert r.status_code == status, r.text
    assert names in r.json()["error"]["message"]


def test_health_metrics_and_openapi(service, served):
    base, _ = service
    assert httpx.get(base + "/healthz", timeout=30).json()["status"] == "ok"
    _post(base, served.internal_key, query=QUERY, mode="bm25")
    metrics = httpx.get(base + "/metrics", timeout=30).text
    assert f'ragspine_library_snapshot{{library="sample",snapshot="{served.old}"}} 1.0' in metrics
    assert 'ragspine_requests_total{endpoint="search",status="200"}' in metrics
    assert 'ragspine_request_seconds_bucket{endpoint="search",le="0.5",mode="bm25"}' in metrics
    assert 'ragspine_errors_total{endpoint="search",kind="access"}' in metrics
    paths = httpx.get(base + "/openapi.json", timeout=30).json()["paths"]
    assert {"/v1/search", "/v1/libraries", "/healthz", "/metrics"} <= set(paths)


def test_binding_beyond_loopback_without_keys_is_refused(served, capsys, monkeypatch):
    monkeypatch.delenv("RAGSPINE_API_KEYS", raising=False)
    monkeypatch.delenv("RAGSPINE_API_KEYS_FILE", raising=False)
    assert main(["serve", str(served.library), "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "refusing to bind '0.0.0.0' without API keys" in capsys.readouterr().err


def _where(r) -> str:
    """Where the service ran the search: ``loop`` or ``pool`` (the ``desc`` of Server-Timing's ``search``)."""
    search = next(p for p in r.headers["server-timing"].split(",") if p.strip().startswith("search;"))
    return dict(kv.split("=", 1) for kv in search.strip().split(";")[1:])["desc"]


def test_search_schema_is_documented_and_true(service, served):
    """The OpenAPI schema documents the body and the answer, and real answers match it exactly
    (unknown fields forbidden), though the service does not validate its answers at run time."""
    import json

    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import Caller
    from ragspine_tools.serve.schemas import ErrorResponse, SearchResponse
    from ragspine_tools.serve.service import SearchService

    base, _ = service
    spec = httpx.get(base + "/openapi.json", timeout=30).json()
    op = spec["paths"]["/v1/search"]["post"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert {"query", "libraries", "filters", "mode", "top_k", "explain"} == set(body["properties"]) and body["required"] == ["query"]
    assert body["additionalProperties"] is False
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/SearchResponse"}
    for status in ("401", "403", "404", "413", "422", "504"):
        assert op["responses"][status]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    assert {"SearchResponse", "Snippet", "ExplainRow", "ErrorResponse"} <= set(spec["components"]["schemas"])
    for key, body in ((served.internal_key, {"query": QUERY, "mode": "bm25", "top_k": 10, "explain": True}),
                      (served.public_key, {"query": QUERY, "top_k": 10, "filters": {"period": "2024"}}),
                      (served.internal_key, {"query": "Nordvolt Storage acquisition enterprise value", "mode": "auto", "top_k": 20})):
        r = _post(base, key, **body)
        assert r.status_code == 200, r.text
        answer = SearchResponse.model_validate(r.json())
        assert answer.results and answer.snapshots == {"sample": served.old}
    for key, body in ((None, {"query": QUERY}), (served.internal_key, {"query": ""}), (served.internal_key, {"query": "a", "top_k": 99})):
        r = _post(base, key, **body)
        assert r.status_code in (401, 422) and ErrorResponse.model_validate(r.json()).error.status == r.status_code
    # encoded once (orjson) yet the very object the in-process service builds, value for value
    local = SearchService([served.library], settings=Settings.from_env({}))
    want = local.search(Caller("x", frozenset({"*"}), "INTERNAL"), QUERY, mode="bm25", top_k=10)
    assert _post(base, served.internal_key, query=QUERY, mode="bm25", top_k=10).json() == json.loads(json.dumps(want))


def test_a_repeated_quick_request_runs_on_the_loop_under_the_same_rules(service, served):
    """The second identical request of a caller runs on the event loop (no thread hand-off) and
    answers the same; another caller's same body is its own request, under its own ceiling."""
    base, _ = service
    internal_ids, _ = _sensitivity_ids(served.library / "current", "INTERNAL")
    body = {"query": QUERY + " repeated", "mode": "bm25", "top_k": 10}
    first, second = _post(base, served.internal_key, **body), _post(base, served.internal_key, **body)
    assert (_where(first), _where(second)) == ("pool", "loop")
    assert first.json()["results"] == second.json()["results"]
    assert {s["chunk_id"] for s in second.json()["results"]} & internal_ids  # this query does reach INTERNAL rows
    public = [_post(base, served.public_key, **body) for _ in range(2)]
    assert [_where(r) for r in public] == ["pool", "loop"]  # the memo is per caller: nothing is shared across keys
    for r in public:
        assert r.status_code == 200 and r.json()["results"]
        assert all(s["sensitivity"] == "PUBLIC" and s["chunk_id"] not in internal_ids for s in r.json()["results"])
    assert public[0].json()["results"] == public[1].json()["results"]
    r = _post(base, None, **body)  # no key: refused, wherever a search would run
    assert r.status_code == 401


def test_bodies_are_bounded_and_parsed_with_a_clear_error(service, served):
    base, _ = service
    headers = {"Authorization": f"Bearer {served.internal_key}", "Content-Type": "application/json"}

    def chunks():  # no Content-Length: the handler counts what it reads
        yield b'{"query": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}'

    r = httpx.post(base + "/v1/search", content=chunks(), headers=headers, timeout=60)
    assert r.status_code == 413 and "more than the limit of 65,536 bytes" in r.json()["error"]["message"]
    r = httpx.post(base + "/v1/search", content=b'{"query": "revenue", "top_k": 3', headers=headers, timeout=60)
    assert r.status_code == 422 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(base + "/v1/search", content=b'{"query": 5}', headers=headers, timeout=60)
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("query: ")


def test_recent_costs_are_bounded_and_only_quick_searches_qualify():
    from ragspine_tools.serve.app import RecentCosts

    costs = RecentCosts(size=2, quick_s=0.05)
    assert not costs.quick(("a",))
    costs.record(("a",), 0.01)
    costs.record(("b",), 0.2)
    assert costs.quick(("a",)) and not costs.quick(("b",))
    costs.record(("c",), 0.01)  # evicts the least recently recorded, ("a",)
    assert not costs.quick(("a",)) and costs.quick(("c",))


def test_concurrent_quick_requests_stay_in_the_pool(served):
    """Only a lone request runs on the event loop: two identical quick ones at once both go to the
    pool (where they overlap), and each answer is the same."""
    import asyncio

    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import KeyStore
    from ragspine_tools.serve.app import create_app
    from ragspine_tools.serve.service import SearchService

    app = create_app(SearchService([served.library], settings=Settings.from_env({})), KeyStore({}), inline_below_s=1.0)
    body = {"query": QUERY, "mode": "bm25", "top_k": 5}

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60) as client:
            first = await client.post("/v1/search", json=body)
            lone = await client.post("/v1/search", json=body)
            pair = await asyncio.gather(client.post("/v1/search", json=body), client.post("/v1/search", json=body))
            return first, lone, pair

    first, lone, pair = asyncio.run(go())
    assert (_where(first), _where(lone)) == ("pool", "loop")
    assert [_where(r) for r in pair] == ["pool", "pool"]
    assert all(r.json()["results"] == first.json()["results"] for r in (lone, *pair))


def _phases(r) -> dict[str, float]:
    """Server-Timing as {name: dur ms}."""
    out = {}
    for part in r.headers["server-timing"].split(","):
        fields = part.strip().split(";")
        out[fields[0]] = float(next(f[4:] for f in fields[1:] if f.startswith("dur=")))
    return out


def test_server_timing_names_every_phase_of_the_request(service, served):
    """Each search answer times its phases (route, parse, access, queue, search, resume, encode) and
    the handler's total; the phases after the route account for the total (so the bench can say
    where the time goes), and a search on the event loop has neither a queue nor a resume."""
    base, _ = service
    body = {"query": QUERY + " phases", "mode": "bm25", "top_k": 10}
    pool, loop = _post(base, served.internal_key, **body), _post(base, served.internal_key, **body)
    assert (_where(pool), _where(loop)) == ("pool", "loop")
    for r in (pool, loop):
        p = _phases(r)
        assert list(p) == ["search", "route", "parse", "access", "queue", "resume", "encode", "total"]
        assert all(v >= 0 for v in p.values()) and p["search"] > 0
        inside = sum(v for k, v in p.items() if k not in ("route", "total"))
        assert inside <= p["total"] + 0.1 and p["total"] - inside < 1.0  # rounding, and the metrics' observe
    assert _phases(loop)["queue"] == 0 and _phases(loop)["resume"] < 0.5


def test_search_is_a_plain_starlette_route_documented_by_fastapi(served):
    """POST /v1/search is answered by a plain Starlette route in front (no FastAPI dependency solving
    per request); FastAPI's route for the same function stays behind it for /openapi.json only."""
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import KeyStore
    from ragspine_tools.serve.app import create_app
    from ragspine_tools.serve.service import SearchService

    app = create_app(SearchService([served.library], settings=Settings.from_env({})), KeyStore({}))
    first = next(r for r in app.router.routes if getattr(r, "path", None) == "/v1/search")
    assert type(first) is Route and "POST" in first.methods
    documented = [r for r in app.router.routes if isinstance(r, APIRoute) and r.path == "/v1/search"]
    assert len(documented) == 1 and documented[0].endpoint is first.endpoint
    assert "post" in app.openapi()["paths"]["/v1/search"]


def test_after_a_publish_a_repeated_request_runs_in_the_pool_first(served):
    """The event-loop memo is keyed by what `current` names now: the first repeated request after a
    publish (and after a rollback) runs in the pool, on the new snapshot, then on the loop again."""
    import asyncio

    from ragspine_core.settings import Settings
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.publish import swap_pointer
    from ragspine_tools.serve.access import KeyStore
    from ragspine_tools.serve.app import create_app
    from ragspine_tools.serve.service import SearchService

    paths = LibraryPaths("sample", served.library.parent.parent / "raw" / "sample", served.library)
    app = create_app(SearchService([served.library], settings=Settings.from_env({})), KeyStore({}), inline_below_s=1.0)
    body = {"query": QUERY + " swap", "mode": "bm25", "top_k": 5}

    async def two():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60) as client:
            return [await client.post("/v1/search", json=body) for _ in range(2)]

    try:
        rounds = []
        for sid in (served.old, served.new, served.old):
            swap_pointer(paths, sid)
            rounds.append([(_where(r), r.json()["snapshots"]["sample"]) for r in asyncio.run(two())])
    finally:
        swap_pointer(paths, served.old)
    assert rounds == [[("pool", s), ("loop", s)] for s in (served.old, served.new, served.old)]
