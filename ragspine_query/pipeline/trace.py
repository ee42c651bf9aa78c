"""Tracing through a context variable: who records what a query's stages did.

A query verb that is asked to explain (``search(..., explain=True)``, ``run(...,
explain=True)``, ``retrieve(..., explain=True)``) opens a trace with :func:`tracing`;
every stage, retriever and library it calls records into :func:`current_tracer` — no
``explain`` argument is threaded through the layers, and no layer is asked whether it
can explain. Without an open trace :func:`current_tracer` is
:data:`~ragspine_query.pipeline.explain.NULL_TRACER`, which records nothing: stage code
calls its tracer unconditionally (no ``if tracer is not None`` anywhere) and passes the
payload of a record as a function, which only a recording tracer calls (a query that is
not explained does no tracing work).

A verb called with ``explain=False`` inside an open trace records into that trace (it is
one step of a larger query); one called with ``explain=True`` opens its own.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from ragspine_query.pipeline.explain import NULL_TRACER, Tracer

_TRACER: ContextVar[Tracer] = ContextVar("ragspine_query_tracer", default=NULL_TRACER)


def current_tracer() -> Tracer:
    """The trace in progress in this context (thread, task), or :data:`NULL_TRACER`
    (``enabled`` False: records nothing) when none is open."""
    return _TRACER.get()


@contextmanager
def tracing(explain: bool) -> Iterator[Tracer]:
    """Open a new trace when ``explain`` (it is the context's until the block ends);
    otherwise yield the trace already in progress (:data:`NULL_TRACER` when nobody explains)."""
    if not explain:
        yield _TRACER.get()
        return
    tracer = Tracer()
    token = _TRACER.set(tracer)
    try:
        yield tracer
    finally:
        _TRACER.reset(token)


__all__ = ["NULL_TRACER", "current_tracer", "tracing"]
