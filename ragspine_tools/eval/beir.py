"""Load an evaluation dataset laid out the BEIR way.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id corpus-id score``). The
qrels reader is deliberately forgiving about layout — CRLF or LF line endings, an
optional header line, tabs or runs of spaces, and the four-column TREC qrels form
(``qid iter docid rel``) — and strict about content: every malformed line is reported
with its ``file:line``. See Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark for
Zero-shot Evaluation of Information Retrieval Models".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragspine_core.errors import DatasetError

CORPUS_FILE = "corpus.jsonl"
#: A judged set whose corpus is a raw library folder (``library = "<path>"``, optional
#: ``glossary = "<path>"``, both relative to the set's folder) has this file instead of
#: ``corpus.jsonl``; ``ragspine eval`` ingests that folder as ``ragspine ingest`` does.
LIBRARY_FILE = "library.toml"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
QRELS_SUFFIX = ".tsv"

_HEADER_WORDS = ("query-id", "corpus-id", "score")


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document: its id, title (possibly empty), body text and sensitivity.

    ``sensitivity`` is the corpus line's optional ``sensitivity`` string exactly as
    written (``""`` when absent); the indexing pipeline validates it and fails closed.
    """

    doc_id: str
    title: str
    text: str
    sensitivity: str = ""


@dataclass(frozen=True, slots=True)
class BeirDataset:
    """A BEIR dataset restricted to the queries judged in one qrels split.

    ``queries`` and ``qrels`` hold exactly the same query ids: a query without
    judgments in the split is dropped on load. ``qrels`` maps query id → doc id →
    graded relevance (judged non-relevant documents keep their 0). Treat the mappings
    as read-only; use :attr:`query_ids` for a deterministic iteration order.
    """

    name: str
    root: Path
    split: str
    qrels_path: Path
    corpus: dict[str, BeirDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    @property
    def query_ids(self) -> list[str]:
        """The judged query ids, numeric ids in numeric order first, then the rest by string."""
        return sorted(self.queries, key=id_sort_key)

    def iter_queries(self) -> Iterator[tuple[str, str]]:
        """Yield ``(query_id, text)`` in :attr:`query_ids` order."""
        for query_id in self.query_ids:
            yield query_id, self.queries[query_id]


def id_sort_key(identifier: str) -> tuple[int, int, str]:
    """Sort key that orders ``"2"`` before ``"10"`` and stays total on any string.

    All-digit ids come first in numeric order (ties such as ``"01"``/``"1"`` broken by
    the string); every other id follows in plain string order.
    """
    if identifier.isascii() and identifier.isdigit():
        return (0, int(identifier), identifier)
    return (1, 0, identifier)


def _expected_layout(split_file: str) -> str:
    return (
        f"a BEIR dataset folder must contain {CORPUS_FILE} (_id, title, text), "
        f"{QUERIES_FILE} (_id, text) and {QRELS_DIR}/{split_file} "
        "(query-id corpus-id score)"
    )


def _describe_folder(folder: Path) -> str:
    try:
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    except OSError:
        return "it cannot be listed"
    return "it contains: " + (", ".join(names) if names else "nothing")


def list_qrels_files(root: str | Path) -> list[str]:
    """List the qrels splits of a BEIR folder, e.g. ``["test", "train"]``.

    Parameters:
        root: the dataset folder.

    Returns:
        The sorted stems of ``qrels/*.tsv``; each is a valid ``split``/``qrels_file``
        for :func:`load_beir`.

    Raises:
        DatasetError: ``root`` or its ``qrels/`` folder does not exist.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(
            f"BEIR dataset folder {str(root)!r} does not exist; point to a folder that "
            f"contains {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_DIR}/<split>.tsv"
        )
    qrels_dir = root / QRELS_DIR
    if not qrels_dir.is_dir():
        raise DatasetError(
            f"no qrels folder at {str(qrels_dir)!r} ({_describe_folder(root)}); "
            f"add {QRELS_DIR}/<split>.tsv files with lines 'query-id corpus-id score'"
        )
    return sorted(p.stem for p in qrels_dir.glob(f"*{QRELS_SUFFIX}") if p.is_file())


def _string_field(record: dict, key: str, where: str, *, required: bool) -> str:
    if key not in record:
        if required:
            raise DatasetError(
                f"{where}: missing field {key!r} (found {sorted(record)}); every line "
                f"needs {key!r}"
            )
        return ""
    value = record[key]
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise DatasetError(
            f"{where}: field {key!r} must be a string, got a JSON {type(value).__name__}; fix the line"
        )
    return value


def _iter_jsonl(path: Path) -> Iterator[tuple[str, dict]]:
    """Yield ``("file:line", record)`` for every non-blank line of a JSON-lines file."""
    try:
        # utf-8-sig tolerates a byte-order mark; text mode folds CRLF into LF.
        with path.open("r", encoding="utf-8-sig") as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{line_no}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(
                        f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                        "each line must be one JSON object"
                    ) from exc
                if not isinstance(record, dict):
                    raise DatasetError(
                        f"{where}: expected a JSON object, got {type(record).__name__}; "
                        "each line must be one JSON object"
                    )
                yield where, record
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 ({exc.reason}); re-encode the file as UTF-8") from exc


def iter_corpus_jsonl(path: str | Path) -> Iterator[BeirDoc]:
    """Stream the documents of a BEIR ``corpus.jsonl`` one at a time.

    Parameters:
        path: the ``corpus.jsonl`` file.

    Yields:
        One :class:`BeirDoc` per non-blank line; a missing ``title`` or ``sensitivity``
        reads as ``""``.

    Raises:
        DatasetError: the file is missing, or a line (named as ``file:line``) is not a
            JSON object with string ``_id`` and ``text``.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"corpus file {str(path)!r} does not exist; {_expected_layout('<split>.tsv')}"
        )
    for where, record in _iter_jsonl(path):
        for key in record:
            folded = "".join(ch for ch in str(key).casefold() if ch.isalnum())
            if folded == "sensitivity" and key != "sensitivity":
                raise DatasetError(
                    f"{where}: a key spelled like 'sensitivity' but not exactly 'sensitivity'; "
                    "write the key as sensitivity (a marking that is not parsed exactly is refused, never defaulted)"
                )
        yield BeirDoc(
            doc_id=_string_field(record, "_id", where, required=True),
            title=_string_field(record, "title", where, required=False),
            text=_string_field(record, "text", where, required=True),
            sensitivity=_string_field(record, "sensitivity", where, required=False),
        )


