"""One command repairs (issue 43): a re-ingest of unchanged sources rebuilds every damaged
artifact of the serving snapshot or of ``work/`` and publishes a verified snapshot; a
damaged old snapshot is quarantined so ``--verify`` passes again; damaged SQLite files
and history are located errors that name a repair that works."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ragspine_core import integrity, schema
from ragspine_core.errors import IndexCorruptError, IndexNotFoundError, RagspineError
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_query import open_library
from ragspine_tools.cli import main as cli_main

from tests.conftest import RAGSPINE_ENV_VARS, REPO_ROOT

DOCS = ("acme-cn-hr-faq.md", "acme-cn-product-launch-2024.md", "acme-eu-distributor-review.md", "acme-group-history-en.md")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("repair") / "data"
    raw = data / "raw" / "tiny"
    raw.mkdir(parents=True)
    for name in DOCS:
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    build(data)
    return data


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def lib_paths(data: Path) -> LibraryPaths:
    return LibraryPaths("tiny", data / "raw" / "tiny", data / "artifacts" / "tiny")


def build(data: Path):
    return build_library(lib_paths(data), embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite")


def copy(tiny: Path, tmp_path: Path) -> Path:
    """A copy that keeps the hard links between snapshot files and work/ outputs."""
    data = tmp_path / "data"
    subprocess.run(["cp", "-a", str(tiny), str(data)], check=True, timeout=60)
    return data


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def flip_in_place(path: Path, n: int = 32) -> None:
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    for i in range(mid, min(len(data), mid + n)):
        data[i] ^= 0xFF
    with open(path, "r+b") as fh:  # same inode: the hard-linked work/ file sees it too
        fh.write(bytes(data))


def assert_serving_verified(data: Path, sid: str) -> None:
    paths = lib_paths(data)
    assert paths.current.resolve().name == sid
    integrity.verify_snapshot(paths.current.resolve(), full=True)
    with open_library(paths.root) as lib:
        assert lib.snapshot_id == sid and lib.n_chunks > 0
    rc, out, err = run_cli("snapshots", str(paths.root), "--verify")
    assert rc == 0, out + err


@pytest.mark.parametrize("rel", [f"{schema.BM25_DIR}/{schema.BM25_POSTINGS}", f"{schema.SUMMARY_TREE_DIR}/{schema.TREE_META}",
                                 f"{schema.EMBEDDINGS_DIR}/{schema.EMB_VECTORS}"])
def test_a_deleted_file_of_the_serving_snapshot_is_rebuilt_by_one_ingest(tiny, tmp_path, rel):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    (paths.current / rel).unlink()
    rc, _, err = run_cli("query", str(paths.root), "product launch")
    assert rc == 2 and rel.split("/")[-1] in err and f"ragspine ingest {data / 'raw' / 'tiny'}" in err
    result = build(data)  # the same sources: the same snapshot id, its files rebuilt
    assert result.snapshot_id == sid
    assert_serving_verified(data, sid)


def test_flipped_bytes_in_a_summary_tree_work_file_are_never_read_and_are_rebuilt(tiny, tmp_path):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    [tree_json] = list((paths.work / "summary_tree").glob(f"*/{schema.TREE_META}"))
    flip_in_place(tree_json)
    with pytest.raises(IndexCorruptError):  # the serving snapshot shares the inode
        open_library(paths.root)
    result = build(data)  # was: "unexpected UnicodeDecodeError … please report"
    assert result.snapshot_id == sid
    assert_serving_verified(data, sid)


def test_every_damaged_work_file_is_rebuilt_by_one_ingest(tiny, tmp_path):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    victims = sorted(p for p in paths.work.rglob("*") if p.is_file() and "/.records/" not in p.as_posix())
    assert len(victims) > 10
    for v in victims:  # every work file damaged at once
        flip_in_place(v, 8)
    result = build(data)
    assert result.snapshot_id == sid
    assert_serving_verified(data, sid)


@pytest.mark.parametrize("large", [False, True])
def test_a_damaged_retained_snapshot_is_quarantined_so_verify_passes_after_the_repair(tiny, tmp_path, large, monkeypatch):
    """Retained snapshots get the open-time check at each publication; one that ``--verify``
    found damaged gets the full check (``large``: nothing hashed by the cheap check)."""
    if large:
        monkeypatch.setattr(integrity, "HASH_AT_OPEN_MAX_FILE_BYTES", 0)
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    old = paths.current.resolve()
    # a second snapshot, then damage a file only the old one has (its chunks.sqlite)
    (paths.raw / "note.md").write_text("# Note\n\nThe Quokka plant opened in 2024.\n", encoding="utf-8")
    new = build(data).snapshot_id
    assert new != old.name
    flip_in_place(old / schema.SNAPSHOT_CHUNKS_FILE, 64)
    rc, out, _ = run_cli("snapshots", str(paths.root), "--verify")
    assert rc == 2 and old.name in out
    assert build(data).snapshot_id == new
    assert not old.exists() and (paths.root / "quarantine" / old.name).is_dir()
    assert_serving_verified(data, new)
    history = [json.loads(line) for line in (paths.root / "history.jsonl").read_text().splitlines()]
    assert any(r["snapshot_id"] == old.name and r["run_id"] == "quarantine-damaged" and "chunks.sqlite" in r["quarantined"]
               for r in history)
    with pytest.raises(RagspineError, match="damaged"):  # never rolled back to
        from ragspine_index.publish import rollback

        rollback(paths, old.name)


def test_the_missing_file_error_is_an_index_not_found_error_naming_the_file(tiny, tmp_path):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    (paths.current / schema.BM25_DIR / schema.BM25_INDPTR).unlink()
    with pytest.raises(IndexNotFoundError, match="indptr.npy is missing"):
        integrity.verify_snapshot(paths.current.resolve(), full=True)


def flip_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(32):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def run_shell(command: str) -> None:
    subprocess.run(["bash", "-c", command], check=True, timeout=60)


@pytest.mark.parametrize("damage", ["header", "truncate"])
def test_a_damaged_chunk_store_is_named_with_a_repair_that_works(tiny, tmp_path, damage):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    if damage == "header":
        flip_header(paths.chunk_store)
    else:
        paths.chunk_store.write_bytes(paths.chunk_store.read_bytes()[:8192])
    with pytest.raises(IndexCorruptError) as info:
        build(data)
    msg = str(info.value)
    assert f"chunk store {paths.chunk_store}" in msg and "the serving snapshot is unchanged" in msg
    assert paths.current.resolve().name == sid
    repair = msg.split("`")[1]
    assert repair.endswith(f"ragspine ingest {paths.raw}")
    run_shell(repair.split(" && ragspine ingest")[0])  # the command named, but the ingest: run in-process here
    assert build(data).snapshot_id == sid  # rebuilt from the sources: the same content
    assert_serving_verified(data, sid)


def test_a_damaged_embedding_cache_is_named_with_a_repair_that_works(tiny, tmp_path):
    data = copy(tiny, tmp_path)
    sid = lib_paths(data).current.resolve().name
    cache = data / "cache" / "embeddings.sqlite"
    flip_header(cache)
    (lib_paths(data).raw / "note.md").write_text("# Note\n\nThe Quokka plant opened in 2024.\n", encoding="utf-8")
    with pytest.raises(IndexCorruptError, match=f"the cache {cache} is damaged") as info:
        build(data)
    assert lib_paths(data).current.resolve().name == sid
    run_shell(str(info.value).split("`")[1].split(" && ragspine ingest")[0])
    new = build(data).snapshot_id
    assert new != sid
    assert_serving_verified(data, new)


def test_bytes_flipped_inside_cached_vectors_are_never_published(tiny, tmp_path, caplog):
    """SQLite has no page checksums: a bit flipped inside a cached vector still parses. The
    repair of damaged ``work/`` outputs reads the cache (chunk vectors, summaries, the relation
    graph's entity names); before the row checks it published the flipped vectors (a new
    snapshot id, every vector off by one bit, and it verified, its hashes taken from the
    wrong bytes)."""
    import sqlite3

    import numpy as np

    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    vectors_rel = f"{schema.EMBEDDINGS_DIR}/{schema.EMB_VECTORS}"
    before = np.load(paths.current / vectors_rel)
    cache = data / "cache" / "embeddings.sqlite"
    with sqlite3.connect(cache) as conn:  # one low mantissa bit of every cached vector: rows that still parse
        for model, h, blob in conn.execute("SELECT model_id, text_hash, vector FROM embedding_cache").fetchall():
            rot = bytearray(blob)
            rot[len(rot) // 2] ^= 0x01
            conn.execute("UPDATE embedding_cache SET vector = ? WHERE model_id = ? AND text_hash = ?", (bytes(rot), model, h))
    conn.close()
    for v in sorted(p for p in paths.work.rglob("*") if p.is_file() and "/.records/" not in p.as_posix()):
        flip_in_place(v, 8)  # every work/ output (and the snapshot files sharing their inodes): rebuilt, reading the cache
    with caplog.at_level("WARNING", logger="ragspine_index.steps.chunk_embeddings"):
        assert build(data).snapshot_id == sid  # the same vectors: the same snapshot
    assert f"embedding cache {cache}" in caplog.text and "failed their checksum" in caplog.text
    np.testing.assert_array_equal(np.load(paths.current / vectors_rel), before)
    assert_serving_verified(data, sid)
    from ragspine_index.steps.chunk_embeddings import EmbeddingCache

    healed = EmbeddingCache(cache)  # the refused rows (chunks, summaries, entity names) were embedded again and rewritten
    try:
        with sqlite3.connect(cache) as conn:
            rows = conn.execute("SELECT model_id, text_hash FROM embedding_cache").fetchall()
        conn.close()
        for model in {m for m, _ in rows}:
            healed.get_many(model, sorted(h for m, h in rows if m == model))
        assert healed.damaged_rows == 0 and healed.unchecked_rows == 0
    finally:
        healed.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "zero"])
def test_a_damaged_history_is_a_located_error_and_one_ingest_repairs_it(tiny, tmp_path, damage):
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    sid = paths.current.resolve().name
    hist = paths.root / "history.jsonl"
    good = hist.read_bytes()
    if damage == "flip":
        flip_in_place(hist, 8)
    elif damage == "truncate":
        hist.write_bytes(good[: len(good) // 2])
    else:
        hist.write_bytes(bytes(len(good)))
    rc, out, err = run_cli("snapshots", str(paths.root))
    assert rc == 2 and f"{hist} line 1 is damaged" in err and f"ragspine ingest {paths.raw}" in err
    assert "Traceback" not in out + err
    assert build(data).snapshot_id == sid
    rc, out, err = run_cli("snapshots", str(paths.root))
    assert rc == 0 and sid in out, err
    assert list(paths.root.glob("history.jsonl.damaged-*"))  # the damaged file is kept
    assert_serving_verified(data, sid)


# -- large files: per-block hashes, checked in a background pass before the first query --------------
def test_large_files_carry_block_hashes_and_a_flipped_bit_is_caught_before_it_ranks(tiny, tmp_path, monkeypatch):
    from ragspine_index import publish
    from ragspine_query import HybridRetriever

    monkeypatch.setattr(publish, "HASH_AT_OPEN_MAX_FILE_BYTES", 0)  # every file 'large': blocks recorded
    monkeypatch.setattr(publish, "BLOCK_BYTES", 1024)
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    (paths.raw / "note.md").write_text("# Note\n\nThe Quokka plant opened in 2024.\n", encoding="utf-8")
    sid = build(data).snapshot_id
    snap = paths.current.resolve()
    manifest = json.loads((snap / schema.MANIFEST_FILE).read_text())
    rel = f"{schema.EMBEDDINGS_DIR}/{schema.EMB_VECTORS}"
    entry = manifest["artifacts"][rel]
    assert len(entry["blocks"]["sha256"]) == -(-entry["bytes"] // 1024)
    # the block lists are not part of the snapshot id: the same content, the same id without them
    stripped = {**manifest, "artifacts": {r: {k: v for k, v in a.items() if k != "blocks"}
                                          for r, a in manifest["artifacts"].items()}}
    assert integrity.content_snapshot_id(stripped) == sid
    monkeypatch.setattr(integrity, "HASH_AT_OPEN_MAX_FILE_BYTES", 0)  # the reader hashes nothing at open
    with open_library(paths.root) as lib:
        lib.ensure_verified(timeout=60)
        assert lib.verify_stats["blocks"] >= len(entry["blocks"]["sha256"])
        assert HybridRetriever(lib).search("Quokka plant", top_k=3)
    data_bytes = bytearray((snap / rel).read_bytes())
    data_bytes[len(data_bytes) - 5] ^= 0x01  # one bit of one vector: same size, same shape
    with open(snap / rel, "r+b") as fh:
        fh.write(bytes(data_bytes))
    with open_library(paths.root) as lib:  # opens (sizes and bounds are fine) ...
        with pytest.raises(IndexCorruptError, match=r"vectors\.npy block \d+ \(bytes \d+-\d+\) does not match"):
            HybridRetriever(lib).search("Quokka plant", top_k=3)  # ... but never ranks with the damaged block
    rc, out, err = run_cli("query", str(paths.root), "Quokka plant")
    assert rc == 2 and "vectors.npy block" in err and f"ragspine ingest {paths.raw}" in err
    monkeypatch.undo()
    assert build(data).snapshot_id == sid
    assert_serving_verified(data, sid)


# -- readers that survive: copied small files, watched large ones --------------------------------------
READER_CHILD = r'''
import json, sys
from ragspine_core import integrity
if sys.argv[3] == "map-all":
    integrity.COPY_AT_OPEN_MAX_FILE_BYTES = 0  # every array mapped, as in a large library
from ragspine_core.errors import IndexCorruptError
from ragspine_query import HybridRetriever, RetrievalConfig, open_library
lib = open_library(sys.argv[1])
r = HybridRetriever(lib, config=RetrievalConfig(mode="hybrid"))
before = [h.chunk_id for h in r.search("product launch storage", top_k=5)]
print("ready", flush=True)
sys.stdin.readline()  # the parent damages the files now
try:
    after = [h.chunk_id for h in r.search("product launch storage", top_k=5)]
    print(json.dumps({"same": after == before}))
except IndexCorruptError as exc:
    print(json.dumps({"error": str(exc)}))
'''


@pytest.mark.parametrize("mapping,damage,expect", [
    ("map-all", "truncate", "was truncated after this reader opened it"),
    ("map-all", "write", "was written in place after this reader opened it"),
    ("copy-small", "truncate", "same"),
    ("copy-small", "write", "same"),
])
def test_a_long_lived_reader_never_crashes_or_answers_from_a_changed_file(tiny, tmp_path, mapping, damage, expect):
    """Damage written into files a reader already opened: SIGBUS (truncated mapping) or a
    silent wrong answer before; now the query fails with a located error (mapped files are
    checked before every query) or is unchanged (small files were copied at open)."""
    import os
    import sys

    from tests.conftest import PYTHON, python_env

    data = copy(tiny, tmp_path)
    snap = lib_paths(data).current.resolve()
    child = subprocess.Popen([PYTHON, "-c", READER_CHILD, str(snap), "", mapping], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=python_env(PYTHONPATH=os.pathsep.join(sys.path)))
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for rel in (f"{schema.BM25_DIR}/{schema.BM25_POSTINGS}", f"{schema.EMBEDDINGS_DIR}/{schema.EMB_VECTORS}"):
        path = snap / rel
        raw = path.read_bytes()
        with open(path, "r+b") as fh:  # the same inode the reader holds
            if damage == "truncate":
                fh.truncate(len(raw) // 3)
            else:
                fh.seek(len(raw) - 64)
                fh.write(bytes(64))
    out, err = child.communicate("go\n", timeout=300)
    assert child.returncode == 0, f"rc {child.returncode} (a signal is negative): {err[-1500:]}"
    result = json.loads(out.strip().splitlines()[-1])
    if expect == "same":
        assert result == {"same": True}, result
    else:
        assert expect in result["error"] and "open the library again" in result["error"], result


# -- readers that reopen: a long-lived retriever follows the library's current snapshot ------------
REOPEN_CHILD = r'''
import json, sys
from ragspine_core import integrity
integrity.COPY_AT_OPEN_MAX_FILE_BYTES = 0  # every array mapped, as in a large library
from ragspine_core.errors import RagspineError
from ragspine_query import HybridRetriever, RetrievalConfig, open_library
r = HybridRetriever(open_library(sys.argv[1]), config=RetrievalConfig(mode="hybrid"))
for line in sys.stdin:
    try:
        hits = r.search("product launch storage", top_k=5)
        print(json.dumps({"ids": [h.chunk_id for h in hits], "snapshot": r.library.snapshot_id}), flush=True)
    except RagspineError as exc:
        print(json.dumps({"error": str(exc), "kind": type(exc).__name__}), flush=True)
'''


class Reader:
    """A long-lived retriever in a child process (a SIGBUS there fails the test, not the run),
    opened through the library folder; each :meth:`ask` is one query."""

    def __init__(self, root: Path) -> None:
        import os
        import sys

        from tests.conftest import PYTHON, python_env

        self.child = subprocess.Popen([PYTHON, "-c", REOPEN_CHILD, str(root)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=python_env(PYTHONPATH=os.pathsep.join(sys.path)))

    def ask(self) -> dict:
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write("q\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        assert line, f"the reader died (rc {self.child.poll()}): {self.child.stderr.read()[-1500:] if self.child.stderr else ''}"
        return json.loads(line)

    def close(self) -> None:
        out, err = self.child.communicate("", timeout=60)
        assert self.child.returncode == 0, f"rc {self.child.returncode} (a signal is negative): {err[-1500:]}"


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "write", "delete"])
def test_a_long_lived_reader_fails_the_query_then_reopens_the_repaired_snapshot(tiny, tmp_path, damage):
    """A file of the serving snapshot truncated, written in place or deleted under an open
    retriever: that query fails with a located error (no SIGBUS, no wrong answer), the
    following ones too while the damage stands; one ``ragspine ingest`` later the same
    retriever answers as before, from the repaired snapshot, without a restart."""
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    snap = paths.current.resolve()
    reader = Reader(paths.root)
    try:
        before = reader.ask()
        path = snap / schema.BM25_DIR / schema.BM25_POSTINGS
        if damage == "delete":
            path.unlink()
        else:
            raw = path.read_bytes()
            with open(path, "r+b") as fh:  # the same inode the reader holds
                if damage == "truncate":
                    fh.truncate(len(raw) // 2)
                else:
                    fh.seek(len(raw) - 64)
                    fh.write(bytes(64))
        for _ in range(2):  # the damage stands: every query says where it is and what repairs it
            failed = reader.ask()
            assert "postings.npy" in failed.get("error", "") and "ragspine ingest" in failed["error"], failed
        assert build(data).snapshot_id == before["snapshot"]  # the repair: same id, new files
        assert reader.ask() == before
    finally:
        reader.close()


@pytest.mark.slow
def test_a_long_lived_reader_of_a_pruned_snapshot_reopens_the_current_one(tiny, tmp_path):
    """Retention prunes the snapshot a retriever opened: it answers from the current one
    (it served nothing before), and a document added since is found."""
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    first = paths.current.resolve()
    reader = Reader(paths.root)
    try:
        before = reader.ask()
        assert before["snapshot"] == first.name
        (paths.raw / "note.md").write_text("# Storage\n\nThe product launch storage plan of the Quokka plant.\n",
                                           encoding="utf-8")
        result = build_library(lib_paths(data), embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite",
                               keep=1)
        assert not first.exists()  # pruned
        after = reader.ask()
        assert after["snapshot"] == result.snapshot_id and after["ids"], after
        with open_library(paths.root) as lib:
            from ragspine_query import HybridRetriever, RetrievalConfig

            fresh = HybridRetriever(lib, config=RetrievalConfig(mode="hybrid")).search("product launch storage", top_k=5)
            assert after["ids"] == [h.chunk_id for h in fresh]
    finally:
        reader.close()


@pytest.mark.slow
def test_a_long_lived_reader_of_a_quarantined_snapshot_reopens_current_or_says_why(tiny, tmp_path):
    """A damaged retained snapshot is quarantined by the next publication: a retriever still
    on it reopens the current snapshot when that one is intact, and otherwise fails with an
    error naming its quarantine and the current snapshot's damage."""
    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    first = paths.current.resolve()
    old_reader, second_reader = Reader(paths.root), None
    try:
        assert old_reader.ask()["snapshot"] == first.name
        (paths.raw / "note.md").write_text("# Storage\n\nThe product launch storage plan of the Quokka plant.\n",
                                           encoding="utf-8")
        flip_in_place(first / schema.BM25_DIR / schema.BM25_PARAMS)  # damage the (soon retained) old snapshot
        (first / schema.BM25_DIR / schema.BM25_POSTINGS).unlink()
        integrity_marks = paths.root / ".suspect-snapshots"
        integrity_marks.write_text(first.name + "\n", encoding="utf-8")  # as `--verify` records it
        second = build(data).snapshot_id
        assert (paths.root / "quarantine" / first.name).is_dir()
        answer = old_reader.ask()
        assert answer["snapshot"] == second and answer["ids"], answer
        # the current snapshot damaged as well: the old reader's error says both
        second_reader = Reader(paths.root)
        assert second_reader.ask()["snapshot"] == second
        (paths.raw / "note2.md").write_text("# Plan\n\nA second storage note.\n", encoding="utf-8")
        third = build(data).snapshot_id
        current = paths.current.resolve()
        assert current.name == third
        (current / schema.BM25_DIR / schema.BM25_POSTINGS).unlink()
        shutil.rmtree(paths.snapshots / second)  # gone (as a quarantine removes it) under second_reader
        with open(paths.root / "history.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"snapshot_id": second, "created_at": None, "run_id": "quarantine-damaged",
                                 "quarantined": "damaged: test"}) + "\n")
        failed = second_reader.ask()
        assert "was quarantined (damaged: test)" in failed.get("error", "") and "postings.npy" in failed["error"], failed
    finally:
        old_reader.close()
        if second_reader is not None:
            second_reader.close()


