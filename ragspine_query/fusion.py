"""Reciprocal Rank Fusion (Cormack, Clarke & Buettcher, SIGIR 2009) — the one fusion.

``rrf_k`` is the smoothing constant of the paper (60), not the number of results.
:func:`weighted_rrf` is the single definition used everywhere rankings are fused: the
channels of one library (rows), the query variants of a multi-query transform and the
libraries of :class:`~ragspine_query.retriever.MultiIndexRetriever` (``(chunk_id,
library_id)`` keys). ``score(id) = sum over rankings of weight / (rrf_k + rank)``,
ranks from 1, contributions added in ranking order; ties break on the id ascending
(for rows of one library, row order is ``chunk_id`` order).

Language-aware fusion (the ``auto`` mode's default): :func:`plan_fusion` picks the
channel weights and ``rrf_k`` for one query from the query's language and the
library's :class:`~ragspine_core.text.language.LanguageProfile` (see
:data:`FUSION_POLICIES` for the cases, their values and where they were tuned), and
:class:`FusionPlan` is applied with :func:`weighted_rrf`, or, for the plans whose
``method`` is ``convex``, with :func:`weighted_score_fusion` (a convex combination of
min–max normalised channel scores: fusion that uses more than ranks, where it measured
better).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any, Hashable, Iterable, Mapping, Sequence, cast, TYPE_CHECKING

import numpy as np

from ragspine_core.runtime.kernels import query_kernels

if TYPE_CHECKING:
    from ragspine_core.text.language import LanguageProfile

DEFAULT_RRF_K = 60

#: A query is *cross-lingual* when its language holds less than this share of the
#: library's chunks (and the library does not mix languages).
CROSS_LINGUAL_SHARE = 0.02


def _check_k(rrf_k: float) -> None:
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")


def weighted_rrf(
    rankings: Mapping[str, Sequence[Hashable] | np.ndarray] | Sequence[Sequence[Hashable] | np.ndarray],
    *,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    rrf_k: float = DEFAULT_RRF_K,
    depth: int | None = None,
    top: int | None = None,
) -> tuple[list[Any], list[float]] | tuple[np.ndarray, np.ndarray]:
    """Fuse ranked id lists; returns ``(ids, fused scores)`` best first, ties by id ascending.

    ``rankings`` maps a name (a channel, a query variant, a library) to its ids best
    first, or is a plain sequence of such lists. ``weights`` (by name, or by position)
    default to 1.0. ``depth`` truncates every input list first. When every ranking is an
    integer numpy array (rows of one library) the fusion is vectorised and returns numpy
    arrays; the result is the same as the generic path, bit for bit. ``top``: only the
    best ``top`` are needed — the result may stop there (it is a prefix of the full one).
    """
    _check_k(rrf_k)
    if isinstance(rankings, Mapping):
        names = list(rankings)
        lists = [rankings[n] for n in names]
        ws = [float((weights or {}).get(n, 1.0)) for n in names] if not isinstance(weights, Sequence) else [float(w) for w in weights]
    else:
        lists = list(rankings)
        ws = [float(w) for w in weights] if isinstance(weights, Sequence) else [1.0] * len(lists)
    if depth is not None:
        lists = [r[:depth] for r in lists]
    if lists and all(isinstance(r, np.ndarray) and r.dtype.kind in "iu" for r in lists):
        return _fuse_rows(lists, ws, rrf_k, top)  # type: ignore[arg-type]  # every list is an int array (checked above)
    fused: dict[str, Any] = {}
    for w, ranking in zip(ws, lists):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + w / (rrf_k + rank)
    order = sorted(fused, key=lambda i: (-fused[i], i))
    return order, [fused[i] for i in order]


def _fuse_rows(lists: list[np.ndarray], ws: list[float], rrf_k: float, top: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`weighted_rrf` over int row arrays (each row at most once per list).

    With the compiled kernels (:mod:`ragspine_core.runtime.kernels`) several lists are
    fused in one GIL-free loop, with the same float64 operations in the same order."""
    lists = [np.asarray(r, dtype=np.int64) for r in lists]
    if len(lists) > 1:
        jit = query_kernels()
        if jit is not None:
            return cast("tuple[np.ndarray, np.ndarray]", jit.fuse_rrf(np.concatenate(lists), ranking_bounds(lists), np.array(ws, dtype=np.float64), float(rrf_k),
                                _limit(top)))
    return _fuse_rows_numpy(lists, ws, rrf_k)


