"""The Dagster UI, checked in a real browser, and the UI tour's screenshots taken on the way.

Starts ``dagster-webserver`` on a free localhost port against a temporary ``DAGSTER_HOME``
and data root, with the project's code location (loaded through a small workspace file
that can bump the paragraph chunker's version, as a developer's change would), while
``ragspine ingest`` materializes the sample library into that instance. Headless
Chromium then renders the asset graph (``--dump-dom``: the asset names must be rendered),
a materialization's metadata, the asset checks, the partitions view and, after the
chunker bump and a reload of the code location, the unsynced partition. The screenshots go
to ``docs/img/ui-*.png`` (``docs/ui-tour.md`` shows them), so they are never stale.
Skipped, with the reason, where Chromium is not installed.
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
SCREENSHOTS = REPO / "docs" / "img"
#: Committed screenshots stay small; larger ones are re-encoded as 256-colour PNGs.
MAX_SCREENSHOT_BYTES = 300_000
INGEST_TIMEOUT_S = 300
ASSET_NAMES = ("documents", "chunks", "index_text", "bm25_index", "chunk_embeddings", "index_manifest")
SERVER_START_TIMEOUT_S = 90
CHROMIUM_TIMEOUT_S = 180  # generous: a loaded 2-core CI machine renders the UI slowly
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


def graphql(base: str, query: str, *, timeout: float = 10) -> dict:
    req = urllib.request.Request(f"{base}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
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


# The code location the tour loads: the project's definitions, with the paragraph chunker's
# version bumped when the file `chunker_bumped` exists beside this one (a reload re-imports it).
TOUR_DEFS = """
from pathlib import Path

if Path(__file__).with_name("chunker_bumped").exists():
    from ragspine_index.chunking import chunker_registry as registry

    registry.CHUNKER_VERSIONS["paragraph"] = registry.CHUNKER_VERSIONS["paragraph"] + "-tour"

from ragspine_assets.definitions import defs  # noqa: E402,F401
"""
TOUR_WORKSPACE = """load_from:
  - python_file:
      relative_path: tour_defs.py
      location_name: ragspine
      working_directory: {repo}
