"""Data-driven publication: ``publish_snapshot`` copies named artifacts of the registry
(``ragspine_core.schema.ARTIFACT_REGISTRY``) and lists them in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_index.publish import publish_snapshot
from ragspine_core import schema
from ragspine_core.errors import RagspineError

DOC = """---
doc_id: {doc_id}
title: {title}
entity: ACME
topic: finance
period: 2024Q3
language: en
sensitivity: PUBLIC
valid_as_of: 2024-10-01
---
{body}
"""


@pytest.fixture
def built(tmp_path):
    raw = tmp_path / "data" / "raw" / "tiny"
    raw.mkdir(parents=True)
    (raw / "a.md").write_text(DOC.format(doc_id="a", title="Revenue", body="Acme revenue grew 5% in Q3."), encoding="utf-8")
    (raw / "b.md").write_text(DOC.format(doc_id="b", title="Margin", body="Gross margin fell to 31%."), encoding="utf-8")
    paths = LibraryPaths("tiny", raw, tmp_path / "data" / "artifacts" / "tiny")
    res = build_library(paths, embedding="none", cache_path=tmp_path / "cache.sqlite")
    return paths, res


def _publish(paths: LibraryPaths, res, artifacts):
    manifest = json.loads((Path(res.snapshot_dir) / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    return publish_snapshot(paths, manifest=manifest, chunk_store=paths.chunk_store, artifacts=artifacts)


def _bm25(res) -> dict[str, Path]:
    return res.bm25.artifact_paths()


def test_every_published_snapshot_lists_its_artifact_sets(built):
    paths, res = built
    manifest = json.loads((Path(res.snapshot_dir) / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest[schema.MANIFEST_ARTIFACT_SETS] == {
        name: {"path": schema.ARTIFACT_REGISTRY[name].path, "asset": schema.ARTIFACT_REGISTRY[name].asset}
        for name in ("bm25", "bm25_doc", "bm25_blend", "chunks", "relation_graph")
    }, "no vectors (embedding none) and no glossary: neither is listed (the relation graph needs neither)"
    assert not (Path(res.snapshot_dir) / schema.EMBEDDINGS_DIR).exists()


def test_identical_artifacts_give_the_same_snapshot_id(built):
    paths, res = built
    graph = Path(res.snapshot_dir) / schema.ARTIFACT_REGISTRY["relation_graph"].path  # every build has one
    again = _publish(paths, res, {**_bm25(res), "relation_graph": graph})
    assert again.snapshot_id == res.snapshot_id and not again.changed


def test_an_unregistered_artifact_is_a_clear_error_and_nothing_is_published(built):
    paths, res = built
    with pytest.raises(RagspineError, match=r"unknown artifact 'colbert'.*register_artifact"):
        _publish(paths, res, {**_bm25(res), "colbert": Path(res.bm25.directory)})
    with pytest.raises(RagspineError, match=r"required artifact 'bm25_doc' is missing; materialize bm25_index"):
        _publish(paths, res, {"bm25": _bm25(res)["bm25"]})
    with pytest.raises(RagspineError, match=r"artifact 'embeddings' has no source .*re-materialize chunk_embeddings"):
        _publish(paths, res, {**_bm25(res), "embeddings": paths.root / "nowhere"})
    assert paths.current.resolve().name == res.snapshot_id


def test_a_newly_registered_artifact_is_published_by_name(built, tmp_path):
    paths, res = built
    spec = schema.register_artifact(schema.ArtifactSpec("test_extra", "extra", "extra_asset"))
    try:
        src = tmp_path / "extra-src"
        (src / "sub").mkdir(parents=True)
        (src / "sub" / "x.json").write_text("{}", encoding="utf-8")
        out = _publish(paths, res, {**_bm25(res), "test_extra": src})
    finally:
        schema.ARTIFACT_REGISTRY.pop(spec.name)
    assert out.changed and out.snapshot_id != res.snapshot_id
    manifest = json.loads((out.snapshot_dir / schema.MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest[schema.MANIFEST_ARTIFACT_SETS]["test_extra"] == {"path": "extra", "asset": "extra_asset"}
    assert (out.snapshot_dir / "extra" / "sub" / "x.json").is_file()
    assert "extra/sub/x.json" in manifest["artifacts"]
