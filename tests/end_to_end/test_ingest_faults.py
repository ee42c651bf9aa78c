"""Faults a user can cause fail loudly, located, in one line — and lose nothing else.

* a JSONL line holding a 5,000-digit integer is a located error for that line; the rest
  of the library publishes (Python refuses to convert it: before, the ingest aborted);
* the ingest summary lists skipped files and withdrawn documents;
* a full disk during an ingest is one line that says so and what to free;
* empty and overlong queries are clear errors.
"""

from __future__ import annotations

import errno
import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout

import pytest

dg = pytest.importorskip("dagster", reason="ingesting needs the 'pipeline' extra")

from ragspine_tools.cli import main as cli_main  # noqa: E402
from ragspine_index.source_documents import jsonl as parsing, metadata  # noqa: E402
from ragspine_query import limits  # noqa: E402
from tests.conftest import RAGSPINE_ENV_VARS, REPO_ROOT  # noqa: E402

DOCS = ("acme-cn-hr-faq.md", "acme-eu-distributor-review.md", "acme-group-history-en.md")
HUGE = "7" * 5000


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture()
def env(tmp_path, monkeypatch):
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    raw = tmp_path / "data" / "raw" / "faulty"
    raw.mkdir(parents=True)
    for name in DOCS:
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    lines = [json.dumps({"doc_id": "pr-good", "text": "Acme opened the Quokka plant in 2024."}),
             '{"doc_id": "pr-huge", "text": "x", "year": ' + HUGE + "}"]
    (raw / "press.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (raw / "scan.tiff").write_bytes(b"II*\x00 not read")
    (raw / "notes.parquet").write_bytes(b"PAR1 not read")
    return raw


def test_a_huge_json_integer_is_a_located_error_for_its_line_only():
    out = parsing.parse_jsonl(b'{"doc_id": "a", "text": "fine"}\n{"doc_id": "b", "text": "x", "n": ' + HUGE.encode()
                              + b"}\n", "p.jsonl", "lib")
    assert [type(x).__name__ for x in out] == ["SourceDocument", "DocumentError"]
    assert "p.jsonl#L2" in str(out[1]) and "5,000 characters" in str(out[1]) and HUGE[:50] not in str(out[1])


def test_field_size_limits_are_located_errors():
    long_title = "t" * (metadata.MAX_METADATA_VALUE_CHARS + 1)
    out = parsing.parse_jsonl(json.dumps({"doc_id": "a", "title": long_title, "text": "body"}).encode(), "p.jsonl", "lib")
    assert len(out) == 1 and "'title' value has" in str(out[0]) and "p.jsonl#L1" in str(out[0])


def test_ingest_publishes_the_rest_and_lists_skipped_and_withdrawn(env, monkeypatch):
    rc, out, err = run_cli("ingest", str(env))
    assert rc == 1, err  # published, but a file failed (listed)
    assert "press.jsonl#L2" in out and "Traceback" not in out + err
    assert "2 files skipped" in out and "scan.tiff" in out and "notes.parquet" in out
    assert "withdrawn" not in out
    (env / "acme-cn-hr-faq.md").unlink()
    rc, out, err = run_cli("ingest", str(env))
    assert rc == 1, err
    assert "1 document withdrawn" in out and "acme-cn-hr-faq" in out
    rc, out, err = run_cli("query", str(env.parent.parent / "artifacts" / "faulty"), "Quokka plant", "--json")
    assert rc == 0 and any(r["doc_id"] == "pr-good" for r in json.loads(out))

    # a full disk while publishing: one line that says so; the serving snapshot stays
    from ragspine_index import publish

    serving = (env.parent.parent / "artifacts" / "faulty" / "current").resolve()

    def disk_full(db_path, chunk_store):
        raise OSError(errno.ENOSPC, "No space left on device", str(db_path))

    monkeypatch.setattr(publish, "write_snapshot_chunks", disk_full)
    (env / "acme-group-history-en.md").write_text("A changed history of Acme.\n", encoding="utf-8")
    rc, out, err = run_cli("ingest", str(env))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err, err
    assert "disk is full" in err and "free space" in err and "cache" in err
    assert (env.parent.parent / "artifacts" / "faulty" / "current").resolve() == serving


@pytest.mark.parametrize("text, words", [("", "empty"), ("   \n", "empty"),
                                         ("x" * (limits.MAX_QUERY_CHARS + 1), "more than the limit")])
def test_empty_and_overlong_queries_are_clear_errors(tmp_path, text, words):
    rc, out, err = run_cli("query", str(tmp_path), text)
    assert rc == 2 and err.startswith("error: ") and words in err and len(err.strip().splitlines()) == 1


def test_a_query_at_the_limit_is_accepted_by_the_check():
    assert limits.check_query("y" * limits.MAX_QUERY_CHARS)
