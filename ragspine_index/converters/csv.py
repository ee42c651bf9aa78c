"""CSV → one Markdown table (standard library, no extra); one region per row
(``cells=A5:F5``, counting the header as row 1). UTF-8, or UTF-16/32 when the file
starts with its byte-order mark (Excel's "Unicode Text" export); the delimiter is
sniffed among ``,``, ``;``, tab and ``|``."""

from __future__ import annotations

import csv as _csv
import io

from ragspine_index.converters.converted import CellBudget, ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, cell_text, TABLE_GROUP_CHARS

VERSION = "3"  # 2: tables in groups of whole rows under their header (issue 36); 3: + normalised text (issue 38)
EXTRA_MODULE = ""  # the standard library


def convert_csv(data: bytes, limits: ConversionLimits) -> Converted:
    from ragspine_index.source_documents.encoding import bom_codec

    codec, name, skip = bom_codec(data) or ("utf-8", "UTF-8", 0)
    try:
        source = data[skip:].decode(codec).removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConversionError(f"is not valid {name} at byte offset {exc.start + skip} ({exc.reason})",
                              "re-save it as UTF-8 CSV", field="encoding") from exc
    if "\x00" in source[:8192]:
        raise ConversionError("looks like a binary file (NUL byte)", "export it as UTF-8 CSV", field="content")
    try:
        dialect = _csv.Sniffer().sniff(source[:8192], delimiters=",;\t|")
    except _csv.Error:
        dialect = _csv.excel
    deadline = Deadline(limits.seconds)
    rows: list[tuple[int, list[str]]] = []
    budget = CellBudget(limits, "split the file")
    try:
        for r, values in enumerate(_csv.reader(io.StringIO(source), dialect), start=1):
            if r % 1000 == 0:
                deadline.check(f"row {r}")
            texts = budget.row([cell_text(v) for v in values])
            if texts:
                rows.append((r, texts))
    except _csv.Error as exc:
        raise ConversionError(f"is not valid CSV ({exc})", "fix the quoting, or re-export it", field="content") from exc
    if not rows:
        raise ConversionError("has no values", "add data, or remove it from the library", field="body")
    out = TextBuilder(limits)
    out.add_table(rows, split_hint="split the file", group_chars=TABLE_GROUP_CHARS)
    return Converted(text=out.text(), regions=tuple(out.regions))
