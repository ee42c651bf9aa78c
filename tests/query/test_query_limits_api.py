"""The query limits hold at every public entry (issue 43): the Python API refuses what the
CLI refuses — too long, too many words, no searchable text — quickly, with a clear error."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from ragspine_core.errors import QueryError
from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library
from ragspine_query import HybridRetriever, MultiIndexRetriever, open_library
from ragspine_query.agent_api import build_narrative_retriever
from ragspine_query.limits import MAX_QUERY_CHARS, MAX_QUERY_TERMS, check_query

from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("limits") / "data"
    raw = data / "raw" / "tiny"
    raw.mkdir(parents=True)
    for name in ("acme-cn-product-launch-2024.md", "acme-group-history-en.md"):
        shutil.copy2(REPO_ROOT / "data" / "raw" / "sample" / name, raw / name)
    paths = LibraryPaths("tiny", raw, data / "artifacts" / "tiny")
    build_library(paths, embedding="deterministic", cache_path=data / "cache" / "embeddings.sqlite")
    return paths.root


REFUSED = [
    ("revenue margin " * 70000, "more than the limit of 4,096"),  # the README's first Python example, grown
    ("\x00\x01\x02\x1b\x7f", "no searchable text"),
    ("\u200b\u200d\u2060 ?!… ¶", "no searchable text"),
    ("a " * (MAX_QUERY_TERMS + 1), f"more than the limit of {MAX_QUERY_TERMS:,}"),
    ("   \t\n", "the query is empty"),
]


@pytest.mark.parametrize("query,message", REFUSED)
def test_hybrid_retriever_search_refuses_what_the_cli_refuses(library, query, message):
    with open_library(library) as lib:
        retriever = HybridRetriever(lib, embedding_backend=None)
        t0 = time.perf_counter()
        with pytest.raises(QueryError, match=message):
            retriever.search(query)
        assert time.perf_counter() - t0 < 1.0  # refused before any work (was 155 s and +4.6 GB)
        with pytest.raises(QueryError, match=message):
            MultiIndexRetriever({"tiny": retriever}).search(query)
    with pytest.raises(QueryError, match=message):
        check_query(query)


def test_the_narrative_entry_and_the_cli_refuse_the_same(library, capsys):
    from ragspine_tools.cli import main as cli_main

    r = build_narrative_retriever(library, embedding_backend=None)
    with pytest.raises(QueryError, match="no searchable text"):
        r.retrieve("\x01\x02")
    assert cli_main(["query", str(library), "\x01\x02"]) == 2
    assert "no searchable text" in capsys.readouterr().err


def test_queries_within_the_limits_still_search(library):
    with open_library(library) as lib:
        retriever = HybridRetriever(lib, embedding_backend=None)
        assert retriever.search("Acme Group history", top_k=3)
        assert retriever.search("历史 Acme", top_k=3) is not None  # letters of any script are searchable
        long_ok = ("history " * (MAX_QUERY_CHARS // 8))[:MAX_QUERY_CHARS]
        assert len(long_ok) == MAX_QUERY_CHARS
        assert retriever.search(long_ok, top_k=3)  # at the character limit: accepted
