"""`ragspine query --reranker listwise` against a real local chat server: RESTRICTED text
never reaches the prompt nor the output, and the judge's order is applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "query" / "rerank"))
from llm_server import LocalChatServer  # noqa: E402

pytestmark = pytest.mark.slow
MARKERS = ("RESTRICTED-MARKER-ALPHA", "RESTRICTED-MARKER-BRAVO", "RESTRICTED-MARKER-CHARLIE", "RESTRICTED-MARKER-DELTA")


def _query(built_sample, text, env, reranker):
    proc = subprocess.run(
        [sys.executable, "-m", "ragspine_tools.cli", "query", str(built_sample), text, "--top-k", "5",
         "--mode", "bm25", "--reranker", reranker, "--json"],
        capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_listwise_judge_from_the_cli_never_sees_restricted_text(built_sample):
    with LocalChatServer("ok") as server:
        env = {**os.environ, "RAGSPINE_LLM_BASE_URL": server.base_url, "RAGSPINE_LLM_MODEL": "local-test"}
        env.pop("RAGSPINE_RERANKER", None)
        judged = _query(built_sample, "price cut PowerFlex 7", env, "listwise")
        bodies = server.all_raw_bodies().decode("utf-8")
        assert server.requests, "the judge was called"
    plain = _query(built_sample, "price cut PowerFlex 7", {**env, "RAGSPINE_LLM_BASE_URL": ""}, "none")
    for marker in MARKERS:
        assert marker not in bodies
        assert marker not in json.dumps(judged, ensure_ascii=False)
    assert all(s["sensitivity"] != "RESTRICTED" for s in judged)
    # the local judge reverses the candidates it is shown, so the order differs from RRF
    assert [s["chunk_id"] for s in judged] != [s["chunk_id"] for s in plain]
