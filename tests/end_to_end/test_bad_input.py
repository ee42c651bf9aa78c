"""Tier 3: bad input in a library is reported by file and loses nothing.

One real materialization of the sample library plus seven kinds of broken file.
"""

from __future__ import annotations

import json

import pytest

dg = pytest.importorskip("dagster", reason="materializing needs the 'pipeline' extra")

from ragspine_query.library import open_library  # noqa: E402
from ragspine_query.agent_api import build_narrative_retriever  # noqa: E402
from tests.conftest import copy_sample_data, ingest  # noqa: E402

pytestmark = pytest.mark.slow

#: file name (relative to the library) -> (bytes, words the error message must contain)
BAD_FILES = {
    "bad-utf8.md": (b"---\ndoc_id: bad-utf8\n---\nRevenue \xff\xfe fell.\n", ["UTF-8", "encoding"]),
    "scan.md": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", ["binary"]),
    "empty.txt": (b"", ["empty"]),
    "broken-front-matter.md": (b"---\ndoc_id: broken\ntitle Missing colon\n---\nBody text.\n", ["front matter", "':'"]),
    "zz-duplicate.md": (b"---\ndoc_id: acme-eu-2024q3-earnings\n---\nA second document claiming an existing id.\n",
                        ["doc_id", "already used", "reports/acme-eu-2024q3-earnings.md"]),
    "secret.md": (b"---\ndoc_id: secret\nsensitivity: TOP-SECRET\n---\nClassified text.\n", ["sensitivity", "TOP-SECRET"]),
    "more-press.jsonl": (
        json.dumps({"doc_id": "pr-extra-quokka", "title": "Quokka plant opens", "text": "Acme opened the Quokka plant."}).encode()
        + b"\n" + json.dumps({"doc_id": "pr-bad", "text": 42}).encode() + b"\n",
        ["more-press.jsonl#L2", "'text'"],
    ),
}


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory):
    data = copy_sample_data(tmp_path_factory.mktemp("bad_input") / "data")
    raw = data / "raw" / "sample"
    for name, (content, _) in BAD_FILES.items():
        (raw / name).write_bytes(content)
    with dg.DagsterInstance.ephemeral() as instance:
        summary = ingest(raw, instance=instance)  # raises if the run fails
        yield data / "artifacts" / "sample", instance, summary


def test_the_run_succeeds_and_publishes(bad_run):
    art, _, summary = bad_run
    assert summary.changed and (art / "current").resolve().name == summary.snapshot_id


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_each_error_names_its_file_in_the_manifest(bad_run, name):
    art, _, _ = bad_run
    with open_library(art) as lib:
        errors = lib.manifest["errors"]
    matching = [e for e in errors if name in e]
    assert matching, f"{name} not reported in {errors}"
    for word in BAD_FILES[name][1]:
        assert any(word in e for e in matching), (word, matching)


def test_errors_appear_in_the_documents_materialization_metadata(bad_run):
    _, instance, _ = bad_run
    record = instance.fetch_materializations(dg.AssetKey("documents"), limit=1).records[0]
    metadata = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert metadata["parse_errors"] == len(BAD_FILES)
    for name in BAD_FILES:
        assert name in metadata["errors"]


def test_the_parse_check_fails_as_a_warning(bad_run):
    _, instance, _ = bad_run
    key = dg.AssetCheckKey(dg.AssetKey("documents"), "documents_parse_cleanly")
    (latest,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    evaluation = latest.event.dagster_event.event_specific_data
    assert evaluation.passed is False
    assert evaluation.severity == dg.AssetCheckSeverity.WARN


def test_every_good_document_is_indexed(bad_run, repo_root):
    art, _, _ = bad_run
    with open_library(art) as lib:
        docs = lib.manifest["documents"]
        counts = lib.manifest["counts"]
    assert counts["documents"] == 47 and counts["parse_errors"] == len(BAD_FILES)
    assert "pr-extra-quokka" in docs  # the good line of a half-broken .jsonl
    for bad_id in ("bad-utf8", "broken", "secret", "pr-bad"):
        assert bad_id not in docs


def test_duplicate_doc_id_keeps_the_first_source(bad_run):
    art, _, _ = bad_run
    with open_library(art) as lib:
        texts = [r[0] for r in lib.execute_read("SELECT text FROM narrative_chunk WHERE doc_id = ?",
                                                 ("acme-eu-2024q3-earnings",))]
    assert texts and not any("second document claiming" in t for t in texts)
    assert any("revenue" in t.lower() for t in texts)


def test_the_library_still_answers(bad_run):
    art, _, _ = bad_run
    retriever = build_narrative_retriever(art, embedding_backend=None, reranker=None)
    assert "acme-eu-2024q3-earnings" in [s.doc_id for s in retriever.retrieve("why did Acme Europe revenue decline in Q3 2024", top_k=3)]
    assert retriever.retrieve("Quokka plant", top_k=3)[0]["doc_id"] == "pr-extra-quokka"
    assert not any("Classified" in s["text"] for s in retriever.retrieve("Classified text", top_k=50))
