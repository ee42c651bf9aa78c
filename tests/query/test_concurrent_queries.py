"""Concurrent queries: a retriever pins the query path's BLAS pool (so threads do not
fight over the cores) and several threads sharing one retriever return exactly the
rankings one thread returns, in auto and bm25 mode."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from ragspine_core.errors import ConfigError
from ragspine_core.runtime import threads as query_pools
from ragspine_core.settings import Settings

WORDS = [f"w{i}" for i in range(300)]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library
    from ragspine_query.library import open_library

    base = tmp_path_factory.mktemp("concurrent")
    raw = base / "raw" / "conc"
    raw.mkdir(parents=True)
    (raw / "_library.toml").write_text('max_chars = 8000\noverlap_chars = 0\nsummarizer = "none"\n', encoding="utf-8")
    rng = np.random.default_rng(7)
    # frequent words in most passages, so some queries take the dense BM25 strategies too
    with open(raw / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(600):
            words = list(rng.choice(WORDS, size=int(rng.integers(5, 30)), p=_zipf(len(WORDS))))
            f.write(json.dumps({"doc_id": f"d{i:04d}", "title": "", "text": " ".join(words), "sensitivity": "INTERNAL"}) + "\n")
    res = build_library(LibraryPaths("conc", raw, base / "artifacts" / "conc"), embedding="deterministic",
                        cache_path=base / "cache.sqlite", run_id="test-concurrency")
    lib = open_library(res.snapshot_dir)
    yield lib, rng
    lib.close()


def _zipf(n: int) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1)
    return p / p.sum()


@pytest.mark.parametrize("mode", ["auto", "bm25"])
def test_threads_sharing_a_retriever_rank_like_one_thread(library, mode):
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig

    lib, rng = library
    retriever = HybridRetriever(lib, config=RetrievalConfig(mode=mode))
    queries = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 6)), p=_zipf(len(WORDS)))) for _ in range(120)]

    def answer(q):
        return [(h.chunk_id, round(h.score, 12)) for h in retriever.search(q, top_k=10)]

    want = [answer(q) for q in queries]
    assert any(want)
    got: list = [None] * len(queries)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(t: int) -> None:
        try:
            start.wait(timeout=60)
            for _ in range(3):  # several passes, so the threads overlap
                for i in range(t, len(queries), 4):
                    got[i] = answer(queries[i])
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not any(w.is_alive() for w in workers), "a query thread did not finish"
    assert not errors, errors[0]
    assert got == want


def test_a_retriever_pins_the_blas_pool(library):
    pytest.importorskip("threadpoolctl")
    from threadpoolctl import threadpool_info

    from ragspine_query.retriever import HybridRetriever

    lib, _ = library
    HybridRetriever(lib)
    done = query_pools.pinned_pools()["pinned"]
    if done["threads"] is None:  # RAGSPINE_QUERY_THREADS=0 in this environment
        pytest.skip(done["note"])
    blas = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    assert blas and all(p["num_threads"] == done["threads"] for p in blas)


def test_query_threads_setting():
    assert query_pools.query_threads(Settings.from_env({})) == 1
    assert query_pools.query_threads(Settings.from_env({"RAGSPINE_QUERY_THREADS": "3"})) == 3
    assert query_pools.query_threads(Settings.from_env({"RAGSPINE_QUERY_THREADS": "0"})) is None
    with pytest.raises(ConfigError, match="RAGSPINE_QUERY_THREADS"):
        query_pools.query_threads(Settings.from_env({"RAGSPINE_QUERY_THREADS": "many"}))


def test_a_blas_library_loaded_after_the_first_pin_is_pinned_too():
    # scipy brings its own OpenBLAS when first imported; a fresh process shows the order
    pytest.importorskip("threadpoolctl")
    pytest.importorskip("scipy")
    script = (
        "import numpy\n"
        "from ragspine_core.runtime.threads import pin_query_threads\n"
        "pin_query_threads()\n"
        "import scipy.linalg\n"
        "pin_query_threads()\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[1]", out.stdout + out.stderr
