"""Offline evaluation: BEIR dataset loading, trec_eval-compatible metrics, significance.

Only the standard library and numpy are used here; pytrec_eval is a test-time oracle.
"""

from ragspine_tools.eval.beir import (
    BeirDataset,
    BeirDoc,
    iter_corpus_jsonl,
    list_qrels_files,
    load_beir,
    read_qrels,
)
from ragspine_tools.eval.metrics import (
    BootstrapResult,
    EvalReport,
    aggregate_chunk_hits_to_docs,
    evaluate_run,
    mrr_at_k,
    ndcg_at_k,
    paired_bootstrap,
    read_trec_run,
    recall_at_k,
    trec_ranking,
    write_trec_run,
)

__all__ = [
    "BeirDataset",
    "BeirDoc",
    "BootstrapResult",
    "EvalReport",
    "aggregate_chunk_hits_to_docs",
    "evaluate_run",
    "iter_corpus_jsonl",
    "list_qrels_files",
    "load_beir",
    "mrr_at_k",
    "ndcg_at_k",
    "paired_bootstrap",
    "read_qrels",
    "read_trec_run",
    "recall_at_k",
    "trec_ranking",
    "write_trec_run",
]
