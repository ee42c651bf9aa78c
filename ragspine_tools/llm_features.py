"""``ragspine eval --llm-features``: each LLM query feature switched on alone, against ``off``.

A feature is evaluated through the chain ``ragspine query`` runs
(:func:`~ragspine_query.builder.build_pipeline` with the user's
:class:`~ragspine_query.builder.PipelineSpec`, that one feature switched on), with the provider the
``RAGSPINE_LLM_*`` settings name (any OpenAI-compatible server: ``ragspine llm serve``,
Ollama, vLLM, a hosted API). ``off`` is the same chain with no provider: the user's
deterministic default.

Whether a reply was used or the feature fell back is read from the query's trace: the
note each feature writes where ``--explain`` shows it (docs/llm-providers.md, "What a bad
reply does"). Per feature the tally counts the feature's *attempts* (one per stage run
that asked the model), how many replies were *used* as asked, *partial* (the listwise
judge ranked only some candidates; the rest keep their fused order), and *fallbacks*, and
the time its stage took (the model's latency included).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ragspine_core.errors import ConfigError

#: feature -> what it switches on (``off``: no provider, the deterministic default)
LLM_FEATURES: dict[str, str] = {
    "off": "no LLM (the deterministic default)",
    "hyde": "HyDE: the model's hypothetical passage probes the dense channel",
    "step_back": "step-back: the model's more general question, fused",
    "decompose": "decomposition: the model's sub-questions, fused",
    "filters": "filter extraction by the model (a preference, never excluding a row without the field)",
    "grader": "the corrective loop's LLM grader and rewrite (RAGSPINE_CORRECTIVE=llm)",
    "listwise": "the listwise judge reorders the top 10",
}

#: how many of the top hits the listwise judge reorders (the user default, ``ragspine query``)
LISTWISE_TOP_N = 10


def parse_features(spec: str) -> list[str]:
    """``off,hyde,…`` -> the list (order kept, duplicates dropped).

    Raises:
        ConfigError: an unknown name (the allowed ones are listed) or an empty list.
    """
    names = list(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    unknown = [n for n in names if n not in LLM_FEATURES]
    if unknown or not names:
        raise ConfigError(f"--llm-features {spec!r}: unknown feature(s) {unknown or '(none given)'}; "
                          f"choose from {', '.join(LLM_FEATURES)} (comma-separated; the first is the baseline)")
    return names


def feature_chain(feature: str, intelligence: Any, provider: Any, settings: Any) -> tuple[Any, Any, Any, int | None]:
    """``(intelligence, provider, reranker, rerank_top_n)`` of the chain that evaluates
    ``feature``: the user's ``intelligence`` (from the settings) with that one feature on.
    ``off`` gets no provider; ``rerank_top_n`` None keeps the evaluation's own depth."""
    if feature == "off":
        return intelligence, None, None, None
    if feature == "listwise":
        from ragspine_query.rerank import make_reranker

        return intelligence, provider, make_reranker("listwise", provider=provider, settings=settings), LISTWISE_TOP_N
    if feature in ("hyde", "step_back", "decompose"):
        present = [t for t in intelligence.transforms.split(",") if t]
        change = {"transforms": ",".join([*present, feature] if feature not in present else present)}
    elif feature == "filters":
        change = {"filters": "llm"}
    elif feature == "grader":
        change = {"corrective": "llm"}
    else:  # pragma: no cover - parse_features checked the name
        raise ConfigError(f"unknown LLM feature {feature!r}")
    return dataclasses.replace(intelligence, **change), provider, None, None


def classify(feature: str, stage: Any) -> str | None:
    """``used`` / ``partial`` / ``fallback`` for one traced stage of ``feature`` that asked
    the model, None for a stage that is not the feature's (or did not ask)."""
    detail = stage.detail or ""
    if feature in ("hyde", "step_back", "decompose"):
        if stage.stage != "transform" or stage.name != feature:
            return None
        if feature == "hyde":
            return "used" if "hyde: dense probe" in detail else "fallback"
        return "fallback" if "deterministic (" in detail else "used"
    if feature == "filters":
        if stage.stage != "extract" or not stage.name.startswith("filters:llm"):
            return None
        return "fallback" if stage.name == "filters:llm→rules" else "used"
    if feature == "grader":
        if stage.stage != "grade" or "LLM grader" not in detail:
            return None
        return "fallback" if "LLM grader:" in detail else "used"
    if feature == "listwise":
        if stage.stage != "rerank" or stage.name != "listwise" or "judge not asked" in detail:
            return None
        if "judge ordered all" in detail:
            return "used"
        return "partial" if "the rest keep their fused order" in detail else "fallback"
    return None