"""
RELOAD_MUTATION = """mutation { reloadRepositoryLocation(repositoryLocationName: "%s") { __typename } }"""
STALE_QUERY = """{ assetNodes { assetKey { path } staleStatus(partition: "sample") } }"""


def stale_statuses(base: str) -> dict[str, str]:
    nodes = graphql(base, STALE_QUERY, timeout=60)["data"]["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): n["staleStatus"] for n in nodes}


def save_screenshot(src: Path, name: str) -> Path:
    """Copy a Chromium screenshot into docs/img, re-encoded with 256 colours when it is large."""
    data = src.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, f"{name}: {len(data)} bytes, not a rendered page"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    dest = SCREENSHOTS / name
    if len(data) > MAX_SCREENSHOT_BYTES * 0.8:
        from PIL import Image  # pillow comes with matplotlib (extra 'notebook')

        with Image.open(src) as img:
            img.convert("RGB").quantize(colors=256).save(dest, optimize=True)
    else:
        dest.write_bytes(data)
    assert dest.stat().st_size < MAX_SCREENSHOT_BYTES, f"{dest} is {dest.stat().st_size} bytes"
    return dest


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """A webserver over an instance where the sample library has been materialized once."""
    browser = find_chromium()
    if browser is None:
        pytest.skip("headless Chromium not found (/usr/bin/chromium or chromium on PATH); "
                    "install Debian's package with `apt-get install -y chromium` to run this test")
    webserver = find_webserver()
    if webserver is None:
        pytest.skip("dagster-webserver is not installed: pip install 'ragspine[pipeline]'")
    pytest.importorskip("PIL", reason="pillow (with matplotlib, extra 'notebook') shrinks the screenshots")
    from tests.conftest import RAGSPINE_ENV_VARS, copy_sample_data

    tmp = tmp_path_factory.mktemp("dagster_ui")
    home = tmp / "dagster_home"
    home.mkdir()
    # nux off: otherwise a first-visit "Join the Dagster community" dialog covers the graph
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n", encoding="utf-8")
    data = copy_sample_data(tmp / "data")
    (tmp / "tour_defs.py").write_text(TOUR_DEFS, encoding="utf-8")
    (tmp / "workspace.yaml").write_text(TOUR_WORKSPACE.format(repo=REPO), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in RAGSPINE_ENV_VARS}
    env.update(DAGSTER_HOME=str(home), RAGSPINE_DATA_ROOT=str(data), RAGSPINE_EMBEDDING="none",
               PYTHONPATH=str(REPO))
    # the user's first step: materialize the sample library (before the webserver starts, so
    # the two do not race to create the instance's SQLite tables)
    ingest = subprocess.run([sys.executable, "-m", "ragspine_tools.cli", "ingest", str(data / "raw" / "sample"),
                             "--embedding", "none"], cwd=tmp, env=env, capture_output=True, text=True,
                            timeout=INGEST_TIMEOUT_S)
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "webserver.log"
    with open(log, "w") as log_fh:
        server = subprocess.Popen(
            [webserver, "-w", str(tmp / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        location = wait_for_location(base, server, log)
        yield {"browser": browser, "base": base, "location": location, "tmp": tmp, "server": server, "log": log}
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


def shoot(ui: dict, url: str, name: str, tmp_path: Path, *, size: str = "1400,900") -> Path:
    shot = tmp_path / name
    taken = chromium(ui["browser"], tmp_path / f"profile-{name}", f"--window-size={size}", f"--screenshot={shot}", url)
    assert taken.returncode == 0, taken.stderr[-2000:]
    return save_screenshot(shot, name)


def test_asset_graph_renders_in_headless_chromium(ui, tmp_path: Path) -> None:
    graph_url = f"{ui['base']}/locations/{ui['location']}/asset-groups/indexing"
    dom = chromium(ui["browser"], tmp_path / "profile-dom", "--dump-dom", graph_url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = visible_text(dom.stdout)
    missing = [name for name in ASSET_NAMES if name not in text]
    assert not missing, f"asset graph at {graph_url} lacks {missing}; page text: {text[:1500]}"
    shoot(ui, graph_url, "ui-1-asset-graph.png", tmp_path, size="1400,1000")


def test_ui_tour_screenshots(ui, tmp_path: Path) -> None:
    base = ui["base"]
    # what a new user opens next: the chunks asset's latest materialization and its metadata,
    # its checks, and its partitions (one per library)
    for view, name, expect in ((None, "ui-2-materialization.png", "chunks_written"),
                               ("checks", "ui-3-asset-checks.png", "chunk_ids_unique"),
                               ("partitions", "ui-4-partitions.png", "sample")):
        url = f"{base}/assets/chunks" + (f"?view={view}" if view else "")
        dom = chromium(ui["browser"], tmp_path / f"profile-dom-{name}", "--dump-dom", url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        assert expect in visible_text(dom.stdout), f"{url} does not show {expect!r}"
        shoot(ui, url, name, tmp_path)

    # a developer changes the chunker: after a reload of the code location, the chunks
    # partition is unsynced (GraphQL's stale status, which the UI reads)
    assert stale_statuses(base)["chunks"] == "FRESH"
    (ui["tmp"] / "chunker_bumped").write_text("1", encoding="utf-8")
    # the reload answers once the code server has restarted and re-imported the definitions
    reloaded = graphql(base, RELOAD_MUTATION % ui["location"], timeout=SERVER_START_TIMEOUT_S)["data"]["reloadRepositoryLocation"]
    assert reloaded["__typename"] == "WorkspaceLocationEntry", reloaded
    wait_for_location(base, ui["server"], ui["log"])
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while (status := stale_statuses(base))["chunks"] != "STALE" and time.monotonic() < deadline:
        time.sleep(0.5)
    # the changed asset is unsynced (code version changed); its upstream is not
    assert status["chunks"] == "STALE" and status["documents"] == "FRESH", status
    # Dagster marks a partitioned asset unsynced on the partition, not in the global graph
    # (dagster-io/dagster#22553): the partition's detail shows "Unsynced (1)" (one cause,
    # the code version, listed on hover)
    url = f"{base}/assets/chunks?view=partitions&partition=sample"
    text = ""
    for attempt in range(3):  # the cause appears once the partition's stale status has loaded
        dom = chromium(ui["browser"], tmp_path / f"profile-dom-unsynced-{attempt}", "--dump-dom", url)
        text = visible_text(dom.stdout)
        if "Unsynced" in text:
            break
    assert "Unsynced (1)" in text, f"the sample partition of chunks is not shown unsynced: {text[:2000]}"
    shoot(ui, url, "ui-5-unsynced.png", tmp_path)