@pytest.mark.slow
def test_the_search_service_reopens_a_repaired_snapshot_without_a_restart(tiny, tmp_path):
    """``ragspine serve``'s worker: a damaged chunk file of the served snapshot fails each
    request with the located error; after one ingest the next request answers as before."""
    from ragspine_core.settings import Settings
    from ragspine_tools.serve.access import Caller
    from ragspine_tools.serve.service import RequestError, SearchService

    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    service = SearchService([paths.root], settings=Settings.from_env({}))
    caller = Caller("x", frozenset({"*"}), "INTERNAL")

    def ask() -> list[str]:
        return [s["chunk_id"] for s in service.search(caller, "product launch storage", mode="bm25", top_k=5)["results"]]

    before = ask()
    assert before
    chunks = paths.current.resolve() / schema.ARTIFACT_REGISTRY["chunks"].path
    flip_in_place(chunks, 4096)
    for _ in range(2):
        with pytest.raises(RequestError, match=r"chunks\.sqlite was written in place after this reader opened it"):
            ask()
    build(data)
    assert ask() == before


# -- every long-lived holder follows the library (one mechanism: Library's Follower) -------------------
NOTE = "# Storage\n\nThe product launch storage plan of the Quokka plant in Bremen.\n"


def publish_pruning(data: Path, raw_note: str = NOTE) -> str:
    """A new document, published with ``keep=1``: the snapshot the holders opened is pruned."""
    paths = lib_paths(data)
    first = paths.current.resolve()
    (paths.raw / "note.md").write_text(raw_note, encoding="utf-8")
    sid = build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite", keep=1).snapshot_id
    assert not first.exists() and sid != first.name
    return sid