@dataclass
class FeatureTally:
    """What one feature did over the evaluated queries (fed each query's trace)."""

    feature: str
    queries: int = 0
    attempts: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"used": 0, "partial": 0, "fallback": 0})
    seconds: float = 0.0  # the feature's stages (the model's latency included)

    def __call__(self, explain: Any) -> None:
        self.queries += 1
        for stage in explain.stages:
            outcome = classify(self.feature, stage)
            if outcome is not None:
                self.attempts += 1
                self.counts[outcome] += 1
                self.seconds += stage.seconds

    def to_dict(self, usage: dict[str, int] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"feature": self.feature, "attempts": self.attempts, **self.counts,
                               "fallback_rate": round(self.counts["fallback"] / self.attempts, 4) if self.attempts else None,
                               "ms_per_attempt": round(self.seconds / self.attempts * 1000, 1) if self.attempts else None}
        if usage is not None:
            out["llm_calls"] = int(usage.get("calls", 0))
            out["prompt_tokens"] = int(usage.get("prompt_tokens", 0))
            out["completion_tokens"] = int(usage.get("completion_tokens", 0))
        return out


def compare_runs(dataset_dir: Any, run_a: Any, run_b: Any, *, split: str = "dev", seed: int = 0) -> dict[str, Any]:
    """nDCG@10 of two TREC run files over one judged set, paired: the worth of a *build*
    (e.g. a library built with the LLM relation extractor and summaries) against another
    build of the same documents, each evaluated by its own ``ragspine eval`` run.

    Returns the means of A and B, B − A with its 95% paired-bootstrap interval and p
    (:func:`~ragspine_tools.eval.metrics.paired_bootstrap`, ``seed``), and the means per
    query kind when the set has them (``queries.jsonl`` ``metadata.type``).

    Raises:
        DatasetError: a run file is missing or not a TREC run; the qrels are missing.
    """
    from pathlib import Path

    from ragspine_tools.eval.beir import load_beir
    from ragspine_tools.eval.metrics import evaluate_run, paired_bootstrap, read_trec_run
    from ragspine_tools.eval.beir import query_types

    dataset = load_beir(Path(dataset_dir), split)
    a = evaluate_run(read_trec_run(run_a), dataset.qrels)
    b = evaluate_run(read_trec_run(run_b), dataset.qrels)
    bs = paired_bootstrap(a.metric("ndcg@10"), b.metric("ndcg@10"), seed=seed)
    out: dict[str, Any] = {"n_queries": bs.n_queries, "ndcg@10_a": round(bs.mean_a, 4), "ndcg@10_b": round(bs.mean_b, 4),
                           "difference": round(bs.mean_difference, 4), "ci95": [round(bs.ci_low, 4), round(bs.ci_high, 4)],
                           "p": round(bs.p_value, 4), "mrr@10_a": round(a.mrr_at_10, 4), "mrr@10_b": round(b.mrr_at_10, 4)}
    types = query_types(Path(dataset_dir))
    if types:
        ga, gb = a.by_group(types), b.by_group(types)
        out["by_type"] = {g: {"n": int(ga[g]["n_queries"]), "a": round(float(ga[g]["ndcg@10"]), 4),
                              "b": round(float(gb[g]["ndcg@10"]), 4)} for g in ga}
    return out


if __name__ == "__main__":  # python -m ragspine_tools.llm_features DATASET_DIR RUN_A.trec RUN_B.trec [SPLIT]
    import json
    import sys

    if len(sys.argv) not in (4, 5):
        sys.exit("usage: python -m ragspine_tools.llm_features DATASET_DIR RUN_A.trec RUN_B.trec [SPLIT (default dev)]")
    print(json.dumps(compare_runs(sys.argv[1], sys.argv[2], sys.argv[3], split=sys.argv[4] if len(sys.argv) == 5 else "dev"),
                     ensure_ascii=False))
