"""What the assets share: the step context of an asset execution, its log and progress,
check specs and results, and the Markdown helpers of the UI metadata."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

import dagster as dg

from ragspine_core.dense.ann import AnnConfig
from ragspine_core.records import is_restricted  # noqa: F401  (re-exported for the assets)

from ragspine_assets.runs import TAG_RUN_HOST, UNFINISHED
from ragspine_assets.stale import STALE_ASSETS_KEY
from ragspine_index.pipeline import CODE_VERSIONS, Step
from ragspine_index.step_api import BlockingCheckError, Progress, StepContext, StepResult
from ragspine_index.locks import claim_library, release_library
from ragspine_index.repair import call_step
from ragspine_index.step_meter import measure_step

if TYPE_CHECKING:
    from ragspine_assets.progress import RateMeter
    from ragspine_assets.resources import RagspineConfig


#: Run tag ``ragspine ingest`` sets when its stderr is a terminal: steps echo their progress there.
TAG_PROGRESS = "ragspine/progress"
PROGRESS_TERMINAL = "terminal"

#: The context a step runs under: an asset's (the one-step assets of :mod:`.factory`) or an
#: op's (the steps of the ``chunk_embeddings`` graph in :mod:`.embeddings_fanout`). Dagster's
#: two context classes are unrelated types with the same ``run``/``log``/``instance``/
#: ``partition_key`` members, which is all this module reads.
ExecutionContext = dg.AssetExecutionContext | dg.OpExecutionContext


def step_log(context: ExecutionContext) -> tuple[Callable[[str], None], Callable[[Progress], None]]:
    """What a step reports through: ``(log, progress)``.

    ``log(message)`` writes to the run's log (``context.log``); ``progress(counts)`` writes
    its :class:`~ragspine_index.step_api.Progress` counts there with the rate and
    ETA of a :class:`~ragspine_assets.progress.RateMeter` started with the step. Both are
    echoed on stderr when the run is tagged :data:`TAG_PROGRESS` (an in-process
    ``ragspine ingest`` on a terminal).
    """
    from ragspine_assets.progress import RateMeter

    meter = RateMeter()
    try:
        echo = context.run.tags.get(TAG_PROGRESS) == PROGRESS_TERMINAL
        name = context.asset_key.to_user_string()
    except Exception:  # invoked directly in a test: no run, no tags
        echo, name = False, ""

    def log(message: str) -> None:
        context.log.info(message)
        if echo:
            print(f"  {name}: {message}", file=sys.stderr, flush=True)

    def progress(counts: Progress) -> None:
        log(progress_line(counts, meter))

    return log, progress


def progress_line(counts: Progress, meter: "RateMeter") -> str:
    """``"embedded 64/243 new texts (52.1/s, ETA 0:03)"``: the counts as reported, the rate
    and ETA from ``meter`` (started with the step)."""
    return f"{counts.what} {meter.describe(counts.done, counts.total, unit=counts.unit)}"


def run_id_of(context: ExecutionContext) -> str:
    """The run id, or ``""`` when an asset is invoked directly (no run) in a test."""
    try:
        return context.run.run_id
    except Exception:
        return ""


def withheld_note(count: int, noun: str) -> str:
    """The line that says how many RESTRICTED items a preview leaves out (never which)."""
    return f"{count} RESTRICTED {noun}{'' if count == 1 else 's'} withheld from this preview" if count else ""


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, limit: int = 10, note: str = "") -> dg.MetadataValue:
    """A small Markdown table for the UI (cells truncated, pipes escaped).

    Callers pass only rows that may be shown: never a RESTRICTED document's id, title or
    text (``note`` says how many were left out).
    """

    def cell(v: Any) -> str:
        s = str(v).replace("\n", " ").replace("|", "\\|")
        return s if len(s) <= 80 else s[:77] + "..."

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in list(rows)[:limit]]
    if len(rows) > limit:
        lines.append(f"\n… {len(rows) - limit} more")
    if note:
        lines.append(f"\n_{note}_")
    return dg.MetadataValue.md("\n".join(lines))


def md_list(items: Sequence[str], *, limit: int = 20) -> dg.MetadataValue:
    if not items:
        return dg.MetadataValue.md("_none_")
    body = "\n".join(f"- {i}" for i in list(items)[:limit])
    if len(items) > limit:
        body += f"\n- … {len(items) - limit} more"
    return dg.MetadataValue.md(body)


# ------------------------------------------------------------------ the step layer
def step_context(context: ExecutionContext, ragspine: "RagspineConfig", *, llm: bool = False) -> StepContext:
    """The plain step context of one asset execution (paths, run id, embedding backend…).

    ``llm``: the step may call the ``summarizer_llm`` resource (``make_llm``)."""
    paths = ragspine.library_paths(context.partition_key)
    claim_library(paths, run_id_of(context), run_unfinished=_run_unfinished(context), step=_step_name(context))
    log, progress = step_log(context)
    provider = ragspine.summarizer_llm if llm else None
    return StepContext(
        paths=paths, cache_path=ragspine.cache_dir() / "embeddings.sqlite", run_id=run_id_of(context),
        embedding=ragspine.embedding_spec(), glossary_path=ragspine.glossary_file(),
        keep=ragspine.keep_snapshots, code_versions=CODE_VERSIONS, log=log, report_progress=progress,
        ann=AnnConfig(min_vectors=ragspine.ann_min_vectors),
        make_llm=provider.make if provider is not None else None)


def _run_unfinished(context: ExecutionContext):
    """``run_id -> True (unfinished) / False (finished) / None (unknown)`` on the run's instance,
    for :func:`~ragspine_index.locks.claim_library` (one writer per library on every path)."""

    def unfinished(run_id: str) -> bool | None:
        try:
            run = context.instance.get_run_by_id(run_id)
        except Exception:  # no instance (a direct invocation in a test): unknown
            return None
        return None if run is None else run.status in UNFINISHED

    return unfinished


def _step_name(context: ExecutionContext) -> str:
    try:
        return str(context.op_def.name)
    except Exception:
        return ""


def check_specs(step: Step) -> list[dg.AssetCheckSpec]:
    """The Dagster asset checks of a step, from its declared :class:`CheckSpec` records."""
    return [dg.AssetCheckSpec(c.name, asset=step.name, blocking=c.blocking, description=c.description or None)
            for c in step.checks]


def check_results(result: StepResult) -> list[dg.AssetCheckResult]:
    """A step's check outcomes as Dagster check results (lists become Markdown lists)."""
    return [
        dg.AssetCheckResult(
            check_name=c.name, passed=c.passed,
            severity=dg.AssetCheckSeverity.WARN if c.severity == "warn" else dg.AssetCheckSeverity.ERROR,
            metadata={k: md_list(list(v)) if isinstance(v, (list, tuple)) else v for k, v in c.metadata.items()})
        for c in result.checks
    ]


