"""Damaged snapshot files fail loudly: every file x truncate / flip / zero / wrong shape.

A small library is built in-process (no Dagster), its snapshot is copied and one file
damaged at a time, and ``ragspine query`` runs on the copy in this process. Each case ends
in a clear error (exit 2, one ``error:`` line naming the file) or in the very answer of the
intact snapshot — never a traceback, a crash, or a silently different answer.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from ragspine_tools.cli import main as cli_main
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_core import integrity, schema
from ragspine_query import open_library
from ragspine_core.errors import IndexCorruptError

from tests.conftest import RAGSPINE_ENV_VARS, REPO_ROOT

DOCS = ("acme-cn-hr-faq.md", "acme-cn-product-launch-2024.md", "acme-eu-distributor-review.md", "acme-group-history-en.md")
QUERIES = (("product launch storage", ["--tree", "collapsed"]), ("Acme Group history", ["--mode", "graph"]))
DAMAGES = ("truncate", "flip", "zero", "shape")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    data = tmp_path_factory.mktemp("integrity") / "data"
    raw = data / "raw" / "tiny"
    raw.mkdir(parents=True)
    for name in DOCS:
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    paths = LibraryPaths("tiny", raw, data / "artifacts" / "tiny")
    result = build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite")
    return {"data": data, "paths": paths, "snapshot": Path(result.snapshot_dir)}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in RAGSPINE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli_main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def answers(snapshot: Path) -> list[tuple[int, str, str]]:
    return [run_cli("query", str(snapshot), text, "--json", *flags) for text, flags in QUERIES]


def damage(path: Path, kind: str) -> None:
    data = bytearray(path.read_bytes())
    if kind == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif kind == "flip":
        data[len(data) * 2 // 3] ^= 0x5A
        path.write_bytes(bytes(data))
    elif kind == "zero":
        path.write_bytes(bytes(len(data)))
    elif path.suffix == ".npy":  # a valid array of another shape (and dtype)
        arr = np.load(path)
        np.save(path, np.zeros((max(1, arr.shape[0] - 1), 3), dtype=np.float64))
    else:  # the file replaced by a valid, different document of its kind
        path.write_bytes(b"{}" if path.suffix == ".json" else bytes(data[: len(data) // 3]) + b"\n" * 7)


def snapshot_files(snapshot: Path) -> list[str]:
    return sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())


def test_the_tiny_snapshot_has_every_artifact(tiny):
    files = snapshot_files(tiny["snapshot"])
    for prefix in ("bm25/", "bm25_blend/", "bm25_doc/", "embeddings/", "relation_graph/", "summary_tree/", "chunks.sqlite"):
        assert any(f.startswith(prefix) for f in files), prefix


def test_verified_open_reads_the_intact_snapshot(tiny):
    manifest = json.loads((tiny["snapshot"] / schema.MANIFEST_FILE).read_text())
    stats = integrity.verify_snapshot(tiny["snapshot"], manifest, full=True)
    assert stats["files"] == len(snapshot_files(tiny["snapshot"])) - 1  # all but the manifest itself
    with open_library(tiny["snapshot"]) as lib:
        assert lib.n_chunks > 0
    rc, out, err = run_cli("snapshots", str(tiny["paths"].root), "--verify")
    assert rc == 0 and " ok (" in out and not err


@pytest.mark.parametrize("kind", DAMAGES)
def test_every_damaged_file_is_a_clear_error_or_the_same_answer(tiny, tmp_path, kind):
    baseline = answers(tiny["snapshot"])
    assert all(rc == 0 and out.strip().startswith("[") and json.loads(out) for rc, out, _ in baseline)
    for rel in snapshot_files(tiny["snapshot"]):
        snap = tmp_path / f"{kind}-{rel.replace('/', '_')}" / "snap"
        shutil.copytree(tiny["snapshot"], snap)
        damage(snap / rel, kind)
        for (rc, out, err), want in zip(answers(snap), baseline):
            assert "Traceback" not in out + err, (rel, kind, err)
            if rc == 0:
                assert (rc, out) == want[:2], f"{kind} of {rel} silently changed the answer"
                continue
            lines = err.strip().splitlines()
            assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rel, kind, err)
            assert "unexpected" not in lines[0], (rel, kind, err)
            assert Path(rel).name in lines[0] or "manifest.json" in lines[0], (rel, kind, err)


@pytest.mark.parametrize("kind", DAMAGES)
def test_without_hashes_at_open_damage_is_still_never_a_crash_or_traceback(tiny, tmp_path, kind, monkeypatch):
    """As a large library (its files too big to hash at open): sizes and array bounds
    still stop every damage that could crash; other damage may change an answer until
    ``--verify`` finds it, but never raises anything but a clear error."""
    monkeypatch.setattr(integrity, "HASH_AT_OPEN_MAX_FILE_BYTES", 0)
    for rel in snapshot_files(tiny["snapshot"]):
        snap = tmp_path / f"{kind}-{rel.replace('/', '_')}" / "snap"
        shutil.copytree(tiny["snapshot"], snap)
        damage(snap / rel, kind)
        for rc, out, err in answers(snap):
            assert "Traceback" not in out + err, (rel, kind, err)
            assert rc in (0, 2), (rel, kind, rc, err)
            if rc == 2:
                assert len(err.strip().splitlines()) == 1, (rel, kind, err)
        with pytest.raises((IndexCorruptError, FileNotFoundError)):  # --verify finds every one
            integrity.verify_snapshot(snap, full=True)


def test_postings_out_of_range_are_refused_at_open_even_unhashed(tiny, tmp_path, monkeypatch):
    """The compiled BM25 kernel indexes rows without bounds checks: a posting beyond the
    rows (same file size) must never reach it."""
    monkeypatch.setattr(integrity, "HASH_AT_OPEN_MAX_FILE_BYTES", 0)
    snap = tmp_path / "snap"
    shutil.copytree(tiny["snapshot"], snap)
    path = snap / schema.BM25_DIR / schema.BM25_POSTINGS
    postings = np.load(path)
    postings[len(postings) // 2] = 10_000_000
    np.save(path, postings)
    with pytest.raises(IndexCorruptError, match=r"bm25/postings\.npy holds ids outside"):
        open_library(snap)
    indptr_path = snap / schema.BM25_DIR / schema.BM25_INDPTR
    shutil.copy2(tiny["snapshot"] / schema.BM25_DIR / schema.BM25_POSTINGS, path)
    indptr = np.load(indptr_path)
    indptr[1], indptr[2] = indptr[2], indptr[1]
    np.save(indptr_path, indptr)
    with pytest.raises(IndexCorruptError, match=r"bm25/indptr\.npy is not monotone"):
        open_library(snap)


def test_snapshots_verify_names_the_damaged_file_and_exits_2(tiny, tmp_path):
    root = tmp_path / "artifacts" / "tiny"
    shutil.copytree(tiny["paths"].root, root, symlinks=True)
    target = root / "current" / schema.EMBEDDINGS_DIR / schema.EMB_VECTORS
    data = bytearray(target.read_bytes())
    data[-5] ^= 1  # one bit of one vector: same size, same shape
    target.write_bytes(bytes(data))
    rc, out, err = run_cli("snapshots", str(root), "--verify")
    assert rc == 2 and "DAMAGED" in out and "embeddings/vectors.npy" in out and "sha256" in out
    assert err.startswith("error: ") and "Traceback" not in out + err


def test_a_reingest_rebuilds_a_damaged_work_output_instead_of_republishing_it(tiny, tmp_path):
    """Snapshot files are hard links to work/ outputs: damage to one shows in both. The
    next build must not reuse (and republish) the damaged bytes."""
    data = tmp_path / "data"
    shutil.copytree(tiny["data"], data, symlinks=True)
    paths = LibraryPaths("tiny", data / "raw" / "tiny", data / "artifacts" / "tiny")
    current = paths.current.resolve()
    sid = current.name
    victim = current / schema.BM25_DIR / schema.BM25_IMPACTS
    before = victim.read_bytes()
    broken = bytearray(before)
    broken[len(broken) // 2] ^= 0xFF
    with open(victim, "r+b") as fh:  # in place, as a disk error would: the work/ link sees it too
        fh.write(bytes(broken))
    with pytest.raises(IndexCorruptError, match="impacts.npy"):
        open_library(paths.root)
    result = build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite")
    assert result.snapshot_id == sid  # the same content, so the same id ...
    assert (paths.current.resolve() / schema.BM25_DIR / schema.BM25_IMPACTS).read_bytes() == before  # ... rebuilt
    with open_library(paths.root) as lib:
        assert lib.snapshot_id == sid
    assert integrity.verify_snapshot(paths.current.resolve(), full=True)["files"] > 0


def test_a_current_link_to_a_deleted_snapshot_is_named(tiny, tmp_path):
    root = tmp_path / "artifacts" / "tiny"
    shutil.copytree(tiny["paths"].root, root, symlinks=True)
    shutil.rmtree((root / "current").resolve())
    rc, out, err = run_cli("query", str(root), "anything")
    assert rc == 2 and "does not exist (the snapshot was deleted)" in err and "--rollback" in err
    assert "no published index" not in err


def test_snapshots_on_a_missing_folder_exits_2(tmp_path):
    rc, out, err = run_cli("snapshots", str(tmp_path / "nope"))
    assert rc == 2 and err.startswith("error: ") and "is not a folder" in err


KERNEL_CHILD = r'''
import sys
import numpy as np
from ragspine_query import open_library
snap, target = sys.argv[1], sys.argv[2]
lib = open_library(snap)
index = lib.bm25
assert index.compile_jit(), "numba is installed but the kernel did not compile"
queries = [index.tokens[i:i + 3] for i in range(0, min(len(index.tokens), 300), 3)]
before = [index.search(q, 5)[0].tolist() for q in queries]
mapped = np.load(target, mmap_mode="r")
start, size = mapped.offset, mapped.nbytes
with open(target, "r+b") as fh:  # damage the mapped file in place, after its check at open
    fh.seek(start)
    fh.write(b"\x7f" * size)
errors = 0
for _ in range(3):
    for q in queries:
        try:
            index.search(q, 5)
        except Exception:
            errors += 1
print("ok", len(before), errors)
'''


@pytest.mark.parametrize("name", [schema.BM25_POSTINGS, schema.BM25_INDPTR])
def test_the_compiled_kernel_survives_a_file_damaged_in_place_after_open(tiny, tmp_path, name):
    """A long-running reader maps the files; damage written into them afterwards (same
    inode) bypasses the check at open. The compiled kernel must still never read or
    write outside its arrays (it segfaulted or corrupted the heap before)."""
    pytest.importorskip("numba", reason="the compiled kernel needs the 'accel' extra")
    import subprocess

    from tests.conftest import PYTHON, python_env

    snap = tmp_path / "snap"
    shutil.copytree(tiny["snapshot"], snap)
    done = subprocess.run([PYTHON, "-c", KERNEL_CHILD, str(snap), str(snap / schema.BM25_DIR / name)],
                          capture_output=True, text=True, timeout=600, env=python_env(PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.startswith("ok ")


def test_a_work_output_damaged_between_its_step_and_publication_is_never_published(tiny, tmp_path):
    from ragspine_index.pipeline import STEPS, run_step
    from ragspine_index.step_api import StepContext

    data = tmp_path / "data"
    shutil.copytree(tiny["data"], data, symlinks=True)
    paths = LibraryPaths("tiny", data / "raw" / "tiny", data / "artifacts" / "tiny")
    serving = paths.current.resolve().name
    (paths.raw / "extra.md").write_text("# Extra\n\nA new note about the Quokka plant.\n", encoding="utf-8")
    ctx = StepContext(paths=paths, cache_path=data / "cache" / "embeddings.sqlite", run_id="r", embedding="deterministic")
    values: dict = {}
    for step in STEPS:
        if step.name == "index_manifest":
            victim = Path(values["bm25_index"].artifact_paths()["bm25"]) / schema.BM25_IMPACTS
            raw = bytearray(victim.read_bytes())
            raw[-3] ^= 0x40
            with open(victim, "r+b") as fh:
                fh.write(bytes(raw))
            damaged = bytes(raw)
            try:  # refused, or (index_manifest's freshness check, issue 28) rebuilt: never published as is
                run_step(step, ctx, values)
            except IndexCorruptError as exc:
                assert "changed after it was built" in str(exc)
                assert paths.current.resolve().name == serving
            else:
                published = paths.current.resolve()
                assert (published / schema.BM25_DIR / schema.BM25_IMPACTS).read_bytes() != damaged
                assert integrity.verify_snapshot(published, full=True)["files"] > 0
                return
            break
        values[step.name] = run_step(step, ctx, values).value
    result = build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite")
    assert result.snapshot_id != serving
    assert integrity.verify_snapshot(paths.current.resolve(), full=True)["files"] > 0