def test_a_tree_retriever_reopens_after_a_prune_and_never_ranks_from_a_changed_file(tiny, tmp_path):
    """TreeRetriever held its library for ever: after a prune it kept answering from the old
    snapshot (the new document never found), and a file written in place under it was read
    without the snapshot check."""
    from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
    from ragspine_query.tree import TreeRetriever

    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    model = DeterministicEmbeddingBackend()  # the tree lives in the library's embedding space
    tree = TreeRetriever(open_library(paths.root), config="collapsed", embedding_backend=model)
    assert tree.search("Quokka plant storage", top_k=3)
    sid = publish_pruning(data)
    hits = tree.search("Quokka plant storage", top_k=3)
    assert tree.library.snapshot_id == sid
    assert any("Quokka" in h.hit.chunk.text for h in hits)  # the new document, only in the new snapshot
    with open_library(paths.root) as lib:
        fresh = TreeRetriever(lib, config="collapsed", embedding_backend=model).search("Quokka plant storage", top_k=3)
        assert [h.hit.chunk_id for h in hits] == [h.hit.chunk_id for h in fresh]
    # damage written in place into the chunk file it reads: a located error, then the repair is followed
    flip_in_place(paths.current.resolve() / schema.ARTIFACT_REGISTRY["chunks"].path, 4096)
    with pytest.raises(IndexCorruptError, match=r"chunks\.sqlite was written in place after this reader opened it"):
        tree.search("Quokka plant storage", top_k=3)
    assert build(data).snapshot_id == sid
    assert [h.hit.chunk_id for h in tree.search("Quokka plant storage", top_k=3)] == [h.hit.chunk_id for h in hits]


