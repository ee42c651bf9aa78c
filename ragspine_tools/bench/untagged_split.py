"""Build the sample cut into three libraries, one of them *untagged*, to measure routing.

The sample library (``data/raw/sample``) is cut by file as ``tests/query/qi_library.SPLIT``
does: ``cn`` (the China business), ``us_eu`` (the US and European businesses) and ``group``
(the rest: group, energy, policies, press releases). In ``group`` the ``entity``, ``topic``
and ``geography`` fields are removed from every document's metadata (front matter,
``.meta.toml`` sidecars, JSONL records), so the answers of most group- and energy-level
questions sit in a library whose profile names no entity and no topic: the case where a
router that trusts the profile skips the library holding the answer.

    python -m ragspine_tools.bench.untagged_split OUT [--embedding minilm+e5+multilingual] [--cache data/cache/embeddings.sqlite]
    python -m ragspine_tools.bench.query_fields OUT/art/cn OUT/art/us_eu OUT/art/group --set data/eval/sample \
        --config router=all --config router=profile
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SPLIT = {
    "cn": ("acme-cn-*", "huaxin-acme-cn-comparison.md", "acme-group-history-zh.md", "reports/acme-cn-*"),
    "us_eu": ("acme-us-*", "acme-eu-*", "reports/acme-us-*", "reports/acme-eu-*", "policies/acme-eu-*"),
}
UNTAGGED = "group"
STRIPPED = ("entity", "topic", "geography")
_FRONT_LINE = re.compile(rf"^(?:{'|'.join(STRIPPED)})\s*[:=].*\n", re.M)


def strip_metadata(path: Path) -> None:
    """Remove the :data:`STRIPPED` fields from one raw file's metadata, in place."""
    name = path.name
    if name.endswith(".jsonl"):
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                for k in STRIPPED:
                    rec.pop(k, None)
                out.append(json.dumps(rec, ensure_ascii=False))
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
    elif name.endswith(".meta.toml"):
        path.write_text(_FRONT_LINE.sub("", path.read_text(encoding="utf-8")), encoding="utf-8")
    elif path.suffix in (".md", ".txt", ".html"):
        text = path.read_text(encoding="utf-8")
        if text.startswith("---"):
            end = text.find("\n---", 3)
            if end > 0:
                text = _FRONT_LINE.sub("", text[:end]) + text[end:]
                path.write_text(text, encoding="utf-8")


def build(dest: Path, embedding: str, cache: Path | None) -> dict[str, Path]:
    from ragspine_index.artifacts import LibraryPaths
    from ragspine_index.pipeline import build_library

    src = REPO_ROOT / "data" / "raw" / "sample"
    files = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    taken: dict[str, list[Path]] = {name: [] for name in (*SPLIT, UNTAGGED)}
    for rel in files:
        name = next((n for n, pats in SPLIT.items()
                     if any(rel.match(pat) and len(rel.parts) == len(Path(pat).parts) for pat in pats)), UNTAGGED)
        taken[name].append(rel)
    cache_path = dest / "cache.sqlite"
    if cache is not None and cache.is_file() and not cache_path.exists():
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cache, cache_path)
    out = {}
    for name, rels in taken.items():
        raw = dest / "raw" / name
        for rel in rels:
            (raw / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, raw / rel)
            if name == UNTAGGED:
                strip_metadata(raw / rel)
        root = dest / "art" / name
        build_library(LibraryPaths(name, raw, root), embedding=embedding, cache_path=cache_path,
                      glossary_path=REPO_ROOT / "data" / "glossary.toml")
        out[name] = root
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--embedding", default="minilm+e5+multilingual", help="the sample's default build (see its manifest)")
    ap.add_argument("--cache", type=Path, default=REPO_ROOT / "data" / "cache" / "embeddings.sqlite",
                    help="an embedding cache to start from (copied)")
    args = ap.parse_args(argv)
    for name, root in build(args.out, args.embedding, args.cache).items():
        print(name, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
