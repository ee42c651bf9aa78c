"""The one ONNX runtime helper: BERT-style encoders on onnxruntime + ``tokenizers``.

Used by the embedding backend (:mod:`ragspine_core.dense.minilm_onnx`, which ColBERT reranking
reuses for token vectors) and by the cross-encoder and SPLADE rerankers. It owns:

* importing the runtime (a :class:`~ragspine_core.errors.MissingExtraError` naming the
  ``embed-onnx`` extra when ``onnxruntime`` or ``tokenizers`` is absent);
* finding model files (``model.onnx`` or ``onnx/model.onnx`` plus ``tokenizer.json`` in a
  folder, or a file inside an installed package such as the int8 MiniLM);
* the session (CPU provider, intra-op threads, one inter-op thread, sequential,
  memory patterns off because batch shapes change every call);
* the tokenizer (truncation at ``max_length``, no padding of its own, the pad id);
* feeding: texts sorted by token length, longest first (a batch that does not fit in
  memory fails on the first call), each batch padded only to its own longest text,
  inputs cast to the types the graph declares, rows restored to input order.

``onnxruntime`` and ``tokenizers`` are imported only when a model is opened.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from ragspine_core.errors import ConfigError, MissingExtraError

#: The extra that installs onnxruntime + tokenizers.
ONNX_EXTRA = "embed-onnx"
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
#: Hub repositories often keep the export one level down; both places are accepted.
MODEL_FILE_ALTERNATIVES = (MODEL_FILE, os.path.join("onnx", MODEL_FILE))
#: The inputs a BERT-style export may declare; ``input_ids`` is required.
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_NUMPY_INT = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def import_onnx_stack(feature: str) -> tuple[Any, Any]:
    """``(onnxruntime, tokenizers)``, or a :class:`MissingExtraError` naming ``embed-onnx``."""
    try:
        import onnxruntime
    except ImportError as err:
        raise MissingExtraError(feature, ONNX_EXTRA, "onnxruntime") from err
    try:
        import tokenizers
    except ImportError as err:
        raise MissingExtraError(feature, ONNX_EXTRA, "tokenizers") from err
    return onnxruntime, tokenizers


def package_dir(package: str, *, feature: str, extra: str = ONNX_EXTRA) -> Path:
    """The folder of an installed package that ships model files (e.g. the int8 MiniLM).

    Raises:
        MissingExtraError: the package is not installed.
        ConfigError: it is installed without files on disk.
    """
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise MissingExtraError(feature, extra, package) from exc
    file = getattr(module, "__file__", None)
    if not file:
        raise ConfigError(f"package {package!r} has no files on disk (namespace or zipped install); reinstall it")
    return Path(file).resolve().parent


def find_model_file(root: Path) -> Path | None:
    """``root/model.onnx`` or ``root/onnx/model.onnx``, whichever exists first."""
    return next((root / alt for alt in MODEL_FILE_ALTERNATIVES if (root / alt).is_file()), None)


@dataclass(frozen=True, slots=True)
class ModelFiles:
    model: Path
    tokenizer: Path


def locate_model_files(model_dir: str | os.PathLike[str] | None, *, feature: str, env_var: str, example: str) -> ModelFiles:
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
    model = find_model_file(root)
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
    assert model is not None  # else ``missing`` was not empty and raised
    return ModelFiles(model=model, tokenizer=tokenizer)


def check_int(name: str, value: object, *, minimum: int) -> int:
    """``value`` when it is an integer (not a bool) >= ``minimum``, else a :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def open_session(ort: Any, model_path: Path | bytes, *, threads: int | None = None, spin: bool = True) -> Any:
    """An onnxruntime CPU session on ``model_path`` (``threads`` default: ``os.cpu_count()``);
    ``bytes`` are a serialized model built in memory (the multilingual-e5 graph).

    ``spin=False`` stops idle intra-op threads from busy-waiting after a run: slower by
    about a millisecond per call, but they no longer take the cores from another engine
    that runs next in the same process (the e5 half of an embedding ensemble: query
    embedding 36 -> 18 ms on 2 cores).

    Raises:
        ConfigError: onnxruntime cannot load the file.
    """
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = (os.cpu_count() or 1) if threads is None else threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Memory patterns pay off for fixed input shapes; length-sorted batches change
    # shape every call, and keeping the patterns cost ~0.5 GB of peak RSS in tests.
    options.enable_mem_pattern = False
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        source = model_path if isinstance(model_path, bytes) else str(model_path)
        return ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        where = "the in-memory graph" if isinstance(model_path, bytes) else str(model_path)
        raise ConfigError(f"onnxruntime cannot load {where}: {exc}; re-export or reinstall the model") from exc


