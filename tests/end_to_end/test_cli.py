"""The ``ragspine`` console script, run as a real child process (``python -m ragspine_tools.cli``)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import PYTHON, RESTRICTED_MARKERS, copy_sample_data, python_env

pytestmark = pytest.mark.slow


def ragspine(*args: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "ragspine_tools.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
        encoding="utf-8", timeout=timeout, env=python_env(DAGSTER_HOME=str(cwd / "dagster_home")),
    )


def query_json(built_sample, tmp_path, text: str, *extra: str) -> list[dict]:
    proc = ragspine("query", built_sample, text, "--json", *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out, list) and all(isinstance(s, dict) for s in out)
    assert not any(m in proc.stdout for m in RESTRICTED_MARKERS.values())
    assert all(s["sensitivity"] != "RESTRICTED" for s in out)
    return out


def test_query_json_english_and_chinese(built_sample, tmp_path):
    en = query_json(built_sample, tmp_path, "why did Acme Europe revenue decline in Q3 2024", "--top-k", "5")
    # top 3 (filter extraction is off by default since issue 36: the group history's chunk on it may lead)
    assert "acme-eu-2024q3-earnings" in [s["doc_id"] for s in en[:3]] and 0 < len(en) <= 5
    assert {"text", "doc_id", "title", "source_locator", "chunk_id", "library_id", "scores"} <= set(en[0])
    zh = query_json(built_sample, tmp_path, "数据出境 第五条")
    assert zh[0]["doc_id"] == "acme-data-security-measures"
    assert "第五条" in "".join(s["text"] for s in zh)  # non-ASCII survives the JSON round trip


@pytest.mark.parametrize("text", ["price cut PowerFlex 7", "Nordvolt acquisition", "RESTRICTED-MARKER-BRAVO"])
def test_query_json_never_prints_restricted_text(built_sample, tmp_path, text):
    query_json(built_sample, tmp_path, text, "--top-k", "50")


def test_query_filter_narrows_results(built_sample, tmp_path):
    out = query_json(built_sample, tmp_path, "revenue 营收", "--top-k", "20", "--filter", "entity=eq:ACME_CN",
                     "--filter", "period=between:2024Q1,2025H2")
    assert out and {s["entity"] for s in out} == {"ACME_CN"}
    assert all("2024Q1" <= s["period"] <= "2025H2" for s in out)


def test_query_text_output_cites_sources(built_sample, tmp_path):
    proc = ragspine("query", built_sample, "为什么营收下滑", "--top-k", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[1]" in proc.stdout and "sample:" in proc.stdout and "#chars=" in proc.stdout
    assert "RESTRICTED-MARKER" not in proc.stdout


@pytest.mark.parametrize(
    ("flt", "named"),
    [("entity=like:ACME", "unknown filter operator 'like'"), ("entitee=eq:ACME_CN", "unknown filter field 'entitee'"),
     ("period=between:2024Q1", "between needs exactly two values")],
)
def test_bad_filter_exits_2_naming_the_problem(built_sample, tmp_path, flt, named):
    proc = ragspine("query", built_sample, "revenue", "--filter", flt, cwd=tmp_path)
    assert proc.returncode == 2
    assert named in proc.stderr and proc.stdout == ""


def test_query_of_a_missing_library_exits_2_naming_the_asset(tmp_path):
    proc = ragspine("query", tmp_path / "artifacts" / "nope", "revenue", cwd=tmp_path)
    assert proc.returncode == 2 and "index_manifest" in proc.stderr


def test_ingest_then_query_from_the_shell(tmp_path):
    pytest.importorskip("dagster", reason="ingest needs the 'pipeline' extra")
    data = copy_sample_data(tmp_path / "data")
    proc = ragspine("ingest", "data/raw/sample", "--embedding", "none", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sample: published snapshot" in proc.stdout and "46 documents" in proc.stdout
    assert (data / "artifacts" / "sample" / "current" / "manifest.json").is_file()
    assert (tmp_path / "dagster_home" / "dagster.yaml").is_file()  # runs land in DAGSTER_HOME
    proc = ragspine("query", "data/artifacts/sample", "why did Acme Europe revenue decline in Q3 2024", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "acme-eu-2024q3-earnings" in [s["doc_id"] for s in json.loads(proc.stdout)[:3]]


def test_ingest_of_a_missing_folder_exits_2(tmp_path):
    proc = ragspine("ingest", "data/raw/absent", "--embedding", "none", cwd=tmp_path)
    assert proc.returncode == 2 and "is not a directory" in proc.stderr
