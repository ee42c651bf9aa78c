"""Tracing through a context variable: who records what a query's stages did.

A query verb that is asked to explain (``search(..., explain=True)``, ``run(...,
explain=True)``, ``retrieve(..., explain=True)``) opens a trace with :func:`tracing`;
every stage, retriever and library it calls records into :func:`current_tracer` — no
``explain`` argument is threaded through the layers, and no layer is asked whether it
can explain. Without an open trace :func:`current_tracer` is None and nothing is
recorded (a query that is not explained does no tracing work).

A verb called with ``explain=False`` inside an open trace records into that trace (it is
one step of a larger query); one called with ``explain=True`` opens its own.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from ragspine_query.pipeline.explain import Tracer

_TRACER: ContextVar[Tracer | None] = ContextVar("ragspine_query_tracer", default=None)


def current_tracer() -> Tracer | None:
    """The trace in progress in this context (thread, task), or None."""
    return _TRACER.get()


@contextmanager
def tracing(explain: bool) -> Iterator[Tracer | None]:
    """Open a new trace when ``explain`` (it is the context's until the block ends);
    otherwise yield the trace already in progress (None when nobody explains)."""
    if not explain:
        yield _TRACER.get()
        return
    tracer = Tracer()
    token = _TRACER.set(tracer)
    try:
        yield tracer
    finally:
        _TRACER.reset(token)


__all__ = ["current_tracer", "tracing"]
