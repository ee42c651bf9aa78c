"""Readers in another process see exactly one complete snapshot, whatever is being published.

A separate interpreter (this file run as a script) loops: open the library through its
``current`` pointer, run a few queries, record the snapshot id, the chunk ids and their
documents' content hashes. It also keeps one library *pinned* open from before the first
re-publish. Meanwhile the test re-materializes the library several times with edited,
deleted and added documents. Afterwards every recorded answer is replayed against the
snapshot it claims to come from: same chunk ids, and the document hashes agree with that
snapshot's manifest. Then ``ragspine snapshots <lib> --rollback`` restores the previous
snapshot for new readers.

Module-level imports stay query-side only, so the reader process never imports Dagster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragspine_query import HybridRetriever, open_library
from ragspine_core import schema

QUERIES = ("zephyr programme update", "globex market share", "quasar plant opening", "gross margin")
#: Liveness bounds only (generous for a busy machine); no assertion is about time.
READER_DEADLINE_S = 1800.0
WAIT_S = 600.0
TOP_K = 5

pytestmark = pytest.mark.slow


def answer(library, query: str) -> dict:
    """One query against an open library, recorded with everything needed to replay it."""
    hits = HybridRetriever(library).search(query, top_k=TOP_K)
    ids = [h.chunk_id for h in hits]
    hashes = {}
    if ids:
        rows = library.execute_read(
            f"SELECT doc_id, doc_content_hash FROM {schema.CHUNK_TABLE} WHERE chunk_id IN ({','.join('?' * len(ids))})", ids)
        hashes = {r[0]: r[1] for r in rows}
    return {"snapshot_id": library.snapshot_id, "query": query, "chunk_ids": ids, "doc_hashes": hashes}


def reader_main(artifacts: str, out_path: str, stop_path: str) -> None:
    """The reader process: fresh opens through ``current``, plus one library pinned open."""
    deadline = time.monotonic() + READER_DEADLINE_S
    pinned = open_library(artifacts)
    n = 0
    with open(out_path, "w", encoding="utf-8") as out:
        while time.monotonic() < deadline and not os.path.exists(stop_path):
            with open_library(artifacts) as lib:
                for q in QUERIES:
                    out.write(json.dumps({"pinned": False, **answer(lib, q)}) + "\n")
            out.write(json.dumps({"pinned": True, **answer(pinned, QUERIES[n % len(QUERIES)])}) + "\n")
            out.flush()
            n += 1
            time.sleep(0.005)  # bounded output however fast the machine is
    pinned.close()


def read_answers(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]  # the last line may be half-written


def wait_for(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def check_answer_against_snapshot(rec: dict, snapshots: Path, replay_cache: dict) -> None:
    snap = snapshots / rec["snapshot_id"]
    assert (snap / schema.MANIFEST_FILE).is_file(), f"answer names snapshot {rec['snapshot_id']} which was never published"
    key = (rec["snapshot_id"], rec["query"])
    if key not in replay_cache:
        with open_library(snap) as lib:
            replay = answer(lib, rec["query"])
            present = {r[0] for r in lib.execute_read(f"SELECT chunk_id FROM {schema.CHUNK_TABLE}")}
            replay_cache[key] = (replay, present, lib.manifest["documents"])
    replay, present, manifest_docs = replay_cache[key]
    assert set(rec["chunk_ids"]) <= present, f"{rec['query']!r}: chunks not in snapshot {rec['snapshot_id']}"
    assert rec["chunk_ids"] == replay["chunk_ids"], f"{rec['query']!r}: answer differs from snapshot {rec['snapshot_id']}"
    for doc_id, h in rec["doc_hashes"].items():
        assert manifest_docs.get(doc_id) == h, f"{doc_id} hash disagrees with the manifest of {rec['snapshot_id']}"


def test_readers_see_one_complete_snapshot_while_publishing_and_rollback(tmp_path: Path) -> None:
    import dagster as dg  # here, not at module level: the reader process runs this file

    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.publish import list_snapshots
    from ragspine_assets.ingest import ingest_library

    repo = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    raw = data / "raw" / "sample"
    shutil.copytree(repo / "data" / "raw" / "sample", raw)
    shutil.copy2(repo / "data" / "glossary.toml", data / "glossary.toml")
    artifacts = data / "artifacts" / "sample"
    instance = dg.DagsterInstance.ephemeral()

    def publish() -> str:
        return ingest_library(raw, embedding="none", keep_snapshots=50, instance=instance).snapshot_id

    published = [publish()]
    out_path, stop_path = tmp_path / "answers.jsonl", tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, __file__, str(artifacts), str(out_path), str(stop_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(read_answers(out_path)) >= 2 * len(QUERIES), WAIT_S, "the reader's first answers")
        faq = raw / "investor-faq.md"
        edits = [
            lambda: faq.write_text(faq.read_text("utf-8") + "\n\nZephyr programme update: phase one is funded.\n", "utf-8"),
            lambda: (raw / "globex-market-share-note.txt").unlink(),
            lambda: faq.write_text(faq.read_text("utf-8") + "\n\nZephyr programme update: phase two slips to 2026.\n", "utf-8"),
            lambda: (raw / "quasar-plant.md").write_text("# Quasar plant opening\n\nThe Quasar plant opens in May.\n", "utf-8"),
        ]
        for edit in edits:
            edit()
            published.append(publish())
            time.sleep(0.3)  # let the reader run a few loops against each snapshot
        wait_for(lambda: any(r["snapshot_id"] == published[-1] for r in read_answers(out_path)), WAIT_S,
                 "the reader to see the last snapshot")
    finally:
        stop_path.touch()
        try:
            reader.wait(timeout=WAIT_S)
        finally:
            if reader.poll() is None:
                reader.kill()
    log = reader.stdout.read() if reader.stdout else ""
    assert reader.returncode == 0, f"reader process failed:\n{log}"

    answers = read_answers(out_path)
    assert len(set(published)) == len(published), "every edit publishes a new snapshot"
    cache: dict = {}
    for rec in answers:
        check_answer_against_snapshot(rec, artifacts / schema.SNAPSHOTS_DIR, cache)
    seen = {r["snapshot_id"] for r in answers if not r["pinned"]}
    assert len(seen) >= 2, f"the reader saw only {seen}"
    assert seen <= set(published)
    # a library opened before the flips keeps serving its own snapshot
    assert {r["snapshot_id"] for r in answers if r["pinned"]} == {published[0]}

    # rollback: one command, new readers get the previous snapshot
    paths = LibraryPaths("sample", raw, artifacts)
    assert list_snapshots(paths)[0]["snapshot_id"] == published[-1]
    done = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "snapshots", str(artifacts), "--rollback"],
                          capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert published[-2] in done.stdout
    with open_library(artifacts) as lib:
        assert lib.snapshot_id == published[-2]
        assert "quasar-plant" not in lib.manifest["documents"]
    listing = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "snapshots", str(artifacts)],
                             capture_output=True, text=True, timeout=WAIT_S).stdout
    assert f"* {published[-2]}" in listing


if __name__ == "__main__":
    reader_main(*sys.argv[1:4])
