#!/usr/bin/env python3
"""Turn a few of the sample library's Markdown reports into real PDF, DOCX and HTML files.

Each chosen report is written in the format its ``source_locator`` names, next to where
its Markdown was, with a sidecar ``<file>.meta.toml`` carrying the same front matter
(so its ``doc_id`` and metadata do not change). The Markdown leaves the library and is
kept under ``data/sample-sources/`` so the files can be written again::

    python scripts/make_sample_formats.py            # data/raw/sample
    python scripts/make_sample_formats.py --check    # exit 1 if a file would change

Needs the ``formats`` and ``dev`` extras (python-docx; reportlab for PDF).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ragspine_index.converters import writers  # noqa: E402

#: Markdown (relative to the library) → the format to write. Not the documents the demo
#: queries must answer first (acme-eu-2024q3-earnings, the acme-cn Q3 ones), not
#: RESTRICTED ones, and none a test opens by file name.
CONVERSIONS = {
    "reports/acme-group-2023-annual-earnings.md": "pdf",
    "reports/acme-us-2024q2-earnings.md": "pdf",
    "acme-us-2024-annual-review.md": "docx",
    "acme-energy-sodium-ion-briefing.md": "html",
}
SOURCES = REPO / "data" / "sample-sources"


def front_matter(text: str) -> tuple[dict[str, str], str]:
    lines = text.split("\n")
    assert lines[0] == "---", "the sample reports open with front matter"
    end = lines.index("---", 1)
    meta = {}
    for line in lines[1:end]:
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip()
    return meta, "\n".join(lines[end + 1:]).lstrip("\n")


def toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(meta: dict[str, str], body: str, fmt: str) -> bytes:
    title = meta.get("title", "")
    if fmt == "pdf":
        return writers.write_pdf(body, title=title)
    if fmt == "docx":
        return writers.write_docx(body, title=title)
    return writers.write_html(body, title=title)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", type=Path, default=REPO / "data" / "raw" / "sample")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a sidecar would change")
    args = parser.parse_args(argv)
    stale = 0
    for rel, fmt in CONVERSIONS.items():
        markdown = args.library / rel
        source = SOURCES / rel
        if markdown.is_file():
            text = markdown.read_text(encoding="utf-8")
        elif source.is_file():
            text = source.read_text(encoding="utf-8")
        else:
            print(f"{rel}: neither the Markdown nor its kept source exists", file=sys.stderr)
            return 2
        meta, body = front_matter(text)
        target = markdown.with_suffix(f".{fmt}")
        sidecar = target.with_name(target.name + ".meta.toml")
        sidecar_text = "".join(f"{key} = {toml_string(value)}\n" for key, value in meta.items())
        if args.check:
            if not target.is_file() or sidecar.read_text(encoding="utf-8") != sidecar_text:
                print(f"{rel}: {target.name} is missing or its sidecar is stale")
                stale += 1
            continue
        target.write_bytes(render(meta, body, fmt))
        sidecar.write_text(sidecar_text, encoding="utf-8")
        if markdown.is_file():
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_text(text, encoding="utf-8")
            markdown.unlink()
        print(f"{rel} -> {target.relative_to(args.library)} (+ {sidecar.name})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
