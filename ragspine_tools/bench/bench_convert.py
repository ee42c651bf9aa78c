"""Conversion throughput per format (documents/s and MB/s) on generated files, and the
PDF engine comparison behind the choice of pypdf.

Writes ``--docs`` seeded synthetic reports (headings, paragraphs, lists, a table; about
``--pages`` pages each) as PDF, DOCX, PPTX, XLSX, HTML and CSV with
:mod:`ragspine_index.converters.writers`, then times
:func:`~ragspine_index.converters.convert_bytes` over each folder (best of
``--rounds``, one process, one core). ``--compare-pdf`` also extracts the same PDFs with
pdfminer.six and pypdfium2 (when installed) and scores each engine's text: the share of
the source sentences found verbatim (whitespace-normalised) and in reading order.

Usage::

    python -m ragspine_tools.bench.bench_convert --docs 40 --pages 3 --compare-pdf

Writes ``reports/convert.md`` (and prints one JSON object). Needs the ``formats`` and
``dev`` extras (reportlab writes the PDFs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from io import BytesIO
from pathlib import Path


from ragspine_tools.bench import REPORTS_DIR
from ragspine_index.converters import ConversionLimits, convert_bytes, writers  # noqa: E402

WORDS = ("revenue margin inverter storage plant order customer region growth quarter capacity contract "
         "supplier battery freight harbour terminal crane cost programme outlook demand price service").split()


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return f"Item {n}: " + " ".join(words).capitalize() + f" rose {rng.randint(1, 99)}%."


def report(rng: random.Random, pages: int) -> tuple[str, list[str]]:
    """Markdown of about ``pages`` A4 pages, and its sentences (for the quality score)."""
    sentences: list[str] = []
    parts = [f"# Report {rng.randint(1000, 9999)}"]
    n = 0
    for section in range(pages * 2):
        parts.append(f"## Section {section + 1}")
        for _ in range(3):
            para = []
            for _ in range(5):
                n += 1
                para.append(sentence(rng, n))
            sentences += para
            parts.append(" ".join(para))
        parts.append("\n".join(f"- {sentence(rng, 10_000 + section * 10 + i)}" for i in range(3)))
        parts.append("| Region | Revenue | Growth |\n|---|---|---|\n"
                     + "\n".join(f"| R{i} | {rng.randint(10, 999)} | {rng.randint(1, 30)}% |" for i in range(4)))
    return "\n\n".join(parts) + "\n", sentences


def write_corpus(docs: int, pages: int, seed: int) -> tuple[dict[str, list[bytes]], list[list[str]]]:
    rng = random.Random(seed)
    files: dict[str, list[bytes]] = {f: [] for f in ("pdf", "docx", "pptx", "xlsx", "html", "csv")}
    truth = []
    for _ in range(docs):
        markdown, sentences = report(rng, pages)
        truth.append(sentences)
        files["pdf"].append(writers.write_pdf(markdown))
        files["docx"].append(writers.write_docx(markdown))
        files["html"].append(writers.write_html(markdown))
        slides = [(f"Slide {i}", sentences[i * 4:(i + 1) * 4]) for i in range(max(1, len(sentences) // 4))]
        files["pptx"].append(writers.write_pptx(slides))
        rows: list[list[object]] = [["Region", "Quarter", "Revenue", "Note"]]
        rows += [
            [f"R{i % 7}", f"Q{i % 4 + 1}", rng.randint(10, 999), sentences[i % len(sentences)]] for i in range(pages * 60)]
        files["xlsx"].append(writers.write_xlsx({"Data": rows}))
        csv_text = "\n".join(",".join(f'"{c}"' for c in row) for row in rows) + "\n"
        files["csv"].append(csv_text.encode("utf-8"))
    return files, truth


def time_format(fmt: str, blobs: list[bytes], rounds: int) -> dict:
    limits = ConversionLimits()
    best = float("inf")
    chars = 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        chars = sum(len(convert_bytes(b, f".{fmt}", limits).text) for b in blobs)
        best = min(best, time.perf_counter() - t0)
    mb = sum(len(b) for b in blobs) / 1e6
    return {"format": fmt, "files": len(blobs), "mb": round(mb, 3), "seconds": round(best, 3),
            "docs_per_s": round(len(blobs) / best, 1), "mb_per_s": round(mb / best, 2), "chars": chars}


def _norm(text: str) -> str:
    return " ".join(text.split())


def quality(text: str, sentences: list[str]) -> tuple[float, float]:
    """(share of sentences found verbatim, share of consecutive found pairs in order)."""
    flat = _norm(text)
    positions = [flat.find(_norm(s)) for s in sentences]
    found = [p for p in positions if p >= 0]
    ordered = sum(1 for a, b in zip(found, found[1:]) if a < b)
    return len(found) / len(sentences), (ordered / max(1, len(found) - 1))


def pdf_engines() -> dict:
    engines = {}

    def run_pypdf(data: bytes) -> str:
        import pypdf

        return "\n\n".join(p.extract_text() or "" for p in pypdf.PdfReader(BytesIO(data)).pages)

    engines["pypdf"] = run_pypdf
    try:
        from pdfminer.high_level import extract_text

        engines["pdfminer.six"] = lambda data: extract_text(BytesIO(data))
    except ImportError:
        pass
    try:
        import pypdfium2 as pdfium

        def run_pdfium(data: bytes) -> str:
            doc = pdfium.PdfDocument(data)
            try:
                return "\n\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
            finally:
                doc.close()

        engines["pypdfium2"] = run_pdfium
    except ImportError:
        pass
    return engines


def compare_pdf(blobs: list[bytes], truth: list[list[str]], rounds: int) -> list[dict]:
    out = []
    mb = sum(len(b) for b in blobs) / 1e6
    for name, engine in pdf_engines().items():
        best = float("inf")
        texts: list[str] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            texts = [engine(b) for b in blobs]
            best = min(best, time.perf_counter() - t0)
        scores = [quality(t, s) for t, s in zip(texts, truth)]
        out.append({"engine": name, "seconds": round(best, 3), "docs_per_s": round(len(blobs) / best, 1),
                    "mb_per_s": round(mb / best, 2),
                    "sentences_found": round(sum(s[0] for s in scores) / len(scores), 4),
                    "in_order": round(sum(s[1] for s in scores) / len(scores), 4)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--compare-pdf", action="store_true")
    parser.add_argument("--out", type=Path, default=REPORTS_DIR / "convert.md")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    files, truth = write_corpus(args.docs, args.pages, args.seed)
    written = time.perf_counter() - t0
    rows = [time_format(fmt, blobs, args.rounds) for fmt, blobs in files.items()]
    pdf = compare_pdf(files["pdf"], truth, args.rounds) if args.compare_pdf else []
    result = {"docs": args.docs, "pages": args.pages, "rounds": args.rounds, "write_seconds": round(written, 1),
              "machine": f"{platform.machine()} {os.cpu_count()} CPU, Python {platform.python_version()}",
              "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "formats": rows, "pdf_engines": pdf}
    lines = [f"# Conversion throughput ({args.docs} generated documents of ~{args.pages} pages per format)", "",
             f"`python -m ragspine_tools.bench.bench_convert --docs {args.docs} --pages {args.pages} --rounds {args.rounds}"
             f"{' --compare-pdf' if args.compare_pdf else ''}` on {result['machine']}, load {result['load']:.1f} "
             "(a shared machine: figures are the best of the rounds, one core).", "",
             "| format | files | MB | seconds | documents/s | MB/s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['format']} | {r['files']} | {r['mb']} | {r['seconds']} | {r['docs_per_s']} | {r['mb_per_s']} |"
              for r in rows]
    if pdf:
        lines += ["", "## PDF engines on the same files", "",
                  "| engine | seconds | documents/s | MB/s | sentences found verbatim | consecutive sentences in order |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['engine']} | {r['seconds']} | {r['docs_per_s']} | {r['mb_per_s']} | {r['sentences_found']:.1%} | "
                  f"{r['in_order']:.1%} |" for r in pdf]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
