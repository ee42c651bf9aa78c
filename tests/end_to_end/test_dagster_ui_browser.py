"""The Dagster UI, checked in a real browser: the asset graph shows the project's assets.

Starts ``dagster-webserver -w workspace.yaml`` from the repository root on a free
localhost port against a temporary ``DAGSTER_HOME``, waits until the code location has
loaded, renders the asset graph with headless Chromium (``--dump-dom``), and saves a
screenshot to ``test-artifacts/dagster-ui-asset-graph.png`` (git-ignored) for a human or
the CI artifact store. Skipped, with the reason, where Chromium is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
ASSET_NAMES = ("documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "index_manifest")
SERVER_START_TIMEOUT_S = 90
CHROMIUM_TIMEOUT_S = 90
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1600,1000", "--virtual-time-budget=15000",
)


def find_chromium() -> str | None:
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def find_webserver() -> str | None:
    beside_python = Path(sys.executable).parent / "dagster-webserver"
    return str(beside_python) if beside_python.is_file() else shutil.which("dagster-webserver")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(base: str, query: str) -> dict:
    req = urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


LOCATIONS_QUERY = """{ workspaceOrError { ... on Workspace { locationEntries {
  name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


def wait_for_location(base: str, server: subprocess.Popen, log: Path) -> str:
    """Poll until the webserver answers and the code location has loaded; return its name."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"dagster-webserver exited with {server.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            entries = graphql(base, LOCATIONS_QUERY)["data"]["workspaceOrError"]["locationEntries"]
        except (urllib.error.URLError, ConnectionError, OSError, KeyError, TypeError) as exc:
            last = repr(exc)
        else:
            loaded = [e for e in entries if e["loadStatus"] == "LOADED"]
            if loaded:
                loc = loaded[0]
                assert loc["locationOrLoadError"]["__typename"] == "RepositoryLocation", loc
                return loc["name"]
            last = json.dumps(entries)
        time.sleep(0.5)
    pytest.fail(f"dagster-webserver did not load the code location within {SERVER_START_TIMEOUT_S}s ({last}):\n"
                f"{log.read_text(errors='replace')[-3000:]}")


def chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)


def visible_text(dom: str) -> str:
    """The page's text, without scripts and styles (asset names must be rendered, not embedded)."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return " ".join(re.sub(r"<[^>]+>", " ", dom).split())


def test_asset_graph_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = find_chromium()
    if browser is None:
        pytest.skip("headless Chromium not found (/usr/bin/chromium or chromium on PATH); "
                    "install Debian's package with `apt-get install -y chromium` to run this test")
    webserver = find_webserver()
    if webserver is None:
        pytest.skip("dagster-webserver is not installed: pip install 'ragspine[pipeline]'")

    home = tmp_path / "dagster_home"
    home.mkdir()
    # nux off: otherwise a first-visit "Join the Dagster community" dialog covers the graph
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n", encoding="utf-8")
    data = tmp_path / "data"
    (data / "raw").mkdir(parents=True)
    env = {**os.environ, "DAGSTER_HOME": str(home), "RAGSPINE_DATA_ROOT": str(data)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "webserver.log"
    with open(log, "w") as log_fh:
        server = subprocess.Popen(
            [webserver, "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        location = wait_for_location(base, server, log)
        graph_url = f"{base}/locations/{location}/asset-groups/indexing"

        dom = chromium(browser, tmp_path / "profile-dom", "--dump-dom", graph_url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        text = visible_text(dom.stdout)
        missing = [name for name in ASSET_NAMES if name not in text]
        assert not missing, f"asset graph at {graph_url} lacks {missing}; page text: {text[:1500]}"

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dagster-ui-asset-graph.png"
        shot.unlink(missing_ok=True)
        taken = chromium(browser, tmp_path / "profile-shot", f"--screenshot={shot}", graph_url)
        assert taken.returncode == 0, taken.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    finally:
        # the webserver leads its own session: its code-server child goes down with it
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=5)
