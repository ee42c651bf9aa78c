"""The scoped result cache: LRU + TTL + purge by prefix, keyed by snapshot, safe across threads."""

from __future__ import annotations

import threading

import pytest

from ragspine_query.cache import ScopedCache, scope_of
from ragspine_query.pipeline.cached import CachedPipeline
from ragspine_core.errors import ConfigError


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_lru_evicts_least_recently_used_and_ttl_expires():
    clock = Clock()
    c = ScopedCache(2, ttl_s=10, clock=clock)
    c.set("a", 1)
    c.set("b", 2)
    assert c.get("a") == (1, True)  # a is now the most recent
    c.set("c", 3)
    assert c.get("b") == (None, False) and c.get("a") == (1, True) and len(c) == 2
    clock.t = 10.5
    assert c.get("a") == (None, False) and len(c) == 1
    assert c.hits == 2 and c.misses == 2 and c.hit_rate == 0.5
    with pytest.raises(ConfigError):
        ScopedCache(0)
    with pytest.raises(ConfigError):
        ScopedCache(1, ttl_s=0)


def test_purge_by_prefix():
    c = ScopedCache(10)
    for k in ("lib@s1\x1fq1", "lib@s1\x1fq2", "lib@s2\x1fq1", "other@s1\x1fq1"):
        c.set(k, k)
    assert c.purge_prefix("lib@s1") == 2 and len(c) == 2
    assert c.get("lib@s2\x1fq1")[1] and c.get("other@s1\x1fq1")[1]


def test_cache_is_thread_safe_under_concurrent_use():
    c = ScopedCache(64, ttl_s=1e9)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(2000):
                key = f"s@{i % 5}\x1fq{(i * 7 + n) % 100}"
                v, found = c.get(key)
                assert not found or v == key
                c.set(key, key)
                if i % 500 == 0:
                    c.purge_prefix(f"s@{n % 5}")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and all(not t.is_alive() for t in threads)
    assert len(c) <= 64 and c.hits + c.misses == 8 * 2000


def test_cached_pipeline_is_keyed_by_snapshot_and_normalised_query(tmp_path_factory):
    from ragspine_query.library import open_library
    from ragspine_query.pipeline.runner import QueryPipeline
    from ragspine_query.retriever import HybridRetriever
    from tests.query.qi_library import shared_sample

    root = shared_sample(tmp_path_factory)
    calls: list[str] = []

    class Counting(HybridRetriever):
        def search(self, query, **kw):
            calls.append(str(query))
            return super().search(query, **kw)

    cache = ScopedCache(100)
    with open_library(root) as lib:
        src = Counting(lib, embedding_backend=None)
        assert scope_of(src) == f"sample@{lib.snapshot_id}"
        cp = CachedPipeline(QueryPipeline(src, use_registered=False), cache)
        first = cp.run("Acme China revenue", top_k=3)
        again = cp.run("  ACME   china REVENUE ", top_k=3, explain=True)  # same normalised query: a hit
        assert [h.chunk_id for h in again] == [h.chunk_id for h in first] and len(calls) == 1
        assert [s.stage for s in again.explain.stages] == ["cache"]
        cp.run("Acme China revenue", top_k=4)  # another top_k: a miss
        assert len(calls) == 2
        # a publish gives a new snapshot id, hence a new scope: nothing is served across it
        other = CachedPipeline(QueryPipeline(src, use_registered=False), cache)
        other.scope = "sample@newsnapshot"
        other.run("Acme China revenue", top_k=3)
        assert len(calls) == 3
        assert cp.invalidate_library("sample") == 3 and len(cache) == 0
