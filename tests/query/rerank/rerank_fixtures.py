"""Plain helpers shared by the rerank tests: hit builders and a deterministic token encoder."""

from __future__ import annotations

import zlib

import numpy as np

from ragspine_core.records import Chunk, Hit


def make_hit(chunk_id: str, text: str, *, sensitivity: str = "INTERNAL", score: float = 0.5) -> Hit:
    chunk = Chunk(
        chunk_id=chunk_id,
        library_id="lib",
        doc_id=f"doc-{chunk_id}",
        ordinal=0,
        text=text,
        start=0,
        end=len(text),
        sensitivity=sensitivity,
    )
    return Hit(chunk=chunk, score=score, scores={"bm25": 1.0, "vector": 0.25, "fused": score})


def chunk_ids(hits: list[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


class HashingTokenEncoder:
    """A deterministic stand-in for a transformer's token embeddings.

    Each whitespace token maps to a fixed unit vector seeded by its CRC32, so equal
    tokens match exactly (dot 1.0) and others score in (-1, 1). It records every text
    it was asked to embed, so tests can check what reached the encoder.
    """

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def vector(self, token: str) -> np.ndarray:
        v = np.random.default_rng(zlib.crc32(token.encode("utf-8"))).normal(size=self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed_tokens(self, texts: list[str]) -> list[np.ndarray]:
        self.seen.extend(texts)
        out = []
        for text in texts:
            tokens = text.lower().split()
            out.append(np.stack([self.vector(t) for t in tokens]) if tokens else np.zeros((0, self.dim), np.float32))
        return out
