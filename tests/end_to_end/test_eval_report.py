"""`ragspine eval --report DIR`: a self-contained HTML report whose plots really render.

A small BEIR corpus written here (with one RESTRICTED document that matches every query)
is evaluated in three modes through the real CLI; the report must be offline (no script,
no remote URL), must never show the RESTRICTED document, and, loaded in headless
Chromium, every plot must have drawn marks with a non-zero size. The screenshot in
``docs/img/eval-report.png`` (shown by docs/evaluation.md) is taken by this test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import python_env
from tests.end_to_end.test_dagster_ui_browser import chromium, find_chromium

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "img" / "eval-report.png"
SECRET = "ZEPHYR-RESTRICTED-7Q"
DOCS = {
    "d1": ("Photosynthesis", "Chlorophyll absorbs light so plants convert carbon dioxide and water into sugar."),
    "d2": ("Volcanoes", "Magma rises through the crust and erupts as lava from a volcano."),
    "d3": ("Tides", "The gravitational pull of the moon drives ocean tides twice a day."),
    "d4": ("Vaccines", "A vaccine trains the immune system to recognise a pathogen."),
    "d5": ("Glaciers", "Glaciers carve valleys as compacted snow slowly flows downhill."),
    "d6": ("Moon landing", "Astronauts first walked on the moon in 1969."),
    "d7": ("Earthquakes", "Earthquakes release energy when tectonic plates slip along a fault."),
    "d8": ("Antibiotics", "Antibiotics kill bacteria but do not work against viruses."),
    "d9": ("Rainbows", "Sunlight refracts in raindrops and splits into a spectrum of colours."),
    "d10": ("Coral reefs", "Coral reefs bleach when warm ocean water stresses the algae living in them."),
}
QUERIES = {
    "q1": "how do plants make sugar from light",
    "q2": "why does lava erupt from a volcano",
    "q3": "moon gravity ocean tides",
    "q4": "immune system vaccine",
    "q5": "how do glaciers shape valleys",
    "q6": "what causes an earthquake",
    "q7": "do antibiotics treat a virus",
    "q8": "why are rainbows colourful",
}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 2), ("q3", "d6", 1), ("q4", "d4", 1), ("q5", "d5", 1),
         ("q6", "d7", 1), ("q7", "d8", 1), ("q8", "d9", 1), ("q8", "d10", 1)]
# every query's words, so a leak would rank it first in every mode
RESTRICTED_TEXT = f"{SECRET} " + " ".join(QUERIES.values())

# Loads the report in an iframe (same origin with --allow-file-access-from-files) and writes,
# for every plot, its rendered box and the boxes of its drawn marks into <pre id="out">.
MEASURE_PAGE = """<!DOCTYPE html><html><body>
<iframe id="r" src="{src}" width="1200" height="4000"></iframe><pre id="out">not measured</pre>
<script>
document.getElementById('r').addEventListener('load', () => {{
  const d = document.getElementById('r').contentDocument;
  const plots = [...d.querySelectorAll('svg.plot')].map(svg => {{
    const r = svg.getBoundingClientRect();
    const marks = [...svg.querySelectorAll('polyline.series, circle.point, circle, line.interval')]
      .map(e => {{ const b = e.getBBox(); return [b.width, b.height]; }});
    return {{kind: svg.dataset.plot, width: r.width, height: r.height, marks: marks}};
  }});
  document.getElementById('out').textContent = JSON.stringify(plots);
}});
</script></body></html>"""


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, (title, text) in DOCS.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
        fh.write(json.dumps({"_id": "restricted-memo", "title": f"{SECRET} memo", "text": RESTRICTED_TEXT,
                             "sensitivity": "RESTRICTED"}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as fh:
        for qid, text in QUERIES.items():
            fh.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, list[dict]]:
    tmp = tmp_path_factory.mktemp("eval_report")
    ds = write_dataset(tmp / "science")
    out = tmp / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "ragspine_tools.cli", "eval", str(ds), "--mode", "bm25,hybrid,vector",
         "--embedding", "deterministic", "--out", str(tmp / "eval"), "--report", str(out), "--json"],
        capture_output=True, text=True, timeout=300, env=python_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out / "index.html", json.loads(proc.stdout)


def test_report_is_self_contained_and_shows_every_section(report) -> None:
    path, metrics = report
    page = path.read_text(encoding="utf-8")
    assert [m["mode"] for m in metrics] == ["bm25", "hybrid", "vector"]
    # offline: no scripts, no stylesheet or image fetched from anywhere
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)
    # RESTRICTED: neither the document's id, title nor text
    assert SECRET not in page and "restricted-memo" not in page
    # the metric table carries the same numbers as --json
    for m in metrics:
        assert f"<td>{m['mode']}</td><td class=\"num\">" in page
        assert f"{m['ndcg@10']:.4f}" in page
    kinds = re.findall(r'<svg class="plot" data-plot="([^"]+)"', page)
    assert sorted(kinds) == ["intervals", "ndcg-curve", "scatter", "scatter"]
    assert "hybrid − bm25" in page and "vector − bm25" in page and "95% interval" in page
    # the scatter has one point per query; the disagreement table lists queries with their hits
    scatter = page[page.index('data-plot="scatter"'):]
    scatter = scatter[:scatter.index("</svg>")]
    assert scatter.count('class="point"') == len(QUERIES)
    assert "Where the modes disagree most" in page and '<ol class="hits">' in page


def test_report_plots_render_in_headless_chromium(report, tmp_path) -> None:
    browser = find_chromium()
    if browser is None:
        pytest.skip("headless Chromium not found (/usr/bin/chromium or chromium on PATH); "
                    "install Debian's package with `apt-get install -y chromium` to run this test")
    path, _ = report
    wrapper = tmp_path / "measure.html"
    wrapper.write_text(MEASURE_PAGE.format(src=path.resolve().as_uri()), encoding="utf-8")
    dom = chromium(browser, tmp_path / "profile-dom", "--allow-file-access-from-files", "--dump-dom", wrapper.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="out">(.*?)</pre>', dom.stdout, re.S)
    assert found and found.group(1).startswith("["), f"the report was not measured: {dom.stdout[-1500:]}"
    plots = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert sorted(p["kind"] for p in plots) == ["intervals", "ndcg-curve", "scatter", "scatter"]
    for plot in plots:
        assert plot["width"] > 200 and plot["height"] > 100, plot
        drawn = [m for m in plot["marks"] if m[0] > 0 or m[1] > 0]
        assert drawn, f"plot {plot['kind']} drew no visible mark: {plot}"
    curve = next(p for p in plots if p["kind"] == "ndcg-curve")
    assert any(w > 100 for w, _h in curve["marks"]), "the nDCG@k lines do not span the plot"

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shot = tmp_path / "eval-report.png"
    taken = chromium(browser, tmp_path / "profile-shot", "--window-size=1100,1500", f"--screenshot={shot}", path.resolve().as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and 20_000 < len(data) < 300_000, len(data)
    SCREENSHOT.write_bytes(data)
