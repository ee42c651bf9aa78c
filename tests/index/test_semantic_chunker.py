"""The semantic chunker: honest spans on any text, cuts where the topic shifts, versioned by its embedder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_index.chunking import (
    CHUNKER_VERSIONS,
    DEFAULT_BREAKPOINT_PERCENTILE,
    LexicalEmbedder,
    SemanticChunker,
    build_chunks,
    chunker_signature,
    make_chunker,
)
from ragspine_index.source_documents.model import SourceDocument
from ragspine_core.dense.deterministic import DeterministicEmbeddingBackend

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_EN_WORD = st.sampled_from(
    ["the", "cell", "protein", "binds", "market", "shares", "fell", "river", "flood", "policy", "3.5%", "v1.2",
     "Dr.", "e.g.", "x" * 30])
_ZH_RUN = st.text(alphabet="营收增长利润季度公司中国数据市场份额风险合规蛋白质细胞结合河流洪水政策", min_size=1, max_size=30)
_SEP = st.sampled_from([" ", " ", "\n", "\n\n", "\n \n", "\t", "\u3000", "\r\n"])
_END = st.sampled_from(["。", "！", "？", "；", ". ", "! ", "? ", "; ", "。”", ".\" ", "……"])
_LONG = st.builds(lambda ch, n: ch * n, st.sampled_from(["y", "营"]), st.integers(50, 400))
TEXTS = st.lists(st.one_of(_EN_WORD, _ZH_RUN, _SEP, _END, _LONG), max_size=80).map("".join)


@st.composite
def settings_(draw) -> dict:
    max_chars = draw(st.integers(min_value=1, max_value=200))
    return {
        "max_chars": max_chars,
        "overlap_chars": draw(st.integers(min_value=0, max_value=max_chars - 1)),
        "breakpoint_percentile": draw(st.sampled_from([0, 5, 25.0, 50, 100])),
        "embed_window": draw(st.integers(1, 3)),
    }


def _embedders():
    return st.sampled_from([LexicalEmbedder(), _BackendEmbedder(DeterministicEmbeddingBackend(dim=32))])


class _BackendEmbedder:
    """A real embedding backend seen through the SentenceEmbedder protocol."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.model_id = backend.model_id

    def embed_sentences(self, texts):
        return self.backend.embed(list(texts))


@PROPERTY_SETTINGS
@given(text=TEXTS, params=settings_(), embedder=_embedders())
def test_every_chunk_is_the_exact_span_within_budget_covering_the_text(text, params, embedder, chunk_invariants):
    chunker = make_chunker("semantic", **params).with_embedder(embedder)
    spans = chunker.split(text)
    chunk_invariants(text, spans, params["max_chars"])  # substring, trimmed, <= max_chars, full coverage
    starts = [s.start for s in spans]
    ends = [s.end for s in spans]
    assert starts == sorted(set(starts)) and ends == sorted(set(ends)), "chunks advance strictly"
    for prev, nxt in zip(spans, spans[1:]):
        assert prev.end - nxt.start <= params["overlap_chars"]  # overlap never exceeds the budget
    assert spans == chunker.split(text), "same text, same spans"


@PROPERTY_SETTINGS
@given(text=TEXTS.filter(str.strip), params=settings_())
def test_chunk_records_are_deterministic_and_point_at_their_text(text, params):
    def build():
        doc = SourceDocument.create(library_id="lib", doc_id="d", body=text, source_path="d.md", title="T")
        return doc, build_chunks(doc, make_chunker("semantic", **params))

    doc, first = build()
    _, again = build()
    assert [(c.chunk_id, c.start, c.end) for c in first] == [(c.chunk_id, c.start, c.end) for c in again]
    for c in first:
        assert doc.body[c.start : c.end] == c.text
        assert (c.chunker, c.chunker_version) == ("semantic", chunker_signature(make_chunker("semantic", **params)))
        assert c.chunker_version.startswith("1+lexical-tfidf-v1-d1024")


# --------------------------------------------------------------------------- breakpoints

CELLS = [
    "Mitochondria produce ATP inside every eukaryotic cell.",
    "The mitochondria of a cell divide when the cell needs more ATP.",
    "Damaged mitochondria release signals that make the cell die.",
    "Cell biologists stain mitochondria to count them in each cell.",
]
RIVERS = [
    "The river flooded the valley after a week of heavy rain.",
    "Flood barriers along the river held back most of the water.",
    "Farmers in the valley lost crops when the river flood peaked.",
    "Engineers now model river flood risk for the whole valley.",
]
ZH_CELLS = ["线粒体为细胞提供能量。", "细胞中的线粒体会分裂。", "受损的线粒体导致细胞死亡。"]
ZH_RIVERS = ["河流在暴雨后淹没了山谷。", "河流的防洪堤挡住了洪水。", "山谷里的农民因洪水失去庄稼。"]


