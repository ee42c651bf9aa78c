"""Classification fails closed for what is already published, too.

A file that fails to parse with its sensitivity in doubt (here: a misspelt
``sensitivity`` level) has its chunks withdrawn from the chunk store. The snapshots
published before still held them under the old, open level: the serving one until the run
published, the retained ones for a rollback, and all of them for good if the run failed
after the chunks step. Now the ``chunks`` step withholds every such snapshot at once
(``publish.withhold_unclassified``); a later run that reads the file again releases them,
or removes them for good when the file is RESTRICTED now.
"""

from __future__ import annotations

import contextlib
import json

import dagster as dg
import pytest

from ragspine_assets.assets import ALL_ASSETS
from ragspine_assets.io_manager import StepOutputIOManager
from ragspine_assets.resources import EmbeddingBackendResource, RagspineConfig
from ragspine_core.errors import IndexNotFoundError
from ragspine_core.integrity import quarantine_reason
from ragspine_index.publish import WITHHELD_DIR
from ragspine_query.library import open_library
from ragspine_query.retriever import HybridRetriever, RetrievalConfig
from tests.conftest import RAGSPINE_ENV_VARS, ingest
from tests.end_to_end.test_snapshot_integrity import run_cli

pytestmark = pytest.mark.slow

NAME = "Quillfeather Ardenvale"
BODY = f"{NAME} signed the supply contract for the northern plant. {NAME} ships the first lots in March.\n"
_BAD_DATE = f"---\nsensitivity: PUBLIC\nvalid_as_of: someday\n---\n# Supplier\n\n{BODY}"


def _doc(level: str) -> str:
    return f"---\nsensitivity: {level}\n---\n# Supplier\n\n{BODY}"


def _library(tmp_path, monkeypatch):
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    data = tmp_path / "data"
    raw = data / "raw" / "lib"
    raw.mkdir(parents=True)
    for i, topic in enumerate(["canteen menu", "parking spaces", "garden benches"]):
        (raw / f"open{i}.md").write_text(f"---\nsensitivity: PUBLIC\n---\n# Note {i}\n\nThe {topic} were reviewed "
                                         f"this week. Staff asked about the {topic} again.\n", encoding="utf-8")
    (raw / "supplier.md").write_text(_doc("PUBLIC"), encoding="utf-8")
    return data, raw, data / "artifacts" / "lib"


@contextlib.contextmanager
def _published(tmp_path, monkeypatch):
    """The library ingested once: ``(data, raw, art, instance, the snapshot it serves)``."""
    data, raw, art = _library(tmp_path, monkeypatch)
    home = tmp_path / "home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        ingest(raw, instance=instance)
        yield data, raw, art, instance, (art / "current").resolve().name


def _serves_name(art) -> bool:
    warm = HybridRetriever(open_library(art), embedding_backend=None, config=RetrievalConfig(mode="bm25"))
    return any(NAME in h.chunk.text for h in warm.search(NAME, top_k=5, include_restricted=False))


