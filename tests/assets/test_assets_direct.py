"""Tier 2: each Dagster asset body invoked directly with ``build_asset_context``.

The assets run in order on a private copy of the sample library, passing each output
to the next by hand — no ``materialize``, no run storage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="materializing needs the 'pipeline' extra")

from ragspine_assets.assets import bm25_index, chunk_embeddings, chunks, documents, index_manifest, index_text, relation_graph, summary_tree  # noqa: E402
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig  # noqa: E402
from ragspine_core import schema  # noqa: E402
from ragspine_query.library import open_library  # noqa: E402
from ragspine_query.retriever import HybridRetriever, RetrievalConfig  # noqa: E402
from tests.conftest import copy_sample_data  # noqa: E402

LIBRARY = "sample"


def ctx(data_root: Path) -> dg.AssetExecutionContext:
    # RagspineConfig nests the embedding backend resource: open the context as a context manager
    return dg.build_asset_context(
        partition_key=LIBRARY,
        resources={"ragspine": RagspineConfig(data_root=str(data_root), embedding_backend=EmbeddingBackendResource(spec="none"))},
    )


def run(asset, data_root: Path, **inputs) -> tuple[dg.Output, dict[str, dg.AssetCheckResult]]:
    with ctx(data_root) as context:
        return split(asset(context, **inputs))


def split(events) -> tuple[dg.Output, dict[str, dg.AssetCheckResult]]:
    events = list(events) if not isinstance(events, dg.Output) else [events]
    outputs = [e for e in events if isinstance(e, dg.Output)]
    checks = {e.check_name: e for e in events if isinstance(e, dg.AssetCheckResult)}
    assert len(outputs) == 1
    return outputs[0], checks


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Run every asset body once; returns (data_root, {asset: (output, checks)})."""
    data = copy_sample_data(tmp_path_factory.mktemp("direct") / "data")
    out: dict[str, tuple[dg.Output, dict]] = {}
    out["documents"] = run(documents, data)
    docs = out["documents"][0].value
    out["chunks"] = run(chunks, data, documents=docs)
    upd = out["chunks"][0].value
    out["index_text"] = run(index_text, data, chunks=upd)
    text = out["index_text"][0].value
    out["bm25_index"] = run(bm25_index, data, index_text=text, documents=docs)
    out["chunk_embeddings"] = run(chunk_embeddings, data, index_text=text, documents=docs)
    out["summary_tree"] = run(summary_tree, data, index_text=text, chunk_embeddings=out["chunk_embeddings"][0].value,
                              documents=docs)
    out["relation_graph"] = run(relation_graph, data, chunks=upd, index_text=text, documents=docs)
    out["index_manifest"] = run(
        index_manifest, data, documents=docs, chunks=upd, index_text=text, bm25_index=out["bm25_index"][0].value,
        chunk_embeddings=out["chunk_embeddings"][0].value, summary_tree=out["summary_tree"][0].value,
        relation_graph=out["relation_graph"][0].value)
    return data, out


def test_documents_asset_parses_the_sample_library(chain):
    _, out = chain
    output, checks = out["documents"]
    docs = output.value
    assert len(docs.documents) == 46 and docs.errors == ()
    assert output.metadata["documents"].value == 46
    assert output.metadata["parse_errors"].value == 0
    assert output.metadata["by_sensitivity"].value["RESTRICTED"] == 4
    assert output.data_version is not None
    assert checks["documents_parse_cleanly"].passed


def test_chunks_asset_writes_the_store_and_passes_its_checks(chain):
    data, out = chain
    output, checks = out["chunks"]
    upd = output.value
    assert len(upd.added) == 46 and upd.n_active_docs == 46
    assert upd.n_active_chunks == output.metadata["active_chunks"].value > 46
    assert Path(upd.store_path) == data / "artifacts" / LIBRARY / schema.CHUNK_STORE_FILE
    assert upd.chunker.startswith("paragraph@")
    assert checks["chunk_text_is_substring_of_source"].passed
    assert checks["chunk_ids_unique"].passed


def test_index_text_asset_counts_restricted_rows(chain):
    _, out = chain
    ref = out["index_text"][0].value
    assert ref.n_rows == out["chunks"][0].value.n_active_chunks
    assert ref.n_restricted > 0
    assert Path(ref.path).is_file()


def test_bm25_asset_reports_vocabulary_and_rows(chain):
    _, out = chain
    output, _ = out["bm25_index"]
    assert output.value.stats["chunk_rows"] == out["chunks"][0].value.n_active_chunks
    assert output.value.stats["doc_rows"] == 46
    assert output.metadata["vocab_size"].value > 1000
    assert (Path(output.value.directory) / schema.BM25_DIR / schema.BM25_IMPACTS).is_file()


