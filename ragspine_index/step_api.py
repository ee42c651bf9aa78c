"""What every pipeline step shares: its context, its result, its check outcomes and progress.

A step is a plain function ``step(ctx, **upstream_values) -> StepResult`` (no Dagster
import). The Dagster asset of the same name calls it and turns the result into an
``Output`` plus ``AssetCheckResult`` events; :func:`~.pipeline.build_library` calls it
and stops when a blocking check fails — exactly as a Dagster run stops. Long work reports
:class:`Progress` counts through :meth:`StepContext.progress`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ragspine_core.dense.embedding import EmbeddingSpec, shared_embedding_backend
from ragspine_core.errors import RagspineError

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.publish import DEFAULT_KEEP_SNAPSHOTS


class BlockingCheckError(RagspineError):
    """A blocking check failed: nothing downstream ran, nothing was published."""

    def __init__(self, message: str, *, step: str = "", check: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.check = check


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """A check a step evaluates on its own output (the Dagster asset check of that name)."""

    name: str
    blocking: bool = False
    #: ``"error"`` or ``"warn"`` (a warning never stops anything).
    severity: str = "error"
    description: str = ""


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The result of one :class:`CheckSpec`.

    ``metadata`` holds plain values (lists are shown as Markdown lists in the UI) and
    ``message`` says what failed; neither ever names a RESTRICTED document or its text.
    """

    name: str
    passed: bool
    blocking: bool = False
    severity: str = "error"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True, slots=True)
class StepResult:
    """A step's output value and the outcomes of its checks."""

    value: Any
    checks: tuple[CheckOutcome, ...] = ()

    def failed_blocking(self) -> list[CheckOutcome]:
        return [c for c in self.checks if c.blocking and not c.passed]


@dataclass(frozen=True, slots=True)
class Progress:
    """Counts a step reports while it works: ``done`` of ``total`` ``unit``, doing ``what``.

    A step calls :meth:`StepContext.progress` with one; the display (the Dagster run log
    with rate and ETA, a terminal, or :func:`~.pipeline.build_library`'s ``progress``
    callback as :meth:`text`) reads the numbers, never text parsed back from a message.
    """

    what: str
    done: int
    total: int
    unit: str = ""

    def text(self) -> str:
        """``"embedded 64/243 new texts"``."""
        return f"{self.what} {self.done}/{self.total}" + (f" {self.unit}" if self.unit else "")


def outcome(spec: CheckSpec, passed: bool, metadata: Mapping[str, Any] | None = None, message: str = "") -> CheckOutcome:
    return CheckOutcome(spec.name, bool(passed), spec.blocking, spec.severity, dict(metadata or {}), message)


def _silent(message: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class StepContext:
    """Everything a step needs besides its upstream values.

    ``embedding`` is the run-level :class:`~ragspine_core.dense.embedding.EmbeddingSpec`
    (built at an edge: the Dagster resource, ``ragspine ingest --embedding``,
    ``build_library(embedding=...)``; a bare backend name is taken as a spec of that name
    alone); a library's own ``_library.toml`` ``embedding`` replaces its backend
    (:func:`~.library_settings.resolve_library_settings`). :meth:`backend` builds the
    backend of a resolved spec with :func:`~ragspine_core.dense.embedding.shared_embedding_backend` (built
    once per process, so the steps of a run share its models);
    ``make_backend(name)``, when given, builds it instead (an override for tests and scripts).
    """

    paths: LibraryPaths
    cache_path: Path
    run_id: str = ""
    embedding: EmbeddingSpec = field(default_factory=EmbeddingSpec)
    make_backend: Callable[[str], Any] | None = None
    glossary_path: Path | None = None
    keep: int = DEFAULT_KEEP_SNAPSHOTS
    code_versions: Mapping[str, str] = field(default_factory=dict)
    log: Callable[[str], None] = _silent
    #: When the embeddings step builds the ANN index (``ragspine_core.dense.ann.AnnConfig``;
    #: None = its defaults).
    ann: Any = None
    #: ``make_llm()`` -> an ``LLMProvider`` or None (the ``llm`` resource); only the
    #: ``summary_tree`` step calls it, and only for a library whose summarizer is ``llm``.
    make_llm: Callable[[], Any] | None = None
    #: Where :meth:`progress` sends a step's structured counts; ``None``: :attr:`log` gets
    #: :meth:`Progress.text`.
    report_progress: Callable[[Progress], None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.embedding, EmbeddingSpec):  # a bare backend name (older callers)
            object.__setattr__(self, "embedding", EmbeddingSpec.coerce(self.embedding))

    def progress(self, counts: Progress) -> None:
        """Report ``counts`` (e.g. ``Progress("embedded", 64, 243, "new texts")``)."""
        if self.report_progress is not None:
            self.report_progress(counts)
        else:
            self.log(counts.text())

    def backend(self, spec: EmbeddingSpec | str) -> Any:
        """The backend of a resolved spec (``None`` for ``none``); a backend name is this
        run's :attr:`embedding` with that backend (an embedding shard's plan names one)."""
        resolved = spec if isinstance(spec, EmbeddingSpec) else self.embedding.with_backend(spec)
        if self.make_backend is not None:
            return self.make_backend(resolved.backend)
        return shared_embedding_backend(resolved)  # the steps of a run share one backend per model
