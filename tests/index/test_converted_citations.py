"""Citations of converted files point where the text is (issue 36): a chunk never spans two
sheets, slides or sections; table chunks are whole rows under their header row; no chunk
is only markup. Each chunk's cited sheet/cells, slide or section is re-extracted from the
original file (with openpyxl, python-pptx, python-docx, the standard HTML parser) and must
hold the chunk's words. The files are written in the test; no binary is committed."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from io import BytesIO
from pathlib import Path

import pytest

pytest.importorskip("openpyxl", reason="the 'formats' extra")
pytest.importorskip("pptx", reason="the 'formats' extra")
pytest.importorskip("docx", reason="the 'formats' extra")

from ragspine_index.chunking import build_chunks, make_chunker  # noqa: E402
from ragspine_index.converters import writers  # noqa: E402
from ragspine_index.converters.converted import slug  # noqa: E402
from ragspine_index.source_documents.parse_library import parse_library

REPO = Path(__file__).resolve().parents[2]
PRODUCTS = [["Product", "Units 2023", "Units 2024", "Growth", "Status"]] + [
    [f"Series {chr(65 + i % 26)}{i} motion controller", 100 + i, 120 + 2 * i, f"{(20 + i) % 9}%", "New" if i % 3 else "Legacy"]
    for i in range(60)]
TABLE_MD = "\n".join("| " + " | ".join(map(str, row)) + " |" + ("\n|---|---|---|---|---|" if i == 0 else "")
                     for i, row in enumerate(PRODUCTS))
SECTIONS = """# Fabrikam Annual Review

Fabrikam closed the year with revenue of EUR 910 million.

## Summary

Revenue rose 4% on storage demand.

## Regions

The Nordics grew fastest, at 11%, while Germany was flat.

## Product table

{table}

## Outlook

Management expects stable margins next year.
""".format(table=TABLE_MD)


def write_converted_library(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "figures.xlsx").write_bytes(writers.write_xlsx({
        "Summary": [["Metric", "Value"], ["Revenue", 910], ["Margin", "31%"]],
        "Regions": [["Region", "Revenue", "Growth"], ["Nordics", 140, "11%"], ["Germany", 260, "0%"]],
        "Products": PRODUCTS,
    }, title="Fabrikam figures"))
    (root / "deck.pptx").write_bytes(writers.write_pptx([
        ("Highlights", ["Revenue EUR 910 million", "Storage demand up"]),
        ("Regions", ["Nordics grew 11%", "Germany flat"]),
        ("Outlook", ["Stable margins expected"]),
    ], title="Fabrikam deck"))
    (root / "review.docx").write_bytes(writers.write_docx(SECTIONS, title="Fabrikam review"))
    (root / "site.html").write_bytes(writers.write_html(SECTIONS, title="Fabrikam site"))


# ------------------------------------------------------------------ re-extraction per format
def _words(text: str) -> set[str]:
    return {w.casefold() for w in re.findall(r"\w+", text)}


def _chunk_words(text: str) -> set[str]:
    """The chunk's words without the converters' markup (``## Sheet: X``, ``## Slide N:``)."""
    text = re.sub(r"(?m)^## Sheet: .*$", " ", text)
    text = re.sub(r"(?m)^## Slide \d+:?", " ", text)
    return _words(text)


def _xlsx_place(data: bytes, sheet: str, cells: str) -> str:
    import openpyxl

    book = openpyxl.load_workbook(BytesIO(data), read_only=False, data_only=True)
    return " ".join(str(c.value) for row in book[sheet][cells] for c in row if c.value is not None)


def _pptx_place(data: bytes, number: int) -> str:
    import pptx

    slide = pptx.Presentation(BytesIO(data)).slides[number - 1]
    return " ".join(s.text_frame.text for s in slide.shapes if s.has_text_frame)


def _docx_sections(data: bytes) -> dict[str, str]:
    import docx
    from docx.table import Table

    out: dict[str, str] = {}
    key = ""
    for block in docx.Document(BytesIO(data)).iter_inner_content():
        if isinstance(block, Table):
            out[key] = out.get(key, "") + " " + " ".join(c.text for row in block.rows for c in row.cells)
            continue
        if (block.style.name or "").startswith(("Heading", "Title")):
            key = slug(block.text)
        out[key] = out.get(key, "") + " " + block.text
    return out


class _HtmlSections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.out: dict[str, str] = {}
        self.key = ""
        self.heading: list[str] | None = None
        self.skip = False

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "title"):
            self.skip = True
        if re.fullmatch(r"h[1-6]", tag):
            self.heading = []

    def handle_endtag(self, tag):
        if tag in ("script", "title"):
            self.skip = False
        if re.fullmatch(r"h[1-6]", tag) and self.heading is not None:
            text = "".join(self.heading)
            self.key = slug(" ".join(text.split()))
            self.out[self.key] = self.out.get(self.key, "") + " " + text
            self.heading = None

    def handle_data(self, data):
        if self.skip:
            return
        if self.heading is not None:
            self.heading.append(data)
        else:
            self.out[self.key] = self.out.get(self.key, "") + " " + data


