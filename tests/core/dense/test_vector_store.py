"""InProcessVectorStore: exact cosine, id-ascending ties, exact-match where filters."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine_core.dense import InProcessVectorStore, VectorStore
from ragspine_core.errors import ConfigError, EmbeddingModelMismatchError, FilterError


@pytest.fixture()
def store() -> InProcessVectorStore:
    s = InProcessVectorStore()
    s.upsert(
        ["c", "a", "b", "d"],
        [[1.0, 0.0], [0.0, 2.0], [3.0, 0.0], [1.0, 1.0]],
        [
            {"lang": "en", "topic": "x"},
            {"lang": "zh", "topic": "x"},
            {"lang": "en", "topic": "y"},
            {"lang": "fr"},
        ],
    )
    return s


def test_satisfies_the_protocol(store):
    assert isinstance(store, VectorStore)
    assert store.count() == 4 and store.dim == 2


def test_query_ranks_by_cosine_and_breaks_ties_by_id(store):
    results = store.query([2.0, 0.0], top_k=3)
    assert [r[0] for r in results] == ["b", "c", "d"]  # b and c tie at 1.0: b < c
    assert results[0][1] == pytest.approx(1.0) and results[2][1] == pytest.approx(2**-0.5)
    assert store.query([1.0, 0.0], top_k=1) == [("b", pytest.approx(1.0))]


def test_where_matches_values_and_lists(store):
    assert [i for i, _ in store.query([1.0, 0.0], 10, where={"lang": "en"})] == ["b", "c"]
    assert [i for i, _ in store.query([1.0, 0.0], 10, where={"lang": ["zh", "fr"]})] == ["d", "a"]
    assert [i for i, _ in store.query([1.0, 0.0], 10, where={"lang": "en", "topic": "y"})] == ["b"]
    assert store.query([1.0, 0.0], 10, where={"topic": "z"}) == []
    assert [i for i, _ in store.query([1.0, 0.0], 10, where={"topic": ["x", "y"]})] == ["b", "c", "a"]  # d lacks topic
    assert store.query([1.0, 0.0], 10, where={"lang": []}) == []


def test_upsert_replaces_vector_and_metadata(store):
    store.upsert(["a"], [[1.0, 0.0]], [{"lang": "de"}])
    assert store.count() == 4
    assert [i for i, _ in store.query([1.0, 0.0], 3)] == ["a", "b", "c"]
    assert store.query([1.0, 0.0], 5, where={"lang": "zh"}) == []
    assert [i for i, _ in store.query([1.0, 0.0], 5, where={"lang": "de"})] == ["a"]


def test_repeated_id_in_one_upsert_keeps_the_last(store):
    store.upsert(["e", "e"], [[1.0, 0.0], [0.0, 1.0]])
    assert store.count() == 5
    assert store.query([0.0, 1.0], 1, where=None)[0][0] == "a"  # a and e tie at 1.0
    assert dict(store.query([0.0, 1.0], 5))["e"] == pytest.approx(1.0)


def test_delete_removes_ids_and_ignores_unknown(store):
    store.delete(["b", "zzz"])
    assert store.count() == 3
    assert [i for i, _ in store.query([1.0, 0.0], 10)] == ["c", "d", "a"]
    store.delete(["a", "c", "d"])
    assert store.count() == 0 and store.query([1.0, 0.0], 3) == []
    store.upsert(["n"], [[0.0, 1.0]])
    assert store.query([0.0, 1.0], 3) == [("n", pytest.approx(1.0))]


def test_zero_vectors_score_zero_without_nan():
    s = InProcessVectorStore(dim=2)
    s.upsert(["z", "y"], np.zeros((2, 2)))
    assert s.query([1.0, 0.0], 5) == [("y", 0.0), ("z", 0.0)]
    assert s.query([0.0, 0.0], 5) == [("y", 0.0), ("z", 0.0)]


def test_matches_a_brute_force_ranking_on_random_data():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((200, 12)).astype(np.float32)
    ids = [f"id{i:03d}" for i in range(200)]
    s = InProcessVectorStore()
    s.upsert(ids, vectors)
    q = rng.standard_normal(12)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = unit @ (q / np.linalg.norm(q))
    want = [ids[i] for i in np.argsort(-scores)[:15]]
    assert [i for i, _ in s.query(q, 15)] == want


def test_wrong_dimension_and_bad_inputs_are_explained(store):
    with pytest.raises(EmbeddingModelMismatchError, match="3-d vectors in a 2-d store"):
        store.upsert(["x"], [[1.0, 2.0, 3.0]])
    with pytest.raises(EmbeddingModelMismatchError, match="2-d vectors"):
        store.query([1.0, 0.0, 0.0], 1)
    with pytest.raises(ConfigError, match=r"shape \(2, dim\)"):
        store.upsert(["x", "y"], [[1.0, 0.0]])
    with pytest.raises(ConfigError, match="metadata has 1 entries for 2 ids"):
        store.upsert(["x", "y"], [[1.0, 0.0], [0.0, 1.0]], [{}])
    with pytest.raises(ConfigError, match="NaN"):
        store.upsert(["x"], [[np.nan, 0.0]])
    with pytest.raises(ConfigError, match="non-empty string"):
        store.upsert([""], [[1.0, 0.0]])
    with pytest.raises(FilterError, match="mapping"):
        store.query([1.0, 0.0], 1, where=[("lang", "en")])
    with pytest.raises(ConfigError, match="top_k"):
        store.query([1.0, 0.0], -1)
    assert store.count() == 4  # nothing partial was written
