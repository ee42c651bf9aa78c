"""The edit distributions behind the near-duplicate threshold of reclassification.

``python -m ragspine_tools.bench.bench_near_duplicates CORPUS.jsonl [--docs N]`` takes N
documents (``title``/``text``) and prints, per edit class, the distribution of the
shingle containment (:func:`ragspine_index.fingerprints.containment`) of the old open
text in the edited, RESTRICTED one, and for unrelated text: each document against the
union of every *other* document of the sample (as if all of them were RESTRICTED), the
harshest negative. ``NEAR_DUPLICATE_SHARE`` must sit between the two.

Edit classes are those that mark a document while touching every sentence: a bullet
added, a comma inserted in each sentence, one word replaced per sentence, every fifth
word replaced, the sentences reordered, a header cell renamed in a table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from ragspine_index.fingerprints import NEAR_DUPLICATE_SHARE, containment, shingles
from ragspine_index.raptor.summarizers import split_sentences


def _edits(text: str, rng: random.Random) -> dict[str, str]:
    sentences = split_sentences(text) or [text]
    words = text.split()

    def per_sentence(f) -> str:
        return " ".join(f(s.split()) for s in sentences)

    def comma(ws: list[str]) -> str:
        return " ".join([ws[0] + ","] + ws[1:]) if len(ws) > 1 else " ".join(ws)

    def one_word(ws: list[str]) -> str:
        if len(ws) < 2:
            return " ".join(ws)
        i = rng.randrange(len(ws))
        return " ".join(ws[:i] + ["revised"] + ws[i + 1:])

    shuffled = sentences[:]
    rng.shuffle(shuffled)
    table_rows = [" | ".join(words[i:i + 5]) for i in range(0, min(len(words), 60), 5)]
    return {
        "bullet added": text + "\n- An added item on the project timeline.",
        "comma per sentence": per_sentence(comma),
        "one word per sentence": per_sentence(one_word),
        "every fifth word": " ".join("changed" if i % 5 == 0 else w for i, w in enumerate(words)),
        "sentences reordered": " ".join(shuffled),
        "header cell renamed": "\n".join(["Item | Amount | Owner | Region | Status"] + table_rows) + "\0"
        + "\n".join(["Item | Value | Owner | Region | Status"] + table_rows),
    }


def _quantiles(values: list[float]) -> str:
    values = sorted(values)
    pick = [values[min(len(values) - 1, int(q * len(values)))] for q in (0.0, 0.01, 0.5, 0.99)]
    return "min {:.2f}  p1 {:.2f}  median {:.2f}  p99 {:.2f}  max {:.2f}".format(*pick, values[-1])


def measure(texts: list[str], seed: int = 37) -> dict[str, list[float]]:
    rng = random.Random(seed)
    out: dict[str, list[float]] = {}
    for text in texts:
        for name, edited in _edits(text, rng).items():
            old, new = edited.split("\0") if "\0" in edited else (text, edited)
            out.setdefault(name, []).append(containment(shingles(old), shingles(new)))
    all_sh = [shingles(t) for t in texts]
    counts: dict[str, int] = {}
    for sh in all_sh:
        for s in sh:
            counts[s] = counts.get(s, 0) + 1
    # the union of the others: a shingle is in it when another document has it too
    out["unrelated (vs all others)"] = [
        sum(1 for s in sh if counts[s] > 1) / len(sh) if sh else 0.0 for sh in all_sh]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--docs", type=int, default=2000)
    args = parser.parse_args(argv)
    texts = []
    with args.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            text = " ".join(((record.get("title") or "") + ". " + (record.get("text") or "")).split())
            if len(shingles(text)) >= 20:
                texts.append(text)
            if len(texts) >= args.docs:
                break
    print(f"{args.corpus.name}: {len(texts)} documents; threshold NEAR_DUPLICATE_SHARE = {NEAR_DUPLICATE_SHARE}")
    for name, values in measure(texts).items():
        above = sum(v >= NEAR_DUPLICATE_SHARE for v in values) / len(values)
        print(f"  {name:28s} {_quantiles(values)}   at or above the threshold: {above:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
