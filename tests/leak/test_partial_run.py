"""Item 2 of issue 28: a partial Dagster run never publishes stale derived artifacts.

After a reclassification, ``documents,chunks,index_text,bm25_index,index_manifest`` used to
succeed and publish the previous ``chunk_embeddings``, ``summary_tree`` and
``relation_graph``, built while the document was open: its vector, its sentences in tree
nodes and its names as graph nodes. ``index_manifest`` now verifies every artifact it
publishes against the current chunks and blocks on a stale one (publishing nothing);
``stale_upstream_sensor`` then requests a run of exactly the stale assets and
``index_manifest``, which publishes the reclassification with nothing stale (issue 39).
"""

from __future__ import annotations

import json

import dagster as dg
import numpy as np
import pyarrow.parquet as pq
import pytest

from ragspine_assets.assets import ALL_ASSETS
from ragspine_assets.io_manager import StepOutputIOManager
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig
from ragspine_assets.stale import stale_upstream_sensor
from ragspine_core.errors import IndexNotFoundError
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.conftest import RAGSPINE_ENV_VARS, ingest
from tests.end_to_end.test_snapshot_integrity import run_cli

pytestmark = pytest.mark.slow

NAME = "Quillfeather Vantablue"
SECRET_BODY = (f"{NAME} signed the supply contract for the northern plant. {NAME} will ship the first "
               f"battery lots in March. The {NAME} team reported strong demand from utilities.\n")


def _open_doc(i: int) -> str:
    topics = ["canteen menu", "parking spaces", "garden benches", "printer toner", "bicycle racks", "coffee beans",
              "meeting rooms", "window cleaning", "fire drills", "badge readers"]
    t = topics[i % len(topics)]
    return (f"---\nsensitivity: PUBLIC\n---\n# Note {i}\n\nThe {t} were reviewed this week by Facilities Office. "
            f"Staff asked about the {t} again. The {t} budget stays flat next year.\n")


def test_partial_run_after_reclassification_publishes_nothing_stale(tmp_path, monkeypatch):
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for i in range(10):
        (raw / f"open{i}.md").write_text(_open_doc(i), encoding="utf-8")
    (raw / "supplier.md").write_text(f"---\nsensitivity: PUBLIC\n---\n# Supplier\n\n{SECRET_BODY}", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        ingest(raw, instance=instance, embedding="deterministic")
        art = data / "artifacts" / "lib"
        with open_library(art) as lib:
            graph_labels = " ".join(pq.read_table(lib.artifact_path("relation_graph") / "nodes.parquet").column("label").to_pylist())
            assert "Vantablue" in graph_labels, "the open document's name is a graph node before"
        (raw / "supplier.md").write_text(f"---\nsensitivity: RESTRICTED\n---\n# Supplier\n\n{SECRET_BODY}", encoding="utf-8")
        keys = [a.key for a in ALL_ASSETS if a.key.to_user_string() in
                ("documents", "chunks", "index_text", "bm25_index", "index_manifest")]
        assert len(keys) == 5
        resources = {"ragspine": RagspineConfig(data_root=str(data), raw_root=str(data / "raw"), embedding_backend=EmbeddingBackendResource(spec="deterministic")),
                     "io_manager": StepOutputIOManager()}
        before = (art / "current").resolve()
        warm = HybridRetriever(open_library(art), embedding_backend=None, config=RetrievalConfig(mode="bm25"))
        assert any(NAME in h.chunk.text for h in warm.search(NAME, top_k=5, include_restricted=False)), "open before"
        result = dg.materialize(ALL_ASSETS, selection=keys, instance=instance, resources=resources, partition_key="lib",
                                raise_on_error=False)
        assert not result.success and (art / "current").resolve() == before, "stale upstream blocks publication"
        # ... and from the moment its chunks step recorded the label, the snapshot that served the
        # document as open serves nothing: withdrawn, even though this run published nothing
        assert not before.exists()
        with pytest.raises(IndexNotFoundError, match="quarantined .*became RESTRICTED.*serves nothing") as err:
            open_library(art)
        assert NAME not in str(err.value) and "Vantablue" not in str(err.value)
        failure = "\n".join(str(e.step_failure_data.error) for e in result.get_step_failure_events())
        assert "the library serves nothing until a snapshot is published" in failure and "keeps serving" not in failure
        with pytest.raises(IndexNotFoundError):  # a process that held it open stops too (fail closed)
            warm.search(NAME, top_k=5, include_restricted=False)
        rc, out, err = run_cli("query", str(art), NAME)  # the user's path says why, and what to run
        assert rc != 0 and "quarantined" in err and "serves nothing" in err and NAME not in out + err
        rc, out, err = run_cli("snapshots", str(art))
        assert rc == 0 and "current: the library serves nothing until a snapshot is published" in out, out
        with dg.build_sensor_context(instance=instance) as context:
            [request] = stale_upstream_sensor(context).run_requests
        assert {k.to_user_string() for k in request.asset_selection} == {
            "chunk_embeddings", "summary_tree", "relation_graph", "index_manifest"}
        repair = dg.materialize(ALL_ASSETS, selection=list(request.asset_selection), instance=instance,
                                resources=resources, partition_key="lib", tags=request.tags)
        assert repair.success
    assert len(warm.search("canteen menu", top_k=3, include_restricted=False)), "the warm reader follows the new publication"
    assert not any(NAME in h.chunk.text for h in warm.search(NAME, top_k=5, include_restricted=False))
    with open_library(art) as lib:
        restricted = lib.restricted_mask()
        assert restricted.any(), "the reclassification was published (or the run failed)"
        emb = lib.embeddings()
        assert emb is not None and not restricted[np.asarray(emb.rows)].any(), "no vector of a RESTRICTED row"
        tree = lib.summary_tree()
        assert tree is not None
        assert not restricted[tree.leaves].any()
        assert not any("Vantablue" in t for t in tree.texts)
        graph_dir = lib.artifact_path("relation_graph")
        assert graph_dir is not None
        nodes = pq.read_table(graph_dir / "nodes.parquet").to_pydict()
        assert not any("Vantablue" in str(label) for label in nodes["label"]), "no graph name from RESTRICTED text"
        manifest = json.dumps(lib.manifest)
        assert "Vantablue" not in manifest
