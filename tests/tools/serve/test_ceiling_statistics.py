"""Nothing a PUBLIC key sees depends on INTERNAL rows, at the HTTP and MCP edges.

A differential test: the library built *without* its INTERNAL documents, served with no
keys, against the whole library served with a PUBLIC key. Every answer must be the same
object: ids, ranks, every score field (raw bm25 too), confidence, tier, counts
(``/v1/libraries``) and the ``explain`` trace (timings aside). The summary tree and the
relation graph under a ceiling are checked at the same edge."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")

from ragspine_tools.serve.launch import running  # noqa: E402
from tests.conftest import REPO_ROOT, python_env  # noqa: E402
from tests.tools.serve.ceiling_library import LIBRARY, QUERIES, build  # noqa: E402

MODES = ("bm25", "auto")


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    root = tmp_path_factory.mktemp("ceiling")
    return build(root / "full", internal=True), build(root / "public", internal=False)


def _env(keys: list[dict] | None = None, **extra: str) -> dict[str, str]:
    env = python_env(PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)
    if keys is not None:
        env["RAGSPINE_API_KEYS"] = json.dumps(keys)
    return env


@pytest.fixture(scope="module")
def keys():
    from ragspine_tools.serve.access import hash_key, new_key

    public, internal = new_key(), new_key()
    entries = [{"name": "public-bot", "sha256": hash_key(public), "libraries": ["*"], "max_sensitivity": "PUBLIC"},
               {"name": "analyst", "sha256": hash_key(internal), "libraries": ["*"], "max_sensitivity": "INTERNAL"}]
    return public, internal, entries


@pytest.fixture(scope="module")
def services(libraries, keys, tmp_path_factory):
    """The whole library behind keys and the PUBLIC-only build with none (default settings)."""
    full, public_only = libraries
    logs = tmp_path_factory.mktemp("ceiling_logs")
    with running("serve", [str(full), "--warm", "bm25"], env=_env(keys[2]), log_path=str(logs / "full.log")) as a:
        with running("serve", [str(public_only), "--warm", "bm25"], env=_env(None), log_path=str(logs / "public.log")) as b:
            yield a, b


def _post(base: str, key: str | None, **body) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(base + "/v1/search", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _comparable(out: dict) -> dict:
    """The answer less what differs between two builds of the same PUBLIC text by construction:
    the snapshot ids (each build's own) and the stage timings."""
    out = dict(out)
    out.pop("snapshots", None)
    out["explain"] = [{k: v for k, v in row.items() if k not in ("ms", "seconds", "elapsed_ms", "time_ms")}
                      for row in out.get("explain", [])]
    return out


def test_public_key_answers_equal_a_library_without_internal_documents(services, keys):
    full, public_only = services
    public_key, internal_key, _ = keys
    moved = 0
    for mode in MODES:
        for q in QUERIES:
            got = _post(full, public_key, query=q, mode=mode, top_k=8, explain=True)
            want = _post(public_only, None, query=q, mode=mode, top_k=8, explain=True)
            assert _comparable(got) == _comparable(want), f"mode {mode}, query {q!r}: the PUBLIC key's answer depends on INTERNAL rows"
            assert all(s["sensitivity"] == "PUBLIC" for s in got["results"])
            # the test can fail: the INTERNAL documents do move the raw bm25 of the same PUBLIC chunks
            # when they count (an INTERNAL key's statistics cover them)
            wide = {s["chunk_id"]: s["scores"]["bm25"] for s in _post(full, internal_key, query=q, mode=mode, top_k=20)["results"]}
            moved += sum(1 for s in want["results"] if s["chunk_id"] in wide and wide[s["chunk_id"]] != s["scores"]["bm25"])
    assert moved > 0
    # counts and languages: what the key may see, equal to the PUBLIC-only build's
    a = httpx.get(full + "/v1/libraries", headers={"X-API-Key": public_key}, timeout=30).json()["libraries"]
    b = httpx.get(public_only + "/v1/libraries", timeout=30).json()["libraries"]
    strip = ("snapshot_id", "created_at", "max_sensitivity")
    assert [{k: v for k, v in x.items() if k not in strip} for x in a] == [{k: v for k, v in x.items() if k not in strip} for x in b]


def _barred_node_ids(library_dir) -> set[str]:
    from ragspine_query.library import open_library
    from ragspine_query.tree.tree_channel import barred_nodes

    with open_library(library_dir) as lib:
        tree = lib.summary_tree()
        barred = barred_nodes(tree, lib.rows_above("PUBLIC"))
        assert barred is not None
        return {n for n, b in zip(tree.node_ids, barred.tolist()) if b}


def test_tree_nodes_over_internal_rows_are_not_served_to_a_public_key(keys, libraries):
    public_key, internal_key, entries = keys
    barred = _barred_node_ids(libraries[0])
    reached_by_internal = 0
    # the tree channel on for every query (it is otherwise on demand, for the global tier's queries)
    with running("serve", [str(libraries[0]), "--warm", "bm25"], env=_env(entries, RAGSPINE_TREE="collapsed")) as full:
        for q in QUERIES:
            reached_by_internal += _tree_query(full, public_key, internal_key, barred, q)
    assert reached_by_internal > 0  # the node does answer a caller that may see its whole subtree


def _tree_query(full: str, public_key: str, internal_key: str, barred: set[str], q: str) -> int:
    """Checks one query; returns how many of the INTERNAL key's results came through a barred node."""
    wide = _post(full, internal_key, query=q, mode="bm25", top_k=8, explain=True)
    out = _post(full, public_key, query=q, mode="bm25", top_k=8, explain=True)
    text = json.dumps(out)
    assert not any(s.get("via") in barred for s in out["results"])
    assert not any(n in text or n[:13] in text for n in barred), f"query {q!r}: a barred node is named"
    return sum(1 for s in wide["results"] if s.get("via") in barred)


def test_graph_is_withheld_below_an_open_row(services, keys):
    full, _ = services
    public_key, internal_key, _ = keys
    r = httpx.post(full + "/v1/search", json={"query": "Acme board merger Globex", "mode": "graph"},
                   headers={"Authorization": f"Bearer {public_key}"}, timeout=60)
    assert r.status_code == 422 and "relation graph" in r.json()["error"]["message"]
    assert _post(full, internal_key, query="Acme board merger Globex", mode="graph")["results"]


def test_mcp_public_key_equals_the_public_only_build(libraries, keys):
    pytest.importorskip("mcp", reason="ragspine mcp needs the 'serve' extra")
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    full, public_only = libraries
    public_key, _, entries = keys

    def params(lib, **env):
        return StdioServerParameters(command=sys.executable, args=["-m", "ragspine_tools.cli", "mcp", str(lib)],
                                     env=_env(**env))

    async def ask(p):
        with anyio.fail_after(120):
            async with stdio_client(p) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return [(await session.call_tool("search", {"query": q, "top_k": 8})).structured_content
                            for q in QUERIES[:3]] + [(await session.call_tool("list_libraries", {})).structured_content]

    got = anyio.run(ask, params(full, RAGSPINE_API_KEYS=json.dumps(entries), RAGSPINE_API_KEY=public_key,
                                RAGSPINE_RETRIEVAL_MODE="bm25"))
    want = anyio.run(ask, params(public_only, RAGSPINE_RETRIEVAL_MODE="bm25"))

    def same(x):
        x = json.loads(json.dumps(x))
        x.pop("snapshots", None)
        for r in x.get("results", []):
            r.get("citation", {}).pop("snapshot_id", None)
        for lib in x.get("libraries", []):
            for k in ("snapshot_id", "created_at", "max_sensitivity"):
                lib.pop(k, None)
        return x

    assert got[0]["results"] and [same(g) for g in got] == [same(w) for w in want]
    assert np.all([r["sensitivity"] == "PUBLIC" for g in got[:3] for r in g["results"]])
    assert LIBRARY in json.dumps(got[-1])


def test_a_snapshot_without_public_statistics_fails_closed(libraries, tmp_path):
    """A snapshot holding INTERNAL rows but built before ``bm25_public`` existed: a PUBLIC key is
    refused (503, saying what to do), an INTERNAL key is served, the service still starts."""
    import shutil

    from ragspine_core.integrity import content_snapshot_id
    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import Caller
    from ragspine_tools.serve.service import RequestError, SearchService

    full = libraries[0]
    snap = (full / "current").resolve()
    old = tmp_path / "artifacts" / LIBRARY
    old.mkdir(parents=True)
    copy = old / snap.name
    shutil.copytree(snap, copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    shutil.rmtree(copy / "bm25_public")  # what an older build wrote: no per-ceiling statistics
    for key in ("artifacts", "artifact_sets"):
        entries = manifest.get(key) or {}
        for name in [n for n in entries if n.startswith("bm25_public")]:
            del entries[name]
    manifest["snapshot_id"] = content_snapshot_id(manifest)  # a consistent snapshot, as the older publisher wrote it
    copy = copy.rename(old / manifest["snapshot_id"])
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (old / "current").symlink_to(copy.name)
    service = SearchService([old], settings=Settings.from_env({}))
    service.warm(["bm25"])  # does not raise: the PUBLIC pipeline is left unwarmed
    assert service.search(Caller("a", frozenset({"*"}), "INTERNAL"), QUERIES[0], mode="bm25")["results"]
    with pytest.raises(RequestError) as err:
        service.search(Caller("p", frozenset({"*"}), "PUBLIC"), QUERIES[0], mode="bm25")
    assert err.value.status == 503 and "re-indexing" in err.value.message
