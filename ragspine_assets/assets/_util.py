
from typing import Any, Sequence

import dagster as dg

from ragspine_query.records import RESTRICTED_SENSITIVITY


def run_id_of(context: dg.AssetExecutionContext) -> str:
    """The run id, or ``""`` when an asset is invoked directly (no run) in a test."""
    try:
        return context.run.run_id
    except Exception:
        return ""


def is_restricted(sensitivity: Any) -> bool:
    return str(sensitivity).strip().upper() == RESTRICTED_SENSITIVITY


def withheld_note(count: int, noun: str) -> str:
    """The line that says how many RESTRICTED items a preview leaves out (never which)."""
    return f"{count} RESTRICTED {noun}{'' if count == 1 else 's'} withheld from this preview" if count else ""


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, limit: int = 10, note: str = "") -> dg.MetadataValue:
    """A small Markdown table for the UI (cells truncated, pipes escaped).

    Callers pass only rows that may be shown: never a RESTRICTED document's id, title or
    text (``note`` says how many were left out).
    """

    def cell(v: Any) -> str:
        s = str(v).replace("\n", " ").replace("|", "\\|")
        return s if len(s) <= 80 else s[:77] + "..."

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in list(rows)[:limit]]
    if len(rows) > limit:
        lines.append(f"\n… {len(rows) - limit} more")
    if note:
        lines.append(f"\n_{note}_")
    return dg.MetadataValue.md("\n".join(lines))


def md_list(items: Sequence[str], *, limit: int = 20) -> dg.MetadataValue:
    if not items:
        return dg.MetadataValue.md("_none_")
    body = "\n".join(f"- {i}" for i in list(items)[:limit])
    if len(items) > limit:
        body += f"\n- … {len(items) - limit} more"
    return dg.MetadataValue.md(body)
