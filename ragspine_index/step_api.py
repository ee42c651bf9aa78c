"""What every pipeline step shares: its context, its result, and its check outcomes.

A step is a plain function ``step(ctx, **upstream_values) -> StepResult`` (no Dagster
import). The Dagster asset of the same name calls it and turns the result into an
``Output`` plus ``AssetCheckResult`` events; :func:`~.pipeline.build_library` calls it
and stops when a blocking check fails — exactly as a Dagster run stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

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


def outcome(spec: CheckSpec, passed: bool, metadata: Mapping[str, Any] | None = None, message: str = "") -> CheckOutcome:
    return CheckOutcome(spec.name, bool(passed), spec.blocking, spec.severity, dict(metadata or {}), message)


def _silent(message: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class StepContext:
    """Everything a step needs besides its upstream values.

    ``embedding`` is the run-level embedding spec (Dagster resource, ``ragspine ingest
    --embedding``, ``build_library(embedding=...)``); a library's own ``_library.toml``
    ``embedding`` wins over it (:func:`~.library_settings.resolve_library_settings`).
    ``make_backend(spec)`` builds the backend of a resolved spec; ``None`` uses
    :func:`ragspine_core.dense.embedding.make_embedding_backend`.
    """

    paths: LibraryPaths
    cache_path: Path
    run_id: str = ""
    embedding: str = "auto"
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

    def backend(self, spec: str) -> Any:
        if self.make_backend is not None:
            return self.make_backend(spec)
        from ragspine_core.dense.embedding import make_embedding_backend

        return make_embedding_backend(spec)
