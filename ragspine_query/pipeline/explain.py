"""``explain``: what each pipeline stage saw, ranked and spent — frozen, printable."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Sequence, TYPE_CHECKING

from ragspine_core.records import is_restricted

if TYPE_CHECKING:
    from ragspine_core.records import Hit


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate as a stage left it: rank from 1, the stage's score."""

    rank: int
    chunk_id: str
    library_id: str
    score: float
    sensitivity: str = ""


@dataclass(frozen=True, slots=True)
class StageTrace:
    """One stage run: kind (transform, channel, fuse, rerank, postprocess, restricted_strip,
    snippets, …), its name (``bm25``, ``rrf``, …), the query it ran for, time, candidates."""

    stage: str
    name: str
    seconds: float
    candidates: tuple[Candidate, ...] = ()
    query: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Explain:
    """Per stage, the candidates with their ranks and scores, and the time spent."""

    query: str
    stages: tuple[StageTrace, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    def without_restricted(self) -> "Explain":
        """The same trace with every RESTRICTED candidate removed (the narrative path's view)."""
        def keep(c: Candidate) -> bool:
            return not is_restricted(c.sensitivity)
        return Explain(self.query, tuple(
            StageTrace(s.stage, s.name, s.seconds, tuple(c for c in s.candidates if keep(c)), s.query, s.detail)
            for s in self.stages))

    def to_rows(self) -> list[dict[str, Any]]:
        """One dict per (stage, candidate); a stage without candidates gives one row with rank None."""
        rows: list[dict[str, Any]] = []
        for i, s in enumerate(self.stages, start=1):
            base = {"step": i, "stage": s.stage, "name": s.name, "query": s.query, "ms": round(s.seconds * 1e3, 3), "detail": s.detail}
            if not s.candidates:
                rows.append({**base, "rank": None, "chunk_id": None, "library_id": None, "score": None})
            for c in s.candidates:
                rows.append({**base, "rank": c.rank, "chunk_id": c.chunk_id, "library_id": c.library_id, "score": c.score})
        return rows

    def format_table(self, *, per_stage: int = 5) -> str:
        """A plain-text table: each stage, its time, and its first ``per_stage`` candidates."""
        lines = [f"explain: {self.query!r}  ({self.seconds * 1e3:.2f} ms in stages)",
                 f"{'#':>2} {'stage':<16} {'name':<14} {'ms':>8} {'n':>5}  top candidates (rank chunk_id[:12]@library score)"]
        for i, s in enumerate(self.stages, start=1):
            top = "  ".join(f"{c.rank}:{c.chunk_id[:12]}@{c.library_id} {c.score:.4g}" for c in s.candidates[:per_stage])
            extra = f" [{s.detail}]" if s.detail else ""
            q = f" q={s.query!r}" if s.query and s.query != self.query else ""
            lines.append(f"{i:>2} {s.stage:<16} {s.name:<14} {s.seconds * 1e3:>8.3f} {len(s.candidates):>5}  {top}{q}{extra}")
        return "\n".join(lines)


@dataclass
class Tracer:
    """Collects :class:`StageTrace` records while a query runs (only when explaining).

    Stage code records unconditionally: when nobody explains, the tracer in effect is
    :data:`NULL_TRACER`, which records nothing. A record's ``candidates`` and ``detail`` may
    be given as functions of no argument (``lambda: hit_candidates(hits)``): they are
    called only by a tracer that records, so a query that is not explained builds no
    payload. ``clock()`` is the start time of a stage (0.0 when not recording) and
    ``enabled`` says whether this tracer records (a stage may take a shortcut that would
    leave a stage out of the trace only when it does not)."""

    stages: list[StageTrace] = field(default_factory=list)
    enabled: ClassVar[bool] = True

    def add(self, stage: str, name: str, seconds: float, candidates: Iterable[Candidate] | Callable[[], Iterable[Candidate]] = (),
            *, query: str = "", detail: str | Callable[[], str] = "") -> None:
        if callable(candidates):
            candidates = candidates()
        if callable(detail):
            detail = detail()
        self.stages.append(StageTrace(stage, name, seconds, tuple(candidates), query, detail))

    def clock(self) -> float:
        """Now (``time.perf_counter``), to time a stage with :meth:`since`."""
        return now()

    def since(self, t0: float) -> float:
        """Seconds since ``t0`` (from :meth:`clock`)."""
        return now() - t0

    def extend(self, explain: "Explain | None") -> None:
        if explain is not None:
            self.stages.extend(explain.stages)

    def freeze(self, query: str) -> Explain:
        return Explain(query, tuple(self.stages))


class NullTracer(Tracer):
    """The tracer in effect when nobody explains: records nothing, builds no payload."""

    enabled: ClassVar[bool] = False

    def add(self, stage: str, name: str, seconds: float, candidates: Iterable[Candidate] | Callable[[], Iterable[Candidate]] = (),
            *, query: str = "", detail: str | Callable[[], str] = "") -> None:
        return None

    def clock(self) -> float:
        return 0.0

    def since(self, t0: float) -> float:
        return 0.0

    def extend(self, explain: "Explain | None") -> None:
        return None


#: The one tracer that records nothing (the context's tracer when no trace is open).
NULL_TRACER = NullTracer()


def hit_candidates(hits: Sequence[Hit]) -> list[Candidate]:
    """Candidates of a hit list (rank from 1, the hit's score)."""
    return [Candidate(i, h.chunk_id, h.chunk.library_id, float(h.score), h.chunk.sensitivity) for i, h in enumerate(hits, start=1)]


now = time.perf_counter
