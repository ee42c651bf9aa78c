"""Start ``ragspine serve`` / ``ragspine mcp --transport http`` as a child process on a free
loopback port, wait (bounded) until it answers, and always stop it: the load test and the
tests drive the real service through this."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Iterator, Mapping, Sequence

from ragspine_core.errors import RagspineError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(command: str, args: Sequence[str], *, env: Mapping[str, str] | None = None, startup_s: float = 120.0,
            health_path: str = "/healthz", log_path: str | None = None) -> Iterator[str]:
    """``python -m ragspine_tools.cli COMMAND ARGS --port P`` on 127.0.0.1; yields ``http://127.0.0.1:P``.

    Waits at most ``startup_s`` for ``health_path`` to answer (any HTTP status), then
    yields; on exit sends SIGTERM to the process group, then SIGKILL after 10 s."""
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "ragspine_tools.cli", command, *args, "--host", "127.0.0.1", "--port", str(port)]
    log = open(log_path, "wb") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env=dict(env) if env is not None else None, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if proc.poll() is not None:
                raise RagspineError(f"`ragspine {command}` exited with status {proc.returncode} before answering"
                                    + (f" (its output: {log_path})" if log_path else ""))
            try:
                httpx.get(base + health_path, timeout=2.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RagspineError(f"`ragspine {command}` did not answer on {base} within {startup_s:g} s") from None
                time.sleep(0.2)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        if log_path:
            log.close()  # type: ignore[union-attr]
