"""Property tests: every chunker keeps chunks honest substrings within budget, on any text."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine_index.chunking import (
    CHUNKER_NAMES,
    SENTENCE_ENDERS,
    build_chunks,
    chunk_text,
    make_chunk_id,
    make_chunker,
    paragraph_spans,
)
from ragspine_index.source_documents.model import SourceDocument

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_ASCII_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=14)
_CJK_RUN = st.text(alphabet="营收增长利润季度公司中国数据市场份额风险合规第一二三条章节", min_size=1, max_size=40)
# Long runs with no sentence ender and no whitespace: only the hard cut can split them.
_UNBROKEN = st.builds(lambda ch, n: ch * n, st.sampled_from(["x", "营", "7"]), st.integers(20, 300))
_SEPARATOR = st.sampled_from([" ", " ", " ", "\n", "\n\n", "\n \n", "\n\n\n", "\t", "\u3000", "\r\n"])
_ENDER = st.sampled_from([*SENTENCE_ENDERS, "。”", ".\"", "?!", "……", "3.5"])
_STRUCTURE = st.sampled_from(
    [
        "\n# Title\n",
        "\n## 小节标题\n\n",
        "\n第一条 ",
        "\n第十二条　",
        "\n第3款 ",
        "\n第一章 总则\n",
        "\nQ: what is it?\n",
        "\n问：为什么？\n",
        "\n1. Introduction\n",
        "\n1.2 Scope\n",
        "\n```\n# not a heading\n```\n",
        "\n---\n",
    ]
)
_FRAGMENT = st.one_of(_ASCII_WORD, _CJK_RUN, _SEPARATOR, _ENDER, _STRUCTURE, _UNBROKEN)
TEXTS = st.lists(_FRAGMENT, max_size=60).map("".join)


@st.composite
def budgets(draw) -> tuple[int, int]:
    max_chars = draw(st.integers(min_value=1, max_value=160))
    overlap = draw(st.integers(min_value=0, max_value=max_chars - 1))
    return max_chars, overlap


def _doc(body: str) -> SourceDocument:
    return SourceDocument.create(library_id="lib", doc_id="doc", body=body, source_path="doc.md", title="T")


@PROPERTY_SETTINGS
@given(text=TEXTS, budget=budgets())
def test_chunk_text_spans_are_trimmed_substrings_covering_every_visible_char(text, budget, chunk_invariants):
    max_chars, overlap = budget
    spans = chunk_text(text, max_chars=max_chars, overlap_chars=overlap)
    chunker = make_chunker("paragraph", max_chars=max_chars, overlap_chars=overlap)
    chunk_spans = chunker.split(text)
    assert [(s.start, s.end) for s in spans] == [(c.start, c.end) for c in chunk_spans]
    chunk_invariants(text, chunk_spans, max_chars)


@PROPERTY_SETTINGS
@given(text=TEXTS, budget=budgets())
def test_chunk_text_overlap_is_bounded_and_starts_strictly_advance(text, budget):
    max_chars, overlap = budget
    spans = chunk_text(text, max_chars=max_chars, overlap_chars=overlap)
    for prev, nxt in zip(spans, spans[1:]):
        assert nxt.start > prev.start
        assert nxt.end > prev.end
        assert prev.end - nxt.start <= overlap  # negative when they do not overlap at all


@PROPERTY_SETTINGS
@given(text=TEXTS, budget=budgets())
def test_sub_chunks_of_an_oversized_paragraph_never_overlap(text, budget):
    max_chars, overlap = budget
    spans = chunk_text(text, max_chars=max_chars, overlap_chars=overlap)
    for p_start, p_end in paragraph_spans(text):
        if p_end - p_start <= max_chars:
            continue
        inside = sorted((s.start, s.end) for s in spans if p_start <= s.start and s.end <= p_end)
        assert inside, "an oversized paragraph must be cut into sub-chunks"
        assert inside[0][0] == p_start and inside[-1][1] == p_end
        for (_, a_end), (b_start, _) in zip(inside, inside[1:]):
            assert a_end <= b_start


@PROPERTY_SETTINGS
@given(text=TEXTS, budget=budgets(), name=st.sampled_from(CHUNKER_NAMES))
def test_every_chunker_keeps_the_invariants(text, budget, name, chunk_invariants):
    max_chars, overlap = budget
    chunker = make_chunker(name, max_chars=max_chars, overlap_chars=overlap)
    spans = chunker.split(text)
    chunk_invariants(text, spans, max_chars)
    assert spans == chunker.split(text)


@PROPERTY_SETTINGS
@given(
    text=TEXTS,
    budget=budgets(),
    extra_parent=st.integers(0, 200),
    name=st.sampled_from(["parent_child", "qa"]),
)
def test_children_stay_inside_a_bounded_parent(text, budget, extra_parent, name, chunk_invariants):
    max_chars, overlap = budget
    parent_max = max_chars + extra_parent
    chunker = make_chunker(name, max_chars=max_chars, overlap_chars=overlap, parent_max_chars=parent_max)
    spans = chunker.split(text)
    chunk_invariants(text, spans, max_chars)
    for span in spans:
        assert span.parent_start >= 0
        assert span.parent_end - span.parent_start <= parent_max


@PROPERTY_SETTINGS
@given(text=TEXTS.filter(lambda t: t.strip()), budget=budgets(), name=st.sampled_from(CHUNKER_NAMES))
def test_chunk_ids_are_deterministic_and_unique(text, budget, name):
    max_chars, overlap = budget
    chunker = make_chunker(name, max_chars=max_chars, overlap_chars=overlap)
    doc = _doc(text)
    first = build_chunks(doc, chunker)
    again = build_chunks(_doc(text), make_chunker(name, max_chars=max_chars, overlap_chars=overlap))
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]
    assert len({c.chunk_id for c in first}) == len(first)
    assert [c.ordinal for c in first] == list(range(len(first)))
    for c in first:
        assert doc.body[c.start : c.end] == c.text
        if c.parent_id:
            assert c.parent_text and c.text in c.parent_text


@settings(max_examples=100, deadline=None)
@given(a=st.text(max_size=30), b=st.text(max_size=30), start=st.integers(0, 50), length=st.integers(0, 50))
def test_different_text_gives_a_different_chunk_id(a, b, start, length):
    make = lambda text: make_chunk_id("lib", "doc", "paragraph", start, start + length, text)  # noqa: E731
    assert (make(a) == make(b)) == (a == b)
