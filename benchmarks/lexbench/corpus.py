"""Deterministic synthetic corpora and query sets (Zipfian vocabulary, no downloads).

Words are drawn from a Zipf law ``p(rank) ∝ rank^-s`` over a fixed vocabulary of
pseudo-words (lowercase ASCII letters, so every engine's default tokenizer splits them
the same way). Passage lengths are log-normal around ``mean_words``. Everything is drawn
from one seeded :class:`numpy.random.Generator`, so the same arguments give the same
corpus on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """Shape of a synthetic corpus and its two query sets."""

    n_passages: int = 100_000
    mean_words: int = 60
    vocab_size: int = 100_000
    zipf_s: float = 1.1
    n_queries: int = 1_000
    n_stop_queries: int = 200
    #: ranks below this are "stop words": normal queries skip them, the
    #: stop-word-heavy set is made only of the most frequent of them.
    stop_ranks: int = 100
    #: the stop-word-heavy set draws from the ``stop_pool`` most frequent terms.
    stop_pool: int = 6
    seed: int = 20240601

    def __post_init__(self) -> None:
        if self.n_passages < 10 or self.vocab_size < 1_000 or self.mean_words < 4:
            raise ValueError(f"synthetic corpus too small: {self}")


@dataclass(frozen=True, slots=True)
class Corpus:
    """Passages and two query sets (each query is a list of tokens)."""

    name: str
    texts: list[str]
    queries: list[list[str]]
    stop_queries: list[list[str]]
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
    """Generate the corpus, the normal query set and the stop-word-heavy query set.

    Normal queries have 2–6 distinct terms drawn Zipf-wise (same law as the corpus) from
    the ranks at or after ``stop_ranks`` that occur in the corpus. Stop-word-heavy
    queries have 3–5 distinct terms drawn uniformly from the ``stop_pool`` most frequent
    terms (each in most passages).
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
    pool = np.arange(cfg.stop_pool)  # rank order is frequency order by construction
    stop_queries = []
    for _ in range(cfg.n_stop_queries):
        n = int(q_rng.integers(3, min(5, cfg.stop_pool) + 1))
        stop_queries.append([str(words[t]) for t in q_rng.choice(pool, size=n, replace=False)])
    desc = (
        f"{cfg.n_passages:,} passages, mean {lengths.mean():.1f} words (log-normal, sigma {sigma}), "
        f"Zipf s={cfg.zipf_s} over {cfg.vocab_size:,} pseudo-words ({int(present.sum()):,} occur), seed {cfg.seed}"
    )
    return Corpus(f"synthetic-{cfg.n_passages}", texts, queries, stop_queries, desc)
