"""Deterministic synthetic corpora and query sets (Zipfian vocabulary, no downloads).

Words are drawn from a Zipf law ``p(rank) ∝ rank^-s`` over a fixed vocabulary of
pseudo-words (lowercase ASCII letters, so every engine's default tokenizer splits them
the same way). Passage lengths are log-normal around ``mean_words``. Everything is drawn
from one seeded :class:`numpy.random.Generator`, so the same arguments give the same
corpus on every machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

DEFAULT_SEED = 20240601
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """Shape of a synthetic corpus and its two query sets."""

    n_passages: int = 100_000
    mean_words: int = 60
    vocab_size: int = 100_000
    zipf_s: float = 1.1
    n_queries: int = 1_000
    #: the most frequent ranks are "stop words": normal queries skip them (the
    #: stop-word-heavy set, :func:`stop_word_queries`, is made of them).
    stop_ranks: int = 100
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.n_passages < 10 or self.vocab_size < 1_000 or self.mean_words < 4:
            raise ValueError(f"synthetic corpus too small: {self}")


@dataclass(frozen=True, slots=True)
class Corpus:
    """Passages and the normal query set (each query is a list of tokens)."""

    name: str
    texts: list[str]
    queries: list[list[str]]
    description: str


def _words(vocab_size: int, rng: np.random.Generator) -> np.ndarray:
    """Distinct pseudo-words; their alphabetical order is unrelated to frequency rank."""
    codes = rng.permutation(26**4 * 4)[:vocab_size] + 26**3  # >= 4 letters, unique
    out = []
    for c in codes.tolist():
        w = []
        while c:
            c, r = divmod(c, 26)
            w.append(_LETTERS[r])
        out.append("".join(w))
    return np.array(out, dtype=object)


def synthetic_corpus(cfg: SyntheticConfig) -> Corpus:
    """Generate the corpus and its normal query set.

    Normal queries have 2–6 distinct terms drawn Zipf-wise (same law as the corpus) from
    the ranks at or after ``stop_ranks`` that occur in the corpus.
    """
    rng = np.random.default_rng(cfg.seed)
    words = _words(cfg.vocab_size, rng)
    ranks = np.arange(1, cfg.vocab_size + 1, dtype=np.float64)
    p = ranks ** -cfg.zipf_s
    p /= p.sum()
    sigma = 0.35
    lengths = np.clip(np.rint(rng.lognormal(np.log(cfg.mean_words) - sigma**2 / 2, sigma, cfg.n_passages)), 4, 8 * cfg.mean_words).astype(np.int64)
    ids = rng.choice(cfg.vocab_size, size=int(lengths.sum()), p=p)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    texts = [" ".join(words[ids[bounds[i] : bounds[i + 1]]]) for i in range(cfg.n_passages)]

    present = np.zeros(cfg.vocab_size, dtype=bool)
    present[ids] = True
    q_rng = np.random.default_rng(cfg.seed + 1)
    tail = np.flatnonzero(present[cfg.stop_ranks :]) + cfg.stop_ranks
    cdf = np.cumsum(p[tail])
    cdf /= cdf[-1]
    queries = []
    for _ in range(cfg.n_queries):
        n = int(q_rng.integers(2, 7))
        picked: list[int] = []
        while len(picked) < n:
            t = int(tail[min(int(np.searchsorted(cdf, q_rng.random(), side="right")), tail.size - 1)])
            if t not in picked:
                picked.append(t)
        queries.append([str(words[t]) for t in picked])
    desc = (
        f"{cfg.n_passages:,} passages, mean {lengths.mean():.1f} words (log-normal, sigma {sigma}), "
        f"Zipf s={cfg.zipf_s} over {cfg.vocab_size:,} pseudo-words ({int(present.sum()):,} occur), seed {cfg.seed}"
    )
    n = cfg.n_passages
    return Corpus(f"synthetic-{n // 1000}k" if n % 1000 == 0 else f"synthetic-{n}", texts, queries, desc)


def stop_word_queries(df: dict[str, int], n_queries: int, *, pool: int = 6, seed: int = 7) -> list[list[str]]:
    """Queries of 3–5 distinct terms drawn uniformly from the ``pool`` highest-df terms."""
    top = sorted(df, key=lambda t: (-df[t], t))[:pool]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_queries):
        n = int(rng.integers(min(3, len(top)), min(5, len(top)) + 1))
        out.append([top[i] for i in rng.choice(len(top), size=n, replace=False)])
    return out


def scifact_corpus(dataset_dir: Path, tokenize: Callable[[str], list[str]], n_queries: int) -> Corpus:
    """SciFact (BEIR layout): documents are ``title + text``; the first ``n_queries`` queries."""
    docs, queries = [], []
    with open(dataset_dir / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                obj = json.loads(line)
                docs.append(f"{obj.get('title', '')} {obj.get('text', '')}".strip())
    with open(dataset_dir / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                toks = tokenize(json.loads(line)["text"])
                if toks:
                    queries.append(toks)
    queries = queries[:n_queries]
    desc = f"SciFact corpus ({len(docs):,} abstracts, title + text) and its first {len(queries):,} queries"
    return Corpus("scifact", docs, queries, desc)
