"""Hot swap over real HTTP: a publish, a rollback and a quarantine-like move of ``current`` are
served without a restart, and a withdrawn document is never served after the move."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx")

from ragspine_index.artifacts import LibraryPaths  # noqa: E402
from ragspine_index.publish import swap_pointer  # noqa: E402
from ragspine_tools.serve.launch import running  # noqa: E402
from tests.tools.serve.conftest import WITHDRAWN  # noqa: E402

QUERY = "Acme Group Investor FAQ shareholders analysts questions"


def test_swap_is_seen_by_the_next_request(served):
    paths = LibraryPaths("sample", served.library.parent.parent / "raw" / "sample", served.library)
    with running("serve", [str(served.library), "--warm", "bm25"], env=served.env()) as base:
        def ask():
            r = httpx.post(base + "/v1/search", json={"query": QUERY, "mode": "bm25", "top_k": 10},
                           headers={"X-API-Key": served.public_key}, timeout=60)
            assert r.status_code == 200, r.text
            out = r.json()
            return out["snapshots"]["sample"], {s["doc_id"] for s in out["results"]}

        try:
            assert ask() == (served.old, ask()[1]) and WITHDRAWN in ask()[1]
            swap_pointer(paths, served.new)  # what a publish does last
            for _ in range(3):
                sid, docs = ask()
                assert sid == served.new and WITHDRAWN not in docs
            libs = httpx.get(base + "/v1/libraries", headers={"X-API-Key": served.public_key}, timeout=30).json()
            assert libs["libraries"][0]["snapshot_id"] == served.new
            metrics = httpx.get(base + "/metrics", timeout=30).text
            assert f'ragspine_library_snapshot{{library="sample",snapshot="{served.new}"}} 1.0' in metrics
            assert f'ragspine_library_snapshot{{library="sample",snapshot="{served.old}"}} 0.0' in metrics
            swap_pointer(paths, served.old)  # a rollback
            sid, docs = ask()
            assert sid == served.old and WITHDRAWN in docs
            metrics = httpx.get(base + "/metrics", timeout=30).text
            assert f'ragspine_library_snapshot{{library="sample",snapshot="{served.old}"}} 1.0' in metrics
            assert f'ragspine_library_snapshot{{library="sample",snapshot="{served.new}"}} 0.0' in metrics
            assert 'ragspine_snapshot_swaps_total{library="sample"} 2.0' in metrics
        finally:
            swap_pointer(paths, served.old)