def _load_corpus(path: Path) -> dict[str, BeirDoc]:
    corpus: dict[str, BeirDoc] = {}
    for doc in iter_corpus_jsonl(path):
        if doc.doc_id in corpus:
            raise DatasetError(
                f"{path}: document id {doc.doc_id!r} appears more than once; "
                "document ids must be unique"
            )
        corpus[doc.doc_id] = doc
    return corpus


def _load_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for where, record in _iter_jsonl(path):
        query_id = _string_field(record, "_id", where, required=True)
        if query_id in queries:
            raise DatasetError(
                f"{where}: query id {query_id!r} appears more than once; "
                "query ids must be unique"
            )
        queries[query_id] = _string_field(record, "text", where, required=True)
    return queries


def _split_fields(line: str) -> list[str]:
    # Tab-separated files may carry spaces inside a field; otherwise any whitespace
    # run separates fields.
    if "\t" in line:
        return [field.strip() for field in line.split("\t")]
    return line.split()


def _is_header(fields: list[str]) -> bool:
    if tuple(f.lower() for f in fields[:3]) == _HEADER_WORDS:
        return True
    try:
        int(fields[-1])
    except ValueError:
        return True
    return False


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read one qrels file into query id → doc id → relevance.

    Accepts CRLF or LF line endings, an optional header on the first line, tabs or
    spaces between fields, and both ``qid docid rel`` and TREC's ``qid iter docid rel``.
    A pair listed twice with the same grade is kept once.

    Parameters:
        path: the qrels file.

    Raises:
        DatasetError: the file is missing, or a line (named as ``file:line``) has the
            wrong number of fields, a non-integer grade, or contradicts an earlier line.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(
            f"qrels file {str(path)!r} does not exist; expected lines "
            "'query-id corpus-id score'"
        )
    qrels: dict[str, dict[str, int]] = {}
    seen_content = False
    try:
        with path.open("r", encoding="utf-8-sig") as handle:
            for line_no, raw in enumerate(handle, start=1):
                line = raw.strip()
                if not line:
                    continue
                fields = _split_fields(line)
                where = f"{path}:{line_no}"
                first = not seen_content
                seen_content = True
                if first and len(fields) in (3, 4) and _is_header(fields):
                    continue
                if len(fields) == 3:
                    query_id, doc_id, grade = fields
                elif len(fields) == 4:
                    query_id, _iteration, doc_id, grade = fields
                else:
                    raise DatasetError(
                        f"{where}: expected 3 fields 'query-id corpus-id score' (or TREC's "
                        f"4 'qid iter docid rel'), got {len(fields)}: {line!r}; fix the line"
                    )
                if not query_id or not doc_id:
                    raise DatasetError(f"{where}: empty query or document id in {line!r}; fix the line")
                try:
                    relevance = int(grade)
                except ValueError:
                    raise DatasetError(
                        f"{where}: relevance {grade!r} is not an integer in {line!r}; "
                        "grades must be whole numbers such as 0, 1, 2"
                    ) from None
                judged = qrels.setdefault(query_id, {})
                previous = judged.get(doc_id)
                if previous is not None and previous != relevance:
                    raise DatasetError(
                        f"{where}: pair ({query_id!r}, {doc_id!r}) graded {relevance} here "
                        f"but {previous} earlier; keep one grade per pair"
                    )
                judged[doc_id] = relevance
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 ({exc.reason}); re-encode the file as UTF-8") from exc
    return qrels


