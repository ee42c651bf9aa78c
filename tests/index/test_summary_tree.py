"""The RAPTOR summary tree's build side: clustering, the extractive summarizer, the LLM
summary cache (counted at a real local chat server), and RESTRICTED text never reaching
a node or an LLM request."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_index.step_api import BlockingCheckError
from ragspine_index.raptor.summarizers import ExtractiveSummarizer, LLMSummarizer, SummaryCache, split_sentences
from ragspine_index.raptor.clustering import TreeParams, cluster_level
from ragspine_index.steps.summary_tree import Leaves, restricted_fingerprints
from ragspine_core.llm import OpenAICompatibleProvider

from tests.query.rerank.llm_server import LocalChatServer


# ------------------------------------------------------------------------ clustering
def _blobs(seed: int, per: int = 20, dim: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.eye(dim)[:3] * 6.0
    x = np.concatenate([c + rng.normal(0, 0.3, (per, dim)) for c in centres])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), np.repeat(np.arange(3), per)


def test_clustering_is_deterministic_and_respects_the_token_budget():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(160, 24)).astype(np.float32)
    tokens = rng.integers(20, 200, size=160)
    params = TreeParams(token_budget=800, max_members=8)
    a = cluster_level(x, tokens, params)
    b = cluster_level(x.copy(), tokens.copy(), params)
    assert a == b
    assert {i for c in a for i in c} == set(range(160))
    for c in a:
        assert len(c) <= params.max_members
        assert tokens[list(c)].sum() <= params.token_budget or len(c) == 1
    counts = np.bincount([i for c in a for i in c], minlength=160)
    assert counts.max() <= params.max_memberships


def test_bic_chosen_mixture_separates_well_separated_groups():
    x, label = _blobs(3)
    # 60 members over a 20-member cap: at least 3 parts; BIC picks among 3..6 components
    clusters = cluster_level(x, [10] * len(x), TreeParams(token_budget=10_000, max_members=20, max_memberships=1))
    assert all(len({int(label[i]) for i in c}) == 1 for c in clusters), clusters
    assert {i for c in clusters for i in c} == set(range(len(x)))


def test_soft_membership_lets_a_boundary_point_join_two_clusters():
    x, _ = _blobs(5, per=12, dim=8)
    mid = (x[0] + x[12]) / 2
    x = np.vstack([x[:24], mid / np.linalg.norm(mid)])  # two groups and one point between them
    clusters = cluster_level(x, [10] * len(x), TreeParams(token_budget=10_000, max_members=13, soft_threshold=0.05))
    homes = [c for c in clusters if 24 in c]
    assert 1 <= len(homes) <= 2
    hard = cluster_level(x, [10] * len(x), TreeParams(token_budget=10_000, max_members=13, max_memberships=1))
    assert sum(24 in c for c in hard) == 1


def test_a_level_above_block_size_is_partitioned_globally_then_split_locally():
    """The scale path: 12 well-separated groups of 50 (600 nodes) over block_size=120
    go through the global stage (sampled PCA + mixture, vectorised assignment) first;
    the result is deterministic, covers every node, respects the budget, and no
    cluster mixes two groups."""
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(12, 32)) * 4.0
    label = np.repeat(np.arange(12), 50)
    x = centres[label] + rng.normal(0, 0.4, (600, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    tokens = rng.integers(50, 150, size=600)
    params = TreeParams(token_budget=700, max_members=8, block_size=120, global_sample=300)
    a = cluster_level(x, tokens, params)
    assert a == cluster_level(x.copy(), tokens.copy(), params)
    assert {i for c in a for i in c} == set(range(600))
    for c in a:
        assert len(c) <= params.max_members
        assert tokens[list(c)].sum() <= params.token_budget or len(c) == 1
    assert all(len({int(label[i]) for i in c}) == 1 for c in a)
    assert np.bincount([i for c in a for i in c], minlength=600).max() <= params.max_memberships
    # the global stage changed the path (a different seed partitions differently) but not the grouping quality
    local_only = cluster_level(x, tokens, TreeParams(token_budget=700, max_members=8, block_size=100_000))
    assert all(len({int(label[i]) for i in c}) == 1 for c in local_only)
    with pytest.raises(Exception, match="block_size"):
        TreeParams(max_members=10, block_size=20)


def test_clustering_is_the_same_with_one_blas_thread_and_without_threadpoolctl(monkeypatch):
    from ragspine_index.raptor.clustering import one_blas_thread

    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 24)).astype(np.float32)
    tokens = rng.integers(50, 150, size=300)
    params = TreeParams(token_budget=600, max_members=8, block_size=100, global_sample=150)
    with one_blas_thread():
        limited = cluster_level(x, tokens, params)
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # the fallback: not installed
    with one_blas_thread():
        fallback = cluster_level(x, tokens, params)
    assert limited == fallback == cluster_level(x, tokens, params)


# ------------------------------------------------------------------------ summarizer
def test_extractive_summary_is_central_sentences_from_the_inputs_within_budget():
    texts = ["Battery supply risk rose in 2024. Lithium prices fell. The battery supply chain is concentrated.",
             "Battery supply risk rose in 2024. Cobalt sourcing is audited yearly.",
             "The cafeteria menu changed on Monday."]
    s = ExtractiveSummarizer(max_chars=120)
    out = s.summarize(texts)
    assert out == s.summarize(list(texts))  # deterministic
    assert len(out) <= 120
    assert out.count("Battery supply risk rose in 2024.") == 1  # redundancy removed
    sentences = {x for t in texts for x in split_sentences(t)}
    assert all(p in sentences for p in split_sentences(out)), out
    assert "cafeteria" not in out  # the outlier is least central


def test_extractive_summary_handles_chinese_sentences():
    out = ExtractiveSummarizer(max_chars=60).summarize(["艾克美中国营收下降。价格竞争加剧！", "艾克美中国营收下降。研发投入增加。"])
    assert out and len(out) <= 60 and out.count("艾克美中国营收下降。") == 1


# --------------------------------------------------------------- libraries for the build
WORDS = ("inverter battery supply margin revenue pricing audit cobalt lithium factory plant servo drive grid "
         "storage warranty export tariff customer order backlog freight carbon solar wind motor sensor").split()


def _write_library(raw: Path, seed: int, n_docs: int = 14, restricted: int = 3) -> dict[str, str]:
    """Open documents of topical sentences plus RESTRICTED ones whose every sentence carries a marker."""
    rng = random.Random(seed)
    raw.mkdir(parents=True, exist_ok=True)
    markers: dict[str, str] = {}
    for d in range(n_docs):
        topic = WORDS[(d * 3) % len(WORDS): (d * 3) % len(WORDS) + 4] or WORDS[:4]
        body = " ".join(f"The {rng.choice(topic)} {rng.choice(WORDS)} report {d}.{s} notes {rng.choice(topic)} "
                        f"{rng.choice(WORDS)} {rng.choice(WORDS)}." for s in range(rng.randint(6, 12)))
        (raw / f"open-{d:02d}.md").write_text(f"---\ntitle: Open {d}\n---\n{body}\n", encoding="utf-8")
    for r in range(restricted):
        marker = f"ZQX{seed}M{r}SECRET"
        markers[f"secret-{r}"] = marker
        body = " ".join(f"The {rng.choice(WORDS)} {marker} {rng.choice(WORDS)} line {s} {marker}." for s in range(6))
        (raw / f"secret-{r}.md").write_text(f"---\ntitle: Secret {r}\nsensitivity: RESTRICTED\n---\n{body}\n",
                                            encoding="utf-8")
    return markers


def _node_texts(snapshot_dir: str) -> list[str]:
    return pq.read_table(Path(snapshot_dir) / "summary_tree" / "nodes.parquet").column("text").to_pylist()


def _summarize_reply(request: dict | None) -> str:
    """A deterministic 'LLM': the first 12 words of each passage in the request."""
    user = [m for m in (request or {}).get("messages", []) if m.get("role") == "user"][-1]["content"]
    return " ".join(" ".join(p.split()[1:13]) for p in user.split("\n\n")[1:-1]) or "empty"


def _llm_library(tmp_path: Path, seed: int, **kw) -> tuple[LibraryPaths, dict[str, str]]:
    raw = tmp_path / "raw" / "lib"
    markers = _write_library(raw, seed, **kw)
    (raw / "_library.toml").write_text('summarizer = "llm"\n', encoding="utf-8")
    return LibraryPaths("lib", raw, tmp_path / "art" / "lib"), markers


def test_llm_summaries_are_cached_rerun_makes_zero_calls_and_a_change_redoes_only_changed_clusters(tmp_path):
    paths, _ = _llm_library(tmp_path, seed=11, restricted=0, n_docs=18)
    cache = tmp_path / "cache" / "embeddings.sqlite"
    with LocalChatServer(reply=_summarize_reply) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        first = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        meta1 = json.loads((Path(first.snapshot_dir) / "summary_tree" / "tree.json").read_text())
        n_nodes = sum(meta1["nodes_per_level"])
        calls = meta1["build"]["llm_calls"]
        # one request per distinct cluster (two clusters with the same member texts share one)
        assert n_nodes >= 3 and len(server.requests) == calls and calls + meta1["build"]["llm_cached"] == n_nodes

        # unchanged library: the tree is reused; and rebuilt from scratch, every summary comes from the cache
        build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        assert len(server.requests) == calls
        import shutil

        shutil.rmtree(paths.work / "summary_tree")
        again = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        assert len(server.requests) == calls, "re-materializing an unchanged library made LLM calls"
        assert _node_texts(again.snapshot_dir) == _node_texts(first.snapshot_dir)

        # change one document: only clusters whose member texts changed are summarized again
        doc = paths.raw / "open-03.md"
        doc.write_text(doc.read_text(encoding="utf-8").replace("report 3.", "report 3 (revised)."), encoding="utf-8")
        before = len(server.requests)
        changed = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        new_calls = len(server.requests) - before
        meta2 = json.loads((Path(changed.snapshot_dir) / "summary_tree" / "tree.json").read_text())
        old_ids = set(pq.read_table(Path(first.snapshot_dir) / "summary_tree" / "nodes.parquet").column("node_id").to_pylist())
        new_ids = pq.read_table(Path(changed.snapshot_dir) / "summary_tree" / "nodes.parquet").column("node_id").to_pylist()
        old_texts = set(_node_texts(first.snapshot_dir))
        # a node whose member set and member texts are unchanged keeps its summary without a call
        assert new_calls == meta2["build"]["llm_calls"]
        assert new_calls == sum(1 for t in _node_texts(changed.snapshot_dir) if t not in old_texts)
        # the incremental build keeps every untouched cluster: the edited leaf's cluster and its ancestors
        assert 1 <= new_calls <= 2 * len(meta2["nodes_per_level"]) < sum(meta2["nodes_per_level"])
        assert len(set(new_ids) & old_ids) >= 1


def test_restricted_text_never_reaches_a_node_or_an_llm_request(tmp_path):
    """Property test: random libraries whose RESTRICTED sentences all carry distinctive markers."""
    for seed in range(3):
        root = tmp_path / f"s{seed}"
        paths, markers = _llm_library(root, seed=100 + seed, n_docs=6 + seed, restricted=1 + seed % 3)
        with LocalChatServer(reply=_summarize_reply) as server:
            make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
            res = build_library(paths, embedding="none", cache_path=root / "cache" / "e.sqlite", make_llm=make_llm)
            bodies = [r.raw_body.decode("utf-8") for r in server.requests]
        assert bodies, "the LLM summarizer was used"
        texts = _node_texts(res.snapshot_dir)
        meta = (Path(res.snapshot_dir) / "summary_tree" / "tree.json").read_text(encoding="utf-8")
        for marker in markers.values():
            assert not any(marker in t for t in texts)
            assert not any(marker in b for b in bodies)
            assert marker not in meta


def test_reclassifying_a_document_restricted_purges_its_cached_summaries(tmp_path):
    paths, _ = _llm_library(tmp_path, seed=21, n_docs=10, restricted=0)
    doc = paths.raw / "open-04.md"
    body = doc.read_text(encoding="utf-8").split("---\n")[-1]
    marker = "ReclassMarkerQQ7"
    doc.write_text(f"---\ntitle: Open 4\n---\n{marker} " + body.replace(". ", f". {marker} "), encoding="utf-8")
    cache = tmp_path / "cache" / "embeddings.sqlite"
    with LocalChatServer(reply=_summarize_reply) as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
        summaries = tmp_path / "cache" / "summaries.sqlite"
        import sqlite3

        def cached() -> list[str]:
            conn = sqlite3.connect(summaries)
            try:
                return [r[0] for r in conn.execute("SELECT summary FROM summary_cache")]
            finally:
                conn.close()

        assert any(marker in s for s in cached())
        doc.write_text(doc.read_text(encoding="utf-8").replace("title: Open 4", "title: Open 4\nsensitivity: RESTRICTED"),
                       encoding="utf-8")
        res = build_library(paths, embedding="none", cache_path=cache, make_llm=make_llm)
    assert not any(marker in s for s in cached()), "a summary of a now-RESTRICTED document stayed in the cache"
    assert not any(marker in t for t in _node_texts(res.snapshot_dir))
    assert len(list((paths.work / "summary_tree").iterdir())) == 1  # older trees' work copies are gone


def test_blocking_check_stops_publication_when_a_summary_repeats_restricted_text(tmp_path):
    paths, markers = _llm_library(tmp_path, seed=5, n_docs=6, restricted=1)
    secret = split_sentences((paths.raw / "secret-0.md").read_text(encoding="utf-8").split("---\n")[-1])[0]
    # a model that (somehow) knows a RESTRICTED sentence and embeds it in its answer
    with LocalChatServer(reply=lambda req: f"Overview: {secret[:-1]} and more") as server:
        make_llm = lambda: OpenAICompatibleProvider(server.base_url, "local-test", timeout_s=10, max_retries=0)  # noqa: E731
        with pytest.raises(BlockingCheckError) as err:
            build_library(paths, embedding="none", cache_path=tmp_path / "c" / "e.sqlite", make_llm=make_llm)
    assert err.value.check == "no_restricted_text_in_nodes"
    assert markers["secret-0"] not in str(err.value)
    assert not (paths.root / "current").exists()


def test_restricted_fingerprints_skip_sentences_that_are_also_open():
    shared = "All rights reserved by the group."
    prints = restricted_fingerprints([f"{shared} The merger code is NIGHTJAR-7 for now."], [f"Open text. {shared}"])
    assert "the merger code is nightjar-7 for now" in prints and shared[:-1].casefold() not in prints


def test_summary_cache_counts_hits_and_misses(tmp_path):
    class Echo:
        id, is_llm = "echo@1", True

        def summarize(self, texts):
            return " | ".join(texts)

    with SummaryCache(tmp_path / "s.sqlite") as cache:
        assert cache.summarize(Echo(), ["a", "b"]) == "a | b"
        assert cache.summarize(Echo(), ["a", "b"]) == "a | b"
        assert cache.summarize(Echo(), ["b", "a"]) == "b | a"
        assert (cache.hits, cache.misses) == (1, 2)


def test_llm_summaries_are_cached_per_token_cap(tmp_path):
    """A summary cut at a small token cap is not served to a build that allows a larger one."""
    with LocalChatServer("ok", reply=lambda body: "A short summary.") as server:
        provider = OpenAICompatibleProvider(server.base_url, "tiny", timeout_s=5.0, backoff_s=0.01)
        small, large = LLMSummarizer(provider, max_tokens=64), LLMSummarizer(provider, max_tokens=256)
        assert small.id != large.id and "t64" in small.id
        with SummaryCache(tmp_path / "s.sqlite") as cache:
            cache.summarize(small, ["a", "b"])
            cache.summarize(small, ["a", "b"])
            cache.summarize(large, ["a", "b"])
            assert (cache.hits, cache.misses) == (1, 2)


def test_llm_summarizer_requires_a_provider():
    from ragspine_core.errors import ConfigError

    with pytest.raises(ConfigError, match="RAGSPINE_LLM_BASE_URL"):
        LLMSummarizer(None)


def test_a_library_above_tree_max_leaves_gets_no_tree_until_it_raises_the_limit(tmp_path):
    raw = tmp_path / "raw" / "lib"
    _write_library(raw, seed=11, n_docs=14, restricted=1)
    paths = LibraryPaths("lib", raw, tmp_path / "art" / "lib")
    cache = tmp_path / "c" / "e.sqlite"
    (raw / "_library.toml").write_text("tree_max_leaves = 5\n", encoding="utf-8")
    small = build_library(paths, embedding="none", cache_path=cache)
    assert not (Path(small.snapshot_dir) / "summary_tree").exists()  # no tree published, and the rest is
    manifest = json.loads((Path(small.snapshot_dir) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["chunks"] > 5
    (raw / "_library.toml").write_text("tree_max_leaves = 0\n", encoding="utf-8")  # 0: no limit
    full = build_library(paths, embedding="none", cache_path=cache)
    assert _node_texts(full.snapshot_dir), "raising the limit builds the tree"
    from ragspine_index.library_config import LibraryConfig
    from ragspine_core.errors import ConfigError

    with pytest.raises(ConfigError, match="tree_max_leaves"):
        LibraryConfig(tree_max_leaves=-1)


# --------------------------------------------------------------------- node vectors
def _two_topic_leaves(n: int = 24) -> tuple[Leaves, np.ndarray]:

    x, labels = _blobs(5, per=n // 3, dim=16)
    # an "ensemble" row: two unit blocks of 8 columns side by side, each scaled by 1/sqrt(2)
    a, b = x[:, :8], x[:, 8:]
    rows = np.concatenate([a / np.linalg.norm(a, axis=1, keepdims=True), b / np.linalg.norm(b, axis=1, keepdims=True)], 1)
    rows = (rows / np.sqrt(2)).astype(np.float32)
    texts = tuple(f"Leaf {i} is about topic {int(t)} and the {WORDS[int(t)]} of the group." for i, t in enumerate(labels))
    leaves = Leaves(np.arange(len(rows), dtype=np.int32), tuple(f"c{i:03d}" for i in range(len(rows))),
                    tuple(f"d{i // 2:03d}" for i in range(len(rows))), texts)
    return leaves, rows


def test_centroid_node_vectors_are_the_covered_leaves_mean_per_model_block_without_embedding(tmp_path):
    from ragspine_index.steps.summary_tree import build_summary_tree, centroid_vectors

    leaves, rows = _two_topic_leaves()
    blocks = ((0, 8, 1 / np.sqrt(2)), (8, 16, 1 / np.sqrt(2)))

    def no_embed(texts):
        raise AssertionError("centroid node vectors must not embed summaries")

    params = TreeParams(token_budget=200, max_members=6, top_size=2)
    ref = build_summary_tree(LibraryPaths("lib", tmp_path / "raw", tmp_path / "art"), leaves, rows, embed=no_embed,
                             vector_kind="embedding:test", summarizer=ExtractiveSummarizer(max_chars=200),
                             summary_cache_path=None, params=params, input_hash="centroid-test", blocks=blocks)
    d = Path(ref.directory)
    vecs = np.load(d / "node_vectors.npy")
    ptr, flat = np.load(d / "leaves_indptr.npy"), np.load(d / "leaves.npy")
    assert len(vecs) == sum(ref.nodes_per_level) >= 3
    for i in range(len(vecs)):
        mean = rows[flat[ptr[i]:ptr[i + 1]]].astype(np.float64).mean(axis=0)
        for s, e, _ in blocks:
            want = mean[s:e] / np.linalg.norm(mean[s:e]) / np.sqrt(2)
            np.testing.assert_allclose(vecs[i, s:e], want, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)  # unit rows, like the leaves'
    assert json.loads((d / "tree.json").read_text())["params"]["node_vectors"] == "centroid"
    # a node is nearer its own leaves than the others' (the tree still ranks by topic)
    top = vecs[int(np.argmax(ptr[1:] - ptr[:-1]))]
    assert np.allclose(centroid_vectors(rows, [[0, 1]], None)[0], centroid_vectors(rows, [[1, 0]], None)[0])
    assert float(np.max(rows @ top)) > 0.5


def test_summary_node_vectors_embed_each_summary_and_change_the_tree_hash(tmp_path):
    from ragspine_index.steps.summary_tree import build_summary_tree

    leaves, rows = _two_topic_leaves()
    seen: list[str] = []

    def embed(texts):
        seen.extend(texts)
        return np.tile(rows[:1], (len(texts), 1))

    paths = LibraryPaths("lib", tmp_path / "raw", tmp_path / "art")
    kw = dict(vector_kind="embedding:test", summarizer=ExtractiveSummarizer(max_chars=200), summary_cache_path=None,
              input_hash="same-input")
    by_summary = build_summary_tree(paths, leaves, rows, embed=embed, **kw,
                                    params=TreeParams(token_budget=200, max_members=6, top_size=2, node_vectors="summary"))
    by_centroid = build_summary_tree(paths, leaves, rows, embed=embed, **kw,
                                     params=TreeParams(token_budget=200, max_members=6, top_size=2))
    texts = pq.read_table(Path(by_summary.directory) / "nodes.parquet").column("text").to_pylist()
    assert seen == texts and by_summary.content_hash != by_centroid.content_hash
    np.testing.assert_array_equal(np.load(Path(by_summary.directory) / "node_vectors.npy"), np.tile(rows[:1], (len(texts), 1)))
    with pytest.raises(Exception, match="node_vectors"):
        TreeParams(node_vectors="mean")
