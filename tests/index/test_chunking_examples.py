"""Constants, parameter errors and small golden examples for every chunker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragspine_index.chunking import (
    CHUNKER_NAMES,
    CHUNKER_VERSIONS,
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    SENTENCE_ENDERS,
    Chunker,
    ChunkSpan,
    build_chunks,
    chunk_text,
    chunker_signature,
    context_header,
    index_text,
    make_chunk_id,
    make_chunker,
    make_parent_id,
)
from ragspine_index.source_documents.model import SourceDocument
from ragspine_core.errors import ConfigError
from ragspine_core.records import Chunk

REPO_ROOT = Path(__file__).resolve().parents[2]


def _doc(body: str, **meta: str) -> SourceDocument:
    return SourceDocument.create(library_id="lib", doc_id="doc", body=body, source_path="doc.md", **meta)


def _pairs(spans: list[ChunkSpan]) -> list[tuple[str, str]]:
    return [(s.heading, s.text) for s in spans]


# --------------------------------------------------------------------------- constants and errors


def test_the_spec_constants():
    assert DEFAULT_CHUNK_CHARS == 480
    assert DEFAULT_OVERLAP_CHARS == 80
    assert SENTENCE_ENDERS == "。！？；.!?;"


def test_every_named_chunker_exists_with_a_version():
    assert set(CHUNKER_NAMES) == {"paragraph", "layout", "parent_child", "sentence_window", "laws", "qa", "book", "semantic"}
    for name in CHUNKER_NAMES:
        chunker = make_chunker(name)
        assert isinstance(chunker, Chunker)
        assert chunker.name == name
        assert chunker.version == CHUNKER_VERSIONS[name] and chunker.version
    assert make_chunker().name == "paragraph"


@pytest.mark.parametrize(
    ("max_chars", "overlap_chars", "named"),
    [(0, 0, "max_chars"), (-5, 0, "max_chars"), (100, -1, "overlap_chars"), (100, 100, "100"), (50, 80, "80")],
)
def test_invalid_budgets_raise_value_error_naming_the_value(max_chars, overlap_chars, named):
    with pytest.raises(ValueError, match=named):
        chunk_text("some text", max_chars=max_chars, overlap_chars=overlap_chars)
    for name in CHUNKER_NAMES:
        with pytest.raises(ValueError, match=named):
            make_chunker(name, max_chars=max_chars, overlap_chars=overlap_chars)


def test_non_integer_budget_is_rejected():
    with pytest.raises(ValueError, match="max_chars"):
        chunk_text("x", max_chars=4.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overlap_chars"):
        chunk_text("x", max_chars=10, overlap_chars=True)  # type: ignore[arg-type]


def test_unknown_chunker_or_parameter_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match="paragraph, layout"):
        make_chunker("topical")
    with pytest.raises(ConfigError, match="allowed parameters: max_chars, overlap_chars, breakpoint_percentile, embed_window, boundary_embedder$"):
        make_chunker("semantic", embedder=None)
    with pytest.raises(ConfigError, match="allowed parameters: max_chars, overlap_chars$"):
        make_chunker("layout", window=3)
    with pytest.raises(ValueError, match="parent_max_chars"):
        make_chunker("parent_child", max_chars=100, overlap_chars=10, parent_max_chars=50)
    with pytest.raises(ValueError, match="window"):
        make_chunker("sentence_window", window=-1)
    assert make_chunker(" Layout ").name == "layout"


def test_empty_and_whitespace_text_give_no_chunks():
    assert chunk_text("") == []
    for name in CHUNKER_NAMES:
        assert make_chunker(name).split(" \n\n\t\u3000\n") == []


# --------------------------------------------------------------------------- paragraph


def test_paragraphs_pack_with_overlap_that_starts_at_a_word():
    text = (
        "Alpha beta gamma.\n\nDelta epsilon zeta. Eta theta.\n\nIota kappa lambda mu.\n\n"
        "Nu xi omicron pi rho sigma tau upsilon phi chi psi omega and more words here."
    )
    spans = chunk_text(text, max_chars=40, overlap_chars=12)
    assert [text[s.start : s.end] for s in spans] == [
        "Alpha beta gamma.",
        "gamma.\n\nDelta epsilon zeta. Eta theta.",  # overlap: starts inside chunk 1, at a word
        "Eta theta.\n\nIota kappa lambda mu.",  # overlap: starts at a sentence
        "Nu xi omicron pi rho sigma tau upsilon p",  # oversized paragraph: hard cut, no overlap
        "hi chi psi omega and more words here.",
    ]


def test_small_document_is_one_chunk_and_text_is_byte_identical():
    text = "  第一段。\n\n第二段，包含 English.  \n"
    [span] = chunk_text(text)
    assert text[span.start : span.end] == "第一段。\n\n第二段，包含 English."


def test_oversized_paragraph_splits_at_sentence_enders_without_overlap():
    text = "第一句话很长很长。第二句话也很长！第三句呢？" + "没有句号的长串" * 3
    spans = chunk_text(text, max_chars=12, overlap_chars=4)
    parts = [text[s.start : s.end] for s in spans]
    assert parts[:3] == ["第一句话很长很长。", "第二句话也很长！", "第三句呢？"]
    assert "".join(parts) == text  # no overlap, nothing lost, hard-cut tail included
    assert all(len(p) <= 12 for p in parts)


def test_ascii_full_stop_inside_a_number_is_not_a_sentence_end():
    text = "Revenue grew 3.5% to 12.4bn. Margins held."
    spans = chunk_text(text, max_chars=30, overlap_chars=0)
    assert [text[s.start : s.end] for s in spans] == ["Revenue grew 3.5% to 12.4bn.", "Margins held."]


# --------------------------------------------------------------------------- structure-aware chunkers


LAW_TEXT = (
    "中华人民共和国示范法\n\n"
    "第一章 总则\n\n"
    "第一条 为了规范示范行为，制定本法。\n"
    "第二条 本法适用于中华人民共和国境内的示范活动。\n\n"
    "第3条 国家鼓励示范。\n"
    "第二章 附则\n"
    "第四条 本法自公布之日起施行。"
)


def test_laws_one_section_per_clause_with_its_marker_as_heading():
    spans = make_chunker("laws").split(LAW_TEXT)
    assert _pairs(spans) == [
        ("", "中华人民共和国示范法"),
        ("第一章 总则", "第一章 总则"),
        ("第一条", "第一条 为了规范示范行为，制定本法。"),
        ("第二条", "第二条 本法适用于中华人民共和国境内的示范活动。"),
        ("第3条", "第3条 国家鼓励示范。"),
        ("第二章 附则", "第二章 附则"),
        ("第四条", "第四条 本法自公布之日起施行。"),
    ]


def test_laws_clause_without_line_start_marker_is_not_a_section():
    text = "第一条 依照本法第三条的规定，第二条不适用。\n第二条 其他。"
    assert [s.heading for s in make_chunker("laws").split(text)] == ["第一条", "第二条"]


def test_laws_long_clause_is_sub_split_with_offsets_into_the_body(chunk_invariants):
    clause = "第一条 " + "本条规定了很多内容，" * 30 + "完。"
    text = "前言。\n" + clause + "\n第二条 短。"
    spans = make_chunker("laws", max_chars=60, overlap_chars=10).split(text)
    chunk_invariants(text, spans, 60)
    assert {s.heading for s in spans} == {"", "第一条", "第二条"}
    assert len([s for s in spans if s.heading == "第一条"]) > 1


QA_TEXT = (
    "Frequently asked questions\n\n"
    "Q: What is RAGSpine?\nA: A retrieval product.\n\nIt indexes documents offline.\n\n"
    "问：支持中文吗？\n答：支持。\n\n"
    "Does it need a GPU?\nNo."
)


def test_qa_pairs_each_question_with_its_answers_under_one_parent():
    spans = make_chunker("qa").split(QA_TEXT)
    assert _pairs(spans) == [
        ("", "Frequently asked questions"),
        ("Q: What is RAGSpine?", "Q: What is RAGSpine?\nA: A retrieval product.\n\nIt indexes documents offline."),
        ("问：支持中文吗？", "问：支持中文吗？\n答：支持。"),
        ("Does it need a GPU?", "Does it need a GPU?\nNo."),
    ]
    for span in spans:
        assert QA_TEXT[span.parent_start : span.parent_end] == span.text


def test_qa_long_answer_children_share_the_question_parent():
    answer = "\n\n".join(f"Answer paragraph number {i} explains one more detail." for i in range(6))
    text = f"Q: How does it work?\n{answer}\n\nQ: Anything else?\nNo."
    chunks = build_chunks(_doc(text), make_chunker("qa", max_chars=120, overlap_chars=20))
    first = [c for c in chunks if c.heading == "Q: How does it work?"]
    assert len(first) > 1
    assert len({c.parent_id for c in first}) == 1
    assert first[0].parent_text.startswith("Q: How does it work?") and first[0].parent_text.endswith("detail.")
    assert chunks[-1].parent_id != first[0].parent_id


BOOK_TEXT = (
    "第一章 起源\n\n很久以前。\n\n"
    "第一节 山\n\n山很高。\n\n"
    "# Part Two\n\nIntro text.\n\n"
    "1. Introduction\n\nBody one.\n\n"
    "1.2 Scope and limits\n\nBody two.\n\n"
    "1.5 million people live there."
)


def test_book_sections_at_chapters_markdown_and_numbered_headings():
    assert _pairs(make_chunker("book").split(BOOK_TEXT)) == [
        ("第一章 起源", "第一章 起源\n\n很久以前。"),
        ("第一节 山", "第一节 山\n\n山很高。"),
        ("Part Two", "# Part Two\n\nIntro text."),
        ("1. Introduction", "1. Introduction\n\nBody one."),
        # "1.5 million … there." ends a sentence: running text, not a heading
        ("1.2 Scope and limits", "1.2 Scope and limits\n\nBody two.\n\n1.5 million people live there."),
    ]


def test_layout_records_headings_and_ignores_fenced_code():
    text = "Preamble.\n\n# One\n\nText one.\n\n```\n# comment in code\n```\n\n## Two ##\n\nText two."
    assert _pairs(make_chunker("layout").split(text)) == [
        ("", "Preamble."),
        ("One", "# One\n\nText one.\n\n```\n# comment in code\n```"),
        ("Two", "## Two ##\n\nText two."),
    ]


def test_parent_child_children_point_at_their_section_parent(chunk_invariants):
    section_a = "# A\n\n" + "\n\n".join(f"Paragraph {i} of section A has some words." for i in range(5))
    text = section_a + "\n\n# B\n\nShort section."
    spans = make_chunker("parent_child", max_chars=100, overlap_chars=20).split(text)
    chunk_invariants(text, spans, 100)
    parents = {(s.parent_start, s.parent_end) for s in spans}
    assert parents == {(0, len(section_a)), (len(section_a) + 2, len(text))}
    assert {s.heading for s in spans} == {"A", "B"}


def test_sentence_window_parent_spans_two_sentences_each_side():
    text = "S1 one. S2 two. S3 three.\n\nS4 four. S5 five. S6 six."
    spans = make_chunker("sentence_window").split(text)
    assert [s.text for s in spans] == ["S1 one.", "S2 two.", "S3 three.", "S4 four.", "S5 five.", "S6 six."]
    windows = [text[s.parent_start : s.parent_end] for s in spans]
    assert windows[0] == "S1 one. S2 two. S3 three."
    assert windows[3] == "S2 two. S3 three.\n\nS4 four. S5 five. S6 six."
    assert windows[5] == "S4 four. S5 five. S6 six."


# --------------------------------------------------------------------------- ids, context, records


def test_chunk_id_is_sha256_of_an_unambiguous_encoding():
    base = make_chunk_id("lib", "doc", "paragraph", 0, 5, "hello")
    assert len(base) == 64 and int(base, 16) >= 0
    assert base == make_chunk_id("lib", "doc", "paragraph", 0, 5, "hello")
    variants = [
        make_chunk_id("lib2", "doc", "paragraph", 0, 5, "hello"),
        make_chunk_id("lib", "doc2", "paragraph", 0, 5, "hello"),
        make_chunk_id("lib", "doc", "layout", 0, 5, "hello"),
        make_chunk_id("lib", "doc", "paragraph", 1, 5, "hello"),
        make_chunk_id("lib", "doc", "paragraph", 0, 6, "hello"),
        make_chunk_id("lib", "doc", "paragraph", 0, 5, "hellp"),
        # shifting a separator between fields must not collide
        make_chunk_id("li", "bdoc", "paragraph", 0, 5, "hello"),
    ]
    assert len({base, *variants}) == len(variants) + 1
    # the chunker version is lineage, not identity: identical output keeps its id
    parent = make_parent_id("lib", "doc", 0, 5)
    assert parent == make_parent_id("lib", "doc", 0, 5) and parent != make_parent_id("lib", "doc", 0, 6)
    with pytest.raises(ValueError, match="start"):
        make_chunk_id("lib", "doc", "paragraph", 5, 2, "x")


def test_context_header_joins_non_empty_parts_in_order():
    doc = _doc("body", title="Acme Q1", entity="ACME", period="2024Q1")
    assert context_header(doc, "Outlook") == "Acme Q1 · ACME · 2024Q1 · Outlook"
    assert context_header(_doc("body", title="Acme Q1"), "") == "Acme Q1"
    assert context_header(doc, "Acme Q1") == "Acme Q1 · ACME · 2024Q1"  # a heading equal to the title adds nothing
    span = ChunkSpan(0, 4, "body", "Outlook")
    assert index_text(doc, span) == "Acme Q1 · ACME · 2024Q1 · Outlook\nbody"


def test_build_chunks_fills_every_field_and_keeps_text_byte_identical():
    body = "# Outlook\n\nRevenue rose.\n\nCosts fell."
    doc = SourceDocument.create(
        library_id="lib",
        doc_id="acme-q1",
        body=body,
        source_path="reports/acme-q1.md",
        title="Acme Q1",
        entity="ACME",
        topic="earnings",
        geography="US",
        period="2024Q1",
        language="en",
        sensitivity="public",
        valid_as_of="2024-04-01",
        extra={"author": "IR"},
    )
    chunker = make_chunker("parent_child", max_chars=20, overlap_chars=0)
    chunks = build_chunks(doc, chunker)
    assert all(isinstance(c, Chunk) for c in chunks)
    first = chunks[0]
    expected_id = make_chunk_id("lib", "acme-q1", "parent_child", first.start, first.end, first.text)
    assert first.chunk_id == expected_id
    assert (first.library_id, first.doc_id, first.ordinal) == ("lib", "acme-q1", 0)
    assert (first.title, first.entity, first.topic) == ("Acme Q1", "ACME", "earnings")
    assert (first.geography, first.period) == ("US", "2024Q1")
    assert (first.language, first.sensitivity, first.valid_as_of) == ("en", "PUBLIC", "2024-04-01")
    assert first.source_locator == "reports/acme-q1.md"
    assert (first.chunker, first.chunker_version, first.heading) == ("parent_child", chunker_signature(chunker), "Outlook")
    assert first.chunker_version == f"{chunker.version};max_chars=20,overlap_chars=0"  # settings are lineage too
    assert first.extra == (("author", "IR"),)
    assert first.parent_id == make_parent_id("lib", "acme-q1", 0, len(body))
    assert first.parent_text == body
    for c in chunks:
        assert body[c.start : c.end] == c.text
        assert c.index_text == f"Acme Q1 · ACME · 2024Q1 · Outlook\n{c.text}"
    plain = build_chunks(doc, chunker, contextual=False)
    assert [c.index_text for c in plain] == [c.text for c in plain]
    assert [c.chunk_id for c in plain] == [c.chunk_id for c in chunks]  # the header is not part of the id


def test_chunkers_without_parents_leave_parent_fields_empty():
    chunks = build_chunks(_doc("One.\n\nTwo."), make_chunker("layout"))
    assert [(c.parent_id, c.parent_text) for c in chunks] == [("", "")]


def test_build_chunks_rejects_a_chunker_that_breaks_the_substring_invariant():
    class Liar:
        name = "liar"
        version = "1"

        def chunk(self, doc):
            return [ChunkSpan(0, 3, "not")]

    with pytest.raises(ValueError, match="liar@1"):
        build_chunks(_doc("abcdef"), Liar())


def test_importing_the_build_modules_does_not_import_dagster():
    code = (
        "import sys\n"
        "import ragspine_index.source_documents.parse_library, ragspine_index.chunking\n"
        "assert 'dagster' not in sys.modules, 'dagster was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
