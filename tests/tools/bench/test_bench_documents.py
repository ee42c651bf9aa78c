"""``ragspine bench --documents DIR`` (issue 38): per-format counts, word recall against an
independent extractor, ligature counts, on files generated here."""

from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("pypdf", reason="the 'formats' extra")
pytest.importorskip("pdfminer", reason="the 'formats' extra")
pytest.importorskip("reportlab", reason="writing test PDFs needs reportlab (the 'dev' extra)")

from ragspine_index.converters import writers  # noqa: E402
from tests.conftest import PYTHON, python_env  # noqa: E402
from tests.index.test_documents_as_users_have_them import ligature_pdf  # noqa: E402


def test_bench_documents_reports_each_format(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "lig.pdf").write_bytes(ligature_pdf([["The re\ufb01nery ran at full capacity all quarter.",
                                                  "Crude \ufb02ow was steady and the margins held."]]))
    (docs / "sub" / "memo.docx").write_bytes(writers.write_docx("# Memo\n\nThe crane order was signed in May "
                                                                "by the harbour board.\n"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj")
    (docs / "blank.docx").write_bytes(writers.write_docx(""))  # nothing to publish: counted apart in the bar
    (docs / "notes.bin").write_bytes(b"\x00\x01")
    (docs / "_hidden.pdf").write_bytes(b"ignored")
    proc = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "bench", "--documents", str(docs), "--json"],
                          capture_output=True, text=True, timeout=300, env=python_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    files = {f["path"]: f for f in report["files"]}
    assert set(files) == {"lig.pdf", "sub/memo.docx", "broken.pdf", "notes.bin", "blank.docx"}
    assert files["blank.docx"]["status"] == "errored" and files["blank.docx"]["field"] == "body"
    assert files["lig.pdf"]["status"] == "published" and files["lig.pdf"]["recall"] >= 0.9
    assert files["lig.pdf"]["left_in_text"] == 0 and files["lig.pdf"]["in_reference"] >= 2  # ﬁ and ﬂ normalised
    assert files["sub/memo.docx"]["recall"] == 1.0
    assert files["broken.pdf"]["status"] == "errored" and files["notes.bin"]["status"] == "skipped"
    pdf = next(s for s in report["formats"] if s["format"] == "pdf")
    assert (pdf["files"], pdf["published"], pdf["errored"]) == (2, 1, 1) and pdf["pages_per_s"] > 0
    table = subprocess.run([PYTHON, "-m", "ragspine_tools.cli", "bench", "--documents", str(docs)],
                           capture_output=True, text=True, timeout=300, env=python_env())
    assert "| pdf | 2 | 1 | 1 | 0 |" in table.stdout and "published 2 of 4 files of supported types" in table.stdout
    assert ("published 2 of 3 files with something to publish (66.7%; 1 errored files hold nothing to publish: "
            "1 no text at all, 0 pictures without text") in table.stdout
    assert "not published, with something to publish:\n- broken.pdf: " in table.stdout


def test_the_bar_counts_pictures_without_text_and_passwords_apart_and_lists_each_failure():
    from ragspine_index.converters.pdf import NO_TEXT
    from ragspine_tools.bench.bench_documents import FileResult, markdown, summarize

    rows = [FileResult("a.pdf", "pdf", "published"), FileResult("b.pdf", "pdf", "published"),
            FileResult("chart.pdf", "pdf", "errored", problem=f"{NO_TEXT}: none of its 1 page(s) ...", field="body"),
            FileResult("lock.pdf", "pdf", "errored", problem="is encrypted", field="encrypted"),
            FileResult("empty.docx", "docx", "errored", problem="has no text", field="body"),
            FileResult("scan.pdf", "pdf", "errored", problem="has no extractable text ... OCR read none", field="ocr"),
            FileResult("fuzz.docx", "docx", "errored", problem="is not a valid DOCX file", field="content")]
    table = markdown(summarize(rows), "docs")
    assert "published 2 of 7 files of supported types" in table
    assert ("published 2 of 4 files with something to publish (50.0%; 3 errored files hold nothing to publish: "
            "1 no text at all, 1 pictures without text (each with OCR's evidence in its problem), 1 need a password)"
            ) in table
    assert table.split("not published, with something to publish:\n")[1].split("\n\n")[0].splitlines() == [
        "- fuzz.docx: is not a valid DOCX file", "- scan.pdf: has no extractable text ... OCR read none"]


def test_odf_reference_reads_mixed_content_with_tails_and_space_elements():
    """ODF paragraphs hold mixed content: the reference must keep the text after a span or a
    ``<text:tab/>`` (it read ``t`` for "the quick" and "withtabs" for "with<tab/>tabs")."""
    import io
    import zipfile

    from ragspine_tools.bench.bench_documents import reference_text, words

    ns = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    content = (f'<?xml version="1.0"?><office:document-content {ns} '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"><office:body><office:text>'
               '<text:p>t<text:span>he</text:span> quick<text:s text:c="3"/>brown</text:p>'
               '<text:h>with<text:tab/>tabs<text:line-break/>and more</text:h>'
               '</office:text></office:body></office:document-content>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("content.xml", content)
    got = words(reference_text(buf.getvalue(), ".odt") or "")
    assert {"the", "quick", "brown", "with", "tabs", "and", "more"} <= got
    assert "withtabs" not in got and "t" not in got


def test_mail_epub_and_inline_html_references():
    """eml, EPUB and HTML have an independent reference; an inline element does not split a
    word (``<b>t</b>he`` is "the") while a block element does."""
    import io
    import zipfile

    from ragspine_tools.bench.bench_documents import reference_text, words

    eml = (b"Subject: Harbour crane order\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"
           b"--x\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe board signed in May.\r\n"
           b"--x\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nsecretword\r\n--x--\r\n")
    got = words(reference_text(eml, ".eml") or "")
    assert {"harbour", "crane", "order", "board", "signed", "may"} <= got and "secretword" not in got
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("OEBPS/ch1.xhtml", "<html><body><p><b>T</b>he crane</p><p>order</p></body></html>")
        archive.writestr("OEBPS/style.css", "p { color: red }")
    got = words(reference_text(buf.getvalue(), ".epub") or "")
    assert {"the", "crane", "order"} <= got and "t" not in got and "craneorder" not in got and "color" not in got
