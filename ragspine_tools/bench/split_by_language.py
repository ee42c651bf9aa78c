"""One language's half of a mixed BEIR set, as a set of its own.

``mixed-dev`` puts two unrelated collections in one library (``en-…`` SciFact abstracts and
``zh-…`` qbqtc titles). #23's bar compares the default on a language's queries *in the mixed
library* with the default on the same queries against a library that holds only that
language's documents. This writes that single-language set: the corpus rows, queries and
qrels whose ids start with the prefix, in the same BEIR layout, so ``ragspine eval`` runs it
the same way::

    python -m ragspine_tools.bench.split_by_language ../shared/datasets/mixed-dev en- /tmp/mixed-en-only
    ragspine eval /tmp/mixed-en-only --split dev --qrels dev-en --mode auto,bm25

Every qrels file is filtered (a query of the other language has no row left). Nothing is
rewritten inside a row, so chunk texts, and hence the embedding cache entries, are the
same as in the mixed library.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def split(dataset: Path, prefix: str, out: Path) -> dict[str, int]:
    """Write the rows of ``dataset`` whose ids start with ``prefix`` to ``out``; return counts."""
    if not (dataset / "corpus.jsonl").is_file():
        raise SystemExit(f"{dataset}: no corpus.jsonl; give a BEIR-format folder")
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for name in ("corpus.jsonl", "queries.jsonl"):
        kept = 0
        with open(dataset / name, encoding="utf-8") as src, open(out / name, "w", encoding="utf-8") as dst:
            for line in src:
                if line.strip() and json.loads(line)["_id"].startswith(prefix):
                    dst.write(line)
                    kept += 1
        counts[name] = kept
    for qrels in sorted((dataset / "qrels").glob("*.tsv")):
        lines = qrels.read_text(encoding="utf-8").splitlines(keepends=True)
        kept_lines = [row for row in lines[1:] if row.startswith(prefix)]
        (out / "qrels" / qrels.name).write_text("".join(lines[:1] + kept_lines), encoding="utf-8")
        counts[f"qrels/{qrels.name}"] = len(kept_lines)
    for extra in ("glossary.toml", "library.toml"):
        if (dataset / extra).is_file():
            shutil.copyfile(dataset / extra, out / extra)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/)")
    parser.add_argument("prefix", help="id prefix of the language to keep, e.g. en- or zh-")
    parser.add_argument("out", type=Path, help="folder to write the single-language set to")
    args = parser.parse_args(argv)
    for name, kept in split(args.dataset, args.prefix, args.out).items():
        print(f"{name}: {kept} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
