"""Every indexing step run inside `metering()` is timed; outside it nothing is kept."""

from __future__ import annotations

import pytest

from ragspine_index.pipeline import STEPS
from ragspine_index.step_meter import measure_step, metering
from tests.query.qi_library import build_sample


def test_every_step_of_a_real_build_is_timed_in_order(tmp_path):
    with metering() as costs:
        build_sample(tmp_path)
    assert [c.name for c in costs] == [s.name for s in STEPS]
    for c in costs:
        assert c.wall_s >= 0 and c.cpu_s >= 0 and c.peak_rss_mib > 0 and c.rss_growth_mib >= 0
    assert sum(c.cpu_s for c in costs) > 0
    assert costs[-1].peak_rss_mib >= max(c.peak_rss_mib for c in costs[:-1])  # a high-water mark never falls


def test_outside_a_metering_block_nothing_is_recorded_and_blocks_do_not_nest():
    with metering() as costs:
        pass
    with measure_step("documents"):
        pass
    assert costs == []
    with metering():
        with pytest.raises(RuntimeError, match="already on"):
            with metering():
                pass


def test_the_cli_routes_ingest_with_a_folder_or_synthetic_to_the_ingest_bench(tmp_path):
    from ragspine_tools.cli import _ingest_bench_args

    assert _ingest_bench_args(["--ingest", str(tmp_path), "--json"]) == [str(tmp_path), "--json"]
    assert _ingest_bench_args(["--ingest", "--synthetic", "50"]) == ["--synthetic", "50"]
    assert _ingest_bench_args(["--corpus", "synthetic-100k", "--ingest"]) is None  # the lexical bench's flag
    assert _ingest_bench_args(["--hybrid"]) is None
