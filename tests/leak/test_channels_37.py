"""Issue 37, every output channel: seeded random queries over converted files marked in
every place the issue lists, through the Python API (the ``--json --explain`` object, the
HTTP service's too, and ``POST /v1/search`` of a real ``ragspine serve``), ``ragspine query`` (text, ``--json``, ``--explain``, ``--global``),
``ragspine graph`` and the summary tree, in every mode with the tree channel off, collapsed
and traversal — 0 fingerprints, and every rank, score, confidence, tier, needs_refinement
and explain count identical to the library built without the RESTRICTED files
(:mod:`tests.leak.channels_37`).

CI runs ``RAGSPINE_CHANNELS37_QUERIES`` queries (default 150); the measurement of 5,000 is
``python -m tests.leak.channels_37 --queries 5000`` (docs/security.md has its figures).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from tests.leak import channels_37 as channels  # noqa: E402

pytestmark = pytest.mark.slow


def _serve_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn", "httpx"))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return channels.build_pair(tmp_path_factory.mktemp("channels37"))


def test_every_marked_file_is_restricted_or_withdrawn_and_findable_by_an_admin_search(pair):
    """The run is not vacuous: every marked converted file and folder-default file is indexed
    RESTRICTED (their markers are in the index, found by an include_restricted search)."""
    from ragspine_query.library import open_library
    from ragspine_query.retriever import HybridRetriever, RetrievalConfig
    from tests.formats import marked

    assert len(pair.restricted_docs) >= len(marked.MARKED) + 4 + 4  # + the sample's 4 and the folder's 4
    with open_library(pair.with_secret) as lib:
        admin = HybridRetriever(lib, config=RetrievalConfig(mode="bm25"))
        found = {m for m in pair.markers if admin.search(m, top_k=3)}
    # every DOCX, PDF and HTML file's body carries its marker (the XLSX and PPTX makers write
    # their own cells and slides: those files are fingerprinted by their text windows)
    bodies = [pair.markers[n] for n, (_, suffix, _) in enumerate(marked.MARKED) if suffix in ("docx", "pdf", "html")]
    assert set(bodies) <= found, sorted(set(bodies) - found)
    assert len(found) >= len(bodies) + 4 + 4  # the sample's four notes, the folder default's four files


def test_random_queries_through_every_channel_show_no_restricted_text_and_equal_the_open_library(pair):
    n = int(os.environ.get("RAGSPINE_CHANNELS37_QUERIES", "150"))
    report = channels.run(pair, n, seed=37, cli_every=6, global_every=20, subprocess_queries=1, graph_calls=24,
                          serve_every=15 if _serve_installed() else 0)
    assert report.queries == n
    assert report.answered > n // 2 and report.compared_hits > n, "real hits were compared"
    modes = {k.split(":")[1] for k in report.calls if k.startswith("api:")}
    assert modes == set(channels.MODES)
    assert {k.split("tree=")[1] for k in report.calls if "tree=" in k} == set(channels.TREES)
    if _serve_installed():
        assert report.calls.get("http:INTERNAL", 0) >= 1 and report.calls.get("http:PUBLIC", 0) >= 1
    for channel in ("cli:text", "cli:--json", "cli:--explain", "cli:--json+--explain", "cli:--global",
                    "graph_cli_text", "graph_cli_json", "tree_node", "subprocess:text", "subprocess:--json+--explain"):
        assert report.calls.get(channel, 0) >= 1, channel
    # --explain of the tree and graph stages was compared too (ids, counts and scores in them)
    for stage in ("channel:tree", "channel:graph", "channel:bm25", "channel:vector", "grade:confidence",
                  "mask:filters+not-restricted"):
        assert report.stages.get(stage, 0) >= 1, (stage, sorted(report.stages))
