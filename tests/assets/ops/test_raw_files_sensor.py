"""raw_files_sensor against real folders: partitions for new libraries, one run per change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg

from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.resources import RagspineConfig
from ragspine_assets.sensors import load_cursor, raw_files_sensor

from tests.assets.ops.helpers import bump_mtime, write_doc


def tick(ragspine: RagspineConfig, instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources={"ragspine": ragspine}) as context:
        result = raw_files_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def apply_partition_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the sensor daemon does with the result's dynamic partition requests."""
    for req in result.dynamic_partitions_requests:
        assert isinstance(req, dg.AddDynamicPartitionsRequest)
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))


def added_partitions(result: dg.SensorResult) -> list[str]:
    return [k for r in result.dynamic_partitions_requests for k in r.partition_keys]


def requested(result: dg.SensorResult) -> dict[str, str]:
    """partition key -> run key of every run request."""
    return {r.partition_key: r.run_key for r in result.run_requests}


def test_new_library_folder_adds_partition_and_requests_run(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    write_doc(data_root / "raw" / "beta" / "b.md", "Beta", "Beta margins fell.")

    result = tick(ragspine, instance, None)

    assert added_partitions(result) == ["alpha", "beta"]
    assert result.dynamic_partitions_requests[0].partitions_def_name == LIBRARIES_PARTITION
    assert sorted(requested(result)) == ["alpha", "beta"]
    assert all(r.run_key.startswith(f"{r.partition_key}:") for r in result.run_requests)
    assert set(load_cursor(result.cursor)) == {"alpha", "beta"}


def test_known_partition_is_not_added_again(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)
    write_doc(data_root / "raw" / "alpha" / "b.md", "Second", "More text.")

    second = tick(ragspine, instance, first.cursor)

    assert instance.get_dynamic_partitions(LIBRARIES_PARTITION) == ["alpha"]
    assert added_partitions(second) == []
    assert list(requested(second)) == ["alpha"]


def test_new_file_in_known_library_requests_one_run(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    write_doc(data_root / "raw" / "beta" / "b.md", "Beta", "Beta margins fell.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    write_doc(data_root / "raw" / "alpha" / "reports" / "q1.md", "Q1", "First quarter.")
    second = tick(ragspine, instance, first.cursor)

    assert list(requested(second)) == ["alpha"], "only the library that changed runs"
    assert requested(second)["alpha"] != requested(first)["alpha"]
    assert "reports/q1.md" in load_cursor(second.cursor)["alpha"].files


def test_changed_file_requests_run_even_with_same_size(data_root: Path, ragspine, instance) -> None:
    doc = write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Revenue grew 5%.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    write_doc(doc, "Alpha", "Revenue grew 7%.")  # same byte length
    bump_mtime(doc)
    second = tick(ragspine, instance, first.cursor)

    assert list(requested(second)) == ["alpha"]
    before, after = load_cursor(first.cursor)["alpha"], load_cursor(second.cursor)["alpha"]
    assert before.files["a.md"].size == after.files["a.md"].size
    assert before.files["a.md"].sha256 != after.files["a.md"].sha256


def test_deleted_file_requests_run(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    doomed = write_doc(data_root / "raw" / "alpha" / "old.md", "Old", "Withdrawn memo.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    doomed.unlink()
    second = tick(ragspine, instance, first.cursor)

    assert list(requested(second)) == ["alpha"]
    assert "old.md" not in load_cursor(second.cursor)["alpha"].files


def test_unchanged_libraries_request_nothing(data_root: Path, ragspine, instance) -> None:
    doc = write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    idle = tick(ragspine, instance, first.cursor)
    bump_mtime(doc)  # touched, not edited: hashed again, same fingerprint
    touched = tick(ragspine, instance, idle.cursor)

    for result in (idle, touched):
        assert result.run_requests == []
        assert added_partitions(result) == []
        assert result.skip_reason is not None and "no new, changed or removed files" in result.skip_reason.skip_message
    assert load_cursor(touched.cursor)["alpha"].fingerprint == load_cursor(first.cursor)["alpha"].fingerprint
    assert load_cursor(touched.cursor)["alpha"].files["a.md"].mtime_ns == doc.stat().st_mtime_ns


def test_same_content_gives_same_run_key(data_root: Path, ragspine, instance, tmp_path: Path) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)
    write_doc(data_root / "raw" / "alpha" / "b.md", "Beta", "New memo.")

    # A retried tick re-evaluates from the same cursor: Dagster dedupes on the run key.
    again_1 = tick(ragspine, instance, first.cursor)
    again_2 = tick(ragspine, instance, first.cursor)
    assert requested(again_1) == requested(again_2)

    # The same content elsewhere (a fresh cursor, another data root) keys the same way.
    twin_root = tmp_path / "twin"
    shutil.copytree(data_root, twin_root)
    fresh = tick(RagspineConfig(data_root=str(twin_root)), dg.DagsterInstance.ephemeral(), None)
    assert requested(fresh) == requested(tick(ragspine, dg.DagsterInstance.ephemeral(), None))


def test_revert_to_earlier_content_is_a_new_run(data_root: Path, ragspine, instance) -> None:
    doc = write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Version A.")
    t1 = tick(ragspine, instance, None)
    apply_partition_requests(instance, t1)
    write_doc(doc, "Alpha", "Version B.")
    bump_mtime(doc)
    t2 = tick(ragspine, instance, t1.cursor)
    write_doc(doc, "Alpha", "Version A.")
    bump_mtime(doc, 2)
    t3 = tick(ragspine, instance, t2.cursor)

    keys = [requested(t)["alpha"] for t in (t1, t2, t3)]
    assert len(set(keys)) == 3, f"reverting to A must re-ingest (the index holds B), got {keys}"
    fp = [load_cursor(t.cursor)["alpha"].fingerprint for t in (t1, t3)]
    assert fp[0] == fp[1], "same content, same fingerprint"


def test_library_config_counts_and_hidden_files_do_not(data_root: Path, ragspine, instance) -> None:
    lib = data_root / "raw" / "alpha"
    write_doc(lib / "a.md", "Alpha", "Alpha revenue grew.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    (lib / ".a.md.swp").write_bytes(b"editor junk")
    (lib / "_drafts").mkdir()
    write_doc(lib / "_drafts" / "wip.md", "WIP", "Not yet.")
    ignored = tick(ragspine, instance, first.cursor)
    assert ignored.run_requests == []

    (lib / "_library.toml").write_text('chunker = "paragraph"\nmax_chars = 300\n', encoding="utf-8")
    config = tick(ragspine, instance, ignored.cursor)
    assert list(requested(config)) == ["alpha"]
    assert sorted(load_cursor(config.cursor)["alpha"].files) == ["_library.toml", "a.md"]


def test_removed_library_folder_requests_nothing_and_leaves_partition(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    write_doc(data_root / "raw" / "beta" / "b.md", "Beta", "Beta margins fell.")
    first = tick(ragspine, instance, None)
    apply_partition_requests(instance, first)

    shutil.rmtree(data_root / "raw" / "beta")
    second = tick(ragspine, instance, first.cursor)

    assert second.run_requests == []
    assert set(load_cursor(second.cursor)) == {"alpha"}
    assert sorted(instance.get_dynamic_partitions(LIBRARIES_PARTITION)) == ["alpha", "beta"]


def test_cursor_is_compact_json(data_root: Path, ragspine, instance) -> None:
    write_doc(data_root / "raw" / "alpha" / "a.md", "Alpha", "Alpha revenue grew.")
    cursor = json.loads(tick(ragspine, instance, None).cursor)
    assert cursor["version"] == 1
    (size, mtime_ns, sha), = cursor["libraries"]["alpha"]["files"].values()
    assert size > 0 and mtime_ns > 0 and len(sha) == 64
    assert load_cursor('{"version": 0, "libraries": {}}') == {}, "an older cursor format starts over"
