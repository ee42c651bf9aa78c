"""Randomized queries over a library of converted files marked in every place of
:mod:`tests.formats.marked` (issue 37): no RESTRICTED marker reaches an answer, and every
visible rank and score equals the same library built without the marked files.

``RAGSPINE_LEAK37_QUERIES`` sets the number of queries (default 5,000).
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_index.artifacts import LibraryPaths  # noqa: E402
from ragspine_index.pipeline import build_library  # noqa: E402
from ragspine_query.agent_api import build_narrative_retriever  # noqa: E402
from tests.formats import marked  # noqa: E402

pytestmark = pytest.mark.slow

OPEN = {
    f"open-{i}.md": f"---\nsensitivity: PUBLIC\n---\n# Harbour note {i}\n\n{text}\n"
    for i, text in enumerate([
        "The harbour crane tender for the terminal closes in spring; six electric cranes are planned.",
        "Delivery of the cranes is planned for the second quarter with payment in instalments.",
        "The Maasvlakte terminal expands its quay and hires crane operators for the tender.",
        "Electric vessels and shore power reduce emissions in the harbour.",
        "Quarterly review: terminal volumes rose, crane availability was high, delivery on time.",
    ])
}


def _marked_files() -> tuple[dict[str, bytes], list[str]]:
    files, markers = {}, []
    for n, (name, suffix, make) in enumerate(marked.MARKED):
        marker = f"zq{n:02d}secretmarker"
        markers.append(marker)
        original = marked.BODY
        marked.BODY = (f"# Tender {marker}\n\nThe {marker} tender covers six electric harbour cranes for the "
                       f"terminal, quoted at {n + 7} million euros by {marker} holdings.\n\n- Delivery {marker}\n")
        try:
            files[f"{name}.{suffix}"] = make()
        finally:
            marked.BODY = original
    return files, markers


def _build(root: Path, files: dict[str, bytes]) -> Path:
    raw = root / "raw" / "lib"
    raw.mkdir(parents=True)
    for name, data in files.items():
        (raw / name).write_bytes(data)
    paths = LibraryPaths("lib", raw, root / "artifacts" / "lib")
    build_library(paths, cache_path=root / "cache" / "embeddings.sqlite")
    return paths.root


def test_no_marker_is_served_and_every_visible_score_equals_the_open_library(tmp_path):
    secret, markers = _marked_files()
    opened = {k: v.encode() for k, v in OPEN.items()}
    with_secret = _build(tmp_path / "with", {**opened, **secret})
    without = _build(tmp_path / "without", opened)
    from ragspine_query.library import open_library

    with open_library(with_secret) as lib:
        docs = {(r[0], r[1].upper()) for r in lib.execute_read("SELECT DISTINCT doc_id, sensitivity FROM narrative_chunk")}
    assert {d for d, s in docs if s == "RESTRICTED"} == {name.rsplit(".", 1)[0] for name in secret}
    a = build_narrative_retriever(with_secret, reranker=None, mode="bm25", glossary=None, embedding_backend=None)
    b = build_narrative_retriever(without, reranker=None, mode="bm25", glossary=None, embedding_backend=None)
    words = sorted({w.lower() for t in OPEN.values() for w in re.findall(r"[A-Za-z]{4,}", t)}
                   | {"tender", "cranes", "harbour", "confidential", "restricted", "million", "holdings"})
    rng = random.Random(37)
    n = int(os.environ.get("RAGSPINE_LEAK37_QUERIES", "5000"))
    compared = 0
    for i in range(n):
        pool = words + markers if i % 3 else markers
        query = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 4)))
        got = a.retrieve(query, top_k=10)
        shown = json.dumps([s.to_dict() for s in got], ensure_ascii=False).lower()
        assert not any(m in shown for m in markers), query
        want = b.retrieve(query, top_k=10)
        assert [(h["chunk_id"], h["scores"]) for h in got] == [(h["chunk_id"], h["scores"]) for h in want], query
        compared += len(want)
    assert compared > n  # real hits were compared
