"""The corruption sweep's ``--results`` file: the names it records survive a rebuild (work/
hashes normalised) and a damaged line is a clear error, so a second run resumes the first."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def sweep():
    spec = importlib.util.spec_from_file_location("corruption_sweep", REPO_ROOT / "benchmarks" / "corruption_sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_case_names_replace_work_hashes_in_folders_and_record_names():
    s = sweep()
    assert s.case_name(Path("artifacts/x/work/bm25/fde9e847e636675f6772fde2/bm25/indptr.npy")) == \
        "artifacts/x/work/bm25/<hash>/bm25/indptr.npy"
    assert s.case_name(Path("artifacts/x/work/.records/bm25/8cd38245e931f930785a7d06.json")) == \
        "artifacts/x/work/.records/bm25/<hash>.json"
    assert s.case_name(Path("artifacts/x/current/bm25/indptr.npy")) == "artifacts/x/current/bm25/indptr.npy"
    # a 40-hex id is no work hash
    long_id = "a" * 40
    assert s.case_name(Path(f"snap/{long_id}/f")) == f"snap/{long_id}/f"


def test_done_cases_reads_the_results_file_and_names_a_damaged_line(tmp_path):
    s = sweep()
    results = tmp_path / "r.jsonl"
    assert s.done_cases(results) == [] and s.done_cases(None) == []
    results.write_text(json.dumps({"file": "a", "kind": "delete", "outcomes": ["error"]}) + "\n\n", encoding="utf-8")
    assert [r["file"] for r in s.done_cases(results)] == ["a"]
    with open(results, "a", encoding="utf-8") as fh:
        fh.write('{"file": "b", "kin')  # a run killed mid-line
    with pytest.raises(SystemExit, match=r"r\.jsonl:3: not a JSON line"):
        s.done_cases(results)


def test_resume_key_is_the_file_for_one_case_per_file_and_the_pair_otherwise():
    s = sweep()
    done = {s.case_key("a", "delete", "files")}
    assert s.case_key("a", "flip_mid", "files") in done  # one case per file: done whatever the kind
    done = {s.case_key("a", "delete", "all")}
    assert s.case_key("a", "delete", "all") in done
    assert s.case_key("a", "flip_mid", "all") not in done  # every kind: the other kinds still run
    assert s.case_key("a", "flip_mid", "12") not in done
