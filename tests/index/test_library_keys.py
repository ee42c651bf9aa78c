"""The ``_library.toml`` keys are documented once: the table in docs/configuration.md is generated."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ragspine_core.settings import env_vars_markdown, generated_doc_main, replace_generated_block
from ragspine_index.chunking import DEFAULT_PARENT_CHARS
from ragspine_index.library_config import LIBRARY_CONFIG_KEYS, LibraryConfig
from ragspine_index.library_keys import LIBRARY_KEYS, TABLE_BEGIN, TABLE_END, key_default, library_keys_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _block(text: str, begin: str, end: str) -> str:
    i = text.index(begin)
    return text[i:text.index(end, i) + len(end)]


def test_the_committed_table_is_the_generated_one():
    text = DOC.read_text(encoding="utf-8")
    assert _block(text, TABLE_BEGIN, TABLE_END) == library_keys_markdown(), (
        "docs/configuration.md is stale: run `python -m ragspine_index.library_keys --write docs/configuration.md`")


def test_every_library_key_is_documented_once():
    documented = [k for row in LIBRARY_KEYS for k in row.keys]
    assert sorted(documented) == sorted(LIBRARY_CONFIG_KEYS)
    assert len(documented) == len(set(documented))


def test_defaults_come_from_the_code():
    defaults = {f.name: f.default for f in dataclasses.fields(LibraryConfig)}
    assert key_default("max_chars") == f"`{defaults['max_chars']}`"
    assert key_default("contextual") == "`true`"
    assert key_default("parent_max_chars") == f"`{DEFAULT_PARENT_CHARS}`"  # the chunker's own default
    assert key_default("ann_min_vectors") == "(unset)"


def test_write_replaces_only_the_block_between_its_markers(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n\n{TABLE_BEGIN}\n| stale |\n{TABLE_END}\n\nafter\n", encoding="utf-8")
    assert generated_doc_main(library_keys_markdown(), ["--write", str(doc)], prog="t") == 0
    assert doc.read_text(encoding="utf-8") == f"intro\n\n{library_keys_markdown()}\n\nafter\n"
    generated_doc_main(env_vars_markdown(), ["--markdown"], prog="t")
    assert capsys.readouterr().out == env_vars_markdown() + "\n"
    with pytest.raises(ValueError, match="markers"):
        replace_generated_block("no markers here", env_vars_markdown())
