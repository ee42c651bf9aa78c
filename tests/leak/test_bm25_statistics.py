"""Item 3 of issue 28: BM25 statistics do not depend on RESTRICTED text.

``df``, ``N`` and ``avgdl`` of both BM25 fields are computed over the open rows, so on
the path users run (the narrative retriever) every score equals the score the same
query gets from a library built without the RESTRICTED documents. Before the fix, an
open note listing guessed codenames confirmed each guess by its lower score.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_core.lexical.bm25 import BM25Index, build_bm25_arrays
from ragspine_query.library import open_library
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.retriever import HybridRetriever, RetrievalConfig

OPEN = {
    "note.md": "---\ndoc_id: guesses\nsensitivity: PUBLIC\n---\n# Codename guesses\n\n"
               "Analysts guessed Falcon, Heron, Osprey and Nightingale as the merger codename.\n",
    "widgets.md": "---\ndoc_id: widgets\nsensitivity: PUBLIC\n---\n# Widget revenue\n\n"
                  "Widget revenue grew while supply costs fell. The widget team hired staff for the merger review.\n",
    "pricing.md": "---\ndoc_id: pricing\nsensitivity: INTERNAL\n---\n# Pricing\n\n"
                  "Pricing rose in the quarter. Supply of widgets was steady and the board met twice.\n",
    "board.md": "---\ndoc_id: board\nsensitivity: PUBLIC\n---\n# Board\n\n"
                "The board discussed the merger timeline, widget pricing and a new supply contract.\n",
}
SECRET = {
    "s1.md": "---\ndoc_id: s1\nsensitivity: RESTRICTED\n---\n# Project Nightingale\n\n"
             "Nightingale Nightingale merger: the board approved Nightingale. Widget revenue widget merger.\n",
    "s2.md": "---\ndoc_id: s2\nsensitivity: RESTRICTED\n---\n# Heron\n\n"
             + "Heron supply contract merger board widget pricing. " * 12 + "\n",
}


def _build(root: Path, files: dict[str, str]) -> Path:
    raw = root / "raw" / "lib"
    raw.mkdir(parents=True)
    for name, text in files.items():
        (raw / name).write_text(text, encoding="utf-8")
    paths = LibraryPaths("lib", raw, root / "artifacts" / "lib")
    build_library(paths, cache_path=root / "cache" / "embeddings.sqlite")
    return paths.root


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with_secret = _build(tmp_path_factory.mktemp("with"), {**OPEN, **SECRET})
    without = _build(tmp_path_factory.mktemp("without"), OPEN)
    return with_secret, without


def _queries() -> list[str]:
    words = sorted({w.lower() for text in (*OPEN.values(), *SECRET.values()) for w in re.findall(r"[A-Za-z]{4,}", text)}
                   - {"sensitivity", "public", "restricted", "internal"})
    rng = random.Random(28)
    fixed = ["Nightingale", "Heron", "Falcon", "Osprey", "merger codename", "widget revenue", "board merger supply",
             "pricing widgets"]
    return fixed + [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(60)]


def _visible(root: Path, query: str) -> list[tuple[str, float, float]]:
    retriever = build_narrative_retriever(root, reranker=None, mode="bm25", glossary=None, embedding_backend=None)
    return [(s["chunk_id"], s["scores"]["bm25"], s["scores"]["fused"]) for s in retriever.retrieve(query, top_k=20)]


def test_narrative_scores_equal_a_library_without_the_restricted_documents(pair):
    with_secret, without = pair
    compared = 0
    for q in _queries():
        got, want = _visible(with_secret, q), _visible(without, q)
        assert got == want, f"query {q!r}: visible hits or scores depend on RESTRICTED text"
        compared += len(want)
    assert compared > 50, "the comparison covered real hits"


def test_a_guessed_codename_is_not_confirmed_by_its_score(pair):
    with_secret, _ = pair
    # each guess occurs once in the same open chunk; with open-row statistics their
    # impacts are equal, whichever of them a RESTRICTED document also uses
    with open_library(with_secret) as lib:
        scores = {}
        for guess in ("Falcon", "Heron", "Osprey", "Nightingale"):
            hits = build_narrative_retriever(with_secret, reranker=None, mode="bm25", glossary=None,
                                             embedding_backend=None).retrieve(guess, top_k=5)
            assert hits and hits[0]["doc_id"] == "guesses"
            scores[guess] = hits[0]["scores"]["bm25"]
        assert len(set(scores.values())) == 1, scores
        assert lib.restricted_mask().any()


def test_include_restricted_searches_still_find_restricted_rows(pair):
    with_secret, _ = pair
    with open_library(with_secret) as lib:
        hits = HybridRetriever(lib, config=RetrievalConfig(mode="bm25")).search("Nightingale approved", top_k=5)
        assert hits and hits[0].chunk.doc_id == "s1"


def test_statistics_mask_gives_the_bytes_of_a_build_over_the_masked_rows():
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(40)]
    rows = [list(rng.choice(vocab, size=int(rng.integers(1, 30)))) for _ in range(200)]
    keep = rng.random(200) < 0.7
    masked = build_bm25_arrays(rows, stat_rows=keep)
    alone = build_bm25_arrays([r for r, k in zip(rows, keep) if k])
    assert masked.avgdl == alone.avgdl
    full, sub = BM25Index(masked), BM25Index(alone)
    kept_rows = np.flatnonzero(keep)
    for t in vocab:
        a = full.score_rows_dense([t])[kept_rows]
        b = sub.score_rows_dense([t])
        assert np.array_equal(a, b), t
