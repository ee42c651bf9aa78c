"""SPLADE learned-sparse reranking on a user-supplied masked-LM ONNX export.

Each text becomes a vocabulary-sized weight vector
``w[v] = max_t log(1 + relu(logits[t, v]))`` over its non-padding tokens, and a passage
scores the dot product of its vector with the query's (Formal et al., 2021, "SPLADE v2";
max pooling as in SPLADE++). Query and passages go through the same encoder.

No SPLADE model is installable offline from a PyPI package, so the model is supplied by
the user: a folder with ``model.onnx`` (a fill-mask export whose first output is
``(batch, seq, vocab)`` logits) and ``tokenizer.json``, given as ``model_dir`` or
through ``RAGSPINE_SPLADE_DIR`` (``Settings.splade_dir``,
which ``make_reranker`` passes in).
"""

from __future__ import annotations

from typing import cast

import os
from collections.abc import Iterable

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.records import Hit
from ragspine_core.runtime.onnx_sessions import OnnxTextModel, check_int, locate_model_files
from ragspine_query.rerank.reranker import check_languages, rank_by_scores

#: The variable behind ``Settings.splade_dir``, the folder ``make_reranker`` passes in.
SPLADE_DIR_ENV = "RAGSPINE_SPLADE_DIR"
_FEATURE = "SPLADE reranking"
_EXAMPLE = "naver/splade-cocondenser-ensembledistil (fill-mask task)"


def _max_pooled_log_saturation(output: np.ndarray, mask: np.ndarray) -> np.ndarray:
    logits = np.asarray(output, dtype=np.float64)
    if logits.ndim != 3:
        raise ConfigError(
            f"{_FEATURE}: the model's first output has shape {logits.shape}; expected "
            f"(batch, seq, vocab) masked-LM logits"
        )
    weights = np.log1p(np.maximum(logits, 0.0))
    # log1p(relu(.)) >= 0, so zeroing padding positions leaves the max untouched.
    weights *= mask[:, : weights.shape[1], None]
    return cast("np.ndarray", weights.max(axis=1))


class SpladeReranker:
    """Reranks by the dot product of SPLADE sparse vectors of query and passage.

    Args:
        model_dir: folder with ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``.
        batch_size: texts per ONNX run (>= 1).
        max_length: tokens per text including special tokens (>= 4).
        languages: the languages the model serves (default ``("en",)``: SPLADE models
            are English BERT vocabularies); None for every language. Queries and
            candidates outside them are not reranked (see :mod:`.base`).

    Raises:
        ConfigError: no folder (the message names ``RAGSPINE_SPLADE_DIR``), a missing
            file, or an argument out of range.
        MissingExtraError: onnxruntime or tokenizers is not installed.
    """

    def __init__(self, model_dir: str | os.PathLike[str] | None, *, batch_size: int = 16, max_length: int = 256,
                 languages: Iterable[str] | None = ("en",)) -> None:
        self.languages = check_languages(languages)
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.max_length = check_int("max_length", max_length, minimum=4)
        files = locate_model_files(model_dir, feature=_FEATURE, env_var=SPLADE_DIR_ENV, example=_EXAMPLE)
        self.model_dir = files.model.parent
        self._model = OnnxTextModel(files.model, files.tokenizer, feature=_FEATURE, max_length=max_length)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Dense ``(len(texts), vocab)`` float64 array of SPLADE term weights (mostly zeros)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float64)
        encodings = self._model.encode(list(texts))
        return self._model.run(encodings, batch_size=self.batch_size, reduce=_max_pooled_log_saturation)

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Dot product of the query's SPLADE vector with each passage's, in input order."""
        if not passages:
            return np.zeros((0,), dtype=np.float64)
        vectors = self.encode([query, *passages])
        return cast("np.ndarray", vectors[1:] @ vectors[0])

    def rank(self, query: str, hits: list[Hit], *, top_n: int | None = None) -> list[Hit]:
        """Reorder hits by SPLADE score (see :class:`~ragspine_query.rerank.reranker.Reranker`)."""
        return rank_by_scores(query, hits, self.score, top_n=top_n, languages=self.languages)
