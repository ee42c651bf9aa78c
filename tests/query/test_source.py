"""The Source protocol (issue 39): both retrievers say which one-library retrievers are
behind them, and every stage that needs the libraries or channels of its source asks
:mod:`ragspine_query.source` instead of probing attributes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragspine_query.assessment import default_tier
from ragspine_query.cache import scope_of
from ragspine_query.filter_extraction import library_values
from ragspine_query.postprocess.mmr import VectorLookup
from ragspine_query.source import Source, channels_of, libraries_of, retrievers_of
from ragspine_query.tiers import available_channels

REPO_ROOT = Path(__file__).resolve().parents[2]


class SearchOnly:
    """A source with ``search`` and nothing behind it (a test double, a wrapper)."""

    def search(self, query, *, filters=None, top_k=10, include_restricted=True, explain=False):
        return []


@pytest.fixture(scope="module")
def sample_lib(tmp_path_factory):
    from ragspine_query.library import open_library
    from tests.query.qi_library import shared_sample

    with open_library(shared_sample(tmp_path_factory)) as lib:
        yield lib


def test_a_single_retriever_is_its_own_library_retriever(sample_lib):
    from ragspine_query.retriever import HybridRetriever

    r = HybridRetriever(sample_lib, embedding_backend=None)
    source: Source = r  # the protocol, checked by mypy where the floors are typed
    assert dict(source.library_retrievers) == {sample_lib.library_id: r}
    assert retrievers_of(r) == [r] and libraries_of(r) == [sample_lib]
    assert channels_of(r) == list(r.channels) and available_channels(r) == {c.name for c in r.channels}
    assert scope_of(r) == f"{sample_lib.library_id}@{sample_lib.snapshot_id}"
    assert default_tier(r) == default_tier(r.library_retrievers[sample_lib.library_id])
    assert set(VectorLookup.of_source(r).libraries) == {sample_lib.library_id}
    assert library_values(r)["entity"], "the sample's open rows name entities"


def test_a_multi_index_lists_its_retrievers_in_library_order(sample_lib):
    from ragspine_query.retriever import HybridRetriever, MultiIndexRetriever

    a = HybridRetriever(sample_lib, embedding_backend=None)
    b = HybridRetriever(sample_lib, embedding_backend=None)
    multi = MultiIndexRetriever({"zz": a, "aa": b})
    assert list(multi.library_retrievers) == ["aa", "zz"]
    assert retrievers_of(multi) == [b, a] and libraries_of(multi) == [sample_lib, sample_lib]
    assert channels_of(multi) == list(b.channels) + list(a.channels)
    assert available_channels(multi) == available_channels(a)
    assert scope_of(multi) == "+".join([f"{sample_lib.library_id}@{sample_lib.snapshot_id}"] * 2)


def test_a_source_with_nothing_behind_it_has_no_libraries():
    double = SearchOnly()
    assert retrievers_of(double) == [] and libraries_of(double) == [] and channels_of(double) == []
    assert available_channels(double) == frozenset()
    assert scope_of(double) == "SearchOnly"  # neither a retriever nor a wrapper of one
    assert VectorLookup.of_source(double).libraries == {}
    assert library_values(double) == {"entity": (), "period": (), "geography": ()}


def test_no_untyped_source_and_no_attribute_probing_in_the_serving_floor():
    """``source: Any`` and ``hasattr(…, "retrievers"/"library")`` are gone from the floors."""
    untyped, probes = [], []
    for package in ("ragspine_core", "ragspine_index", "ragspine_assets", "ragspine_query", "ragspine_tools"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "source: Any" in line:
                    untyped.append(f"{path.relative_to(REPO_ROOT)}:{n}")
                if re.search(r"hasattr\([^)]*[\"'](retrievers|library)[\"']\)", line):
                    probes.append(f"{path.relative_to(REPO_ROOT)}:{n}")
    assert untyped == [] and probes == [], (untyped, probes)
