"""Late-interaction (MaxSim) reranking: lexical tokens, or token embeddings (ColBERT).

Both score a passage ``D`` for a query ``Q`` by matching every query token with its
best passage token and averaging, each query token weighted by ``w(q)``::

    MaxSim(Q, D) = sum_q w(q) * max_d sim(q, d) / sum_q w(q)

(Khattab & Zaharia, 2020, "ColBERT"; the average rather than ColBERT's plain sum keeps
the score bounded, which score normalisation relies on.)

* Lexical: ``sim`` is a character-trigram overlap between token strings and ``w`` is
  1 (:func:`maxsim_score`) or a specificity weight (:func:`weighted_maxsim_score`). No
  model, no extra; useful for identifiers and near-miss spellings BM25 misses.
* ColBERT-style: ``sim`` is the dot product of L2-normalised token embeddings from any
  encoder with ``embed_tokens(texts) -> list[(n_tokens, dim) arrays]``, and ``w = 1``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragspine_core.errors import RagspineError
from ragspine_core.records import Hit
from ragspine_query.rerank.reranker import check_languages, rank_by_scores
from ragspine_core.text.tokenize import ENGLISH_STOP_WORDS, tokenize

#: Function words of Chinese text that carry little meaning alone (CJK unigrams).
CJK_STOP_WORDS = frozenset("的 了 是 在 和 与 及 或 为 对 也 都 而 并 其 之 于 以 等 这 那 有".split())

STOP_WORD_WEIGHT = 0.25
SINGLE_LETTER_WEIGHT = 0.5
DIGIT_BONUS = 0.5
UNDERSCORE_BONUS = 0.5
LONG_TOKEN_CHARS = 8
LONG_TOKEN_BONUS = 0.5
MEDIUM_TOKEN_CHARS = 6
MEDIUM_TOKEN_BONUS = 0.25

_BEGIN, _END = "\x02", "\x03"


# -- lexical similarity and weights ------------------------------------------------------


def _trigrams(token: str) -> Counter[str]:
    padded = f"{_BEGIN}{token}{_END}"
    return Counter(padded[i : i + 3] for i in range(len(padded) - 2))


def token_similarity(a: str, b: str) -> float:
    """Character-trigram overlap of two tokens, in [0, 1]; 1.0 when they are identical.

    The Dice coefficient of the trigram multisets of ``a`` and ``b``, each padded with
    a begin and an end marker so that prefixes, suffixes and one-letter tokens count:
    ``2·|T(a) ∩ T(b)| / (|T(a)| + |T(b)|)``. An empty token is similar to nothing.
    """
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    return _dice(_trigrams(a), _trigrams(b))


def _dice(ga: Counter[str], gb: Counter[str]) -> float:
    shared = sum((ga & gb).values())
    return 2.0 * shared / (sum(ga.values()) + sum(gb.values()))


def token_specificity_weight(token: str) -> float:
    """How much a query token should count in the weighted MaxSim (> 0; 0 for "").

    Stop words (English and CJK function words) weigh 0.25 and a lone ASCII letter
    0.5. Anything else starts at 1.0 and gains 0.5 for containing a digit, 0.5 for an
    underscore (identifiers such as ``acme_cn``) and, for ASCII tokens, 0.25 from 6
    characters or 0.5 from 8 — longer words are rarer and more specific.
    """
    if not token:
        return 0.0
    lowered = token.lower()
    if lowered in ENGLISH_STOP_WORDS or lowered in CJK_STOP_WORDS:
        return STOP_WORD_WEIGHT
    if len(token) == 1 and token.isascii() and token.isalpha():
        return SINGLE_LETTER_WEIGHT
    weight = 1.0
    if any(ch.isdigit() for ch in token):
        weight += DIGIT_BONUS
    if "_" in token:
        weight += UNDERSCORE_BONUS
    if token.isascii():
        if len(token) >= LONG_TOKEN_CHARS:
            weight += LONG_TOKEN_BONUS
        elif len(token) >= MEDIUM_TOKEN_CHARS:
            weight += MEDIUM_TOKEN_BONUS
    return weight


class _TrigramProfiles:
    """Trigram multisets computed once per distinct token within one scoring call."""

    def __init__(self) -> None:
        self._grams: dict[str, Counter[str]] = {}

    def __call__(self, token: str) -> Counter[str]:
        grams = self._grams.get(token)
        if grams is None:
            grams = self._grams[token] = _trigrams(token)
        return grams


def _best_similarities(
    query_tokens: Sequence[str], doc_tokens: Sequence[str], profiles: _TrigramProfiles
) -> list[float]:
    """``max_d sim(q, d)`` for each query token (only doc tokens sharing a trigram are compared)."""
    doc_set = {d for d in doc_tokens if d}
    by_gram: dict[str, set[str]] = {}
    for d in doc_set:
        for gram in profiles(d):
            by_gram.setdefault(gram, set()).add(d)
    best: list[float] = []
    memo: dict[str, float] = {}
    for q in query_tokens:
        if q in memo:
            best.append(memo[q])
            continue
        if not q:
            value = 0.0
        elif q in doc_set:
            value = 1.0
        else:
            qg = profiles(q)
            rivals = set().union(*(by_gram.get(g, ()) for g in qg)) if qg else set()
            value = max((_dice(qg, profiles(d)) for d in rivals), default=0.0)
        memo[q] = value
        best.append(value)
    return best


def _maxsim(
    query_tokens: Sequence[str],
    doc_tokens: Sequence[str],
    weight: Callable[[str], float],
    profiles: _TrigramProfiles,
) -> float:
    weights = [weight(q) for q in query_tokens]
    total = sum(weights)
    if total <= 0.0 or not doc_tokens:
        return 0.0
    best = _best_similarities(query_tokens, doc_tokens, profiles)
    return sum(w * s for w, s in zip(weights, best)) / total


def maxsim_score(query_tokens: Sequence[str], doc_tokens: Sequence[str]) -> float:
    """Unweighted lexical MaxSim: the mean over query tokens of their best :func:`token_similarity`.

    In [0, 1]; 0.0 when either side has no tokens. Repeated query tokens count each time.
    """
    return _maxsim(query_tokens, doc_tokens, lambda q: 1.0 if q else 0.0, _TrigramProfiles())


def weighted_maxsim_score(query_tokens: Sequence[str], doc_tokens: Sequence[str]) -> float:
    """Lexical MaxSim with query tokens weighted by :func:`token_specificity_weight`; in [0, 1]."""
    return _maxsim(query_tokens, doc_tokens, token_specificity_weight, _TrigramProfiles())


class LexicalMaxSimReranker:
    """Reranks by lexical (weighted) MaxSim between query and passage tokens.

    Args:
        weighted: weight query tokens by specificity (default) or count them equally.
        tokenizer: text -> tokens; defaults to the spec tokenizer
            :func:`ragspine_core.text.tokenize.tokenize` (lowercase ASCII alphanumeric
            runs, CJK unigrams and bigrams), the one the BM25 index uses.
        languages: the languages served; None (the default) for every language, as
            the spec tokenizer reads Chinese and English alike.
    """

    def __init__(self, *, weighted: bool = True, tokenizer: Callable[[str], list[str]] | None = None,
                 languages: Iterable[str] | None = None) -> None:
        self.languages = check_languages(languages)
        self.weighted = weighted
        self.tokenizer = tokenizer or tokenize

    def score(self, query: str, passages: list[str]) -> list[float]:
        query_tokens = self.tokenizer(query)
        weight = token_specificity_weight if self.weighted else (lambda q: 1.0 if q else 0.0)
        profiles = _TrigramProfiles()  # shared by all passages of this call only
        return [_maxsim(query_tokens, self.tokenizer(p), weight, profiles) for p in passages]

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None) -> list[Hit]:
        """Reorder hits by lexical MaxSim (see :class:`~ragspine_query.rerank.reranker.Reranker`)."""
        return rank_by_scores(query, hits, self.score, top_n=top_n, languages=self.languages)


# -- ColBERT-style MaxSim over token embeddings -------------------------------------------


@runtime_checkable
class TokenEncoder(Protocol):
    """Anything that turns texts into per-token L2-normalised embeddings."""

    def embed_tokens(self, texts: list[str]) -> list[np.ndarray]:
        """One ``(n_tokens, dim)`` array per text, rows L2-normalised, special tokens removed."""
        ...


def embedding_maxsim(query_vectors: np.ndarray, doc_vectors: np.ndarray) -> float:
    """Mean over query token vectors of their best dot product with a document token vector.

    In [-1, 1] for L2-normalised rows; 0.0 when either side has no tokens.
    """
    q = np.asarray(query_vectors, dtype=np.float64)
    d = np.asarray(doc_vectors, dtype=np.float64)
    if q.ndim != 2 or d.ndim != 2 or q.shape[0] == 0 or d.shape[0] == 0:
        return 0.0
    if q.shape[1] != d.shape[1]:
        raise RagspineError(
            f"token embeddings disagree in dimension: query {q.shape[1]}, passage {d.shape[1]}; "
            f"query and passages must come from the same encoder"
        )
    return float((q @ d.T).max(axis=1).mean())


class ColbertMaxSimReranker:
    """Reranks by ColBERT-style MaxSim over token embeddings from ``token_encoder``.

    ``token_encoder.embed_tokens`` is called once per ranking, with the query first and
    then the passages. ``OnnxEmbeddingBackend`` (packaged MiniLM) is one such encoder;
    an encoder wanting different query/passage prefixes should apply them itself.

    ``languages``: the languages the encoder serves; by default the encoder's own
    ``languages`` attribute, else every language. The packaged MiniLM serves ``en``
    only (it maps Chinese characters to ``[UNK]``; on a Chinese set it halved nDCG@10),
    so :func:`~ragspine_query.rerank.make_reranker` passes ``("en",)``.
    """

    def __init__(self, token_encoder: TokenEncoder, *, languages: Iterable[str] | None = None) -> None:
        if not callable(getattr(token_encoder, "embed_tokens", None)):
            raise RagspineError(
                f"{type(token_encoder).__name__} has no embed_tokens(texts) method; ColBERT "
                f"reranking needs per-token embeddings (e.g. OnnxEmbeddingBackend)"
            )
        self.token_encoder = token_encoder
        self.languages = check_languages(languages if languages is not None else getattr(token_encoder, "languages", None))

    def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        arrays = self.token_encoder.embed_tokens([query, *passages])
        if len(arrays) != len(passages) + 1:
            raise RagspineError(
                f"{type(self.token_encoder).__name__}.embed_tokens returned {len(arrays)} arrays "
                f"for {len(passages) + 1} texts; it must return one per text"
            )
        query_vectors = arrays[0]
        return [embedding_maxsim(query_vectors, doc) for doc in arrays[1:]]

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None) -> list[Hit]:
        """Reorder hits by embedding MaxSim (see :class:`~ragspine_query.rerank.reranker.Reranker`)."""
        return rank_by_scores(query, hits, self.score, top_n=top_n, languages=self.languages)
