"""A small library with PUBLIC, INTERNAL and RESTRICTED documents, built twice: whole, and
without its INTERNAL documents (what a PUBLIC caller's answers must equal)."""

from __future__ import annotations

from pathlib import Path

from ragspine_index.artifacts import LibraryPaths
from ragspine_index.pipeline import build_library

LIBRARY = "ceil"

PUBLIC = {
    "widgets.md": "---\ndoc_id: widgets\ntitle: Widget revenue 2024\nentity: ACME\nsensitivity: PUBLIC\n---\n# Widget revenue\n\n"
                  "Acme widget revenue grew nine percent in 2024 while supply costs fell. Gross margin on widgets "
                  "rose to 41 percent. The widget team hired staff for the Harbor plant.\n\n"
                  "Widget demand in Europe was steady; distributors in Germany and France ordered more gadgets.\n",
    "board.md": "---\ndoc_id: board\ntitle: Board summary\nentity: ACME\nsensitivity: PUBLIC\n---\n# Board\n\n"
                "The Acme board discussed the merger timeline, widget pricing and a new supply contract with Globex. "
                "Revenue guidance for 2025 was kept. The board approved a dividend.\n",
    "faq.md": "---\ndoc_id: faq\ntitle: Investor FAQ\nentity: ACME\nsensitivity: PUBLIC\n---\n# Investor FAQ\n\n"
              "What drives Acme revenue? Widgets and gadgets. What is the gross margin? About 40 percent. "
              "Where are the plants? Harbor and Ridge.\n",
    "gadgets.md": "---\ndoc_id: gadgets\ntitle: Gadget launch\nentity: ACME\nsensitivity: PUBLIC\n---\n# Gadget launch\n\n"
                  "Acme launched a gadget line at the Ridge plant. Gadget revenue is small; margin is thin. "
                  "Globex sells a rival gadget in Europe.\n",
}
INTERNAL = {
    "pricing.md": "---\ndoc_id: pricing\ntitle: Pricing plan internal\nentity: ACME\nsensitivity: INTERNAL\n---\n# Pricing plan\n\n"
                  + "Widget pricing rises in 2025; widget margin widget revenue widget supply Harbor. " * 6
                  + "\n\nGlobex merger talks: revenue synergies and margin targets for widgets and gadgets.\n",
    "headcount.md": "---\ndoc_id: headcount\ntitle: Headcount plan\nentity: ACME\nsensitivity: INTERNAL\n---\n# Headcount\n\n"
                    "Acme Ridge plant headcount falls by 120 in 2025. Board merger review continues with Globex. "
                    "Quillfeather supplier contract renegotiated.\n",
}
RESTRICTED = {
    "secret.md": "---\ndoc_id: secret\ntitle: Project Lantern\nentity: ACME\nsensitivity: RESTRICTED\n---\n# Lantern\n\n"
                 "Project Lantern: Acme acquires Globex widget division. Revenue merger board pricing.\n",
}

QUERIES = ("widget revenue margin", "Acme board merger Globex", "gadget plant Ridge", "pricing supply Harbor",
           "Quillfeather supplier", "What is the gross margin of Acme?")


def build(root: Path, *, internal: bool) -> Path:
    """``<root>/artifacts/ceil`` after one build (embedding ``none``), with or without the INTERNAL documents."""
    raw = root / "raw" / LIBRARY
    raw.mkdir(parents=True)
    for name, text in {**PUBLIC, **(INTERNAL if internal else {}), **RESTRICTED}.items():
        (raw / name).write_text(text, encoding="utf-8")
    paths = LibraryPaths(LIBRARY, raw, root / "artifacts" / LIBRARY)
    build_library(paths, embedding="none", cache_path=root / "cache" / "embeddings.sqlite")
    return paths.root
