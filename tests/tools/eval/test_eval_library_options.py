"""``ragspine eval --chunker/--library-option`` over a judged set whose corpus is a raw library
folder (``library.toml``): the keys are set over the library's own ``_library.toml`` in a linked
copy, so the evaluation index is built with them (they were ignored before), the library's own
folder is never written, and its own keys — a ``[defaults]`` sensitivity above all — are kept."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ragspine_core import schema
from ragspine_core.errors import ConfigError
from ragspine_tools.evaluate import evaluate_dataset, prepare_library

OWN_TOML = 'analyzer = "english"\n\n[defaults]\nsensitivity = "INTERNAL"\n'
PARAGRAPH = ("The harbour of Rotterdam handled a record volume of containers this year, and the port authority "
             "expects the new terminal to raise capacity again next spring. ")


def _judged_set(root: Path) -> Path:
    lib = root / "raw" / "ports"
    lib.mkdir(parents=True)
    (lib / "_library.toml").write_text(OWN_TOML, encoding="utf-8")
    (lib / "rotterdam.txt").write_text("\n\n".join(PARAGRAPH * 2 for _ in range(6)), encoding="utf-8")
    (lib / "hamburg.txt").write_text("Hamburg is the largest port in Germany by container throughput.\n", encoding="utf-8")
    judged = root / "eval" / "ports"
    (judged / "qrels").mkdir(parents=True)
    (judged / "library.toml").write_text('library = "../../raw/ports"\n', encoding="utf-8")
    (judged / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "largest port in Germany"}) + "\n", encoding="utf-8")
    (judged / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\thamburg\t1\n", encoding="utf-8")
    return judged


def _active_chunks(root: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(root / "chunk_store.sqlite") as conn:
        return conn.execute(f"SELECT doc_id, sensitivity FROM {schema.CHUNK_TABLE} WHERE active = 1").fetchall()


def test_library_options_reach_the_build_of_a_raw_library_set(tmp_path):
    judged = _judged_set(tmp_path)
    own = tmp_path / "raw" / "ports"
    before = sorted(p.name for p in own.iterdir())
    out = tmp_path / "out"

    [plain] = evaluate_dataset(judged, modes=("bm25",), embedding="none", out=out, quiet=True)
    [small] = evaluate_dataset(judged, modes=("bm25",), embedding="none", out=out, quiet=True,
                               chunker_options={"max_chars": 300})
    assert plain.metrics["ndcg@10"] == small.metrics["ndcg@10"] == pytest.approx(1.0)

    plain_paths = prepare_library(judged, out, quiet=True)
    small_paths = prepare_library(judged, out, quiet=True, chunker_options={"max_chars": 300})
    assert plain_paths.raw == own and small_paths.raw != own  # only the option build reads a copy
    assert small_paths.root != plain_paths.root  # cached apart: never one build served for the other

    plain_rows, small_rows = _active_chunks(plain_paths.root), _active_chunks(small_paths.root)
    # the option was applied: the long document is cut into more, shorter chunks
    count = lambda rows: sum(1 for doc, _ in rows if doc == "rotterdam")  # noqa: E731
    assert count(small_rows) > count(plain_rows) >= 1
    # the library's own [defaults] sensitivity still decides (no file became PUBLIC by the copy)
    assert {s for _, s in small_rows} == {s for _, s in plain_rows} == {"INTERNAL"}

    overlay = (small_paths.raw / "_library.toml").read_text(encoding="utf-8")
    assert "max_chars = 300" in overlay and 'analyzer = "english"' in overlay and "[defaults]" in overlay
    # the library's own folder is untouched
    assert sorted(p.name for p in own.iterdir()) == before
    assert (own / "_library.toml").read_text(encoding="utf-8") == OWN_TOML


def test_an_invalid_library_option_names_the_key(tmp_path):
    judged = _judged_set(tmp_path)
    with pytest.raises(ConfigError, match="no_such_key"):
        evaluate_dataset(judged, modes=("bm25",), embedding="none", out=tmp_path / "out", quiet=True,
                         chunker_options={"no_such_key": 1})


def test_the_merged_config_reads_back_as_written():
    import tomllib

    from ragspine_tools.evaluate import _config_toml

    config = {"chunker": "semantic", "max_chars": 300, "breakpoint_percentile": 12.5, "contextual": False,
              "defaults": {"sensitivity": "RESTRICTED", "author": "艾克美 😀\n", "tags": ["a", "中文"]}}
    assert tomllib.loads(_config_toml(config)) == config


def test_the_option_copy_keeps_links_as_links(tmp_path):
    """The walk never follows a link (it may leave the library): a linked file is not indexed in
    the option build either, where a copy that followed it would have made it a plain file."""
    judged = _judged_set(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("Antwerp moved more containers than Hamburg this year.\n", encoding="utf-8")
    (tmp_path / "raw" / "ports" / "antwerp.txt").symlink_to(outside)
    out = tmp_path / "out"
    evaluate_dataset(judged, modes=("bm25",), embedding="none", out=out, quiet=True)
    evaluate_dataset(judged, modes=("bm25",), embedding="none", out=out, quiet=True, chunker_options={"max_chars": 300})
    plain = prepare_library(judged, out, quiet=True)
    small = prepare_library(judged, out, quiet=True, chunker_options={"max_chars": 300})
    assert (small.raw / "antwerp.txt").is_symlink()
    docs = lambda rows: {doc for doc, _ in rows}  # noqa: E731
    assert docs(_active_chunks(small.root)) == docs(_active_chunks(plain.root)) == {"rotterdam", "hamburg"}


def test_a_linked_library_config_is_refused_as_ingest_refuses_it(tmp_path):
    judged = _judged_set(tmp_path)
    own = tmp_path / "raw" / "ports" / "_library.toml"
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(OWN_TOML, encoding="utf-8")
    own.unlink()
    own.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="symbolic link"):
        prepare_library(judged, tmp_path / "out", quiet=True, chunker_options={"max_chars": 300})
