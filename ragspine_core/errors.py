"""One error hierarchy for the whole product.

Every message says what happened, with which value, and what to do about it.
"""

from __future__ import annotations

from typing import Any


class RagspineError(Exception):
    """Base class of every error RAGSpine raises on purpose."""


class ConfigError(RagspineError, ValueError):
    """A configuration value is invalid (the message lists the allowed values)."""


class FilterError(RagspineError, ValueError):
    """A metadata filter (field, operator or value) is invalid."""


class QueryError(RagspineError, ValueError):
    """A query text that cannot be searched (empty, or longer than the limit)."""


class DocumentError(RagspineError):
    """A raw document cannot be parsed; carries the file and field at fault."""

    def __init__(self, path: str, problem: str, *, field: str | None = None, hint: str = "") -> None:
        self.path = path
        self.field = field
        self.problem = problem
        self.hint = hint
        where = f"{path}" + (f" (field {field!r})" if field else "")
        msg = f"{where}: {problem}"
        if hint:
            msg += f" — {hint}"
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable with its fields (parsing runs in worker processes)
        return (_rebuild_document_error, (type(self), self.path, self.problem, self.field, self.hint))


def _rebuild_document_error(cls: type[DocumentError], path: str, problem: str, field: str | None, hint: str) -> DocumentError:
    return cls(path, problem, field=field, hint=hint)


class IndexNotFoundError(RagspineError, FileNotFoundError):
    """No published index where one was expected."""


class IndexIncompatibleError(RagspineError):
    """A published index exists but this version of the reader cannot use it."""


class IndexCorruptError(RagspineError):
    """A published artifact fails its integrity check (hash or shape mismatch)."""


class MissingExtraError(RagspineError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(
            f"{feature} needs the optional module {module!r}, which is not installed. "
            f"Install it with: pip install 'ragspine[{extra}]'"
        )
        self.extra = extra
        self.module = module


class EmbeddingModelMismatchError(RagspineError):
    """The query embedding model differs from the model the index was built with."""


class ProviderError(RagspineError):
    """An LLM or embedding HTTP provider failed or answered something unusable."""


class DatasetError(RagspineError):
    """An evaluation dataset (BEIR layout) is missing a file or is malformed."""


class ScoreError(RagspineError, ValueError):
    """A retrieval score that cannot take part in ranking or confidence (missing, negative, NaN, infinite)."""


class SynthesisCitationError(RagspineError, ValueError):
    """Something asked for a citation of generated text (a summary-tree node): cite its leaf chunks."""
