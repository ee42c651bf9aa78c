"""Markdown report and console summary for ``bench_lexical``."""

from __future__ import annotations

SETS = (("normal", "normal queries"), ("stop", "stop-word-heavy queries"))


def _f(value, fmt: str = "{:,.1f}", missing: str = "–") -> str:
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _rounds(report: dict):
    for _, e in _engines(report):
        return (e.get("normal") or {}).get("rounds")
    return None


def _engines(report: dict) -> list[tuple[str, dict]]:
    return [(n, e) for n, e in (report.get("engines") or {}).items() if "skipped" not in e]


def query_table(report: dict, qset: str) -> list[str]:
    lines = [
        "| engine | QPS (1 query/call) | CPU-time QPS | batched QPS | p50 ms | p99 ms | top-10 overlap | top-10 valid | Jaccard@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in _engines(report):
        s = e.get(qset) or {}
        batched = _f(s.get("batch_qps"), "{:,.0f}") + ("" if s.get("batch_api") else " (loop)")
        lines.append(
            f"| {name} | {_f(s.get('qps'), '{:,.0f}')} | {_f(s.get('cpu_qps'), '{:,.0f}')} | {batched} | {_f(s.get('p50_ms'), '{:.3f}')} | "
            f"{_f(s.get('p99_ms'), '{:.3f}')} | {_f(s.get('top10_overlap'), '{:.4f}')} | {_f(s.get('top10_valid'), '{:.4f}')} | "
            f"{_f(s.get('top10_jaccard'), '{:.4f}')} |"
        )
    return lines


def build_table(report: dict) -> list[str]:
    lines = [
        "| engine | build s | build RSS Δ MiB | build tracemalloc MiB | index MiB | open s | first query s | open + warm-up RSS Δ MiB | cold start s (in-process) | cold start s, stop-word query | cold start s (process wall) | query RSS Δ MiB (normal / stop) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in _engines(report):
        cold = e.get("cold_start") or {}
        cold_s = cold.get("error") or _f(cold.get("total_s"), "{:.3f}")
        lines.append(
            f"| {name} | {_f(e.get('build_s'), '{:.2f}')} | {_f(e.get('build_rss_delta_mb'))} | {_f(e.get('build_tracemalloc_mb'))} | "
            f"{_f(e.get('index_mb'), '{:.1f}')} | {_f(e.get('open_s'), '{:.4f}')} | {_f(e.get('first_query_s'), '{:.4f}')} | "
            f"{_f(e.get('open_warm_rss_delta_mb'))} | {cold_s} | {_f((e.get('cold_start_stop') or {}).get('total_s'), '{:.3f}')} | {_f(cold.get('process_wall_s'), '{:.3f}')} | "
            f"{_f((e.get('normal') or {}).get('rss_delta_mb'))} / {_f((e.get('stop') or {}).get('rss_delta_mb'))} |"
        )
    return lines


def ratio_lines(report: dict) -> list[str]:
    keys = [
        ("qps_ratio", "ours ÷ fastest bm25s, QPS, normal queries"),
        ("qps_ratio_stop", "ours ÷ fastest bm25s, QPS, stop-word-heavy queries"),
        ("qps_ratio_vs_tantivy", "ours ÷ tantivy, QPS, normal queries"),
        ("qps_ratio_vs_tantivy_stop", "ours ÷ tantivy, QPS, stop-word-heavy queries"),
        ("cpu_qps_ratio", "ours ÷ fastest bm25s, CPU-time QPS, normal queries"),
        ("cpu_qps_ratio_stop", "ours ÷ fastest bm25s, CPU-time QPS, stop-word-heavy queries"),
        ("build_speed_ratio", "fastest bm25s build time ÷ ours"),
        ("build_speed_ratio_vs_tantivy", "tantivy build time ÷ ours"),
    ]
    return [f"- `{k}` = **{_f(report.get(k), '{:.2f}')}** — {what}" for k, what in keys if k in report]


def render_markdown(report: dict) -> str:
    m = report.get("machine", {})
    v = m.get("versions", {})
    out = [
        f"# Lexical benchmark — {report.get('corpus', {}).get('name', '')}",
        "",
        f"Command: `{report.get('command', '')}`",
        "",
        "## Machine",
        "",
        f"- CPU: {m.get('cpu')} — {m.get('logical_cores')} logical cores ({m.get('physical_cores')} physical), RAM {m.get('ram_gb')} GiB",
        f"- OS: {m.get('os')}; Python {m.get('python')}",
        "- " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
        f"- Threads: {report.get('threads')}",
        f"- Load average (1, 5, 15 min) at start {report.get('load_average_start')}, at end {report.get('load_average_end')} "
        "— above the core count means other work shared the CPUs"
        + (f"; each query ran {_rounds(report)} times, engines alternating every 100 queries, and QPS / p50 / p99 use "
           "each query's median latency (raw best-round QPS and raw p99 are in the JSON); CPU-time QPS counts only "
           "the CPU seconds of the calls" if _rounds(report) else ""),
        "",
    ]
    if report.get("skipped"):
        out += [f"**Skipped:** {report['skipped']}", ""]
    c = report.get("corpus")
    if c:
        qn, qs = c["queries"]["normal"], c["queries"]["stop"]
        out += [
            "## Corpus and queries",
            "",
            f"- {c['description']}",
            f"- {c['rows']:,} rows, {c['tokens']:,} tokens, vocabulary {c['vocabulary']:,}; analyzer {c.get('analyzer')}, "
            f"tokenizing took {c['tokenize_s']:.2f} s "
            f"(not part of any build time: every engine gets the same token lists)",
            f"- normal: {qn['n']:,} queries, {qn['how']}; mean {qn['mean_terms']} terms, {qn['mean_postings']:,} postings per query",
            f"- stop-word-heavy: {qs['n']:,} queries, {qs['how']}; mean {qs['mean_terms']} terms, {qs['mean_postings']:,} postings per query; "
            "df of the terms: " + ", ".join(f"{t} {d:,}" for t, d in qs["terms_df"].items()),
            "- top-10 agreement: against an exact float64 BM25 (k1=1.5, b=0.75) written in the script; rows tied with the "
            "reference's 10th score (relative 1e-5) may fill the tied slots. *overlap* = mean share of a correct top-10 found, "
            "*valid* = share of queries whose list is a correct top-10, *Jaccard* = against the reference's list with ties broken by row.",
            "",
        ]
        for qset, title in SETS:
            out += [f"## Queries — {title}", "", *query_table(report, qset), ""]
        tv = (report.get("engines") or {}).get("tantivy") or {}
        if "top10_overlap_vs_k1_1.2" in (tv.get("normal") or {}):
            out += [
                f"tantivy against a k1=1.2 reference: top-10 overlap {tv['normal']['top10_overlap_vs_k1_1.2']:.4f} (normal), "
                f"{tv['stop']['top10_overlap_vs_k1_1.2']:.4f} (stop-word-heavy); the rest of its gap is its one-byte "
                "field-norm (document length) quantisation.",
                "",
            ]
        out += ["## Build, size, memory, cold start", "", *build_table(report), "",
                "Cold start = a fresh interpreter imports the engine, opens the saved index and answers one query "
                "(in-process clock; the process wall time adds interpreter start-up). RSS Δ is the peak resident-set growth "
                "during the phase (kernel high-water mark; memory an earlier phase freed may be reused unseen, so it is a "
                "lower bound); tracemalloc counts Python and numpy allocations of a second, instrumented build. Open + "
                f"warm-up covers opening the saved index and {report.get('warmup_queries', '–')} queries (index pages read, caches, JIT code).", ""]
        out += ["## Ratios (above 1.0: ours is faster)", "", *ratio_lines(report), ""]
        g = report.get("goals") or {}
        if g:
            out += ["## Goals", "", *[f"- {k}: **{_f(val)}**" for k, val in g.items()], ""]
        out += ["## Engines", ""]
        for name, e in (report.get("engines") or {}).items():
            out.append(f"- **{name}** ({e.get('label')}): {e.get('skipped') or e.get('notes', '')}")
        out.append("")
    ing = report.get("ingest")
    if ing:
        out += [
            "## End-to-end ingest through Dagster",
            "",
            f"- {ing['documents']:,} documents → {ing['chunks']:,} chunks in {ing['seconds']:.1f} s: "
            f"**{ing['documents_per_s']:,.0f} documents/s, {ing['chunks_per_s']:,.0f} chunks/s** "
            f"(RSS Δ {ing['rss_delta_mb']:.0f} MiB, analyzer {ing.get('analyzer')}, embedding none)",
            f"- {ing['how']}",
            "",
        ]
    return "\n".join(out)


def summary_lines(report: dict) -> list[str]:
    """A short console summary: one line per engine and query set, then the ratios."""
    lines = []
    if report.get("skipped"):
        lines.append(f"skipped: {report['skipped']}")
    if report.get("corpus"):
        lines.append(f"corpus: {report['corpus']['description']}")
        for qset, title in SETS:
            lines.append(f"{title}:")
            for name, e in _engines(report):
                s = e.get(qset) or {}
                lines.append(
                    f"  {name:<12} {_f(s.get('qps'), '{:>9,.0f}')} QPS  p50 {_f(s.get('p50_ms'), '{:.3f}')} ms  "
                    f"p99 {_f(s.get('p99_ms'), '{:.3f}')} ms  batched {_f(s.get('batch_qps'), '{:,.0f}')}  "
                    f"top-10 overlap {_f(s.get('top10_overlap'), '{:.4f}')}"
                )
        lines.append("build / cold start:")
        for name, e in _engines(report):
            cold = e.get("cold_start") or {}
            lines.append(
                f"  {name:<12} build {_f(e.get('build_s'), '{:.2f}')} s  index {_f(e.get('index_mb'), '{:.1f}')} MiB  "
                f"cold start {cold.get('error') or _f(cold.get('total_s'), '{:.3f}')} s"
            )
        lines.append("ratios (above 1.0: ours faster):")
        lines += ["  " + line[2:] for line in ratio_lines(report)]
        for k, val in (report.get("goals") or {}).items():
            lines.append(f"  goal {k}: {_f(val)}")
    ing = report.get("ingest")
    if ing:
        lines.append(
            f"ingest: {ing['documents']:,} docs / {ing['chunks']:,} chunks in {ing['seconds']:.1f} s = "
            f"{ing['documents_per_s']:,.0f} docs/s, {ing['chunks_per_s']:,.0f} chunks/s"
        )
    return lines


def write_report(report: dict, out_dir, stem: str, *, as_json: bool, render, summarize) -> int:
    """Write ``<stem>.md`` (``render(report)``) and ``<stem>.json``; print JSON or the summary."""
    import json
    from pathlib import Path

    md_path, json_path = Path(out_dir) / f"{stem}.md", Path(out_dir) / f"{stem}.json"
    report["report_markdown"] = str(md_path)
    md_path.write_text(render(report), encoding="utf-8")
    json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if as_json:
        print(json.dumps(report))
    else:
        print("\n".join(summarize(report)))
        print(f"\nreport: {md_path}")
    return 0