def test_the_router_profiles_the_library_a_retriever_reopened(tiny, tmp_path):
    """make_router profiled each library once: after a retriever reopened a newer snapshot the
    router still routed by what the pruned one held."""
    from ragspine_query import HybridRetriever, RetrievalConfig
    from ragspine_query.retriever import MultiIndexRetriever
    from ragspine_query.router import LibraryProfile, make_router

    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    r = HybridRetriever(open_library(paths.root), config=RetrievalConfig(mode="bm25"))
    multi = MultiIndexRetriever({"tiny": r}, router=make_router("profile", {"tiny": r}))
    router = multi.router
    assert router is not None and "ACME_DE" not in router.profiles["tiny"].entities
    publish_pruning(data, "---\ndoc_id: acme-de-storage\ntitle: Storage plan\nentity: ACME_DE\ntopic: logistics\n"
                          "geography: DE\nlanguage: en\nsensitivity: INTERNAL\n---\n\n" + NOTE)
    assert multi.search("Quokka plant storage", top_k=3)
    with open_library(paths.root) as lib:
        expected = LibraryProfile.of(lib)
    assert router.profiles["tiny"] == expected and "ACME_DE" in expected.entities and "logistics" in expected.topics
    assert "logistics" in router.decide("logistics of the Quokka plant")[1]  # the new topic is matched


