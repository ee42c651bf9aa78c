"""Chunkers and embedding backends are registries: a user registers one by name and selects it
with the usual setting (``_library.toml`` ``chunker`` / ``embedding``, ``RAGSPINE_EMBEDDING``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import ClassVar

import pytest

from ragspine_core.chunk_rows import ChunkStoreReader
from ragspine_core.dense import EMBEDDING_BACKENDS, EMBEDDING_SPECS, DeterministicEmbeddingBackend, EmbeddingSpec
from ragspine_core.dense import register_embedding_backend
from ragspine_core.dense.embedding import embedding_spec_choices
from ragspine_core.errors import ConfigError
from ragspine_core.settings import Settings
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.chunking import CHUNKER_NAMES, CHUNKER_VERSIONS, CHUNKERS, ChunkSpan, chunker_names, register_chunker
from ragspine_index.library_config import load_library_config
from ragspine_index.pipeline import build_library

BUILTIN_CHUNKERS = ("paragraph", "layout", "parent_child", "sentence_window", "laws", "qa", "book", "semantic")
BUILTIN_BACKENDS = ("auto", "none", "onnx", "multilingual", "e5", "minilm+e5", "minilm+e5+multilingual", "deterministic",
                    "openai", "sentence-transformers")


@dataclasses.dataclass(frozen=True)
class LineChunker:
    """A user's chunker: one chunk per non-empty line."""

    max_chars: int = 800
    overlap_chars: int = 0

    name: ClassVar[str] = "lines"
    version: ClassVar[str] = "1"

    def chunk(self, doc) -> list[ChunkSpan]:
        spans, pos = [], 0
        for line in doc.body.split("\n"):
            text = line.strip()
            if text:
                start = doc.body.index(text, pos)
                spans.append(ChunkSpan(start, start + len(text), text))
            pos += len(line) + 1
        return spans


class Recorder:
    """A user's embedding backend factory that remembers the specs it was given."""

    def __init__(self) -> None:
        self.specs: list[EmbeddingSpec] = []

    def __call__(self, spec: EmbeddingSpec, threads: int | None) -> DeterministicEmbeddingBackend:
        self.specs.append(spec)
        return DeterministicEmbeddingBackend(dim=16)


@pytest.fixture
def lines_chunker():
    register_chunker(LineChunker)
    yield LineChunker
    CHUNKERS.unregister("lines")


@pytest.fixture
def recorder():
    factory = Recorder()
    register_embedding_backend("recorder", factory)
    yield factory
    EMBEDDING_BACKENDS.unregister("recorder")


def _library(root: Path, toml: str) -> LibraryPaths:
    raw = root / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "_library.toml").write_text(toml, encoding="utf-8")
    (raw / "a.md").write_text("---\ndoc_id: a\ntitle: A\nsensitivity: PUBLIC\nlanguage: en\n---\n"
                              "Acme revenue grew in 2024.\nThe board approved the merger.\n\nWidgets sold well.\n",
                              encoding="utf-8")
    return LibraryPaths("lib", raw, root / "artifacts" / "lib")


def test_builtin_orders_are_the_ones_users_saw():
    assert CHUNKER_NAMES == BUILTIN_CHUNKERS == chunker_names()
    assert EMBEDDING_BACKENDS.names() == BUILTIN_BACKENDS
    assert embedding_spec_choices() == EMBEDDING_SPECS


def test_a_registered_chunker_comes_after_the_builtins_and_changes_no_builtin_version(lines_chunker):
    before = dict(CHUNKER_VERSIONS)
    assert chunker_names() == BUILTIN_CHUNKERS + ("lines",)
    assert CHUNKER_NAMES == BUILTIN_CHUNKERS and CHUNKER_VERSIONS == before  # snapshot ids do not move
    with pytest.raises(ConfigError, match="the built-in chunker 'paragraph' cannot be removed"):
        CHUNKERS.unregister("paragraph")
    with pytest.raises(ConfigError, match="already registered"):
        register_chunker(LineChunker)


def test_a_chunker_that_breaks_the_contract_is_refused_with_the_reason():
    @dataclasses.dataclass(frozen=True)
    class NoBudget:
        name: ClassVar[str] = "nobudget"
        version: ClassVar[str] = "1"

        def chunk(self, doc):
            return []

    with pytest.raises(ConfigError, match="must take max_chars and overlap_chars"):
        register_chunker(NoBudget)
    assert "nobudget" not in chunker_names()


def test_a_registered_chunker_and_backend_are_selected_by_library_toml(tmp_path, lines_chunker, recorder):
    paths = _library(tmp_path, 'chunker = "lines"\nembedding = "recorder"\n')
    assert load_library_config(paths.raw).chunker == "lines"
    run = EmbeddingSpec("none", model="from-the-run")
    res = build_library(paths, embedding=run, cache_path=tmp_path / "cache" / "embeddings.sqlite")
    with ChunkStoreReader(paths.chunk_store) as reader:
        texts = [c.text for c in reader.iter_chunks(doc_id="a")]
    assert texts == ["Acme revenue grew in 2024.", "The board approved the merger.", "Widgets sold well."]
    # the library chose the backend; the rest of the spec is the run's, passed down as one value
    assert recorder.specs and all(s == EmbeddingSpec("recorder", model="from-the-run") for s in recorder.specs)
    manifest = json.loads((Path(res.snapshot_dir) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["embedding"]["backend"] == "recorder"
    assert manifest["embedding"]["model_id"] == "deterministic-hash-v1-d16"


def test_a_registered_backend_is_selected_by_the_environment_variable(tmp_path, recorder, monkeypatch):
    paths = _library(tmp_path, 'chunker = "paragraph"\n')
    settings = Settings.from_env({"RAGSPINE_EMBEDDING": "Recorder", "RAGSPINE_EMBEDDING_MODEL": "m1"})  # at the edge
    monkeypatch.setenv("RAGSPINE_EMBEDDING_MODEL", "read-deep")  # nothing below the edge reads this
    res = build_library(paths, embedding=EmbeddingSpec.from_settings(settings), cache_path=tmp_path / "c.sqlite")
    assert [s.model for s in recorder.specs] and {s.model for s in recorder.specs} == {"m1"}
    assert res.embeddings.model_id == "deterministic-hash-v1-d16"


def test_an_unregistered_name_lists_the_plugins_too(recorder):
    with pytest.raises(ConfigError) as info:
        EmbeddingSpec("bert")
    assert str(info.value).endswith("sentence-transformers, st, recorder")
    with pytest.raises(ConfigError, match="alias of the embedding backend 'onnx'"):
        register_embedding_backend("minilm", recorder)