def load_beir(root: str | Path, split: str = "test", *, qrels_file: str | None = None) -> BeirDataset:
    """Load a BEIR dataset folder, keeping only the queries judged in one split.

    Parameters:
        root: the dataset folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/``).
        split: the split name recorded on the result; also the qrels file stem unless
            ``qrels_file`` is given.
        qrels_file: another qrels file in ``qrels/``, with or without ``.tsv``
            (e.g. ``"test-monolingual"``).

    Returns:
        A :class:`BeirDataset` whose ``queries`` are exactly the ids in the qrels.

    Raises:
        DatasetError: the folder or a file is missing (the message lists the expected
            layout and what is there), a line is malformed (``file:line``), or the
            qrels judge a query id that ``queries.jsonl`` does not define.
    """
    root = Path(root)
    stem = qrels_file if qrels_file is not None else split
    if stem.endswith(QRELS_SUFFIX):
        stem = stem[: -len(QRELS_SUFFIX)]
    split_file = f"{stem}{QRELS_SUFFIX}"
    if not root.is_dir():
        raise DatasetError(
            f"BEIR dataset folder {str(root)!r} does not exist; {_expected_layout(split_file)}"
        )
    corpus_path = root / CORPUS_FILE
    queries_path = root / QUERIES_FILE
    qrels_path = root / QRELS_DIR / split_file
    library_set = (root / LIBRARY_FILE).is_file()
    for required in ((queries_path,) if library_set else (corpus_path, queries_path)):
        if not required.is_file():
            raise DatasetError(
                f"missing {str(required)!r} ({_describe_folder(root)}); {_expected_layout(split_file)}"
            )
    if not qrels_path.is_file():
        available = list_qrels_files(root)
        raise DatasetError(
            f"missing qrels file {str(qrels_path)!r}; available splits: "
            f"{available or 'none'}; pass one of them as split= or qrels_file=, "
            f"or add {QRELS_DIR}/{split_file}"
        )

    qrels = read_qrels(qrels_path)
    all_queries = _load_queries(queries_path)
    unknown = sorted((q for q in qrels if q not in all_queries), key=id_sort_key)
    if unknown:
        raise DatasetError(
            f"{qrels_path}: {len(unknown)} judged query ids are not in {queries_path} "
            f"(first: {unknown[:5]}); the qrels and queries files do not belong together"
        )
    queries = {query_id: all_queries[query_id] for query_id in sorted(qrels, key=id_sort_key)}
    return BeirDataset(
        name=root.name,
        root=root,
        split=stem if qrels_file is None else split,
        qrels_path=qrels_path,
        corpus={} if library_set else _load_corpus(corpus_path),
        queries=queries,
        qrels=qrels,
    )


def query_types(dataset_dir: Path) -> dict[str, str]:
    """Query id -> ``type`` (HotpotQA) or ``kind`` (the sample's judged set: same-language,
    cross-language, multi-hop) from ``queries.jsonl`` when the queries carry one, else {}."""
    path = dataset_dir / "queries.jsonl"
    out: dict[str, str] = {}
    if path.is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    q = json.loads(line)
                    kind = q.get("type") or q.get("kind")
                    if isinstance(kind, str) and kind:
                        out[str(q["_id"])] = kind
    return out
