"""The step-output IO manager: the storage policy of Dagster's stored step outputs.

A ``DocumentSet`` is stored as a reference (no document text) and loads back whole; a
``ChunkUpdate`` is stored without RESTRICTED doc ids; a file from before this IO manager
(a plain pickle) is not loaded, and the error says what to re-materialize.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

dg = pytest.importorskip("dagster", reason="the IO manager needs the 'pipeline' extra")

from ragspine_index.artifacts import LibraryPaths  # noqa: E402
from ragspine_index.steps.chunks import ChunkUpdate  # noqa: E402
from ragspine_index.steps.documents import DocumentSet, load_documents  # noqa: E402
from ragspine_assets.io_manager import StepOutputIOManager  # noqa: E402
from ragspine_assets.partitions import LIBRARIES_PARTITION, libraries_partitions  # noqa: E402
from ragspine_core.errors import RagspineError  # noqa: E402
from tests.conftest import copy_sample_data  # noqa: E402

LIB = "sample"


@pytest.fixture()
def store(tmp_path):
    manager = StepOutputIOManager(base_dir=str(tmp_path / "io")).create_io_manager(dg.build_init_resource_context())
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(LIBRARIES_PARTITION, [LIB])

        def put(asset: str, value) -> Path:
            manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey(asset), partition_key=LIB,
                                                          asset_partitions_def=libraries_partitions,
                                                          instance=instance), value)
            return tmp_path / "io" / asset / LIB

        def get(asset: str):
            return manager.load_input(dg.build_input_context(asset_key=dg.AssetKey(asset), partition_key=LIB,
                                                             asset_partitions_def=libraries_partitions,
                                                             instance=instance))

        yield put, get


@pytest.fixture(scope="module")
def sample_documents(tmp_path_factory) -> DocumentSet:
    data = copy_sample_data(tmp_path_factory.mktemp("io") / "data")
    paths = LibraryPaths(LIB, data / "raw" / LIB, data / "artifacts" / LIB)
    return load_documents(paths.raw, LIB).save(paths)


def test_a_document_set_round_trips_whole_and_its_file_holds_no_document_text(store, sample_documents):
    put, get = store
    docs = sample_documents
    restricted = [d for d in docs.documents if d.sensitivity == "RESTRICTED"]
    assert restricted and len(docs.documents) == 46
    stored = put("documents", docs).read_bytes()
    loaded = get("documents")
    assert loaded == docs  # every field, every document (bodies, regions, extra metadata) equal
    assert [dataclasses.asdict(d) for d in loaded.documents] == [dataclasses.asdict(d) for d in docs.documents]
    for d in docs.documents:  # no body, and no RESTRICTED title or id, outside the library's folder
        assert d.body.encode("utf-8") not in stored
    for d in restricted:
        assert d.doc_id.encode() not in stored and d.title.encode() not in stored


def test_a_document_set_is_never_pickled_with_its_text(sample_documents):
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(sample_documents)
    unsaved = dataclasses.replace(sample_documents, saved_path="")
    with pytest.raises(RagspineError, match="not saved"):
        unsaved.reference()


def test_a_removed_documents_file_is_a_located_error(store, sample_documents, tmp_path):
    put, get = store
    moved = tmp_path / "elsewhere.json"
    Path(sample_documents.saved_path).rename(moved)
    try:
        put("documents", sample_documents)
        with pytest.raises(RagspineError, match="re-materialize the documents asset"):
            get("documents")
    finally:
        moved.rename(sample_documents.saved_path)


def _update(**changes) -> ChunkUpdate:
    base = dict(library_id=LIB, store_path="/x/chunks.sqlite", chunker="paragraph@1", added=("open-a", "secret-memo"),
                changed=("open-b",), removed=("secret-old",), unchanged=3, kept_on_error=(), rechunked_identical=0,
                chunks_written=9, n_active_chunks=12, n_active_docs=4, active_hash="ab" * 32,
                withdrawn_on_error=("secret-broken",), restricted=("secret-memo", "secret-old", "secret-broken"))
    return ChunkUpdate(**{**base, **changes})


def test_a_chunk_update_is_stored_without_restricted_doc_ids(store):
    put, get = store
    stored = put("chunks", _update()).read_bytes()
    assert b"secret" not in stored
    loaded = get("chunks")
    assert loaded == _update(added=("open-a",), removed=(), withdrawn_on_error=(), restricted=())


def test_other_values_round_trip_as_they_are(store):
    put, get = store
    put("bm25_index", {"directory": "/x/bm25", "stats": {"vocab_size": 7}})
    assert get("bm25_index") == {"directory": "/x/bm25", "stats": {"vocab_size": 7}}


@pytest.mark.parametrize("old", [pickle.dumps({"directory": "/x"}), b"\x80\x04\x95garbage"])
def test_an_output_stored_by_an_older_ragspine_asks_for_re_materialization(store, old):
    put, get = store
    path = put("bm25_index", {"directory": "/x"})
    path.write_bytes(old)  # what Dagster's filesystem IO manager wrote before (a plain pickle)
    with pytest.raises(RagspineError, match=r"of asset bm25_index, partition 'sample' was written by an older "
                                            r"ragspine .* re-materialize it"):
        get("bm25_index")


@pytest.mark.parametrize("value", [None, "not a reference"])
def test_a_documents_file_without_its_reference_is_a_located_error(store, value):
    put, get = store
    path = put("bm25_index", {"directory": "/x"})
    path.write_bytes(pickle.dumps({"format": "ragspine-step-output/1", "kind": "document_set", "value": value}))
    with pytest.raises(RagspineError, match=r"of asset bm25_index, partition 'sample' holds no document-set "
                                            r"reference; re-materialize it"):
        get("bm25_index")


def test_the_code_location_stores_step_outputs_through_it(tmp_path):
    from ragspine_assets.definitions import make_resources

    assert isinstance(make_resources({})["io_manager"], StepOutputIOManager)
    assert make_resources({"RAGSPINE_IO_DIR": str(tmp_path)})["io_manager"].base_dir == str(tmp_path)
