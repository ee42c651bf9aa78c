"""Hot swap over real HTTP: a publish, a rollback and a quarantine-like move of ``current`` are
served without a restart, and a withdrawn document is never served after the move."""

from __future__ import annotations

import time

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


@pytest.mark.slow
def test_two_workers_answer_and_both_see_a_publish(served):
    """``--workers 2``: both worker processes answer concurrent requests correctly, and a move of
    ``current`` is served by both within the bounded swap time (each request reads the pointer)."""
    from concurrent.futures import ThreadPoolExecutor

    from ragspine_tools.serve.app import WORKER_HEADER

    paths = LibraryPaths("sample", served.library.parent.parent / "raw" / "sample", served.library)
    swap_bound_s = 10.0  # the next request after a move reads the new pointer; 10 s leaves room on a loaded machine

    def ask(base: str) -> tuple[str, str, set[str], set[str]]:
        # a fresh connection per request, so the kernel spreads them over both workers' accept()
        r = httpx.post(base + "/v1/search", json={"query": QUERY, "mode": "bm25", "top_k": 10},
                       headers={"X-API-Key": served.public_key, "Connection": "close"}, timeout=60)
        assert r.status_code == 200, r.text
        out = r.json()
        return (r.headers[WORKER_HEADER], out["snapshots"]["sample"], {s["doc_id"] for s in out["results"]},
                {s["sensitivity"] for s in out["results"]})

    def round_of(base: str, pool: ThreadPoolExecutor, n: int = 16) -> list[tuple[str, str, set[str], set[str]]]:
        return list(pool.map(lambda _: ask(base), range(n), timeout=120))

    with running("serve", [str(served.library), "--warm", "bm25", "--workers", "2"], env=served.env(),
                 startup_s=180) as base, ThreadPoolExecutor(8) as pool:
        try:
            seen: dict[str, str] = {}
            deadline = time.monotonic() + 60
            while len(seen) < 2:  # bounded: both workers must have answered within a minute
                assert time.monotonic() < deadline, f"only worker(s) {sorted(seen)} answered"
                for worker, sid, docs, levels in round_of(base, pool):
                    assert sid == served.old and WITHDRAWN in docs and levels == {"PUBLIC"}
                    seen[worker] = sid
            swap_pointer(paths, served.new)  # what a publish does last
            moved = time.monotonic()
            fresh: dict[str, float] = {}
            while len(fresh) < 2:
                assert time.monotonic() < moved + 60, f"only worker(s) {sorted(fresh)} served the new snapshot"
                for worker, sid, docs, levels in round_of(base, pool):
                    assert sid == served.new and WITHDRAWN not in docs and levels == {"PUBLIC"}  # never the old one
                    fresh.setdefault(worker, time.monotonic() - moved)
            assert set(fresh) == set(seen)
            # every answer after the move was the new snapshot (asserted above); both workers gave one in time
            assert max(fresh.values()) < swap_bound_s, fresh
        finally:
            swap_pointer(paths, served.old)
