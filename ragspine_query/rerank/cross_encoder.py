"""Offline cross-encoder reranking on onnxruntime (e.g. ms-marco-MiniLM-L-6-v2).

A cross-encoder reads the query and a passage together as one sentence pair
(``[CLS] query [SEP] passage [SEP]`` with token type ids 0/1) and outputs a relevance
logit; see Nogueira & Cho, 2019, "Passage Re-ranking with BERT".

No trained cross-encoder ships in a PyPI package, so the model is user-supplied: a
folder with ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``, given as
``model_dir`` or through ``RAGSPINE_CROSS_ENCODER_DIR`` (``Settings.cross_encoder_dir``,
which ``make_reranker`` passes in).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.records import Hit
from ragspine_core.runtime.onnx_sessions import OnnxTextModel, check_int, locate_model_files
from ragspine_query.rerank.reranker import check_languages, rank_by_scores

#: The variable behind ``Settings.cross_encoder_dir``, the folder ``make_reranker`` passes in.
CROSS_ENCODER_DIR_ENV = "RAGSPINE_CROSS_ENCODER_DIR"
_FEATURE = "cross-encoder reranking"
_EXAMPLE = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def _first_logit(output: np.ndarray, mask: np.ndarray) -> np.ndarray:
    logits = np.asarray(output, dtype=np.float64)
    if logits.ndim == 1:
        return logits
    if logits.ndim == 2:
        return logits[:, 0]
    raise ConfigError(
        f"{_FEATURE}: the model's first output has shape {logits.shape}; expected (batch,) "
        f"or (batch, n_labels) logits from a sequence-classification export"
    )


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a BERT-style cross-encoder exported to ONNX.

    Pairs are encoded with the tokenizer's pair template, truncating the passage only
    (a query too long for that falls back to trimming the longer side), scored in
    length-sorted batches, and the first logit is the score.

    Args:
        model_dir: folder with ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``.
        batch_size: pairs per ONNX run (>= 1).
        max_length: tokens per pair including special tokens (>= 8; 512 for BERT models).
        languages: the languages the model serves (default ``("en",)``, as for the
            ms-marco models); None for a multilingual model. Queries and candidates
            outside them are not reranked (see :mod:`.base`).

    Raises:
        ConfigError: no folder, a missing file, or an argument out of range; the
            message says which file to put where and names ``RAGSPINE_CROSS_ENCODER_DIR``.
        MissingExtraError: onnxruntime or tokenizers is not installed.
    """

    def __init__(self, model_dir: str | os.PathLike[str] | None, *, batch_size: int = 16, max_length: int = 512,
                 languages: Iterable[str] | None = ("en",)) -> None:
        self.languages = check_languages(languages)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.max_length = check_int("max_length", max_length, minimum=8)
        files = locate_model_files(model_dir, feature=_FEATURE, env_var=CROSS_ENCODER_DIR_ENV, example=_EXAMPLE)
        self.model_dir = files.model.parent
        self._model = OnnxTextModel(files.model, files.tokenizer, feature=_FEATURE, max_length=max_length, truncation="only_second")

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """One relevance logit per passage (float64), in input order."""
        if not passages:
            return np.zeros((0,), dtype=np.float64)
        encodings = self._model.encode([(query, p) for p in passages])
        return self._model.run(encodings, batch_size=self.batch_size, reduce=_first_logit)

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None) -> list[Hit]:
        """Reorder hits by cross-encoder score (see :class:`~ragspine_query.rerank.reranker.Reranker`)."""
        return rank_by_scores(query, hits, self.score, top_n=top_n, languages=self.languages)
