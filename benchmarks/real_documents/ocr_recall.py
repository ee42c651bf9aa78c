"""OCR word recall on the real-document set's scanned files that come with their own
expected text: textract's test images and OCR PDF, each next to a ``<stem>.txt`` holding
the text printed in it (written by textract's authors, independent of any OCR engine).

    python benchmarks/real_documents/ocr_recall.py OUT [--mirrors DIR]

``OUT`` is the folder ``rebuild.py`` wrote; the ``.txt`` files are read from the same
pinned commit. Prints one row per file (recall: the share of the expected text's distinct
words, NFKC and case-folded, found in the converted text) and the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rebuild import LIST, _git, _repo_dir  # noqa: E402

REPO = "deanmalmgren/textract"
SCANNED = (".png", ".jpg", ".jpeg", ".pdf")


def main(argv: list[str] | None = None) -> int:
    from ragspine_index.converters import convert_bytes
    from ragspine_tools.bench.bench_documents import recall

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mirrors", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = [line.split("\t") for line in LIST.read_text(encoding="utf-8").splitlines()[1:] if line.startswith(REPO)]
    values = []
    for repo, commit, path, _, _ in rows:
        if not path.lower().endswith(SCANNED):
            continue
        converted = convert_bytes((args.out / repo.replace("/", "+") / path).read_bytes(), Path(path).suffix.lower())
        if "OCR by" not in converted.engine_note and not path.lower().endswith((".png", ".jpg", ".jpeg")):
            continue  # a PDF with a text layer: not OCR
        expected = _git(_repo_dir(repo, args.mirrors, args.out), "show",
                        f"{commit}:{str(Path(path).with_suffix('.txt'))}").decode("utf-8", "replace")
        value = recall(expected, converted.text)
        if value is not None:
            values.append(value)
            print(f"{path}\t{value:.3f}")
    if values:
        print(f"OCR word recall median {statistics.median(values):.3f} (min {min(values):.3f}, n {len(values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
