"""XLSX → text with openpyxl (MIT), read-only and values only: one ``## Sheet: <name>``
section per sheet holding its rows as a Markdown table; one region per row
(``sheet=<name>&cells=A5:F5``), so a chunk cites the sheet and cell range it quotes.

Formulas are never evaluated (the value Excel cached is read), macros (``.xlsm``) and
external links are never run or followed. A workbook past ``max_cells`` non-empty cells
is an error (a huge sheet is not a document). Print headers/footers and text in drawings
are read for a sensitivity marking (:mod:`.markings`).
"""

from __future__ import annotations

from io import BytesIO

from ragspine_index.converters.converted import CellBudget, ConversionError, ConversionLimits, Converted, Deadline, TextBuilder, cell_text, check_zip, TABLE_GROUP_CHARS
from ragspine_index.converters.markings import xlsx_marking_lines
from ragspine_index.converters.ooxml import package_properties
from ragspine_index.converters.regions import region_fragment

VERSION = "3"  # 2: tables in whole-row groups under their header (issue 36); 3: + normalised text (issue 38)
EXTRA_MODULE = "openpyxl"


def convert_xlsx(data: bytes, limits: ConversionLimits) -> Converted:
    import openpyxl

    check_zip(data, limits, "XLSX")
    deadline = Deadline(limits.seconds)
    try:
        workbook = openpyxl.load_workbook(BytesIO(data), read_only=True, data_only=True, keep_links=False)
    except Exception as exc:  # noqa: BLE001 - openpyxl raises many types for a damaged package
        if _refused_xml(exc):  # openpyxl parses with defusedxml: an entity declaration is refused
            raise ConversionError(f"declares XML entities in a part ({_refused_xml(exc)}: an entity-expansion "
                                  "'XML bomb'?), refused, never expanded",
                                  "re-save it from Excel (Excel never writes entity declarations)") from exc
        raise ConversionError(f"cannot be read as XLSX ({type(exc).__name__}; damaged, or not a workbook?)",
                              "re-save it from Excel as .xlsx") from exc
    out = TextBuilder(limits)
    budget = CellBudget(limits, "split the workbook, or export the part to index as CSV")
    try:
        for sheet in workbook.worksheets:
            deadline.check(f"sheet {sheet.title!r}" if sheet.title.isidentifier() else "a sheet")
            # the declared <dimension> is not trusted: an inflated one (A1:XFD1048576 in a 4 KB
            # file) would pad every row to 16,384 cells
            sheet.reset_dimensions()
            rows: list[tuple[int, list[str]]] = []
            for r, values in enumerate(sheet.iter_rows(values_only=True), start=1):
                if r % 1000 == 0:
                    deadline.check(f"row {r}")
                texts = budget.row([cell_text(v) for v in values])
                if texts:
                    rows.append((r, texts))
            _add_sheet(out, sheet.title, rows)
    finally:
        workbook.close()
    if not out.text().strip():
        raise ConversionError("has no values in any sheet", "add data, or remove it from the library", field="body")
    props = package_properties(data)
    return Converted(text=out.text(), regions=tuple(out.regions), properties=props,
                     marking_lines=xlsx_marking_lines(data), title=next((v for k, v in props if k == "title"), ""))


def _refused_xml(exc: BaseException) -> str:
    """The name of the defusedxml refusal behind ``exc`` (openpyxl wraps it in a ValueError), or ""."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if type(seen).__module__.startswith("defusedxml"):
            return type(seen).__name__
        seen = seen.__cause__ or seen.__context__
    return ""


def _add_sheet(out: TextBuilder, name: str, rows: list[tuple[int, list[str]]]) -> None:
    if not rows:
        return
    out.add(f"## Sheet: {' '.join(name.split())}")
    out.add_table(rows, fragment=region_fragment("sheet", name), split_hint="split the workbook", group_chars=TABLE_GROUP_CHARS)
