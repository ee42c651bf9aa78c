"""Chunker settings in ``_library.toml``: parsed, validated against the chosen chunker, used."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_index.library_settings import CHUNKER_OPTION_KEYS, chunker_kwargs
from ragspine_index.library_config import LIBRARY_CONFIG_KEYS, load_library_config
from ragspine_index.steps.chunks import update_chunk_store
from ragspine_index.steps.documents import load_documents
from ragspine_core import schema
from ragspine_core.chunk_rows import ChunkStoreReader
from ragspine_core.errors import ConfigError

BODY = "\n\n".join(f"Paragraph {i} says one thing. It then says another thing about item {i}." for i in range(12))


def library(root: Path, toml: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "_library.toml").write_text(toml, encoding="utf-8")
    (root / "doc.md").write_text("---\ndoc_id: doc\n---\n" + BODY + "\n", encoding="utf-8")
    return root


def test_every_chunker_setting_is_a_library_key():
    assert set(CHUNKER_OPTION_KEYS) <= set(LIBRARY_CONFIG_KEYS)


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('chunker = "parent_child"\nparent_max_chars = 900\n', {"parent_max_chars": 900}),
        ('chunker = "qa"\nmax_chars = 200\noverlap_chars = 0\nparent_max_chars = 400\n', {"parent_max_chars": 400}),
        ('chunker = "sentence_window"\nwindow = 0\n', {"window": 0}),
        ('chunker = "semantic"\nbreakpoint_percentile = 12.5\nembed_window = 2\nboundary_embedder = "lexical"\n',
         {"breakpoint_percentile": 12.5, "embed_window": 2, "boundary_embedder": "lexical"}),
    ],
)
def test_chunker_settings_reach_the_chunker(tmp_path, toml, expected):
    config = load_library_config(library(tmp_path / "lib", toml))
    chunker = config.make_chunker()
    for key, value in expected.items():
        assert getattr(chunker, key) == value
        assert chunker_kwargs(config)[key] == value


@pytest.mark.parametrize(
    ("toml", "phrases"),
    [
        ("window = 3\n", ["window = 3", "does not apply to chunker 'paragraph'", "'sentence_window'"]),
        ('chunker = "layout"\nparent_max_chars = 900\n', ["parent_max_chars = 900", "'parent_child', 'qa'"]),
        ('chunker = "parent_child"\nbreakpoint_percentile = 20\n', ["breakpoint_percentile = 20", "'semantic'"]),
        ('chunker = "sentence_window"\nwindow = -1\n', ["window must be an integer >= 0", "got -1"]),
        # string values are described, never echoed (issue 28 item 9)
        ('chunker = "sentence_window"\nwindow = "two"\n', ["window", "a string of 3 characters"]),
        ('chunker = "parent_child"\nparent_max_chars = 100\n', ["parent_max_chars", "100", "480"]),
        ('chunker = "semantic"\nbreakpoint_percentile = 150\n', ["breakpoint_percentile", "[0, 100]", "150"]),
        ('chunker = "semantic"\nembed_window = 0\n', ["embed_window", "got 0"]),
        ('chunker = "semantic"\nboundary_embedder = "bert"\n', ["boundary_embedder", "library, lexical",
                                                                  "a string of 4 characters"]),
        ('chunker = "semantic"\nembedder = "x"\n', ["unknown key(s) 'embedder'", "allowed keys"]),
    ],
)
def test_invalid_chunker_settings_name_the_file_the_key_and_the_value(tmp_path, toml, phrases):
    root = library(tmp_path / "lib", toml)
    with pytest.raises(ConfigError) as info:
        load_library_config(root)
    message = str(info.value)
    assert str(root / "_library.toml") in message
    for phrase in phrases:
        assert phrase in message, message


def _parents(store: Path) -> list[tuple[int, int, str]]:
    with ChunkStoreReader(store) as r:
        return [(c.start, c.end, c.parent_text) for c in r.iter_chunks(doc_id="doc")]


def test_the_chunks_step_builds_with_the_library_settings(tmp_path):
    narrow = library(tmp_path / "a", 'chunker = "sentence_window"\nwindow = 0\n')
    wide = library(tmp_path / "b", 'chunker = "sentence_window"\nwindow = 3\n')
    stores = [tmp_path / n / schema.CHUNK_STORE_FILE for n in ("sa", "sb")]
    for raw, store in zip((narrow, wide), stores):
        update_chunk_store(load_documents(raw, "lib"), store)
    narrow_rows, wide_rows = (_parents(s) for s in stores)
    assert [r[:2] for r in narrow_rows] == [r[:2] for r in wide_rows], "same sentences"
    body = load_documents(narrow, "lib").documents[0].body
    assert all(parent == body[a:b] for a, b, parent in narrow_rows), "window 0: the parent is the sentence"
    assert all(len(p) > b - a for (a, b, p) in wide_rows[1:-1]), "window 3: neighbours in the parent"


def test_changing_a_chunker_setting_rechunks_the_library(tmp_path):
    raw = library(tmp_path / "lib", 'chunker = "sentence_window"\nwindow = 1\n')
    store = tmp_path / "s" / schema.CHUNK_STORE_FILE
    first = update_chunk_store(load_documents(raw, "lib"), store)
    assert first.chunker == "sentence_window@1;window=1"
    assert update_chunk_store(load_documents(raw, "lib"), store).unchanged == 1
    (raw / "_library.toml").write_text('chunker = "sentence_window"\nwindow = 3\n', encoding="utf-8")
    switched = update_chunk_store(load_documents(raw, "lib"), store)
    assert switched.chunker == "sentence_window@1;window=3"
    assert switched.changed == ("doc",) and switched.unchanged == 0
    assert all(len(p) > b - a for (a, b, p) in _parents(store)[1:-1])


def test_the_library_embedding_replaces_only_the_backend_of_the_run_spec(tmp_path):
    from ragspine_core.dense import EmbeddingSpec
    from ragspine_index.library_settings import resolve_library_settings

    run = EmbeddingSpec("none", model_dir="/models/x", model="m", dim=8, e5_engine="onnx")
    own = load_documents(library(tmp_path / "own", 'embedding = "deterministic"\n'), "own")
    settings = resolve_library_settings(own, embedding=run)
    assert settings.embedding_spec == EmbeddingSpec("deterministic", model_dir="/models/x", model="m", dim=8, e5_engine="onnx")
    assert settings.embedding == "deterministic"
    plain = load_documents(library(tmp_path / "plain", 'chunker = "paragraph"\n'), "plain")
    assert resolve_library_settings(plain, embedding=run).embedding_spec is run


def test_an_unknown_library_embedding_is_refused_where_the_file_is_read(tmp_path):
    # the file's value is not echoed (library_config_guard scrubs it), the choices are
    with pytest.raises(ConfigError, match=r"_library\.toml: unknown embedding backend .*; allowed: auto, none"):
        load_library_config(library(tmp_path / "lib", 'embedding = "bert"\n'))