@pytest.mark.parametrize(
    ("first", "second", "joiner"),
    [(CELLS, RIVERS, " "), (ZH_CELLS, ZH_RIVERS, "")],
    ids=["english", "chinese"],
)
@pytest.mark.parametrize("embedder", [LexicalEmbedder(), _BackendEmbedder(DeterministicEmbeddingBackend(dim=256))],
                         ids=["lexical", "hashing-backend"])
def test_a_two_topic_document_is_cut_exactly_at_the_topic_shift(first, second, joiner, embedder):
    # one paragraph, well within the budget: the paragraph chunker returns it whole
    body = joiner.join(first + second)
    assert [s.text for s in make_chunker("paragraph").split(body)] == [body]
    chunker = SemanticChunker(max_chars=2000, overlap_chars=0, breakpoint_percentile=10, embed_window=2,
                              embedder=embedder)
    units = chunker.units(body)
    sims = chunker.gap_similarities(body, units)
    shift = len(first) - 1  # the gap between the last sentence of topic one and the first of topic two
    assert int(np.argmin(sims)) == shift, sims
    assert chunker.breakpoints(sims) == {shift}
    assert [s.text for s in chunker.split(body)] == [joiner.join(first), joiner.join(second)]


def test_percentile_zero_is_plain_sentence_packing_and_a_higher_percentile_cuts_more():
    body = " ".join(CELLS + RIVERS)
    packed = SemanticChunker(max_chars=130, overlap_chars=0, breakpoint_percentile=0).split(body)
    assert all(len(s.text) <= 130 for s in packed)
    # with no semantic cut, every chunk but the last is closed by the budget: the next sentence did not fit
    units = SemanticChunker(max_chars=130).units(body)
    for chunk in packed[:-1]:
        nxt = next(u for u in units if u[0] > chunk.end)
        assert nxt[1] - chunk.start > 130
    counts = [len(SemanticChunker(max_chars=2000, overlap_chars=0, breakpoint_percentile=p).split(body)) for p in (0, 30, 90)]
    assert counts[0] == 1 and counts[0] < counts[1] < counts[2]


def test_a_size_cut_overlaps_the_previous_chunk_but_a_topic_cut_does_not():
    body = " ".join(CELLS + RIVERS)
    chunker = SemanticChunker(max_chars=180, overlap_chars=70, breakpoint_percentile=10, embed_window=2)
    spans = chunker.split(body)
    river_start = body.index(RIVERS[0])
    assert any(s.start == river_start for s in spans), "the topic shift starts a chunk"
    assert all(s.end <= river_start or s.start >= river_start for s in spans), "no chunk straddles the shift"
    overlapping = [(a, b) for a, b in zip(spans, spans[1:]) if b.start < a.end]
    assert overlapping, "packed chunks closed by the budget overlap"
    for a, b in overlapping:
        assert a.end - b.start <= 70


def test_version_names_the_embedder_and_the_registry_lists_the_default():
    assert CHUNKER_VERSIONS["semantic"] == "1+lexical-tfidf-v1-d1024" == make_chunker("semantic").version
    bound = make_chunker("semantic").with_embedder(_BackendEmbedder(DeterministicEmbeddingBackend()))
    assert bound.version == "1+deterministic-hash-v1-d64"
    assert make_chunker("semantic").breakpoint_percentile == DEFAULT_BREAKPOINT_PERCENTILE
    # non-default settings are part of what the chunk store records and compares
    assert chunker_signature(make_chunker("semantic")) == "1+lexical-tfidf-v1-d1024"
    assert chunker_signature(make_chunker("semantic", breakpoint_percentile=30, embed_window=1)) == (
        "1+lexical-tfidf-v1-d1024;breakpoint_percentile=30,embed_window=1")


@pytest.mark.parametrize(
    ("params", "named"),
    [({"breakpoint_percentile": 101}, "breakpoint_percentile"), ({"breakpoint_percentile": True}, "breakpoint_percentile"),
     ({"breakpoint_percentile": "25"}, "'25'"), ({"embed_window": 0}, "embed_window"),
     ({"boundary_embedder": "bert"}, "library, lexical"), ({"max_chars": 10, "overlap_chars": 10}, "overlap_chars")],
)
def test_invalid_settings_raise_naming_the_value(params, named):
    with pytest.raises(ValueError, match=named):
        make_chunker("semantic", **params)


def test_lexical_embedder_rows_are_unit_or_zero_and_ignore_words_every_text_shares():
    vecs = LexicalEmbedder().embed_sentences(["the cell divides", "the river floods", "。。", "the cell grows"])
    norms = np.linalg.norm(vecs, axis=1)
    assert np.allclose(norms[[0, 1, 3]], 1.0, atol=1e-5) and norms[2] == 0.0
    assert vecs[0] @ vecs[3] > 0.3 > vecs[0] @ vecs[1]
