"""Shared checks for the chunking tests: the invariants every chunker must honour."""

from __future__ import annotations

from typing import Callable, Sequence

import pytest

from ragspine_index.chunking import ChunkSpan


def check_chunk_invariants(body: str, spans: Sequence[ChunkSpan], max_chars: int) -> None:
    """Substring, non-empty, trimmed, within budget, parent contains child, full coverage."""
    covered = bytearray(len(body))
    for span in spans:
        assert 0 <= span.start < span.end <= len(body), span
        assert body[span.start : span.end] == span.text, span
        assert span.text.strip() == span.text and span.text, span
        assert len(span.text) <= max_chars, (len(span.text), max_chars, span)
        if span.parent_start != -1:
            assert 0 <= span.parent_start <= span.start and span.end <= span.parent_end <= len(body), span
        else:
            assert span.parent_end == -1, span
        covered[span.start : span.end] = b"\x01" * (span.end - span.start)
    missing = [i for i, ch in enumerate(body) if not ch.isspace() and not covered[i]]
    assert not missing, f"non-whitespace characters not covered at {missing[:10]}: {[body[i] for i in missing[:10]]}"


@pytest.fixture(scope="session")
def chunk_invariants() -> Callable[[str, Sequence[ChunkSpan], int], None]:
    return check_chunk_invariants
