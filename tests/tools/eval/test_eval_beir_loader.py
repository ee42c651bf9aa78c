"""The BEIR loader on tiny datasets written here, and on the shared datasets when present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine_core.errors import DatasetError, RagspineError
from ragspine_tools.eval.beir import (
    BeirDataset,
    BeirDoc,
    iter_corpus_jsonl,
    list_qrels_files,
    load_beir,
    read_qrels,
)

# tests/tools/eval/<this file> -> parents[3] is the repository root; shared/ sits beside it.
SHARED_DATASETS = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"

CORPUS = [
    {"_id": "d1", "title": "Alpha", "text": "first document"},
    {"_id": "d2", "title": "", "text": "second document"},
    {"_id": "d3", "text": "no title field at all"},
]
QUERIES = [
    {"_id": "10", "text": "query ten"},
    {"_id": "2", "text": "query two"},
    {"_id": "7", "text": "query seven, never judged"},
    {"_id": "x", "text": "query x"},
]


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def make_dataset(root: Path, qrels: dict[str, bytes] | None = None) -> Path:
    """Write a 3-document BEIR folder; ``qrels`` maps split name -> raw file bytes."""
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(_jsonl(CORPUS), encoding="utf-8")
    (root / "queries.jsonl").write_text(_jsonl(QUERIES), encoding="utf-8")
    if qrels is None:
        qrels = {"test": b"query-id\tcorpus-id\tscore\r\n10\td1\t1\r\n2\td2\t2\r\n2\td3\t0\r\nx\td1\t1\r\n"}
    for split, raw in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_bytes(raw)
    return root


def test_crlf_qrels_with_header_load_and_keep_only_judged_queries(tmp_path):
    ds = load_beir(make_dataset(tmp_path / "tiny"))
    assert isinstance(ds, BeirDataset)
    assert ds.name == "tiny" and ds.split == "test"
    assert ds.qrels == {"10": {"d1": 1}, "2": {"d2": 2, "d3": 0}, "x": {"d1": 1}}
    # Query 7 has no judgments in this split and is dropped; ids sort numerically first.
    assert ds.query_ids == ["2", "10", "x"]
    assert list(ds.iter_queries()) == [("2", "query two"), ("10", "query ten"), ("x", "query x")]
    assert ds.corpus["d1"] == BeirDoc("d1", "Alpha", "first document")
    assert ds.corpus["d3"].title == ""


def test_lf_qrels_without_header_separated_by_spaces(tmp_path):
    root = make_dataset(tmp_path / "d", {"test": b"10 d1 1\n2   d2 2\n\nx d1 1"})
    assert load_beir(root).qrels == {"10": {"d1": 1}, "2": {"d2": 2}, "x": {"d1": 1}}


def test_four_column_trec_qrels_are_accepted(tmp_path):
    root = make_dataset(tmp_path / "d", {"test": b"10 0 d1 1\n2 0 d2 3\n"})
    assert load_beir(root).qrels == {"10": {"d1": 1}, "2": {"d2": 3}}


def test_qrels_file_selects_another_split_and_list_qrels_files_names_them(tmp_path):
    root = make_dataset(
        tmp_path / "d",
        {"test": b"10\td1\t1\n", "test-monolingual": b"2\td2\t1\n", "train": b"x\td3\t1\n"},
    )
    assert list_qrels_files(root) == ["test", "test-monolingual", "train"]
    for name in ("test-monolingual", "test-monolingual.tsv"):
        ds = load_beir(root, qrels_file=name)
        assert ds.query_ids == ["2"]
        assert ds.qrels_path.name == "test-monolingual.tsv"
    assert load_beir(root, "train").query_ids == ["x"]


def test_missing_folder_says_which_files_are_expected(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError) as info:
        load_beir(missing)
    message = str(info.value)
    assert str(missing) in message
    for expected in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert expected in message
    assert isinstance(info.value, RagspineError)


def test_missing_corpus_file_names_the_path_and_what_the_folder_holds(tmp_path):
    root = make_dataset(tmp_path / "d")
    (root / "corpus.jsonl").unlink()
    with pytest.raises(DatasetError) as info:
        load_beir(root)
    message = str(info.value)
    assert str(root / "corpus.jsonl") in message
    assert "queries.jsonl" in message and "qrels/" in message


def test_missing_split_lists_the_available_ones(tmp_path):
    root = make_dataset(tmp_path / "d")
    with pytest.raises(DatasetError, match=r"dev\.tsv.*available splits: \['test'\]"):
        load_beir(root, "dev")


def test_missing_qrels_folder_is_reported_by_list_qrels_files(tmp_path):
    root = make_dataset(tmp_path / "d")
    for file in (root / "qrels").iterdir():
        file.unlink()
    (root / "qrels").rmdir()
    with pytest.raises(DatasetError, match="no qrels folder"):
        list_qrels_files(root)


@pytest.mark.parametrize(
    ("raw", "line", "why"),
    [
        (b"query-id\tcorpus-id\tscore\n10\td1\t1\n2\td2\n", 3, "expected 3 fields"),
        (b"10 d1 1\r\n2 d2 high\r\n", 2, "not an integer"),
        (b"10 d1 1\n10 d1 2\n", 2, "graded 2 here but 1 earlier"),
        (b"10 d1 1 extra junk\n", 1, "got 5"),
    ],
)
def test_malformed_qrels_line_is_reported_with_file_and_line(tmp_path, raw, line, why):
    root = make_dataset(tmp_path / "d", {"test": raw})
    with pytest.raises(DatasetError, match=why) as info:
        load_beir(root)
    assert f"test.tsv:{line}" in str(info.value)


def test_malformed_corpus_line_is_reported_with_file_and_line(tmp_path):
    root = make_dataset(tmp_path / "d")
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": \n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: not valid JSON"):
        load_beir(root)


def test_corpus_line_without_id_or_with_duplicate_id_is_refused(tmp_path):
    root = make_dataset(tmp_path / "d")
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: missing field '_id'"):
        load_beir(root)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="'d1' appears more than once"):
        load_beir(root)


def test_qrels_judging_an_unknown_query_is_refused(tmp_path):
    root = make_dataset(tmp_path / "d", {"test": b"10 d1 1\nghost d1 1\n"})
    with pytest.raises(DatasetError, match=r"not in .*queries\.jsonl.*'ghost'"):
        load_beir(root)


def test_iter_corpus_jsonl_streams_documents_lazily(tmp_path):
    path = tmp_path / "corpus.jsonl"
    # The third line is broken: a lazy reader hands out the first two before noticing.
    path.write_text(_jsonl(CORPUS[:2]) + "not json\n", encoding="utf-8")
    docs = iter_corpus_jsonl(path)
    assert next(docs).doc_id == "d1"
    assert next(docs).doc_id == "d2"
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:3"):
        next(docs)


def test_read_qrels_strips_carriage_returns_from_ids(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_bytes(b"query-id\tcorpus-id\tscore\r\nq\td\t1\r\n")
    assert read_qrels(path) == {"q": {"d": 1}}


# ------------------------------------------------------------------ shared datasets


def _shared(name: str) -> Path:
    path = SHARED_DATASETS / name
    if not path.is_dir():
        pytest.skip(f"shared dataset {name!r} not found at {path}; it lives in shared/datasets beside the repo")
    return path


def test_shared_scifact_has_the_published_sizes():
    root = _shared("scifact")
    test = load_beir(root, "test")
    train = load_beir(root, "train")
    assert len(test.corpus) == 5183
    assert len(test.queries) == 300
    assert len(train.queries) == 809
    # The shared test qrels use CRLF; no id may keep a stray carriage return.
    assert all("\r" not in q and all("\r" not in d for d in docs) for q, docs in test.qrels.items())
    assert all(doc in test.corpus for docs in test.qrels.values() for doc in docs)


@pytest.mark.parametrize(
    ("name", "split", "n_docs", "n_queries"),
    [
        ("xquad-zh-en", "test", 480, 2380),
        ("xquad-zh-en", "test-monolingual", 480, 2380),
        ("cmrc2018-retrieval", "test", 1104, 3219),
    ],
)
def test_other_shared_datasets_load_with_their_readme_sizes(name, split, n_docs, n_queries):
    ds = load_beir(_shared(name), qrels_file=split)
    assert (len(ds.corpus), len(ds.queries)) == (n_docs, n_queries)
