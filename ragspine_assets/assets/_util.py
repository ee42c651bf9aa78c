
from typing import Any, Sequence

import dagster as dg


def run_id_of(context: dg.AssetExecutionContext) -> str:
    """The run id, or ``""`` when an asset is invoked directly (no run) in a test."""
    try:
        return context.run.run_id
    except Exception:
        return ""


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, limit: int = 10) -> dg.MetadataValue:
    """A small Markdown table for the UI (cells truncated, pipes escaped)."""

    def cell(v: Any) -> str:
        s = str(v).replace("\n", " ").replace("|", "\\|")
        return s if len(s) <= 80 else s[:77] + "..."

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in list(rows)[:limit]]
    if len(rows) > limit:
        lines.append(f"\n… {len(rows) - limit} more")
    return dg.MetadataValue.md("\n".join(lines))


def md_list(items: Sequence[str], *, limit: int = 20) -> dg.MetadataValue:
    if not items:
        return dg.MetadataValue.md("_none_")
    body = "\n".join(f"- {i}" for i in list(items)[:limit])
    if len(items) > limit:
        body += f"\n- … {len(items) - limit} more"
    return dg.MetadataValue.md(body)