def test_the_confidence_grader_weighs_terms_of_the_library_its_retriever_reopened(tiny, tmp_path):
    """The grader kept the library handle it was built with: after a reopen its open-row IDF
    was the pruned snapshot's (a term only the new snapshot holds weighed as unseen)."""
    from ragspine_query import HybridRetriever, RetrievalConfig
    from ragspine_query.assessment import RelevanceGrader

    data = copy(tiny, tmp_path)
    paths = lib_paths(data)
    r = HybridRetriever(open_library(paths.root), config=RetrievalConfig(mode="bm25"))
    grader = RelevanceGrader(r)
    before = grader.library_scores("Quokka plant storage")["tiny"][1]
    publish_pruning(data)
    assert r.search("Quokka plant storage", top_k=3)  # the retriever reopened the current snapshot
    after = grader.library_scores("Quokka plant storage")["tiny"][1]
    with open_library(paths.root) as lib:
        fresh = RelevanceGrader(HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))).library_scores("Quokka plant storage")
    assert after == fresh["tiny"][1] and after != before


def test_the_tiers_see_the_channels_of_the_reopened_library_on_the_first_query(tmp_path):
    """The tier transform runs before the search that reopens: the first query after a prune
    was restricted to the pruned snapshot's channels (no relation graph: multi_hop fell back
    to semantic). The pipeline now follows its source before the first stage."""
    from ragspine_query.agent_api import build_narrative_retriever
    from ragspine_query.intelligence import QueryIntelligence
    from ragspine_query.source import libraries_of

    data = tmp_path / "data"
    raw = data / "raw" / "tiny"
    raw.mkdir(parents=True)
    for name in DOCS:
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    (raw / "_library.toml").write_text("graph_max_chunks = 1\n", encoding="utf-8")  # no relation graph
    build(data)
    question = "Which subsidiary of Acme Group makes batteries?"
    r = build_narrative_retriever(lib_paths(data).root, reranker=None, intelligence=QueryIntelligence(tiers="rules", filters="off"))
    assert r.retrieve(question, top_k=3).tier == "semantic"  # multi_hop needs the graph channel
    (raw / "_library.toml").unlink()
    sid = publish_pruning(data)
    res = r.retrieve(question, top_k=3, explain=True)
    assert res.tier == "multi_hop" and "graph" in {s.name for s in res.explain.stages if s.stage == "channel"}
    assert [lib.snapshot_id for lib in libraries_of(r.index.source)] == [sid]