def _history(art) -> list[dict]:
    return [json.loads(x) for x in (art / "history.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]


def test_a_file_whose_sensitivity_cannot_be_read_is_served_by_no_snapshot(tmp_path, monkeypatch):
    with _published(tmp_path, monkeypatch) as (data, raw, art, instance, first):
        assert _serves_name(art)
        (raw / "supplier.md").write_text(_doc("RESTRICTD"), encoding="utf-8")  # meant RESTRICTED: unknown level
        resources = {"ragspine": RagspineConfig(data_root=str(data), raw_root=str(data / "raw"),
                                                embedding_backend=EmbeddingBackendResource(spec="none")),
                     "io_manager": StepOutputIOManager()}
        keys = [a.key for a in ALL_ASSETS if a.key.to_user_string() in ("documents", "chunks")]
        # a run that stops after the chunks step (a crash, a partial selection) publishes nothing ...
        assert dg.materialize(ALL_ASSETS, selection=keys, instance=instance, resources=resources,
                              partition_key="lib").success
        # ... and still no snapshot serves the document under its old level
        assert not (art / "snapshots" / first).exists() and (art / WITHHELD_DIR / first).is_dir()
        with pytest.raises(IndexNotFoundError, match="quarantined .*sensitivity is unknown.*serves nothing"):
            open_library(art)
        rc, out, err = run_cli("query", str(art), NAME)
        assert rc != 0 and "sensitivity is unknown" in err and NAME not in out + err
        rc, out, err = run_cli("snapshots", str(art), "--rollback", first)
        assert rc != 0 and "withheld" in err, err
        rc, out, err = run_cli("snapshots", str(art))
        assert rc == 0 and f"withheld (not served, no rollback): {first}" in out and "serves nothing" in out, out
        rc, out, err = run_cli("snapshots", str(art), "--verify")  # names the withdrawal, not "never published"
        assert rc != 0 and "no servable snapshot" in err and "sensitivity is unknown" in err, err

        ingest(raw, instance=instance)  # the file still fails: the library serves again, without it
        second = (art / "current").resolve().name
        assert second != first and not _serves_name(art)
        assert (art / WITHHELD_DIR / first).is_dir(), "a snapshot stays withheld while its document is in doubt"

        (raw / "supplier.md").write_text(_doc("PUBLIC"), encoding="utf-8")  # the doubt is gone: it was open
        ingest(raw, instance=instance)
        assert (art / "snapshots" / first).is_dir() and not (art / WITHHELD_DIR / first).exists()
        assert quarantine_reason(art, first) is None, "released: no reason names it quarantined any more"
        assert any(r.get("released") and r["snapshot_id"] == first for r in _history(art))
        assert _serves_name(art)
        rc, out, err = run_cli("snapshots", str(art), "--rollback", first)
        assert rc == 0, err


@pytest.mark.parametrize("broken, in_doubt", [
    (_doc("RESTRICTD"), True),  # an error about the sensitivity itself
    # a bad date beside a marking word deep in the text (not a banner): in doubt
    (_BAD_DATE + "\n".join(["Filler line."] * 30) + "\nDistribution is now restricted to the board.\n", True),
    (_BAD_DATE, False),  # a bad date and nothing about sensitivity: its previous chunks keep serving
])
def test_which_failing_files_put_their_sensitivity_in_doubt(tmp_path, monkeypatch, broken, in_doubt):
    from ragspine_index.steps.chunks import update_chunk_store
    from ragspine_index.steps.documents import load_documents

    _, raw, _ = _library(tmp_path, monkeypatch)
    store = tmp_path / "chunks.sqlite"
    update_chunk_store(load_documents(raw), store)
    (raw / "supplier.md").write_text(broken, encoding="utf-8")
    docs = load_documents(raw)
    assert docs.error_paths == ("supplier.md",)
    update = update_chunk_store(docs, store)
    assert update.in_doubt == (("supplier",) if in_doubt else ())
    assert update.withdrawn_on_error == update.in_doubt and update.kept_on_error == (() if in_doubt else ("supplier",))


def test_a_withheld_snapshot_is_removed_for_good_when_the_file_is_restricted_now(tmp_path, monkeypatch):
    with _published(tmp_path, monkeypatch) as (data, raw, art, instance, first):
        (raw / "supplier.md").write_text(_doc("RESTRICTD"), encoding="utf-8")
        ingest(raw, instance=instance)
        assert (art / WITHHELD_DIR / first).is_dir() and not _serves_name(art)
        (raw / "supplier.md").write_text(_doc("RESTRICTED"), encoding="utf-8")
        ingest(raw, instance=instance)
        assert not (art / WITHHELD_DIR / first).exists() and not (art / "snapshots" / first).exists()
        assert not any(p.name.startswith(first) for p in (art / WITHHELD_DIR).iterdir())
        assert "became RESTRICTED" in (quarantine_reason(art, first) or "")
        rc, out, err = run_cli("snapshots", str(art), "--rollback", first)
        assert rc != 0 and "RESTRICTED now" in err, err
        assert not _serves_name(art)


def test_a_withheld_snapshot_that_serves_another_reclassified_document_is_removed(tmp_path, monkeypatch):
    # withheld for the supplier (still failing), and then another document it serves as open is
    # marked RESTRICTED: it is removed at once, not kept until the supplier is read again
    with _published(tmp_path, monkeypatch) as (data, raw, art, instance, first):
        (raw / "supplier.md").write_text(_doc("RESTRICTD"), encoding="utf-8")
        ingest(raw, instance=instance)
        assert (art / WITHHELD_DIR / first).is_dir()
        note = (raw / "open0.md").read_text(encoding="utf-8").replace("sensitivity: PUBLIC", "sensitivity: RESTRICTED")
        (raw / "open0.md").write_text(note, encoding="utf-8")
        ingest(raw, instance=instance)
        assert not (art / WITHHELD_DIR / first).exists() and not (art / WITHHELD_DIR / f"{first}.json").exists()
        assert "became RESTRICTED" in (quarantine_reason(art, first) or "")
        assert not _serves_name(art)