def _limit(top: int | None) -> int:
    """A kernel's ``limit`` for ``top`` (0: every row)."""
    return top if isinstance(top, int) and top > 0 else 0


def ranking_bounds(lists: Sequence[np.ndarray]) -> np.ndarray:
    """Where each of ``lists`` starts and ends in their concatenation."""
    out = [0]
    for r in lists:
        out.append(out[-1] + r.shape[0])
    return np.array(out, dtype=np.int64)


def _fuse_rows_numpy(lists: list[np.ndarray], ws: list[float], rrf_k: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fuse_rows` in numpy (int64 ``lists``)."""
    contrib = [w / (rrf_k + np.arange(1, r.shape[0] + 1, dtype=np.float64)) for w, r in zip(ws, lists)]
    if len(lists) == 1:  # already ordered: strictly decreasing scores (w > 0) in rank order
        if ws[0] > 0:
            return lists[0], contrib[0]
    cat = np.concatenate(lists)
    if cat.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    uniq, inv = np.unique(cat, return_inverse=True)
    fused = np.zeros(uniq.shape[0], dtype=np.float64)
    # unbuffered and in order: each id's contributions are summed in ranking order,
    # 0.0 + first + second …, exactly like the dict path
    np.add.at(fused, inv, np.concatenate(contrib))
    order = np.lexsort((uniq, -fused))
    return uniq[order], fused[order]


def keep_head(base_rows: np.ndarray, fused_rows: np.ndarray, fused: np.ndarray, head: int) -> tuple[np.ndarray, np.ndarray]:
    """``fused`` with the first ``head`` rows of ``base_rows`` put back first, in their order.

    Graph mode fuses the default's ranking with the graph's; the graph adds the second hops a
    multi-hop question needs, and this keeps it from displacing what the default ranks first
    (HotpotQA tuning subset: nDCG@10 0.881 -> 0.888, Recall@5 and both@5 unchanged,
    docs/evaluation.md). A kept row's score is its own, raised just above the best score of the
    rows below it where needed, so the scores still fall as the ranks do. ``head`` 0: unchanged.
    """
    if head <= 0 or len(base_rows) == 0 or len(fused_rows) == 0:
        return fused_rows, fused
    pinned = np.asarray(base_rows[:head], dtype=fused_rows.dtype)
    fused = np.asarray(fused, dtype=np.float64)
    at = np.isin(fused_rows, pinned)
    rest_rows, rest = fused_rows[~at], fused[~at]
    own = dict(zip(fused_rows[at].tolist(), fused[at].tolist()))
    scores = np.empty(len(pinned), dtype=np.float64)
    floor = float(rest[0]) if len(rest) else -np.inf
    for i in range(len(pinned) - 1, -1, -1):  # from the last kept row up: each above the one below it
        s = own.get(int(pinned[i]), floor)
        scores[i] = s if s > floor else float(np.nextafter(floor, np.inf))
        floor = scores[i]
    return np.concatenate([pinned, rest_rows]), np.concatenate([scores, rest])


def weighted_score_fusion(
    rankings: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    weights: Sequence[float],
    depth: int | None = None,
    top: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Convex combination of min–max normalised scores over ``(rows, scores)`` rankings.

    Each ranking is cut to ``depth``, its scores mapped to [0, 1] by its own minimum and
    maximum (all 1.0 when they are equal) and multiplied by its weight; a row missing from
    a ranking gets 0 from it. Returns ``(rows, fused)`` best first, ties by row ascending.
    The result depends on ``depth`` (the normalisation range), so callers fix it. With
    the compiled kernels (:mod:`ragspine_core.runtime.kernels`) it runs as one GIL-free
    loop, with the same float64 operations in the same order (the same bytes). ``top``:
    only the best ``top`` rows are needed — the result may stop there (a prefix of the
    full one).
    """
    jit = query_kernels()
    if jit is not None and 0 < len(rankings) == len(weights):
        rows_l = [np.asarray(r, dtype=np.int64)[:depth] for r, _ in rankings]
        vals_l = [np.asarray(s)[:depth] for _, s in rankings]
        if all(r.ndim == 1 and r.shape == v.shape for r, v in zip(rows_l, vals_l)):
            return cast("tuple[np.ndarray, np.ndarray]", jit.fuse_minmax(np.concatenate(rows_l), np.concatenate(vals_l, dtype=np.float64), ranking_bounds(rows_l),
                                   np.array([float(w) for w in weights], dtype=np.float64), _limit(top)))
    return _weighted_score_fusion_numpy(rankings, weights=weights, depth=depth)


def _weighted_score_fusion_numpy(rankings: Sequence[tuple[np.ndarray, np.ndarray]], *, weights: Sequence[float],
                                 depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`weighted_score_fusion` in numpy."""
    parts_rows, parts_vals = [], []
    for (rows, scores), w in zip(rankings, weights):
        rows = np.asarray(rows, dtype=np.int64)[:depth]
        vals = np.asarray(scores, dtype=np.float64)[:depth]
        if rows.shape[0] == 0:
            continue
        parts_rows.append(rows)
        parts_vals.append(float(w) * _minmax(vals))
    return _sum_by_row(parts_rows, parts_vals)


def _minmax(vals: np.ndarray) -> np.ndarray:
    """``vals`` mapped to [0, 1] by their own minimum and maximum (all 1.0 when equal)."""
    lo, hi = (vals.min(), vals.max()) if vals.shape[0] else (0.0, 0.0)
    return (vals - lo) / (hi - lo) if hi > lo else np.ones_like(vals)


def _sum_by_row(parts_rows: list[np.ndarray], parts_vals: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's contributions summed (in order), rows best first, ties by row ascending."""
    if not parts_rows:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    uniq, inv = np.unique(np.concatenate(parts_rows), return_inverse=True)
    fused = np.zeros(uniq.shape[0], dtype=np.float64)
    np.add.at(fused, inv, np.concatenate(parts_vals))
    order = np.lexsort((uniq, -fused))
    return uniq[order], fused[order]


@dataclass(frozen=True, slots=True)
class FusionPlan:
    """How one query's channel rankings are fused: weights by channel name, ``rrf_k``.

    A channel with weight 0 is not fused (and, in the retriever, not even run).
    ``case`` names the :data:`FUSION_POLICIES` entry, ``reason`` says why it applies.
    ``method``: ``rrf`` (:func:`weighted_rrf`, ``rrf_k``), ``convex``
    (:func:`weighted_score_fusion` over each channel's first ``depth`` rows) or
    ``mixed`` (:func:`fuse_mixed_languages` with ``mixed``, a
    :class:`MixedLanguagePolicy`: a library that mixes languages).
    """

    weights: tuple[tuple[str, float], ...]
    rrf_k: float = DEFAULT_RRF_K
    query_language: str = ""
    case: str = "custom"
    reason: str = ""
    method: str = "rrf"
    depth: int = 0
    mixed: "MixedLanguagePolicy | None" = None

    def weight(self, channel: str, default: float = 1.0) -> float:
        return dict(self.weights).get(channel, default)

    def describe(self) -> str:
        """One line for explain: case, weights, k and the reason."""
        ws = " ".join(f"{n}={w:g}" for n, w in self.weights)
        if self.method == "mixed" and self.mixed is not None:
            how = self.mixed.describe()
        elif self.method == "convex":
            how = f"convex min-max depth={self.depth}"
        else:
            how = f"rrf k={self.rrf_k:g}"
        return f"{self.case}: {ws} {how} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        out = {"case": self.case, "method": self.method, "weights": dict(self.weights), "rrf_k": self.rrf_k,
               "depth": self.depth, "reason": self.reason}
        if self.mixed is not None:
            out["mixed"] = self.mixed.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class MixedLanguagePolicy:
    """How a library that mixes languages fuses one query's channels (:func:`fuse_mixed_languages`).

    Scores are min–max normalised per channel over its first ``depth`` rows, as in the
    convex fusion. A row in the query's language gets ``bm25`` × its BM25 score plus
    ``dense`` × each dense channel's score (``cross_same`` for a cross-lingual channel).
    A row in another language, which BM25 can rarely match, is ranked by the dense
    channels that can compare languages (a model that declares ``languages`` without the
    query's is not used for it): ``other_dense`` × its score, plus ``earn`` × the best
    score a same-language row can reach, once it *earns its place*: its raw cosine in a
    cross-lingual channel reaches
    the best cosine of any same-language row in that channel, ramping up linearly from
    ``margin`` below it. So another language's rows rise to the top only when the model
    built for cross-lingual retrieval finds them closer to the question than anything in
    the question's own language (a cross-language question), not by default.
    """

    bm25: float = 1.0
    dense: float = 1.0
    other_dense: float = 1.0
    earn: float = 1.0
    margin: float = 0.05
    cross_same: float = 1.0
    depth: int = 300

    def describe(self) -> str:
        return (f"mixed convex depth={self.depth}: same-language bm25={self.bm25:g} dense={self.dense:g} "
                f"cross-lingual={self.cross_same:g}; other-language dense={self.other_dense:g} earn={self.earn:g} "
                f"margin={self.margin:g}")

    def to_dict(self) -> dict[str, Any]:
        return {"bm25": self.bm25, "dense": self.dense, "cross_same": self.cross_same, "other_dense": self.other_dense,
                "earn": self.earn, "margin": self.margin, "depth": self.depth}


def fuse_mixed_languages(
    rankings: Sequence[tuple[str, np.ndarray, np.ndarray]],
    *,
    row_language: np.ndarray,
    query_language: str,
    policy: MixedLanguagePolicy,
    channel_languages: Mapping[str, "frozenset[str] | None"] | None = None,
    cross_lingual: "frozenset[str] | set[str]" = frozenset(),
) -> tuple[np.ndarray, np.ndarray]:
    """Fuse ``(name, rows, scores)`` rankings of a mixed-language library (see
    :class:`MixedLanguagePolicy`); returns ``(rows, fused)`` best first, ties by row.

    ``name`` ``bm25`` is the lexical channel; every other name is a dense channel.
    ``row_language`` holds each row's ``language`` label; ``channel_languages`` the
    languages a dense channel's model serves (missing or None: every language);
    ``cross_lingual`` names the channels whose model is built for cross-lingual retrieval
    (their cosines decide what another language's rows earn; when none is named, every
    channel that serves every language decides).
    """
    langs = channel_languages or {}
    multilingual = [n for n, _, _ in rankings if n != "bm25" and langs.get(n) is None]
    judges = {n for n in multilingual if n in cross_lingual} or set(multilingual)
    parts_rows: list[np.ndarray] = []
    parts_vals: list[np.ndarray] = []
    credit_rows: list[np.ndarray] = []
    credit_vals: list[np.ndarray] = []
    same_top = 0.0  # the best fused score a row in the query's language can reach
    for name, rows, scores in rankings:
        rows = np.asarray(rows, dtype=np.int64)[: policy.depth]
        vals = np.asarray(scores, dtype=np.float64)[: policy.depth]
        if rows.shape[0] == 0:
            continue
        if name == "bm25":
            parts_rows.append(rows)
            parts_vals.append(policy.bm25 * _minmax(vals))
            same_top += policy.bm25
            continue
        served = langs.get(name)
        if served is not None and query_language not in served:
            continue  # the model cannot embed this query's language
        same = row_language[rows] == query_language
        if served is not None:  # a one-language model: its cosines to other languages mean little
            rows, vals = rows[same], vals[same]
            if rows.shape[0]:
                parts_rows.append(rows)
                parts_vals.append(policy.dense * _minmax(vals))
                same_top += policy.dense
            continue
        norm = _minmax(vals)
        same_w = policy.cross_same if name in cross_lingual else policy.dense
        same_top += same_w
        parts_rows.append(rows)
        parts_vals.append(np.where(same, same_w, policy.other_dense) * norm)
        other = ~same
        if name in judges and policy.earn > 0 and other.any():
            best_same = float(vals[same].max()) if same.any() else -np.inf
            gap = vals[other] - best_same
            ramp = np.clip(1.0 + gap / policy.margin, 0.0, 1.0) if policy.margin > 0 else (gap >= 0).astype(np.float64)
            credit_rows.append(rows[other])
            credit_vals.append(ramp)
    if credit_rows:  # in units of the best score a same-language row can reach
        parts_rows.extend(credit_rows)
        parts_vals.extend(policy.earn * max(same_top, 1e-9) * v / len(judges) for v in credit_vals)
    return _sum_by_row(parts_rows, parts_vals)


@dataclass(frozen=True, slots=True)
class FusionPolicy:
    """One case of the language-aware default: weights by channel and ``rrf_k``."""

    weights: tuple[tuple[str, float], ...]
    rrf_k: float
    method: str = "rrf"
    depth: int = 0
    mixed: MixedLanguagePolicy | None = None


#: The language-aware defaults (``auto`` mode), chosen only on SciFact *train*,
#: ``qbqtc-dev`` and xquad-zh-en/cmrc2018 used as development sets (never on SciFact
#: test); the measurements are in ``docs/evaluation.md``. Cases, in the order
#: :func:`plan_fusion` tries them:
#:
#: * ``mixed:en`` / ``mixed:zh`` — the library holds both languages (its second language
#:   holds at least :data:`~ragspine_core.text.language.MIXED_LIBRARY_THRESHOLD` of the
#:   chunks): :func:`fuse_mixed_languages`. Rows in the query's language: BM25 + 0.5 × each
#:   dense channel that serves the language (+ 0.25 × USE for English); a row in the other
#:   language is ranked by the cross-lingual model (USE, ``cross_lingual``) and earns a
#:   credit (0.25 × the best same-language score) only when USE finds it at least as close
#:   to the question as the best row in the question's language (ramping up from 0.1
#:   below). Chosen jointly on the sample's judged set (``data/eval/sample``, dev) and
#:   xquad-zh-en's two qrels (cross-lingual ≥ 0.80, monolingual within 0.005 of BM25); the
#:   previous policy (other-language dense rows interleaved by default, tuned on xquad, a
#:   parallel corpus) put another language's documents first on the sample
#:   (docs/evaluation.md).
#: * ``cross-lingual`` — the query's language is (nearly) absent from the library
#:   (under :data:`CROSS_LINGUAL_SHARE` of its chunks): BM25 can match little more than
#:   names and numbers, so the dense channel leads (xquad, each language's queries
#:   against the other language's paragraphs only: 0.835 vs dense alone 0.827).
#: * ``minority-language`` — the query's language is present but rare in the library
#:   (qbqtc: Latin-script queries such as product codes against Chinese titles, 5 % of
#:   which are labelled ``en``): the matching rows are found by their words, BM25 leads.
#: * ``same-language:zh`` — Chinese query, Chinese library: BM25 alone, the dense
#:   channel is not run (cmrc2018: the best small dense weight is within 0.002 of BM25
#:   alone, equal RRF −0.058; on a held-out Chinese search set hybrid was −0.030).
#: * ``same-language:en`` — English query, English library: an equal convex combination
#:   of min–max normalised BM25 and dense scores over each channel's top 300 (SciFact
#:   train 0.7311 → 0.7399, +0.0088, 95% CI +0.002 … +0.016; RRF with k=10 and dense
#:   weight 0.8 reached 0.7375, CI −0.000 … +0.013). Such a library's BM25 is built with
#:   ``k1`` 0.2 (``ragspine_index.library_settings.FUSION_BM25_K1``): train
#:   0.7399 → 0.7489, and +0.0087 on hotpotqa-dev, which no tuning used. Pseudo-relevance
#:   feedback (Rocchio in the dense channel, RM3-style BM25 expansion), document-level
#:   fusion and per-query weights measured within noise on train and are not used.
#:   An English library embedded with the MiniLM + multilingual-e5 ensemble has two dense
#:   channels (``vector``, ``vector:e5``), each weighted as ``vector``: three rankings,
#:   train 0.7489 → 0.7562; hotpotqa-dev 0.8049 → 0.8436 (+0.039, CI +0.033 … +0.045).
#:   A channel ``vector:<model>`` of the ``mixed`` case is not split by language.
FUSION_POLICIES: dict[str, FusionPolicy] = {
    "mixed:en": FusionPolicy((("bm25", 1.0), ("vector", 0.5)), DEFAULT_RRF_K, method="mixed",
                             mixed=MixedLanguagePolicy(bm25=1.0, dense=0.5, cross_same=0.25, other_dense=1.0, earn=0.25,
                                                       margin=0.1)),
    "mixed:zh": FusionPolicy((("bm25", 1.0), ("vector", 0.5)), DEFAULT_RRF_K, method="mixed",
                             mixed=MixedLanguagePolicy(bm25=1.0, dense=0.5, cross_same=0.0, other_dense=0.5, earn=0.25,
                                                       margin=0.1)),
    "cross-lingual": FusionPolicy((("bm25", 0.25), ("vector", 1.0)), 60),
    "minority-language": FusionPolicy((("bm25", 1.0), ("vector", 0.0)), 60),
    "same-language:zh": FusionPolicy((("bm25", 1.0), ("vector", 0.0)), 60),
    "same-language:en": FusionPolicy((("bm25", 1.0), ("vector", 1.0)), DEFAULT_RRF_K, method="convex", depth=300),
}


def is_dense_part(channel: str) -> bool:
    """Whether ``channel`` is a further model of an embedding ensemble (``vector:<model>``)."""
    return channel.startswith("vector:")


def plan_fusion(query_language: str, profile: LanguageProfile, channels: Sequence[str]) -> FusionPlan:
    """The :class:`FusionPlan` of the ``auto`` mode for one query.

    ``profile`` is the library's :class:`~ragspine_core.text.language.LanguageProfile`,
    ``channels`` the names of the channels the retriever runs. The plan weighs only the
    built-in ``bm25`` and ``vector`` channels, the further models of an embedding ensemble
    (``vector:<model>``, weighted as ``vector``) and the cross-language ranking; any other
    channel keeps its own weight. With fewer than both built-ins there is nothing to
    weigh: plain RRF, equal weights.
    """
    lib = profile.majority
    if not {"bm25", "vector"} <= set(channels):
        return FusionPlan(tuple((c, 1.0) for c in channels if c in ("bm25", "vector")), DEFAULT_RRF_K,
                          query_language, "single-channel", "fewer than two built-in channels: plain RRF")
    if profile.mixed:
        case = "mixed:zh" if query_language == "zh" else "mixed:en"
        why = (f"library mixes languages ({profile.describe()}): rows in the query's language by BM25 and dense, "
               "the others by dense, at the top only when closer than any row in the query's language")
    elif query_language != lib and profile.share(query_language) < CROSS_LINGUAL_SHARE:
        case, why = "cross-lingual", f"query is {query_language}, library is {lib} ({profile.describe()}): dense leads"
    elif query_language != lib:
        case, why = "minority-language", f"query is {query_language}, a minority language of the library ({profile.describe()}): BM25 leads"
    else:
        case = f"same-language:{lib}"
        if case not in FUSION_POLICIES:
            case = "same-language:en"
        why = f"query and library are {lib} ({profile.describe()})"
    pol = FUSION_POLICIES[case]
    weights = tuple((c, w) for c, w in pol.weights if c in channels)
    # the further models of an embedding ensemble (``vector:<model>``) weigh what ``vector`` weighs
    dense = dict(pol.weights)["vector"]
    weights += tuple((c, dense) for c in channels if is_dense_part(c))
    return FusionPlan(weights, pol.rrf_k, query_language, case, why, pol.method, pol.depth, pol.mixed)


def rrf_fuse(rankings: Iterable[Sequence[Hashable]], *, rrf_k: int = DEFAULT_RRF_K, depth: int | None = None) -> dict[str, Any]:
    """Fuse ranked id lists: ``score(id) += 1 / (rrf_k + rank)``, rank starting at 1.

    ``depth`` truncates every input list first. Returns id -> fused score (best first,
    ties by id); :func:`rrf_order` orders any such mapping. A thin wrapper of
    :func:`weighted_rrf` with every weight 1.0.
    """
    _check_k(rrf_k)
    ids, scores = weighted_rrf([list(r) for r in rankings], rrf_k=rrf_k, depth=depth)
    return dict(zip(ids, scores))


def rrf_order(fused: Mapping[Any, Any]) -> list[Any]:
    """Ids ordered by fused score descending, ties by id ascending."""
    return sorted(fused, key=lambda i: (-fused[i], i))


def time_decay_weight(valid_as_of: str, *, half_life_days: float, today: date) -> float:
    """Exponential decay ``0.5 ** (age_days / half_life_days)``; undated items weigh 1.0."""
    if half_life_days <= 0:
        raise ValueError(f"half_life_days must be > 0, got {half_life_days}")
    try:
        d = date.fromisoformat(valid_as_of[:10])
    except (TypeError, ValueError):
        return 1.0
    age = max((today - d).days, 0)
    return math.pow(0.5, age / half_life_days)


def time_decayed(rows: np.ndarray, fused: np.ndarray, valid_as_of: np.ndarray, *, half_life_days: float,
                 reference: str | date = "") -> tuple[np.ndarray, np.ndarray]:
    """Time-decayed RRF: ``fused[i] * 0.5 ** (age_days(row_i) / half_life_days)``, re-sorted.

    ``valid_as_of`` is the library's column (aligned with rows); undated rows weigh 1.0,
    future dates count as age 0. ``reference`` is the day ages are counted to (default
    today). Ties break on row ascending. ``half_life_days <= 0`` returns the input as is.
    """
    rows = np.asarray(rows, dtype=np.int64)
    fused = np.asarray(fused, dtype=np.float64)
    if half_life_days <= 0 or rows.size == 0:
        return rows, fused
    today = reference if isinstance(reference, date) else (date.fromisoformat(reference) if reference else date.today())
    cache: dict[str, float] = {}
    w = np.empty(rows.shape[0], dtype=np.float64)
    for i, r in enumerate(rows.tolist()):
        d = str(valid_as_of[r])
        if d not in cache:
            cache[d] = time_decay_weight(d, half_life_days=half_life_days, today=today)
        w[i] = cache[d]
    scores = fused * w
    order = np.lexsort((rows, -scores))
    return rows[order], scores[order]
