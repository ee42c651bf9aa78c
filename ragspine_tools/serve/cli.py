"""``ragspine serve`` (HTTP) and ``ragspine mcp`` (Model Context Protocol): argument parsing and start-up."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.settings import Settings
from ragspine_tools.serve.access import KeyStore, check_bind, hash_key, is_loopback, new_key


def _need_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import orjson  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("`ragspine serve`", "serve", exc.name or "fastapi") from None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("libraries", nargs="*", metavar="LIBRARY", help="library folders data/artifacts/<library> (their `current` is followed)")
    p.add_argument("--keys", default=None, metavar="FILE",
                   help="API keys (TOML [[key]] tables: name, sha256, libraries, max_sensitivity; default RAGSPINE_API_KEYS_FILE; "
                        "RAGSPINE_API_KEYS may hold the same entries as JSON). Without keys only loopback is served")
    p.add_argument("--max-top-k", type=int, default=50, help="largest top_k a request may ask (default 50)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one search may take before a 504 (default 10)")
    p.add_argument("--new-key", default=None, metavar="NAME",
                   help="print a fresh random key for NAME and the [[key]] entry (its sha256) to add to the key file, then exit")
    p.add_argument("--key-libraries", default="*", help="with --new-key: comma-separated library ids (default *)")
    p.add_argument("--key-max-sensitivity", default="PUBLIC", help="with --new-key: PUBLIC or INTERNAL (default PUBLIC)")


def add_serve_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("serve", help="serve libraries over HTTP: POST /v1/search, GET /v1/libraries, /healthz, /metrics",
                       description="A warm HTTP query service (FastAPI on uvicorn; OpenAPI at /docs and /openapi.json). "
                                   "It follows each library's `current`: a publish or a rollback is served without a "
                                   "restart. See docs/serving.md.")
    _add_common(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; another needs keys or --allow-anonymous)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any free port)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1); each opens the libraries once "
                                                          "(their memory-mapped files are shared by the page cache)")
    p.add_argument("--allow-anonymous", action="store_true", help="serve beyond loopback without keys (every caller sees INTERNAL)")
    p.add_argument("--threads", type=int, default=8, help="searches one worker runs at once (default 8)")
    p.add_argument("--inline-ms", type=float, default=25.0,
                   help="a lone search whose identical predecessor (same key, body, snapshots) used under this many ms of CPU "
                        "runs on the event loop instead of the worker pool, sparing two thread hand-offs (default 25; "
                        "0: always the pool)")
    p.add_argument("--warm", default="auto", help="comma-separated modes whose pipelines each worker builds at start (default auto)")
    return p


def add_mcp_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("mcp", help="serve libraries to agents over the Model Context Protocol (stdio or streamable HTTP)",
                       description="An MCP server with two tools, search and list_libraries, under the access rules of "
                                   "`ragspine serve`. Over stdio the key is RAGSPINE_API_KEY (needed when keys are "
                                   "configured); over HTTP each request sends its own.")
    _add_common(p)
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="with --transport http: address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8766, help="with --transport http: port (default 8766)")
    p.add_argument("--allow-anonymous", action="store_true", help="with --transport http: serve beyond loopback without keys")
    return p


def _print_new_key(args: argparse.Namespace) -> int:
    level = args.key_max_sensitivity.strip().upper()
    if level not in ("PUBLIC", "INTERNAL"):
        raise ConfigError(f"--key-max-sensitivity must be PUBLIC or INTERNAL, got {args.key_max_sensitivity!r}")
    libs = [x.strip() for x in args.key_libraries.split(",") if x.strip()] or ["*"]
    key = new_key()
    print(f"# the key (give it to the caller once; it is not stored anywhere):\n# {key}", file=sys.stderr)
    libs_toml = ", ".join('"' + x.replace('"', '') + '"' for x in libs)
    print(f'[[key]]\nname = "{args.new_key}"\nsha256 = "{hash_key(key)}"\nlibraries = [{libs_toml}]\nmax_sensitivity = "{level}"')
    return 0


def _keys(args: argparse.Namespace, settings: Settings) -> KeyStore:
    return KeyStore.load(args.keys or settings.api_keys_file or None, settings.api_keys or None)


def _http_protocol() -> Any:
    """uvicorn's httptools protocol writing each answer in one piece (:mod:`.protocol`); uvicorn's own
    choice where httptools is not installed."""
    try:
        from ragspine_tools.serve.protocol import CoalescingHttpToolsProtocol
    except ImportError:  # no httptools: uvicorn falls back to h11
        return "auto"
    return CoalescingHttpToolsProtocol


def run_serve(args: argparse.Namespace) -> int:
    if args.new_key:
        return _print_new_key(args)
    if not args.libraries:
        raise ConfigError("serve needs at least one library: ragspine serve data/artifacts/<library>")
    _need_extra()
    import uvicorn

    from ragspine_tools.serve.app import CONFIG_ENV, serve_config
    from ragspine_tools.serve.service import Limits, SearchService

    settings = Settings.from_env()  # the one read of the environment for this command
    keys = _keys(args, settings)
    check_bind(args.host, keys, args.allow_anonymous)
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    if not 0 <= args.inline_ms <= 1000:
        raise ConfigError(f"--inline-ms must be between 0 and 1000 (a search on the event loop holds every other request), "
                          f"got {args.inline_ms:g}")
    limits = Limits(max_top_k=args.max_top_k, timeout_s=args.timeout)
    libraries = [os.path.abspath(p) for p in args.libraries]
    SearchService(libraries, settings=settings, limits=limits)  # fail here, once, with a clear error, not in every worker
    os.environ[CONFIG_ENV] = serve_config(libraries, keys_file=os.path.abspath(args.keys) if args.keys else None, limits=limits,
                                          warm_modes=[m.strip() for m in args.warm.split(",") if m.strip()],
                                          workers=args.workers, threads=args.threads, inline_below_s=args.inline_ms / 1000)
    made = None
    if args.workers > 1:  # the workers' metrics meet in a fresh folder (prometheus_client's multiprocess mode)
        made = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="ragspine-metrics-")
    print(f"serving {len(libraries)} librar{'y' if len(libraries) == 1 else 'ies'} on http://{args.host}:{args.port} "
          f"({args.workers} worker{'s' if args.workers > 1 else ''}; keys: {'on' if keys.enabled else 'off'})", flush=True)
    try:
        uvicorn.run("ragspine_tools.serve.app:app_from_env", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level="warning", access_log=False, http=_http_protocol())
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
    return 0


def run_mcp(args: argparse.Namespace) -> int:
    if args.new_key:
        return _print_new_key(args)
    if not args.libraries:
        raise ConfigError("mcp needs at least one library: ragspine mcp data/artifacts/<library>")
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MissingExtraError("`ragspine mcp`", "serve", "mcp") from None
    from ragspine_tools.serve.mcp_server import run

    settings = Settings.from_env()  # the one read of the environment for this command
    keys = _keys(args, settings)
    if args.transport == "http":
        check_bind(args.host, keys, args.allow_anonymous)
    elif keys.enabled and not settings.api_key:
        raise ConfigError("keys are configured: set RAGSPINE_API_KEY to the key this MCP client uses")
    return run(args, keys, settings, loopback=is_loopback(args.host))
