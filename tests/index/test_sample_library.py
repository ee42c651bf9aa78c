"""The shipped sample library parses cleanly and every chunker honours the invariants on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine_index.chunking import CHUNKER_NAMES, build_chunks, chunk_spans, make_chunker
from ragspine_index.library_config import load_library_config
from ragspine_index.source_documents.parse_library import parse_library

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "raw" / "sample"

pytestmark = pytest.mark.skipif(not SAMPLE.is_dir(), reason=f"sample library not present at {SAMPLE}")


@pytest.fixture(scope="module")
def sample():
    return parse_library(SAMPLE)


def test_sample_library_parses_with_no_errors(sample):
    assert sample.errors == (), "\n".join(str(e) for e in sample.errors)
    assert sample.documents
    assert sample.library_id == "sample"
    load_library_config(SAMPLE)  # valid when present, defaults when absent


@pytest.mark.parametrize("name", CHUNKER_NAMES)
def test_every_chunker_honours_the_invariants_on_the_sample(sample, name, chunk_invariants):
    chunker = make_chunker(name)
    ids: set[str] = set()
    for doc in sample.documents:
        spans = chunk_spans(doc, chunker)  # the chunker's; a converted file's cut at its sheets/slides/sections
        if not doc.regions:
            assert spans == chunker.chunk(doc)
        chunk_invariants(doc.body, spans, chunker.max_chars)
        chunks = build_chunks(doc, chunker)
        assert [c.text for c in chunks] == [s.text for s in spans]
        assert all(c.sensitivity == doc.sensitivity and c.doc_id == doc.doc_id for c in chunks)
        ids.update(c.chunk_id for c in chunks)
        assert [c.chunk_id for c in build_chunks(doc, chunker)] == [c.chunk_id for c in chunks]
    assert len(ids) == sum(len(chunk_spans(d, chunker)) for d in sample.documents)
