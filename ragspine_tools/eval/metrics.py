"""Document-level retrieval metrics that reproduce trec_eval, plus a paired bootstrap.

Ranking convention (verified against pytrec_eval 0.5.11, which embeds trec_eval): a
run is ranked by score descending, where scores are compared **as 32-bit floats**
(trec_eval stores them as C ``float``), and ties are broken by document id
**descending** (``strcmp`` order, i.e. Unicode code-point order). The order in which
documents appear in the run is irrelevant. :func:`trec_ranking` implements exactly this.

Metric conventions: the discount is ``log2(rank + 1)``; a document is relevant when its
grade is >= 1; unjudged documents count as non-relevant. nDCG's gain is ``2**rel - 1``
by default (the project's documented convention); trec_eval's ``ndcg_cut`` uses the
grade itself, available here as ``gain="linear"``. The two agree on binary qrels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ragspine_core.errors import ConfigError, DatasetError

Gain = Literal["exponential", "linear"]
GAINS: tuple[str, ...] = ("exponential", "linear")

#: Cut-offs evaluate_run always computes (the headline metrics need them).
HEADLINE_KS: tuple[int, ...] = (10, 100)
#: Always computed too, for multi-hop sets: Recall@2/@5 and both@5/@10 (every relevant doc in the top k).
RECALL_KS: tuple[int, ...] = (2, 5)
BOTH_KS: tuple[int, ...] = (5, 10)
MULTIHOP_KEYS: tuple[str, ...] = ("recall@2", "recall@5", "both@5", "both@10")


# --------------------------------------------------------------------------- ranking


def _check_k(k: int, name: str = "k") -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{name} must be a positive integer, got {k!r}; use e.g. 10 or 100")


def _check_gain(gain: str) -> None:
    if gain not in GAINS:
        raise ConfigError(f"gain must be one of {list(GAINS)}, got {gain!r}")


def trec_ranking(run: Mapping[str, float]) -> list[str]:
    """Rank one query's documents exactly as trec_eval does.

    Scores are rounded to 32-bit floats (trec_eval's storage type) and sorted
    descending; ties, including scores that differ only beyond float32 precision, are
    broken by document id descending.

    Parameters:
        run: document id → retrieval score.

    Returns:
        Document ids, best first.

    Raises:
        DatasetError: a score is NaN (it has no place in a ranking).
    """
    if not run:
        return []
    doc_ids = list(run)
    scores = np.fromiter((run[d] for d in doc_ids), dtype=np.float64, count=len(doc_ids))
    if np.isnan(scores).any():
        bad = [d for d, s in zip(doc_ids, scores.tolist()) if math.isnan(s)]
        raise DatasetError(
            f"run has NaN scores for documents {bad[:5]}; give every document a finite score"
        )
    with np.errstate(over="ignore"):
        rounded = scores.astype(np.float32).tolist()
    order = sorted(zip(rounded, doc_ids), reverse=True)
    return [doc_id for _, doc_id in order]


def _exp_gain(relevance: int) -> float:
    return float(2**relevance - 1) if relevance > 0 else 0.0


def _linear_gain(relevance: int) -> float:
    return float(relevance) if relevance > 0 else 0.0


def _dcg(gains: Iterable[float]) -> float:
    total = 0.0
    for index, value in enumerate(gains):
        if value:
            total += value / math.log2(index + 2)
    return total


def _ndcg_from_ranking(ranked: Sequence[str], qrels: Mapping[str, int], k: int, gain: str) -> float:
    gain_of = _exp_gain if gain == "exponential" else _linear_gain
    ideal = sorted((gain_of(r) for r in qrels.values() if r > 0), reverse=True)[:k]
    ideal_dcg = _dcg(ideal)
    if ideal_dcg == 0.0:
        return 0.0
    return _dcg(gain_of(qrels.get(doc_id, 0)) for doc_id in ranked[:k]) / ideal_dcg


def _recall_from_ranking(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    n_relevant = sum(1 for r in qrels.values() if r > 0)
    if n_relevant == 0:
        return 0.0
    found = sum(1 for doc_id in ranked[:k] if qrels.get(doc_id, 0) > 0)
    return found / n_relevant


def _all_from_ranking(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """1.0 when every relevant document is in the top ``k`` (HotpotQA's "both supporting paragraphs"), else 0."""
    relevant = {d for d, rel in qrels.items() if rel > 0}
    return float(bool(relevant) and relevant <= set(ranked[:k]))


def _rr_from_ranking(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    for index, doc_id in enumerate(ranked[:k]):
        if qrels.get(doc_id, 0) > 0:
            return 1.0 / (index + 1)
    return 0.0


# --------------------------------------------------------------------------- per query


def ndcg_at_k(
    run: Mapping[str, float], qrels: Mapping[str, int], k: int = 10, *, gain: Gain = "exponential"
) -> float:
    """nDCG@k of one query (Järvelin & Kekäläinen 2002), trec_eval's ``ndcg_cut_k``.

    DCG sums ``gain(rel) / log2(rank + 1)`` over the top ``k`` of :func:`trec_ranking`;
    the ideal DCG ranks every judged document with grade > 0, best first, cut at ``k``.

    Parameters:
        run: document id → score for this query.
        qrels: document id → graded relevance for this query.
        k: the cut-off.
        gain: ``"exponential"`` (``2**rel - 1``) or ``"linear"`` (``rel``, trec_eval's).

    Returns:
        A value in [0, 1]; 0 when the query has no relevant document.

    Raises:
        ConfigError: ``k`` is not a positive integer or ``gain`` is unknown.
    """
    _check_k(k)
    _check_gain(gain)
    return _ndcg_from_ranking(trec_ranking(run), qrels, k, gain)


def recall_at_k(run: Mapping[str, float], qrels: Mapping[str, int], k: int = 100) -> float:
    """Recall@k of one query: relevant documents in the top ``k`` / all relevant ones.

    Matches trec_eval's ``recall_k``; 0 when the query has no relevant document.

    Raises:
        ConfigError: ``k`` is not a positive integer.
    """
    _check_k(k)
    return _recall_from_ranking(trec_ranking(run), qrels, k)


def mrr_at_k(run: Mapping[str, float], qrels: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top ``k`` (else 0).

    trec_eval's ``recip_rank`` is the same measure without a cut-off.

    Raises:
        ConfigError: ``k`` is not a positive integer.
    """
    _check_k(k)
    return _rr_from_ranking(trec_ranking(run), qrels, k)


# --------------------------------------------------------------------------- whole run


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Mean and per-query metrics of one run over every query in the qrels.

    ``per_query`` maps query id → metric name (``"ndcg@10"``, ``"recall@100"``,
    ``"mrr@10"`` and the same for every extra cut-off) → value; ``means`` holds the
    mean of each metric over the ``n_queries`` judged queries.
    """

    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float
    n_queries: int
    per_query: Mapping[str, Mapping[str, float]]
    means: Mapping[str, float]
    gain: str = "exponential"

    def to_dict(self) -> dict[str, float | int]:
        """The headline numbers under the keys ``ndcg@10``, ``recall@100``, ``mrr@10``, ``n_queries``."""
        return {
            "ndcg@10": self.ndcg_at_10,
            "recall@100": self.recall_at_100,
            "mrr@10": self.mrr_at_10,
            "n_queries": self.n_queries,
            # multi-hop (HotpotQA): Recall@2/@5, and the share of queries with every relevant doc in the top 5/10
            **{k: self.means[k] for k in MULTIHOP_KEYS if k in self.means},
        }

    def by_group(self, groups: Mapping[str, str]) -> dict[str, dict[str, float | int]]:
        """Headline metrics per group of queries (e.g. HotpotQA ``type``: bridge / comparison).

        ``groups`` maps query id to its group; queries without a group are left out.
        """
        members: dict[str, list[str]] = {}
        for qid in self.per_query:
            if qid in groups:
                members.setdefault(str(groups[qid]), []).append(qid)
        out: dict[str, dict[str, float | int]] = {}
        for g, qids in sorted(members.items()):
            keys = ("ndcg@10", "recall@100", "mrr@10", *MULTIHOP_KEYS)
            out[g] = {k: math.fsum(self.per_query[q][k] for q in qids) / len(qids) for k in keys if k in self.means}
            out[g]["n_queries"] = len(qids)
        return out

    def metric(self, name: str) -> dict[str, float]:
        """Query id → value of one metric, ready for :func:`paired_bootstrap`.

        Raises:
            ConfigError: ``name`` was not computed (the message lists those that were).
        """
        if name not in self.means:
            raise ConfigError(f"metric {name!r} was not computed; choose one of {sorted(self.means)}")
        return {query_id: values[name] for query_id, values in self.per_query.items()}


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    ks: Iterable[int] = HEADLINE_KS,
    gain: Gain = "exponential",
) -> EvalReport:
    """Score a run against qrels: nDCG@k, Recall@k and MRR@k for every cut-off.

    Means are over **every query in the qrels**; a judged query missing from the run
    (or with an empty ranking) scores 0, as ``trec_eval -c`` does. Queries in the run
    but not in the qrels are ignored.

    Parameters:
        run: query id → document id → score.
        qrels: query id → document id → graded relevance.
        ks: cut-offs to compute; 10 and 100 are always added for the headline fields.
        gain: nDCG gain, see :func:`ndcg_at_k`.

    Returns:
        An :class:`EvalReport`.

    Raises:
        DatasetError: the qrels are empty, or a score is NaN.
        ConfigError: a cut-off is not a positive integer or ``gain`` is unknown.
    """
    _check_gain(gain)
    cutoffs = sorted(set(ks) | set(HEADLINE_KS) | set(RECALL_KS))
    for k in cutoffs:
        _check_k(k, "every value in ks")
    if not qrels:
        raise DatasetError("qrels are empty; evaluate against a split that judges at least one query")
    names = [f"{metric}@{k}" for k in cutoffs for metric in ("ndcg", "recall", "mrr")] + [f"both@{k}" for k in BOTH_KS]
    per_query: dict[str, dict[str, float]] = {}
    for query_id, judged in qrels.items():
        ranked = trec_ranking(run.get(query_id, {}))
        values: dict[str, float] = {}
        for k in cutoffs:
            values[f"ndcg@{k}"] = _ndcg_from_ranking(ranked, judged, k, gain)
            values[f"recall@{k}"] = _recall_from_ranking(ranked, judged, k)
            values[f"mrr@{k}"] = _rr_from_ranking(ranked, judged, k)
        for k in BOTH_KS:
            values[f"both@{k}"] = _all_from_ranking(ranked, judged, k)
        per_query[query_id] = values
    n_queries = len(per_query)
    means = {name: math.fsum(v[name] for v in per_query.values()) / n_queries for name in names}
    return EvalReport(
        ndcg_at_10=means["ndcg@10"],
        recall_at_100=means["recall@100"],
        mrr_at_10=means["mrr@10"],
        n_queries=n_queries,
        per_query=per_query,
        means=means,
        gain=gain,
    )


# --------------------------------------------------------------------------- significance


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """Outcome of a paired bootstrap comparing system B with system A on the same queries.

    ``mean_difference`` is mean(B − A); ``ci_low``/``ci_high`` bound its percentile
    confidence interval; ``p_value`` is the two-sided fraction of null resamples at
    least as extreme as the observed difference.
    """

    mean_a: float
    mean_b: float
    mean_difference: float
    ci_low: float
    ci_high: float
    p_value: float
    n_queries: int
    n_resamples: int
    confidence: float
    seed: int


def paired_bootstrap(
    per_query_a: Mapping[str, float],
    per_query_b: Mapping[str, float],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Paired bootstrap test of the mean per-query difference B − A.

    Queries are resampled with replacement (Efron & Tibshirani 1993, ch. 16; Sakai 2006,
    "Evaluating evaluation metrics based on the bootstrap"). The interval is the
    percentile interval of the resampled mean differences. The p-value resamples the
    differences shifted to mean zero (the null hypothesis) and reports
    ``(1 + #{|mean*| >= |observed|}) / (1 + n_resamples)``. Queries are taken in sorted id
    order, so the result depends only on the values, ``n_resamples`` and ``seed``.

    Parameters:
        per_query_a: query id → metric value of the baseline.
        per_query_b: query id → metric value of the candidate; same query ids.
        n_resamples: number of bootstrap resamples.
        seed: seed of the ``numpy.random.Generator``.
        confidence: coverage of the interval, in (0, 1).

    Returns:
        A :class:`BootstrapResult`.

    Raises:
        DatasetError: the two mappings cover different queries, or none.
        ConfigError: ``n_resamples`` or ``confidence`` is out of range.
    """
    _check_k(n_resamples, "n_resamples")
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must be strictly between 0 and 1, got {confidence!r}; use e.g. 0.95")
    if set(per_query_a) != set(per_query_b):
        only_a = sorted(set(per_query_a) - set(per_query_b))
        only_b = sorted(set(per_query_b) - set(per_query_a))
        raise DatasetError(
            f"paired bootstrap needs the same queries on both sides; only in A: {only_a[:5]} "
            f"({len(only_a)}), only in B: {only_b[:5]} ({len(only_b)}); evaluate both runs "
            "against the same qrels"
        )
    if not per_query_a:
        raise DatasetError("paired bootstrap got no queries; evaluate at least one judged query")
    query_ids = sorted(per_query_a)
    a = np.array([per_query_a[q] for q in query_ids], dtype=np.float64)
    b = np.array([per_query_b[q] for q in query_ids], dtype=np.float64)
    diff = b - a
    n = diff.size
    observed = float(diff.mean())
    centred = diff - observed

    rng = np.random.default_rng(seed)
    boot_means = np.empty(n_resamples, dtype=np.float64)
    null_means = np.empty(n_resamples, dtype=np.float64)
    # Bound memory to about 8 MB of indices however many queries there are.
    block = max(1, 1_000_000 // n)
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int64)
        boot_means[start:stop] = diff[idx].mean(axis=1)
        null_means[start:stop] = centred[idx].mean(axis=1)

    tail = (1.0 - confidence) / 2.0
    ci_low, ci_high = np.quantile(boot_means, [tail, 1.0 - tail])
    # A tiny tolerance so floating-point noise in the null means cannot flip a tie.
    tolerance = 1e-12 * max(1.0, abs(observed))
    extreme = int(np.count_nonzero(np.abs(null_means) >= abs(observed) - tolerance))
    return BootstrapResult(
        mean_a=float(a.mean()),
        mean_b=float(b.mean()),
        mean_difference=observed,
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        p_value=(1 + extreme) / (1 + n_resamples),
        n_queries=n,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )


# --------------------------------------------------------------------------- runs


def aggregate_chunk_hits_to_docs(hits: Iterable[tuple[str, float]], depth: int | None = None) -> dict[str, float]:
    """Turn chunk-level hits into a document run: a document scores its best chunk's score.

    Parameters:
        hits: ``(doc_id, score)`` per retrieved chunk, in any order.
        depth: keep only the ``depth`` best documents (in :func:`trec_ranking` order, so
            truncating never changes a metric cut at ``k <= depth``); ``None`` keeps all.

    Returns:
        Document id → max chunk score.

    Raises:
        ConfigError: ``depth`` is not a positive integer or ``None``.
        DatasetError: a score is NaN.
    """
    if depth is not None:
        _check_k(depth, "depth")
    best: dict[str, float] = {}
    for doc_id, score in hits:
        score = float(score)
        if math.isnan(score):
            raise DatasetError(f"chunk hit for document {doc_id!r} has a NaN score; give every hit a finite score")
        previous = best.get(doc_id)
        if previous is None or score > previous:
            best[doc_id] = score
    if depth is None or len(best) <= depth:
        return best
    return {doc_id: best[doc_id] for doc_id in trec_ranking(best)[:depth]}


def _check_trec_token(value: str, what: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise ConfigError(
            f"{what} {value!r} is empty or contains whitespace, which the TREC run format "
            "cannot represent; use ids without spaces"
        )


def write_trec_run(path: str | Path, run: Mapping[str, Mapping[str, float]], run_name: str) -> None:
    """Write a run in the 6-column TREC format ``qid Q0 docid rank score run_name``.

    Queries appear in sorted id order; within a query, documents by score descending
    then document id ascending, ranks from 1. Scores are written with ``repr`` so they
    read back bit-identical. (trec_eval ignores the rank column and re-sorts by score,
    breaking ties by id descending — see :func:`trec_ranking`.)

    Raises:
        ConfigError: the run name or an id is empty or contains whitespace.
        DatasetError: a score is NaN.
    """
    _check_trec_token(run_name, "run name")
    lines: list[str] = []
    for query_id in sorted(run):
        _check_trec_token(query_id, "query id")
        docs = run[query_id]
        for doc_id, score in docs.items():
            _check_trec_token(doc_id, "document id")
            if math.isnan(score):
                raise DatasetError(
                    f"query {query_id!r}, document {doc_id!r} has a NaN score; give every document a finite score"
                )
        ordered = sorted(docs.items(), key=lambda item: (-item[1], item[0]))
        for rank, (doc_id, score) in enumerate(ordered, start=1):
            lines.append(f"{query_id} Q0 {doc_id} {rank} {float(score)!r} {run_name}\n")
    Path(path).write_text("".join(lines), encoding="utf-8", newline="\n")


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a 6-column TREC run file into query id → document id → score.

    Fields may be separated by tabs or spaces; CRLF and LF are both accepted; the rank
    and run-name columns are not used.

    Raises:
        DatasetError: the file is missing, or a line (named as ``file:line``) does not
            have 6 fields, has a non-numeric score, or repeats a (query, document) pair.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"run file {str(path)!r} does not exist; write it with write_trec_run")
    run: dict[str, dict[str, float]] = {}
    with path.open("r", encoding="utf-8") as handle:
        for line_no, raw in enumerate(handle, start=1):
            fields = raw.split()
            if not fields:
                continue
            where = f"{path}:{line_no}"
            if len(fields) != 6:
                raise DatasetError(
                    f"{where}: expected 6 fields 'qid Q0 docid rank score run_name', got "
                    f"{len(fields)}: {raw.strip()!r}; fix the line"
                )
            query_id, _q0, doc_id, _rank, score_text, _name = fields
            try:
                score = float(score_text)
            except ValueError:
                raise DatasetError(f"{where}: score {score_text!r} is not a number; fix the line") from None
            docs = run.setdefault(query_id, {})
            if doc_id in docs:
                raise DatasetError(
                    f"{where}: document {doc_id!r} listed twice for query {query_id!r}; "
                    "a run ranks each document once per query"
                )
            docs[doc_id] = score
    return run