def cited_text(path: Path, location: dict[str, str]) -> str:
    """The text of the place a chunk's locator names, read again from the original file."""
    data = path.read_bytes()
    if not location:
        return ""  # cites no place at all
    if path.suffix == ".xlsx":
        return _xlsx_place(data, location["sheet"], location["cells"])
    if path.suffix == ".pptx":
        first, last = int(location["slide"]), int(location.get("end_slide", location["slide"]))
        return " ".join(_pptx_place(data, n) for n in range(first, last + 1))
    if path.suffix == ".docx":
        return _docx_sections(data).get(location.get("anchor", ""), "")
    if path.suffix == ".html":
        parser = _HtmlSections()
        parser.feed(data.decode("utf-8"))
        return parser.out.get(location.get("anchor", ""), "")
    raise AssertionError(path)


def check_library(root: Path, chunker_name: str = "paragraph") -> dict[str, int]:
    """Every chunk of every converted file of ``root``: its cited place holds its words;
    counts of chunks, misses, chunks without words, table chunks not under their header."""
    docs = [d for d in parse_library(root).documents if d.regions]
    counts = {"chunks": 0, "misses": 0, "wordless": 0, "table_without_header": 0, "torn_rows": 0}
    misses = []
    for doc in docs:
        path = root / doc.source_path
        for chunk in build_chunks(doc, make_chunker(chunker_name)):
            counts["chunks"] += 1
            if not re.search(r"\w", chunk.text):
                counts["wordless"] += 1
            if path.suffix in (".xlsx", ".pptx", ".docx", ".html"):
                missing = _chunk_words(chunk.text) - _words(cited_text(path, chunk.location))
                if missing:
                    counts["misses"] += 1
                    misses.append((doc.source_path, chunk.location, sorted(missing)[:5]))
            lines = chunk.text.split("\n")
            if any(ln.startswith("|") for ln in lines):
                rows = [ln for ln in lines if ln.startswith("|")]
                if any(not (ln.startswith("| ") or ln.startswith("|---")) or not ln.endswith("|") for ln in rows):
                    counts["torn_rows"] += 1
                first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
                if first + 1 >= len(lines) or not lines[first + 1].startswith("|---"):
                    counts["table_without_header"] += 1
    counts["miss_examples"] = misses[:3]  # type: ignore[assignment]
    return counts


@pytest.mark.parametrize("chunker", ["paragraph", "layout"])
def test_every_chunk_of_a_converted_library_is_where_it_cites(tmp_path, chunker):
    write_converted_library(tmp_path)
    got = check_library(tmp_path, chunker)
    assert got["chunks"] >= 15
    assert got["misses"] == 0, got["miss_examples"]
    assert got["wordless"] == 0 and got["torn_rows"] == 0 and got["table_without_header"] == 0, got


def test_no_chunk_spans_two_sheets_slides_or_sections(tmp_path):
    write_converted_library(tmp_path)
    docs = {d.source_path: d for d in parse_library(tmp_path).documents}
    chunks = {p: build_chunks(d, make_chunker("paragraph")) for p, d in docs.items()}
    nordics = [c for c in chunks["figures.xlsx"] if "Nordics" in c.text]
    assert [c.location["sheet"] for c in nordics] == ["Regions"]
    assert all("end_slide" not in c.location for c in chunks["deck.pptx"])
    assert sorted(c.location["slide"] for c in chunks["deck.pptx"]) == ["1", "2", "3"]  # one chunk per short slide
    for path in ("review.docx", "site.html"):
        by_anchor = {c.location.get("anchor") for c in chunks[path] if "Nordics" in c.text}
        assert by_anchor == {"regions"}, (path, by_anchor)
        outlook = [c for c in chunks[path] if "stable margins" in c.text]
        assert [c.location["anchor"] for c in outlook] == ["outlook"]
        assert not any("Nordics" in c.text and "Revenue rose" in c.text for c in chunks[path])


def test_the_sample_librarys_converted_files_cite_where_the_text_is():
    got = check_library(REPO / "data" / "raw" / "sample")
    assert got["chunks"] > 0 and got["misses"] == 0, got["miss_examples"]
    assert got["wordless"] == 0 and got["torn_rows"] == 0 and got["table_without_header"] == 0, got


def test_markdown_tables_repeat_their_header_per_row_group():
    from ragspine_index.converters.converted import TABLE_GROUP_CHARS, markdown_table

    table = markdown_table([[str(c) for c in row] for row in PRODUCTS], group_chars=TABLE_GROUP_CHARS)
    groups = table.split("\n\n")
    assert len(groups) > 1 and all(g.startswith("| Product |") and g.split("\n")[1].startswith("|---") for g in groups)
    assert all(len(g) <= TABLE_GROUP_CHARS for g in groups)
    assert markdown_table([["a", "b"], ["1", "2"]]) == "| a | b |\n|---|---|\n| 1 | 2 |"  # no grouping asked: as before
