"""Availability cases of issue 37: a tiny workbook that declares an inflated sheet
dimension converts in well under a second, not in the whole time budget."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("openpyxl", reason="the 'formats' extra")

from ragspine_index.converters import writers  # noqa: E402
from ragspine_index.converters.converted import ConversionLimits  # noqa: E402
from ragspine_index.converters.xlsx import convert_xlsx  # noqa: E402
from tests.formats.marked import patch_zip  # noqa: E402


def test_an_inflated_declared_dimension_costs_no_time():
    data = writers.write_xlsx({"S": [["item", "amount"], ["cranes", 6]]})
    far = b'<row r="1048576"><c r="C1048576" t="inlineStr"><is><t>end</t></is></c></row></sheetData>'
    data = patch_zip(data, {"xl/worksheets/sheet1.xml": lambda c: c.replace(
        b'<dimension ref="A1:B2"/>', b'<dimension ref="A1:XFD1048576"/>').replace(b"</sheetData>", far)})
    assert len(data) < 8_000
    started = time.monotonic()
    converted = convert_xlsx(data, ConversionLimits(seconds=30))
    assert time.monotonic() - started < 5  # was: every one of 1,048,576 rows padded to 16,384 cells
    assert "| cranes | 6 |" in converted.text and "end" in converted.text


def test_the_converter_child_does_not_rerun_an_unguarded_calling_script(tmp_path):
    """A script without ``if __name__ == "__main__"`` that converts a file runs once: the
    forkserver child used to import (run) it again to rebuild its ``__main__``."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "page.html").write_bytes(writers.write_html("# Ports\n\nRotterdam is large.\n"))
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\nsys.path.insert(0, %r)\nprint('SCRIPT-RAN', flush=True)\n"
        "from ragspine_index.source_documents.parse_library import parse_library\n"
        "from ragspine_index.converters.isolation import ConverterProcess\n"
        "assert ConverterProcess.available()\n"
        "print('DOCS', len(parse_library(%r).documents), flush=True)\n" % (str(Path.cwd()), str(tmp_path / "lib")))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("SCRIPT-RAN") == 1 and "DOCS 1" in done.stdout