def load_tokenizer(tokenizers: Any, path: Path, *, max_length: int, strategy: str = "longest_first") -> tuple[Any, int]:
    """``(tokenizer, pad_id)``: truncating at ``max_length`` with ``strategy``, padding nothing.

    Shipped ``tokenizer.json`` files often pin padding and truncation to 128: the helper
    pads each batch to its own longest text instead. The pad id is the file's padding
    id, else ``[PAD]``, else ``<pad>``, else 0.

    Raises:
        ConfigError: the file is not a Hugging Face ``tokenizer.json``.
    """
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ConfigError(f"cannot load tokenizer {path}: {exc}; it must be a Hugging Face tokenizer.json") from exc
    pad_id = (tokenizer.padding or {}).get("pad_id")
    if pad_id is None:
        pad_id = next((i for i in (tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>")) if i is not None), 0)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy=strategy)
    return tokenizer, int(pad_id)


def pad_batch(encodings: Sequence[Any], pad_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask, token_type_ids)`` int64 arrays padded to the longest encoding."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n] = enc.ids
        mask[row, :n] = 1
        types[row, :n] = enc.type_ids
    return ids, mask, types


def length_sorted_batches(
    encodings: Sequence[Any], batch_size: int, pad_id: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(positions, ids, mask, types)`` for batches of similar token length, longest first."""
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        positions = order[start : start + batch_size]
        yield (positions, *pad_batch([encodings[i] for i in positions], pad_id))


class OnnxTextModel:
    """An ONNX transformer plus its tokenizer, run over length-sorted padded batches.

    Args:
        model_path: the ``.onnx`` graph.
        tokenizer_path: its ``tokenizer.json``.
        feature: how messages name the user of the model (e.g. ``"SPLADE reranking"``).
        max_length: tokens per text or pair, special tokens included.
        truncation: the tokenizer's strategy (``only_second`` keeps a pair's query whole;
            a pair whose first text alone is too long falls back to ``longest_first``).
        threads: onnxruntime intra-op threads (default ``os.cpu_count()``).
        spin: whether idle intra-op threads busy-wait (see :func:`open_session`).

    Raises:
        MissingExtraError: onnxruntime or tokenizers is not installed.
        ConfigError: a file cannot be loaded, or the graph has inputs it cannot feed.
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer_path: Path,
        *,
        feature: str,
        max_length: int,
        truncation: str = "longest_first",
        threads: int | None = None,
        spin: bool = True,
    ) -> None:
        ort, tokenizers = import_onnx_stack(feature)
        self.model_path = Path(model_path)
        self.session = open_session(ort, self.model_path, threads=threads, spin=spin)
        inputs = {i.name: i.type for i in self.session.get_inputs()}
        unexpected = sorted(set(inputs) - set(KNOWN_INPUTS))
        if unexpected or "input_ids" not in inputs:
            raise ConfigError(
                f"{feature}: {model_path} declares inputs {sorted(inputs)}; expected input_ids plus "
                f"optionally attention_mask and token_type_ids (a BERT-style export) — re-export "
                f"the model with those inputs"
            )
        self.input_types = {name: _NUMPY_INT.get(kind, np.int64) for name, kind in inputs.items()}
        self.tokenizer, self.pad_id = load_tokenizer(tokenizers, tokenizer_path, max_length=max_length, strategy=truncation)
        self._fallback = (
            load_tokenizer(tokenizers, tokenizer_path, max_length=max_length)[0]
            if truncation != "longest_first"
            else self.tokenizer
        )

    def encode(self, items: Sequence[str | tuple[str, str]]) -> list[Any]:
        """Tokenize texts or (first, second) pairs with special tokens and truncation."""
        try:
            return cast("list[Any]", self.tokenizer.encode_batch(list(items)))
        except Exception:  # noqa: BLE001 — a pair whose first part is too long for only_second
            out = []
            for item in items:
                try:
                    out.append(self.tokenizer.encode(*item) if isinstance(item, tuple) else self.tokenizer.encode(item))
                except Exception:  # noqa: BLE001
                    out.append(self._fallback.encode(*item) if isinstance(item, tuple) else self._fallback.encode(item))
            return out

    def forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray, *, output: str | None = None) -> np.ndarray:
        """One padded batch through the graph: the named output (default: the first one)."""
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(dtype, copy=False) for name, dtype in self.input_types.items()}
        return np.asarray(self.session.run([output] if output else None, feed)[0])

    def batches(self, encodings: Sequence[Any], batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:func:`length_sorted_batches` with this model's pad id."""
        return length_sorted_batches(encodings, batch_size, self.pad_id)

    def run(
        self,
        encodings: Sequence[Any],
        *,
        batch_size: int,
        reduce: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """``reduce(first_output, attention_mask)`` rows for ``encodings``, in input order.

        ``reduce`` maps one batch's first output and its ``(batch, seq)`` mask to one row
        per item.
        """
        rows: list[np.ndarray | None] = [None] * len(encodings)
        for positions, ids, mask, types in self.batches(encodings, batch_size):
            reduced = reduce(self.forward(ids, mask, types), mask)
            for row, i in enumerate(positions):
                rows[i] = reduced[row]
        if not rows:
            return np.zeros((0,), dtype=np.float32)
        return np.stack(rows)  # type: ignore[arg-type]  # every position was filled above


__all__ = [
    "KNOWN_INPUTS",
    "MODEL_FILE",
    "MODEL_FILE_ALTERNATIVES",
    "ModelFiles",
    "ONNX_EXTRA",
    "OnnxTextModel",
    "TOKENIZER_FILE",
    "check_int",
    "find_model_file",
    "import_onnx_stack",
    "length_sorted_batches",
    "load_tokenizer",
    "locate_model_files",
    "open_session",
    "package_dir",
    "pad_batch",
]
