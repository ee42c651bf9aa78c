"""Items 9-12 of issue 28: configuration, filter, collision and Dagster side doors.

9.  ``_library.toml`` is never read through a symbolic link, and its values are never
    echoed in an error.
10. A filter error lists only metadata keys that open documents use.
11. A ``doc_id`` collision error never names a RESTRICTED document or its path.
12. No RESTRICTED ``doc_id`` is in Dagster's stored step outputs (outside the data plane).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.steps.documents import load_documents
from ragspine_index.library_config import load_library_config
from ragspine_index.pipeline import build_library
from ragspine_core.errors import ConfigError, FilterError
from ragspine_query.library import open_library
from ragspine_query.agent_api import build_narrative_retriever
from tests.conftest import ingest

MARKER = "ZEPHYRINE-GAMBIT-7731"
SECRET_ID = "zz-merger-memo-quillfeather"


def _open(i: int, extra: str = "") -> str:
    return (f"---\nsensitivity: PUBLIC\nregion: north\n{extra}---\n# Note {i}\n\nThe canteen menu {i} changes "
            "every week for all staff in the north office.\n")


# ------------------------------------------------------------------------ item 9
def test_library_config_is_not_read_through_a_link_leaving_the_library(tmp_path):
    outside = tmp_path / "elsewhere" / "secret.md"
    outside.parent.mkdir()
    outside.write_text(f'summarizer = "{MARKER}"\n', encoding="utf-8")
    raw = tmp_path / "raw" / "lib"
    raw.mkdir(parents=True)
    (raw / "note.md").write_text(_open(1), encoding="utf-8")
    os.symlink(outside, raw / "_library.toml")
    with pytest.raises(ConfigError, match="symbolic link") as err:
        load_library_config(raw)
    assert MARKER not in str(err.value) and "elsewhere" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        build_library(LibraryPaths("lib", raw, tmp_path / "art" / "lib"), cache_path=tmp_path / "c" / "e.sqlite")
    assert MARKER not in str(err.value)


@pytest.mark.parametrize("toml", [f'summarizer = "{MARKER}"\n', f'bm25_k1 = "{MARKER}"\n', f'analyzer = ["{MARKER}"]\n',
                                  f'"{MARKER} key" = 1\n', f'summarizer = "{MARKER}\n'])
def test_library_config_errors_never_echo_what_the_file_holds(tmp_path, toml):
    raw = tmp_path / "lib"
    raw.mkdir()
    (raw / "_library.toml").write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_library_config(raw)
    assert MARKER not in str(err.value) and "_library.toml" in str(err.value)


# ----------------------------------------------------------------------- item 10
def test_filter_errors_name_only_keys_open_documents_use(tmp_path):
    raw = tmp_path / "raw" / "lib"
    raw.mkdir(parents=True)
    for i in range(3):
        (raw / f"open{i}.md").write_text(_open(i), encoding="utf-8")
    (raw / "secret.md").write_text("---\nsensitivity: RESTRICTED\nzephyrinecodename: gambit\n---\n# Memo\n\n"
                                   "The memo body talks about the canteen menu too.\n", encoding="utf-8")
    res = build_library(LibraryPaths("lib", raw, tmp_path / "art" / "lib"), cache_path=tmp_path / "c" / "e.sqlite")
    with open_library(Path(res.snapshot_dir)) as lib:
        assert "region" in lib.filter_fields() and "zephyrinecodename" not in lib.filter_fields()
        assert "zephyrinecodename" not in json.dumps(lib.manifest)
    retriever = build_narrative_retriever(res.snapshot_dir, reranker=None, mode="bm25", glossary=None, embedding_backend=None)
    with pytest.raises(FilterError) as err:
        retriever.retrieve("canteen menu", filters={"no_such_field": "x"})
    assert "region" in str(err.value) and "zephyrinecodename" not in str(err.value)


# ----------------------------------------------------------------------- item 11
def test_a_doc_id_collision_never_names_the_restricted_document(tmp_path):
    raw = tmp_path / "raw" / "lib"
    (raw / "a-board").mkdir(parents=True)
    (raw / "a-board" / "merger-memo.md").write_text(
        f"---\ndoc_id: guessed-id\nsensitivity: RESTRICTED\n---\n# {MARKER}\n\nSecret body.\n", encoding="utf-8")
    (raw / "z-open.md").write_text("---\ndoc_id: guessed-id\nsensitivity: PUBLIC\n---\n# Guess\n\nAn open note.\n",
                                   encoding="utf-8")
    docs = load_documents(raw, "lib")
    assert len(docs.errors) == 1 and "z-open.md" in docs.errors[0] and "already used" in docs.errors[0]
    assert "merger-memo" not in docs.errors[0] and "a-board" not in docs.errors[0] and MARKER not in docs.errors[0]


# ----------------------------------------------------------------------- item 12
@pytest.mark.slow
def test_dagster_stored_outputs_hold_no_restricted_doc_id(tmp_path):
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for i in range(3):
        (raw / f"open{i}.md").write_text(_open(i), encoding="utf-8")
    (raw / "memo.md").write_text(f"---\ndoc_id: {SECRET_ID}\nsensitivity: RESTRICTED\n---\n# Memo\n\nSecret body.\n",
                                 encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        ingest(raw, instance=instance)
        # a second run that changes the RESTRICTED document: it is in the update's id lists
        (raw / "memo.md").write_text(f"---\ndoc_id: {SECRET_ID}\nsensitivity: RESTRICTED\n---\n# Memo\n\nNew body.\n",
                                     encoding="utf-8")
        ingest(raw, instance=instance)
    found = [p.relative_to(home).as_posix() for p in sorted(home.rglob("*"))
             if p.is_file() and SECRET_ID.encode() in p.read_bytes()]
    assert not found, f"a RESTRICTED doc_id in Dagster files: {found}"
    assert any(p.is_file() for p in (home / "storage").rglob("*")), "step outputs were stored"