#: Run tag: the machine the run's steps execute on (``ragspine_assets.runs`` judges only
#: runs of its own machine when it looks for killed ones).


def tag_run_host(context: ExecutionContext) -> None:
    try:
        import socket

        run = context.run
        if run.tags.get(TAG_RUN_HOST) != socket.gethostname():
            context.instance.add_run_tags(run.run_id, {TAG_RUN_HOST: socket.gethostname()})
    except Exception:  # invoked directly in a test (no run), or an instance that refuses tags: nothing to record
        pass


def run_asset_step(step: Step, context: ExecutionContext, ragspine: "RagspineConfig", *, llm: bool = False,
                   **inputs: Any) -> StepResult:
    """Call the asset's step; a failed pre-publication guard becomes a ``dg.Failure``."""
    tag_run_host(context)
    try:
        ctx = step_context(context, ragspine, llm=llm)  # claims the library for this run (locks.claim_library)
        with measure_step(step.name):  # `ragspine bench --ingest` (a no-op otherwise)
            result = call_step(step, ctx, inputs)  # names the step, locates SQLite damage
    except BlockingCheckError as exc:
        # stale upstream assets are named in the failure's metadata: stale_upstream_sensor
        # reads them from the event log and launches a run of exactly those (stale.py)
        stale = getattr(exc, "stale", ())
        raise dg.Failure(str(exc), metadata={STALE_ASSETS_KEY: ", ".join(stale)} if stale else None) from exc
    if step.name == "index_manifest":  # published: the run's writing is over
        release_library(ctx.paths, ctx.run_id)
    return result
