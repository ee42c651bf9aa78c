"""The embedding cache keeps an ensemble's vectors per part model.

A library that gains a language moves from ``minilm+e5`` to ``minilm+e5+multilingual``;
its existing chunks must then be embedded with the new model only, and the rows must be
exactly what the new ensemble's own ``embed`` returns. Real SQLite cache, real
(deterministic) backends; a subclass only counts the texts each backend is asked for.
"""

from __future__ import annotations

import numpy as np

from ragspine_index.steps.chunk_embeddings import EmbeddingCache, cached_vectors, embed_through_cache, text_hash
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.ensemble import EnsembleEmbeddingBackend


class Counting(DeterministicEmbeddingBackend):
    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.asked: list[str] = []

    def embed(self, texts, *, kind="passage", batch_size=32):
        self.asked.extend(texts)
        return super().embed(texts, kind=kind, batch_size=batch_size)


TEXTS = ["Acme Europe revenue fell in Q3", "anti-bribery policy", "艾克美中国营收", "sodium-ion plant"]


def test_a_new_part_embeds_alone_and_rows_equal_the_ensembles_own(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    a, b, c = Counting(32), Counting(16), Counting(24)
    hashes = [text_hash(t) for t in TEXTS]
    two = EnsembleEmbeddingBackend([("a", a), ("b", b)])
    rows_two = embed_through_cache(cache, two, TEXTS, hashes, batch_size=8)
    assert sorted(a.asked) == sorted(TEXTS) and sorted(b.asked) == sorted(TEXTS)
    np.testing.assert_array_equal(rows_two, two.embed(TEXTS))

    # the same texts again: every row comes from the parts' entries, nothing is embedded
    found = cached_vectors(cache, two, hashes)
    assert sorted(found) == sorted(hashes)
    np.testing.assert_array_equal(np.stack([found[h] for h in hashes]), rows_two)

    # the library gains a model: only that model embeds, and rows equal the new ensemble's embed
    a.asked.clear(), b.asked.clear()
    three = EnsembleEmbeddingBackend([("a", a), ("b", b), ("c", c)])
    assert cached_vectors(cache, three, hashes) == {}
    rows_three = embed_through_cache(cache, three, TEXTS, hashes, batch_size=8)
    assert a.asked == [] and b.asked == [] and sorted(c.asked) == sorted(TEXTS)
    c.asked.clear()
    np.testing.assert_array_equal(rows_three, three.embed(TEXTS))
    cache.close()


def test_whole_ensemble_entries_of_an_older_cache_are_still_used(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    a, b = Counting(32), Counting(16)
    ens = EnsembleEmbeddingBackend([("a", a), ("b", b)])
    hashes = [text_hash(t) for t in TEXTS]
    old_rows = ens.embed(TEXTS)
    cache.put_many(ens.model_id, list(zip(hashes, old_rows)))  # what earlier releases stored
    found = cached_vectors(cache, ens, hashes)
    np.testing.assert_array_equal(np.stack([found[h] for h in hashes]), old_rows)
    # a text only one part has is not a cached row
    extra = "a text no model has seen"
    embed_through_cache(cache, a, [extra], [text_hash(extra)], batch_size=8)
    assert text_hash(extra) not in cached_vectors(cache, ens, [text_hash(extra)])
    cache.close()


def test_a_single_model_is_cached_under_its_own_id(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    a = Counting(32)
    hashes = [text_hash(t) for t in TEXTS]
    rows = embed_through_cache(cache, a, TEXTS, hashes, batch_size=8)
    found = cache.get_many(a.model_id, hashes)
    np.testing.assert_array_equal(np.stack([found[h] for h in hashes]), rows)
    cache.close()


def test_a_zero_vector_in_the_cache_is_embedded_again(tmp_path):
    # a build whose vectors_finite_and_normalised check refused a zero vector left it in the
    # cache; the next build must not reuse it (it would be refused again, for ever)
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    backend = Counting(16)
    hashes = [text_hash(t) for t in TEXTS]
    cache.put_many(backend.model_id, [(hashes[0], np.zeros(16, dtype=np.float32))])
    assert hashes[0] not in cached_vectors(cache, backend, hashes)
    rows = embed_through_cache(cache, backend, TEXTS[:1], hashes[:1], batch_size=8)
    assert backend.asked == TEXTS[:1]
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-6)
    assert cached_vectors(cache, backend, hashes[:1])[hashes[0]].any()


def test_a_row_whose_check_fails_is_a_miss_and_a_row_without_one_gets_one(tmp_path):
    """Bytes flipped inside a row (SQLite has no page checksums) are not returned: the text is
    embedded again. A row of a cache written before the check column is returned and checked
    from then on (an upgrade re-embeds nothing)."""
    import sqlite3

    path = tmp_path / "cache.sqlite"
    with sqlite3.connect(path) as conn:  # the schema before the check column
        conn.execute("CREATE TABLE embedding_cache (model_id TEXT NOT NULL, text_hash TEXT NOT NULL, "
                     "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model_id, text_hash))")
        conn.execute("INSERT INTO embedding_cache VALUES ('m', 'old', 2, ?)", (np.ones(2, np.float32).tobytes(),))
    conn.close()
    cache = EmbeddingCache(path)
    try:
        assert sorted(cache.get_many("m", ["old"])) == ["old"] and cache.unchecked_rows == 1
        assert sorted(cache.get_many("m", ["old"])) == ["old"] and cache.unchecked_rows == 1  # checked now
        cache.put_many("m", [("new", np.full(2, 0.5, np.float32))])
        got = cache.get_many("m", ["new", "old"])
        assert sorted(got) == ["new", "old"] and cache.damaged_rows == 0 and cache.unchecked_rows == 1
        with sqlite3.connect(path) as conn:
            blob = bytearray(conn.execute("SELECT vector FROM embedding_cache WHERE text_hash = 'new'").fetchone()[0])
            blob[1] ^= 0x01
            conn.execute("UPDATE embedding_cache SET vector = ? WHERE text_hash = 'new'", (bytes(blob),))
        conn.close()
        assert sorted(cache.get_many("m", ["new", "old"])) == ["old"] and cache.damaged_rows == 1
        # a row's check covers its key: the same vector under another text's hash is refused too
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE embedding_cache SET text_hash = 'olc' WHERE text_hash = 'old'")
        conn.close()
        assert cache.get_many("m", ["olc"]) == {} and cache.damaged_rows == 2
        with sqlite3.connect(path) as conn:  # an old row cut short (no whole float32): refused, not a crash
            conn.execute("INSERT INTO embedding_cache VALUES ('m', 'cut', 2, ?, NULL)", (b"\x00\x00\x80",))
        conn.close()
        assert cache.get_many("m", ["cut"]) == {} and cache.damaged_rows == 3
    finally:
        cache.close()
