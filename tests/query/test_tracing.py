"""Tracing without branches: a tracer is always in effect (a recording one inside an
explained query, :data:`NULL_TRACER` otherwise), stage code calls it unconditionally, and
a record's payload is built only by a tracer that records."""

from __future__ import annotations

import re
from pathlib import Path

import ragspine_query
from ragspine_query.pipeline.explain import NULL_TRACER, Candidate, NullTracer, Tracer
from ragspine_query.pipeline.trace import current_tracer, tracing


def _boom() -> list[Candidate]:
    raise AssertionError("a payload was built for a tracer that does not record")


def test_a_tracer_is_always_in_effect():
    assert current_tracer() is NULL_TRACER and isinstance(NULL_TRACER, NullTracer) and not NULL_TRACER.enabled
    with tracing(False) as outside:
        assert outside is NULL_TRACER
    with tracing(True) as tracer:
        assert current_tracer() is tracer and tracer.enabled and type(tracer) is Tracer
        with tracing(False) as inner:  # a verb that is not asked to explain records into the open trace
            assert inner is tracer
    assert current_tracer() is NULL_TRACER


def test_payloads_are_built_only_when_recording():
    NULL_TRACER.add("channel", "bm25", NULL_TRACER.since(NULL_TRACER.clock()), _boom, detail=lambda: str(_boom()))
    assert NULL_TRACER.freeze("q").stages == () and NULL_TRACER.clock() == 0.0
    t = Tracer()
    t.add("channel", "bm25", t.since(t.clock()), lambda: [Candidate(1, "c1", "lib", 2.0)], query="q", detail=lambda: "d")
    t.add("fuse", "rrf", 0.5, [Candidate(1, "c1", "lib", 1.0)], detail="plain")
    ex = t.freeze("q")
    assert [(s.name, s.detail, s.candidates[0].score) for s in ex.stages] == [("bm25", "d", 2.0), ("rrf", "plain", 1.0)]
    assert ex.stages[0].seconds >= 0.0


def test_no_stage_code_branches_on_the_tracer_being_absent():
    root = Path(ragspine_query.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if re.search(r"tracer\s+is\s+(not\s+)?None|tracer\s+else\b", code) and "``" not in code:
                found.append(f"{path.relative_to(root)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
