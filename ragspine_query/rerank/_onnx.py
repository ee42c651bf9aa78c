"""Shared plumbing for the ONNX rerankers: locate files, load lazily, run padded batches.

``onnxruntime`` and ``tokenizers`` are imported inside functions so that importing
``ragspine_query`` needs neither.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragspine_query.errors import ConfigError, MissingExtraError

#: The extra that installs onnxruntime + tokenizers.
ONNX_EXTRA = "embed-onnx"

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
#: Hub repositories often keep the export one level down; both places are accepted.
MODEL_FILE_ALTERNATIVES = (MODEL_FILE, os.path.join("onnx", MODEL_FILE))

_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_NUMPY_INT = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path
    tokenizer: Path


def locate_model_files(model_dir: str | os.PathLike | None, *, feature: str, env_var: str, example: str) -> ModelFiles:
    """The ``model.onnx`` and ``tokenizer.json`` of ``model_dir``, or an error saying what to put where.

    Raises:
        ConfigError: no directory given, the directory is missing, or a file is missing.
    """
    layout = (
        f"a folder holding {MODEL_FILE} (or onnx/{MODEL_FILE}) and {TOKENIZER_FILE}, "
        f"e.g. an ONNX export of {example}"
    )
    if model_dir is None or not str(model_dir).strip():
        raise ConfigError(f"{feature} needs a model directory: pass model_dir or set {env_var} to {layout}")
    root = Path(model_dir).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{feature}: model directory {str(root)!r} does not exist; set {env_var} to {layout}")
    model = next((root / alt for alt in MODEL_FILE_ALTERNATIVES if (root / alt).is_file()), None)
    tokenizer = root / TOKENIZER_FILE
    missing = []
    if model is None:
        missing.append(f"the ONNX graph at {root / MODEL_FILE}")
    if not tokenizer.is_file():
        missing.append(f"the Hugging Face fast-tokenizer file at {tokenizer}")
    if missing:
        raise ConfigError(
            f"{feature}: {root} is incomplete; put {' and '.join(missing)} "
            f"(or point {env_var} at {layout})"
        )
    return ModelFiles(model=model, tokenizer=tokenizer)


def _import_stack(feature: str):
    try:
        import onnxruntime
    except ImportError as err:
        raise MissingExtraError(feature, ONNX_EXTRA, "onnxruntime") from err
    try:
        import tokenizers
    except ImportError as err:
        raise MissingExtraError(feature, ONNX_EXTRA, "tokenizers") from err
    return onnxruntime, tokenizers


class OnnxTextModel:
    """An ONNX transformer plus its tokenizer, run over length-sorted padded batches."""

    def __init__(self, files: ModelFiles, *, feature: str, max_length: int, truncation: str) -> None:
        ort, tokenizers = _import_stack(feature)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
        inputs = {i.name: i.type for i in self.session.get_inputs()}
        unexpected = sorted(set(inputs) - set(_KNOWN_INPUTS))
        if unexpected or "input_ids" not in inputs:
            raise ConfigError(
                f"{feature}: {files.model} has inputs {sorted(inputs)}; expected input_ids plus "
                f"optionally attention_mask and token_type_ids (a BERT-style export)"
            )
        self.input_types = {name: _NUMPY_INT.get(kind, np.int64) for name, kind in inputs.items()}
        self.tokenizer = self._load_tokenizer(tokenizers, files.tokenizer, max_length, truncation)
        # only_second cannot help when the query alone is too long; such pairs fall back.
        self._fallback = (
            self._load_tokenizer(tokenizers, files.tokenizer, max_length, "longest_first")
            if truncation != "longest_first"
            else self.tokenizer
        )
        pad_ids = [self.tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>")]
        self.pad_id = next((int(i) for i in pad_ids if i is not None), 0)

    @staticmethod
    def _load_tokenizer(tokenizers, path: Path, max_length: int, strategy: str):
        tok = tokenizers.Tokenizer.from_file(str(path))
        tok.no_padding()
        tok.enable_truncation(max_length=max_length, strategy=strategy)
        return tok

    def encode(self, items: Sequence[str | tuple[str, str]]) -> list:
        """Tokenize texts or (first, second) pairs with special tokens and truncation."""
        try:
            return self.tokenizer.encode_batch(list(items))
        except Exception:  # noqa: BLE001 — a pair whose first part is too long for only_second
            out = []
            for item in items:
                try:
                    out.append(self.tokenizer.encode(*item) if isinstance(item, tuple) else self.tokenizer.encode(item))
                except Exception:  # noqa: BLE001
                    out.append(self._fallback.encode(*item) if isinstance(item, tuple) else self._fallback.encode(item))
            return out

    def run(
        self,
        encodings: Sequence,
        *,
        batch_size: int,
        reduce: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """Run the model over ``encodings`` and return ``reduce(first_output, attention_mask)`` rows in input order.

        Encodings are sorted by length (stable) so each batch pads little; ``reduce``
        maps one batch's first output and its ``(batch, seq)`` mask to one row per item.
        """
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        rows: list[np.ndarray | None] = [None] * len(encodings)
        for start in range(0, len(order), batch_size):
            picked = order[start : start + batch_size]
            width = max(len(encodings[i].ids) for i in picked)
            ids = np.full((len(picked), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(picked), width), dtype=np.int64)
            types = np.zeros((len(picked), width), dtype=np.int64)
            for row, i in enumerate(picked):
                enc = encodings[i]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = 1
                types[row, :n] = enc.type_ids
            arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in self.input_types.items()}
            output = np.asarray(self.session.run(None, feed)[0])
            reduced = reduce(output, mask)
            for row, i in enumerate(picked):
                rows[i] = reduced[row]
        if not rows:
            return np.zeros((0,), dtype=np.float32)
        return np.stack(rows)
