"""Stage 1, ``documents``: parse and validate a library's raw files.

The step saves the parsed documents under the library's ``work/`` folder
(:meth:`DocumentSet.save`); between processes a set travels as :meth:`DocumentSet.reference`
(every field but the documents) and is read back with :meth:`DocumentSet.from_reference`.
Dagster's step-output IO manager (``ragspine_assets/io_manager.py``) stores only that
reference, so no RESTRICTED body or title is ever copied into ``DAGSTER_HOME``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ragspine_core.errors import DocumentError, RagspineError

from ragspine_index.artifacts import LibraryPaths, sha256_json, write_once
from ragspine_index.converters import converted_file
from ragspine_index.marking_scan import mentions_restricted
from ragspine_index.library_config import LibraryConfig, load_library_config
from ragspine_index.source_documents.parse_library import parse_library
from ragspine_index.source_documents.model import ParseResult, SourceDocument
from ragspine_index.step_api import CheckSpec, StepContext, StepResult, outcome

#: ``_library.toml`` keys added after libraries were first built: at their default they are
#: left out of :attr:`DocumentSet.config_id`, so those libraries keep their ids.
KEYS_OMITTED_AT_DEFAULT = ("ann_min_vectors", "graph_max_chunks", "graph_extractor", "relation_extractor")


@dataclass(frozen=True, slots=True)
class DocumentSet:
    """Parsed documents of one library plus everything that went wrong."""

    library_id: str
    raw_dir: str
    config: LibraryConfig
    documents: tuple[SourceDocument, ...]
    errors: tuple[str, ...]
    error_paths: tuple[str, ...]
    skipped: tuple[str, ...]
    #: Failing files that may now be RESTRICTED (a sensitivity error, or the word
    #: "restricted" anywhere in them): their previous chunks are withdrawn, not kept.
    withdraw_paths: tuple[str, ...] = ()
    #: Of those, the files whose sensitivity itself is in doubt (an error about sensitivity, or
    #: a marking word in them): no published snapshot serves their documents until a run reads
    #: them again (``publish.withhold_unclassified``). A converted file that merely fails to
    #: convert is withdrawn, but leaves the serving snapshot serving until the run publishes.
    doubt_paths: tuple[str, ...] = ()
    #: Set by :meth:`save`: the file the documents are read back from after pickling.
    saved_path: str = ""
    #: What the user should know about the walk (a format skipped for a missing extra).
    notes: tuple[str, ...] = ()

    @property
    def content_hash(self) -> str:
        return sha256_json([[d.doc_id, d.content_hash] for d in self.documents] + [self.config_id]
                           + [["withdraw", p] for p in self.withdraw_paths])

    @property
    def config_id(self) -> str:
        config = dataclasses.asdict(self.config)
        defaults = {f.name: f.default for f in dataclasses.fields(self.config)}
        for key in KEYS_OMITTED_AT_DEFAULT:  # ids of libraries from before these keys stay as they were
            if key in config and config[key] == defaults.get(key):
                config.pop(key)
        return json.dumps(config, sort_keys=True)

    # -- between processes: a reference, never the text --------------------------------
    def save(self, paths: LibraryPaths) -> "DocumentSet":
        """Write the parsed documents under the library's ``work/documents/`` and return the
        set with :attr:`saved_path` naming that file (content-addressed: written once)."""
        records = [{f.name: getattr(d, f.name) for f in dataclasses.fields(SourceDocument)} for d in self.documents]
        payload = json.dumps(records, ensure_ascii=False, sort_keys=True).encode("utf-8")
        target = paths.work_dir("documents", hashlib.sha256(payload).hexdigest())
        write_once(target, lambda tmp: (tmp / _DOCUMENTS_FILE).write_bytes(payload))
        return dataclasses.replace(self, saved_path=str(target / _DOCUMENTS_FILE))

    def reference(self) -> dict[str, Any]:
        """Every field but :attr:`documents`: what may be stored outside the library's folder.

        Raises:
            RagspineError: the set was never saved (:meth:`save`): its reference would lose
                the documents.
        """
        if not self.saved_path:
            raise RagspineError(
                f"the parsed documents of library {self.library_id!r} were not saved under the library "
                "(DocumentSet.save); a step output that holds document text is never stored")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "documents"}

    @classmethod
    def from_reference(cls, reference: Mapping[str, Any]) -> "DocumentSet":
        """The set of a :meth:`reference`, its documents read back from :attr:`saved_path`.

        Raises:
            RagspineError: the saved file is gone (the message says to re-materialize).
        """
        state = dict(reference)
        try:
            Path(state["saved_path"]).stat()  # a removed file is an error even when a copy is cached
            docs = _saved_documents(state["saved_path"])
        except OSError as exc:
            raise RagspineError(
                f"the parsed documents of library {state['library_id']!r} are gone ({exc.strerror}); "
                "re-materialize the documents asset") from exc
        return cls(documents=docs, **state)

    def __reduce__(self):
        """Refused: a set holds document text, RESTRICTED bodies included; what may be stored
        is its :meth:`reference` (Dagster's step-output IO manager stores exactly that)."""
        raise TypeError(
            f"a DocumentSet (library {self.library_id!r}) holds document text and is never pickled; store "
            "DocumentSet.reference() instead: give Dagster the io_manager of "
            "ragspine_assets.definitions.make_resources (StepOutputIOManager)")


_DOCUMENTS_FILE = "documents.json"


@functools.lru_cache(maxsize=1)
def _saved_documents(path: str) -> tuple[SourceDocument, ...]:
    """The documents of one saved file, read once per process.

    Every downstream step loads the ``documents`` output; in one process (the
    in-process executor) they would each re-read it: 6 x ~5 s at a million chunks. The
    file is content-addressed (its name is the hash of its bytes), so it never changes.
    """
    data = Path(path).read_bytes()
    folder = Path(path).parent
    if not hashlib.sha256(data).hexdigest().startswith(folder.name):  # named by the hash of its bytes
        from ragspine_index.artifacts import discard_work_output

        discard_work_output(folder)
        raise RagspineError(
            f"{path} changed after it was written (a damaged file): it was removed and is not read; "
            "re-materialize the documents asset (`ragspine ingest` of this library does)")
    records = json.loads(data)
    return tuple(SourceDocument(**{**r, "extra": tuple(tuple(p) for p in r["extra"]),
                                   "regions": tuple(tuple(g) for g in r.get("regions", ()))}) for r in records)


def load_documents(raw_dir: Path, library_id: str | None = None) -> DocumentSet:
    raw_dir = Path(raw_dir)
    config = load_library_config(raw_dir)
    result: ParseResult = parse_library(raw_dir, library_id)
    lib = library_id or raw_dir.name
    # one pass over the errors (a lookup per failing file was quadratic: 4k bad files took 213 s)
    fields_by_path: dict[str, set[str]] = {}
    for e in result.errors:
        fields_by_path.setdefault(_error_path(e, raw_dir), set()).add((e.field or "").casefold())
    error_paths = sorted(fields_by_path)
    reasons = {p: _withdraw_reason(raw_dir, p, fields_by_path[p]) for p in error_paths}
    return DocumentSet(
        library_id=lib,
        raw_dir=str(raw_dir),
        config=config,
        documents=tuple(result.documents),
        errors=tuple(str(e) for e in result.errors),
        error_paths=tuple(error_paths),
        skipped=tuple(result.skipped),
        withdraw_paths=tuple(p for p in error_paths if reasons[p]),
        doubt_paths=tuple(p for p in error_paths if reasons[p] in _DOUBT_REASONS),
        notes=tuple(result.notes),
    )


def _withdraw_reason(raw_dir: Path, rel: str, error_fields: set[str]) -> str | None:
    """Why a file that failed to parse could be trying to become RESTRICTED, or None:
    ``"sensitivity"`` (an error about its sensitivity), ``"converted"`` (a converted file:
    its text cannot be sniffed), ``"unreadable"`` or ``"marking"`` (a marking word in it).

    Fail closed: a converted file (PDF, DOCX, PPTX, XLSX, HTML, CSV, or a sidecar), a
    sensitivity error in the file, an unreadable file, or the word
    "restricted" anywhere in its text (after Unicode NFKC and case folding, with
    whitespace removed, so ``R E S T R I C T E D`` and full-width letters count; in
    UTF-8, UTF-16 or UTF-32, through JSON escapes and HTML references:
    :func:`~.marking_scan.mentions_restricted`) means yes. Any other broken file keeps its previous chunks (bad input loses nothing). Such a file's previously indexed chunks are withdrawn
    instead of kept serving under their old, lower sensitivity.
    """
    if error_fields & _SENSITIVITY_ERROR_FIELDS:  # the casefolded fields of the file's errors
        return "sensitivity"
    if converted_file(rel):
        return "converted"  # a PDF/DOCX/…: its text cannot be sniffed without converting it
    path = raw_dir / rel
    try:
        if path.is_symlink() or not path.is_file():
            return "unreadable"  # never follow a link (it may leave the library); unreadable: fail closed
        data = path.read_bytes()
    except OSError:
        return "unreadable"
    # any encoding, JSON escapes, invisible characters (marking_scan.py)
    return "marking" if mentions_restricted(data) else None


_SENSITIVITY_ERROR_FIELDS = frozenset({"sensitivity"})
#: The reasons that put a file's sensitivity itself in doubt (:attr:`DocumentSet.doubt_paths`).
_DOUBT_REASONS = frozenset({"sensitivity", "marking"})


def _error_path(err: DocumentError, raw_dir: Path) -> str:
    p = Path(str(err.path).split("#", 1)[0])
    try:
        return p.relative_to(raw_dir).as_posix()
    except ValueError:
        return p.as_posix()


# --------------------------------------------------------------------------------- step
PARSE_CLEANLY = CheckSpec("documents_parse_cleanly", blocking=False, severity="warn",
                          description="every file parsed (a bad file is reported, never fatal)")
DOCUMENTS_CHECKS = (PARSE_CLEANLY,)


def documents_step(ctx: StepContext) -> StepResult:
    """Parse the library folder; the result is saved under ``work/documents`` (its reference travels)."""
    paths = ctx.paths
    if not paths.raw.is_dir():
        raise RagspineError(
            f"library folder {paths.raw} does not exist; create it or remove the partition {paths.library_id!r}")
    docs = load_documents(paths.raw, paths.library_id).save(paths)
    ctx.log(f"parsed {len(docs.documents)} documents ({len(docs.errors)} errors)")
    for note in docs.notes:
        ctx.log(note)
    return StepResult(docs, (outcome(PARSE_CLEANLY, not docs.errors, {"errors": list(docs.errors), "count": len(docs.errors)},
                                     f"{len(docs.errors)} file(s) failed to parse"),))
