"""One hit type: a hit a retriever fills lazily is a plain :class:`Hit` (no subclass, no
``__getattr__``), frozen, comparable and picklable like one built by hand."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from ragspine_core.records import Chunk, Hit, lazy_hits, ranked_hits


def _chunk(i: int) -> Chunk:
    return Chunk(f"c{i:02d}", "lib", f"d{i}", 0, f"text {i}", 0, 6 + len(str(i)))


class Loader:
    """Chunks by row, counting reads (the store a library gives ``lazy_hits``)."""

    def __init__(self) -> None:
        self.reads: list[list[int]] = []

    def __call__(self, rows: list[int]) -> list[Chunk]:
        self.reads.append(list(rows))
        return [_chunk(r) for r in rows]


def test_every_hit_is_one_class_and_fields_load_together():
    load = Loader()
    fused = lazy_hits(load, [4, 2], ["c04", "c02"], [0.3, 0.2], [{"bm25": 1.0, "fused": 0.3}, {"fused": 0.2}], ["", "n1"])
    ranked = ranked_hits(load, [7, 1, 3], {7: "c07", 1: "c01", 3: "c03"}, "bm25", [9.0, 8.0, 7.0], weight=2.0, rrf_k=60)
    plain = Hit(_chunk(5), 0.1)
    for h in fused + ranked + [plain]:
        assert type(h) is Hit
    assert not hasattr(Hit, "__getattr__") and not Hit.__subclasses__()
    # ids, scores and rows without any read; one read per result when a chunk is used
    assert [h.chunk_id for h in fused] == ["c04", "c02"] and [h.row for h in fused] == [4, 2]
    assert [h.chunk_id for h in ranked] == ["c07", "c01", "c03"] and [h.row for h in ranked] == [7, 1, 3]
    assert fused[1].via == "n1" and ranked[0].via == "" and plain.row is None and plain.scores == {}
    assert ranked[1].score == 2.0 / 62 and ranked[1].scores == {"bm25": 8.0, "vector": 0.0, "fused": 2.0 / 62}
    assert ranked[1].scores is ranked[1].scores
    assert load.reads == []
    assert ranked[2].chunk == _chunk(3) and fused[0].chunk == _chunk(4)
    assert load.reads == [[7, 1, 3], [4, 2]]
    ranked[0].chunk  # noqa: B018  (already loaded with its ranking)
    assert len(load.reads) == 2


def test_a_hit_is_a_frozen_value():
    load = Loader()
    lazy = ranked_hits(load, [3], {3: "c03"}, "vector", [0.9], weight=1.0, rrf_k=60)[0]
    same = Hit(_chunk(3), 1.0 / 61, {"bm25": 0.0, "vector": 0.9, "fused": 1.0 / 61})
    assert lazy == same and same == lazy and lazy != Hit(_chunk(3), 0.5, dict(same.scores))
    assert (lazy == "c03") is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        lazy.score = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        same.via = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        lazy.no_such_field  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(TypeError):  # scores is a dict: unhashable, as the dataclass it was
        hash(same)
    moved = lazy.with_score(0.5, fused=0.5, rerank=2.0)
    assert type(moved) is Hit and moved.score == 0.5 and moved.scores["vector"] == 0.9 and moved.scores["rerank"] == 2.0
    assert lazy.scores["fused"] == 1.0 / 61  # the original is unchanged
    assert repr(lazy) == repr(same) and repr(same).startswith("Hit(chunk=Chunk(chunk_id='c03'")


def test_hits_pickle_and_copy_as_plain_hits():
    load = Loader()
    lazy = lazy_hits(load, [6], ["c06"], [0.25], [{"fused": 0.25}], ["node"])[0]
    for back in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy), copy.copy(lazy)):
        assert type(back) is Hit and back == lazy and back.row == 6 and back.via == "node" and back.chunk_id == "c06"
    plain = Hit(_chunk(1), 1.0, {"fused": 1.0})
    assert pickle.loads(pickle.dumps(plain)) == plain and pickle.loads(pickle.dumps(plain)).row is None
