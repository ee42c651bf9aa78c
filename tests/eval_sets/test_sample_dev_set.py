"""The judged development set for the sample library (``data/eval/sample``) is well formed.

The set is judged by hand against ``data/raw/sample``; these checks keep it consistent with
the library as the product parses it (``parse_library``) and with the security rules:
no judged document is RESTRICTED or about a competitor, and no question names a competitor
(the product's own :class:`CompetitorGate` would refuse it before retrieval).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragspine_index.source_documents.parse_library import parse_library
from ragspine_tools.eval.beir import read_qrels
from ragspine_core.gate import CompetitorGate
from ragspine_core.glossary import Glossary
from tests.conftest import REPO_ROOT, RESTRICTED_MARKERS

SET_DIR = REPO_ROOT / "data" / "eval" / "sample"
LIBRARY_DIR = REPO_ROOT / "data" / "raw" / "sample"
GLOSSARY_PATH = REPO_ROOT / "data" / "glossary.toml"
HEADER = "query-id\tcorpus-id\tscore"
KINDS = {"same-language": "dev-same", "cross-language": "dev-cross", "multi-hop": "dev-multihop"}
PREFIX = {"same-language": ("en-", "zh-"), "cross-language": ("xl-",), "multi-hop": ("mh-",)}
CJK = re.compile(r"[\u3400-\u9fff]")
#: Floors the set promises in its README (issue 23 asks for at least 60 judged questions).
MINIMUM = {"same-language": 40, "cross-language": 14, "multi-hop": 14}
MINIMUM_UNANSWERABLE = 20


def _jsonl(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        assert line.strip(), f"{path.name}:{n}: blank line"
        rows.append(json.loads(line))
    return rows


@pytest.fixture(scope="module")
def queries() -> dict[str, dict]:
    rows = _jsonl(SET_DIR / "queries.jsonl")
    ids = [r["_id"] for r in rows]
    assert len(ids) == len(set(ids)), [i for i, c in Counter(ids).items() if c > 1]
    return {r["_id"]: r for r in rows}


@pytest.fixture(scope="module")
def unanswerable() -> list[dict]:
    return _jsonl(SET_DIR / "unanswerable.jsonl")


@pytest.fixture(scope="module")
def qrels() -> dict[str, dict[str, int]]:
    return read_qrels(SET_DIR / "qrels" / "dev.tsv")


@dataclass(frozen=True)
class _Doc:
    """What the checks need of a parsed document. Bodies are not kept, so a failing
    assertion can never print RESTRICTED text; a RESTRICTED document keeps no title."""

    language: str
    sensitivity: str
    entity: str
    title: str


@pytest.fixture(scope="module")
def library() -> dict[str, _Doc]:
    result = parse_library(LIBRARY_DIR, library_id="sample")
    assert result.ok, [str(e) for e in result.errors]
    return {
        d.doc_id: _Doc(d.language, d.sensitivity, d.entity, "" if d.sensitivity == "RESTRICTED" else d.title)
        for d in result.documents
    }


@pytest.fixture(scope="module")
def gate() -> CompetitorGate:
    return CompetitorGate(Glossary.load(GLOSSARY_PATH))


def test_queries_have_the_documented_fields_kinds_and_languages(queries):
    for qid, q in queries.items():
        assert set(q) == {"_id", "text", "lang", "kind"}, qid
        assert q["kind"] in KINDS, qid
        assert qid.startswith(PREFIX[q["kind"]]), f"{qid}: id prefix does not match kind {q['kind']}"
        if q["kind"] == "same-language":
            assert q["lang"] == qid[:2], f"{qid}: en-/zh- ids carry their language"
        assert q["lang"] in ("en", "zh"), qid
        has_cjk = bool(CJK.search(q["text"]))
        assert has_cjk == (q["lang"] == "zh"), f"{qid}: text script does not match lang {q['lang']}"
        assert q["text"].strip() == q["text"] and len(q["text"]) >= 8, qid
    counts = Counter(q["kind"] for q in queries.values())
    for kind, floor in MINIMUM.items():
        assert counts[kind] >= floor, (kind, counts[kind])
    assert len(queries) >= 60


def test_every_qrels_file_has_the_header_and_integer_grades_1_or_2():
    for name in ["dev", *KINDS.values()]:
        lines = (SET_DIR / "qrels" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()
        assert lines[0] == HEADER, name
        for n, line in enumerate(lines[1:], start=2):
            qid, doc_id, score = line.split("\t")
            assert score in ("1", "2"), f"{name}.tsv:{n}"


def test_subset_files_partition_dev_by_kind(queries, qrels):
    assert set(qrels) == set(queries), "every query is judged and every judged query exists"
    merged: dict[str, dict[str, int]] = {}
    for kind, name in KINDS.items():
        part = read_qrels(SET_DIR / "qrels" / f"{name}.tsv")
        assert {queries[q]["kind"] for q in part} == {kind}, name
        assert set(part) == {q for q, r in queries.items() if r["kind"] == kind}, name
        assert not set(part) & set(merged)
        merged.update(part)
    assert merged == qrels


def test_judged_documents_exist_and_are_never_restricted_or_competitor(qrels, library, gate):
    restricted = {d for d, doc in library.items() if doc.sensitivity == "RESTRICTED"}
    assert restricted == set(RESTRICTED_MARKERS), "the sample's RESTRICTED documents changed; re-judge the set"
    competitor_ids = set(Glossary.load(GLOSSARY_PATH).competitors())
    assert competitor_ids, "the glossary names competitors"
    for qid, rels in qrels.items():
        for doc_id in rels:
            doc = library.get(doc_id)
            assert doc is not None, f"{qid}: {doc_id!r} is not a document of data/raw/sample"
            assert doc.sensitivity != "RESTRICTED", f"{qid}: judges a RESTRICTED document"
            assert doc.entity not in competitor_ids, f"{qid}: judges competitor document {doc_id}"
            assert not gate.competitors_in(doc.title), f"{qid}: judges {doc_id}, whose title names a competitor"


def test_no_question_names_a_competitor(queries, unanswerable, gate):
    assert gate.active
    for row in [*queries.values(), *unanswerable]:
        assert not gate.competitors_in(row["text"]), f"{row['_id']} would be refused by the competitor gate"


def test_answers_sit_where_each_kind_says(queries, qrels, library):
    for qid, q in queries.items():
        answers = sorted(d for d, s in qrels[qid].items() if s == 2)
        assert answers, f"{qid}: no document answers it (grade 2)"
        langs = {library[d].language for d in answers}
        if q["kind"] == "same-language":
            assert q["lang"] in langs, f"{qid}: no answer in the question's language"
        elif q["kind"] == "cross-language":
            assert q["lang"] not in langs, f"{qid}: an answer is in the question's own language"
        else:
            assert len(answers) >= 2, f"{qid}: a multi-hop question needs two answering documents"


def test_unanswerable_questions_are_separate_and_unjudged(queries, unanswerable, qrels):
    ids = [u["_id"] for u in unanswerable]
    assert len(ids) == len(set(ids)) >= MINIMUM_UNANSWERABLE
    texts = {q["text"] for q in queries.values()}
    for u in unanswerable:
        assert set(u) == {"_id", "text", "lang"}, u["_id"]
        assert u["_id"].startswith("un-") and u["_id"] not in qrels and u["_id"] not in queries
        assert u["lang"] in ("en", "zh") and bool(CJK.search(u["text"])) == (u["lang"] == "zh"), u["_id"]
        assert u["text"] not in texts, u["_id"]
