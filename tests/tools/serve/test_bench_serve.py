"""``ragspine bench --serve`` end to end, small: the real service, a publish and a rollback, the checks pass."""

from __future__ import annotations

import json

import pytest

from tests.conftest import copy_data_root


@pytest.mark.slow
def test_bench_serve_runs_and_checks(built_sample, tmp_path, capsys):
    from ragspine_tools.cli import main

    data = copy_data_root(built_sample.parents[1], tmp_path / "data")
    rc = main(["bench", "--serve", str(data / "artifacts" / "sample"), "--modes", "bm25", "--clients", "1,3",
               "--requests", "12", "--rounds", "1", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0, rep
    assert [(r["mode"], r["clients"], r["requests"], r["errors"]) for r in rep["levels"]] == [("bm25", 1, 12, 0), ("bm25", 3, 12, 0)]
    assert all(r["p99_ms"] is not None and r["qps"] > 0 for r in rep["levels"])
    checks = rep["checks"]
    assert checks["responses"] == 24 and checks["withdrawn_served_on_first_snapshot"] > 0
    assert checks["answered_between_publish_and_rollback"] > 0  # the after-publish checks saw answers
    assert checks["mixed_snapshots"] == checks["old_snapshot_after_publish"] == checks["withdrawn_served_after_publish"] == 0
    assert rep["swaps"][0]["clients"] == 3 and rep["swaps"][0]["rollback_under_load"] and rep["http_over_in_process"] > 0
    rep_q = rep["repeated_queries"]  # where the time goes: every phase of the service, and the client's decode apart
    assert {"route", "parse", "access", "queue", "search", "resume", "encode", "total", "outside"} <= set(rep_q["service_phases_p50_ms"])
    assert rep_q["client_decode_p50_ms"] > 0


@pytest.mark.slow
def test_bench_serve_latency_only_reads_the_library_as_it_is(built_sample, tmp_path, capsys):
    """``--latency-only``: the in-process / HTTP comparison alone, on the library itself (nothing copied,
    built or published), the repeated questions' searches on the service's event loop by default."""
    from ragspine_tools.cli import main

    data = copy_data_root(built_sample.parents[1], tmp_path / "data")
    library = data / "artifacts" / "sample"
    before = sorted(p.name for p in (library / "snapshots").iterdir()), (library / "current").resolve()
    rc = main(["bench", "--serve", str(library), "--latency-only", "--modes", "bm25", "--requests", "6", "--rounds", "1", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and rep["latency_only"] and rep["levels"] == [] and rep["errors"] == 0
    assert (sorted(p.name for p in (library / "snapshots").iterdir()), (library / "current").resolve()) == before
    rep_q = rep["repeated_queries"]
    assert rep_q["http_searches"] == 18 and rep_q["http_searches_on_event_loop"] > 0  # the default --inline-ms
    assert rep_q["wire_p50_ms"] > 0 and rep_q["http_p50_ms"] > 0 and rep_q["in_process_p50_ms"] > 0 and rep["new_queries"]["http_searches_on_event_loop"] == 0