def test_embeddings_asset_with_backend_none_writes_no_vectors(chain):
    _, out = chain
    output, checks = out["chunk_embeddings"]
    assert output.value.directory is None and output.value.count == 0
    assert output.value.skipped_restricted == out["index_text"][0].value.n_restricted
    assert checks["no_restricted_vectors"].passed


def test_manifest_asset_publishes_a_snapshot_the_reader_opens(chain):
    data, out = chain
    output, _ = out["index_manifest"]
    snapshot_dir = Path(output.value["snapshot_dir"])
    assert (data / "artifacts" / LIBRARY / "current").resolve() == snapshot_dir.resolve()
    with open_library(data / "artifacts" / LIBRARY) as lib:
        assert lib.snapshot_id == output.value["snapshot_id"] == output.metadata["snapshot_id"].value
        assert lib.n_chunks == output.metadata["chunks"].value
        hits = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search(
            "why did Acme Europe revenue decline in Q3 2024", top_k=3)
        assert hits[0].chunk.doc_id == "acme-eu-2024q3-earnings"


def test_documents_asset_reports_a_bad_file_without_failing(tmp_path):
    data = copy_sample_data(tmp_path / "data")
    (data / "raw" / LIBRARY / "broken.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    output, checks = run(documents, data)
    assert len(output.value.documents) == 46
    assert output.metadata["parse_errors"].value == 1
    assert "broken.md" in output.metadata["errors"].value
    assert not checks["documents_parse_cleanly"].passed
    assert checks["documents_parse_cleanly"].severity == dg.AssetCheckSeverity.WARN


def test_documents_asset_fails_clearly_for_a_missing_library(tmp_path):
    with pytest.raises(dg.Failure, match="does not exist"):
        run(documents, tmp_path / "empty-data-root")


def test_relation_graph_asset_reports_counts_and_sizes_but_no_labels(chain):
    import json

    from tests.conftest import RESTRICTED_MARKERS

    _, out = chain
    output, checks = out["relation_graph"]
    meta = {k: v.value for k, v in output.metadata.items()}
    assert meta["nodes_entity"] > 100 and meta["nodes_chunk"] > 100
    assert meta["edges_mentions"] > 0 and meta["edges_subsidiary_of"] >= 1 and meta["edges_peer_of"] >= 1
    assert meta["restricted_chunks_skipped"] >= 4
    # sizes, never labels: a label may be text of a document RESTRICTED later (issue 37)
    assert meta["top_entity_degrees"] and meta["top_entity_degrees"] == sorted(meta["top_entity_degrees"], reverse=True)
    assert "neighbourhood_of_most_connected" not in meta and "top_entities_by_degree" not in meta
    assert meta["communities"] >= 3 and "| community | entities | member chunks |" in meta["largest_communities"]
    assert output.data_version is not None
    assert checks["no_restricted_graph_labels"].passed
    shown = json.dumps(meta, default=str).lower()
    assert not any(m.lower() in shown for m in RESTRICTED_MARKERS.values())


def test_no_chunk_or_summary_text_reaches_the_event_log(chain):
    """The Dagster event log outlives a reclassification (issue 37): materialization metadata
    holds ids, counts and sizes, never a chunk's text, a tree node's summary or a community
    summary, so nothing shown today can be text of a document that is RESTRICTED tomorrow."""
    import json

    import pyarrow.parquet as pq

    from ragspine_index.steps.index_text import read_index_text

    data, out = chain
    shown = json.dumps({name: {k: v.value for k, v in output.metadata.items()} for name, (output, _) in out.items()},
                       default=str)
    texts = read_index_text(out["index_text"][0].value).column("index_text").to_pylist()
    with open_library(data / "artifacts" / LIBRARY) as lib:
        tree_texts = list(lib.summary_tree().texts) if "summary_tree" in lib.manifest["artifact_sets"] else []
    communities = Path(out["relation_graph"][0].value.directory) / "communities.parquet"
    summaries = pq.read_table(communities).column("summary").to_pylist() if communities.is_file() else []
    # entity labels (glossary names, and extracted names such as a document title) are the
    # graph's own labels, checked by no_restricted_graph_labels; they are not text shown here
    labels = pq.read_table(Path(out["relation_graph"][0].value.directory) / "nodes.parquet",
                           columns=["label"]).column("label").to_pylist()
    for label in sorted(set(labels), key=len, reverse=True):
        if len(label) >= 20:
            shown = shown.replace(label, "")
    windows = {t[i:i + 40] for t in [*texts, *tree_texts, *summaries] for i in range(0, max(len(t) - 40, 1), 40)
               if len(t) >= 40}
    assert len(windows) > 100 and summaries and tree_texts
    assert not [w for w in windows if w in shown]
