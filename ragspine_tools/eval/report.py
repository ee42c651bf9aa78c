"""A self-contained HTML evaluation report (``ragspine eval --report DIR``).

One ``index.html`` with everything inline: styles, and plots drawn here as SVG (no
JavaScript, no CDN, no plotting library), so it opens offline in any browser and can be
attached to a ticket or a CI run. It shows:

* the metric table per mode;
* the paired-bootstrap interval of every mode against the first (the baseline);
* nDCG@k curves per mode;
* a per-query scatter of the baseline against each other mode;
* the queries where the modes disagree most, with each mode's top hits.

Only the standard library is used. RESTRICTED documents are never shown: a hit whose
document is RESTRICTED (or unknown to the corpus) is left out of the hit lists and
counted, never named (``ragspine eval`` already ranks with RESTRICTED chunks removed, so
in practice there are none).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragspine_core.errors import ConfigError, DatasetError
from ragspine_tools.eval.metrics import BootstrapResult, EvalReport, paired_bootstrap, trec_ranking
from ragspine_core.records import is_restricted

#: Cut-offs ``ragspine eval`` computes so the report can draw nDCG@k curves.
CURVE_KS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 50, 100)
#: How many disagreeing queries, and how many hits per mode for each, the report lists.
DISAGREEMENTS = 10
HITS_SHOWN = 5
REPORT_FILE = "index.html"
#: Colour per mode position (colour-blind-safe Okabe-Ito palette).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


@dataclass(frozen=True, slots=True)
class ModeRun:
    """One evaluated configuration: its label, headline metrics, per-query metrics and run.

    ``report`` must have been computed with ``ks`` covering the curve's cut-offs
    (``evaluate_run(run, qrels, ks=CURVE_KS)``); ``run`` is query id → document id → score.
    ``details`` are extra key/value pairs shown in the metric table (e.g. the embedding model).
    """

    label: str
    report: EvalReport
    run: Mapping[str, Mapping[str, float]]
    ms_per_query: float | None = None
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the report shows. ``docs`` maps document id → (title, sensitivity)."""

    title: str
    modes: tuple[ModeRun, ...]
    queries: Mapping[str, str]
    qrels: Mapping[str, Mapping[str, int]]
    docs: Mapping[str, tuple[str, str]]
    subtitle: str = ""

    def __post_init__(self) -> None:
        if not self.modes:
            raise ConfigError("an evaluation report needs at least one mode; pass --mode bm25,hybrid for a comparison")
        labels = [m.label for m in self.modes]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"mode labels must be unique, got {labels}")


# ----------------------------------------------------------------------------- SVG
def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fmt(v: float) -> str:
    text = f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:.0f}"
    return "0" if text in ("-0", "") else text


@dataclass(frozen=True, slots=True)
class _Frame:
    """A plot area: pixel size, margins and the data ranges mapped onto it."""

    width: int
    height: int
    x0: float
    x1: float
    y0: float
    y1: float
    left: int = 56
    right: int = 16
    top: int = 16
    bottom: int = 44

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (v - self.x0) / span * (self.width - self.left - self.right)

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - self.bottom - (v - self.y0) / span * (self.height - self.top - self.bottom)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def _axes(f: _Frame, *, x_label: str, y_label: str, x_ticks: Sequence[tuple[float, str]] | None = None) -> list[str]:
    parts = [f'<rect x="{f.left}" y="{f.top}" width="{f.width - f.left - f.right}" '
             f'height="{f.height - f.top - f.bottom}" fill="#fff" stroke="#999"/>']
    for t in _ticks(f.y0, f.y1):
        y = f.y(t)
        parts.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_fmt(t)}</text>')
    for v, label in (x_ticks if x_ticks is not None else [(t, _fmt(t)) for t in _ticks(f.x0, f.x1)]):
        x = f.x(v)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.height - f.bottom}" y2="{f.height - f.bottom + 4}" stroke="#999"/>')
        parts.append(f'<text x="{x:.1f}" y="{f.height - f.bottom + 16}" text-anchor="middle" class="tick">{_esc(label)}</text>')
    parts.append(f'<text x="{(f.left + f.width - f.right) / 2:.1f}" y="{f.height - 6}" text-anchor="middle" class="axis">{_esc(x_label)}</text>')
    parts.append(f'<text transform="translate(14 {(f.top + f.height - f.bottom) / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle" class="axis">{_esc(y_label)}</text>')
    return parts


def _svg(f: _Frame, title: str, body: Sequence[str], kind: str) -> str:
    return (f'<svg class="plot" data-plot="{_esc(kind)}" role="img" xmlns="http://www.w3.org/2000/svg" '
            f'width="{f.width}" height="{f.height}" viewBox="0 0 {f.width} {f.height}">'
            f'<title>{_esc(title)}</title>' + "".join(body) + "</svg>")


def _legend(labels: Sequence[str], colours: Sequence[str], x: float, y: float) -> list[str]:
    parts = []
    for i, (label, colour) in enumerate(zip(labels, colours)):
        yy = y + i * 16
        parts.append(f'<line x1="{x}" x2="{x + 18}" y1="{yy}" y2="{yy}" stroke="{colour}" stroke-width="3"/>')
        parts.append(f'<text x="{x + 24}" y="{yy + 4}" class="tick">{_esc(label)}</text>')
    return parts


def ndcg_curve_svg(modes: Sequence[ModeRun], ks: Sequence[int] = CURVE_KS) -> str:
    """Mean nDCG@k per mode as lines over the cut-offs (evenly spaced, labelled by k)."""
    ks = [k for k in ks if all(f"ndcg@{k}" in m.report.means for m in modes)]
    if not ks:
        raise DatasetError(f"no nDCG@k cut-off was computed for every mode; evaluate with ks={list(CURVE_KS)}")
    values = [[m.report.means[f"ndcg@{k}"] for k in ks] for m in modes]
    lo = min(min(v) for v in values)
    f = _Frame(640, 300, 0, max(len(ks) - 1, 1), max(0.0, math.floor(lo * 10) / 10), 1.0, right=130)
    body = _axes(f, x_label="cut-off k", y_label="mean nDCG@k", x_ticks=[(i, str(k)) for i, k in enumerate(ks)])
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(modes))]
    for vals, colour, m in zip(values, colours, modes):
        pts = " ".join(f"{f.x(i):.1f},{f.y(v):.1f}" for i, v in enumerate(vals))
        body.append(f'<polyline class="series" points="{pts}" fill="none" stroke="{colour}" stroke-width="2.5">'
                    f'<title>{_esc(m.label)}</title></polyline>')
        body += [f'<circle cx="{f.x(i):.1f}" cy="{f.y(v):.1f}" r="3" fill="{colour}"><title>{_esc(m.label)} '
                 f'nDCG@{k} = {v:.4f}</title></circle>' for i, (k, v) in enumerate(zip(ks, vals))]
    body += _legend([m.label for m in modes], colours, f.width - f.right + 12, f.top + 10)
    return _svg(f, "mean nDCG@k per mode", body, "ndcg-curve")


def scatter_svg(a: ModeRun, b: ModeRun, metric: str = "ndcg@10") -> str:
    """Per-query ``metric`` of mode ``a`` (x) against mode ``b`` (y), with the diagonal."""
    qids = sorted(a.report.per_query)
    f = _Frame(360, 360, 0.0, 1.0, 0.0, 1.0)
    body = _axes(f, x_label=f"{a.label} {metric}", y_label=f"{b.label} {metric}")
    body.append(f'<line x1="{f.x(0):.1f}" y1="{f.y(0):.1f}" x2="{f.x(1):.1f}" y2="{f.y(1):.1f}" stroke="#aaa" stroke-dasharray="4 3"/>')
    better = worse = 0
    for q in qids:
        x, y = a.report.per_query[q][metric], b.report.per_query.get(q, {}).get(metric, 0.0)
        colour = "#009E73" if y > x + 1e-12 else "#D55E00" if y < x - 1e-12 else "#666"
        better += y > x + 1e-12
        worse += y < x - 1e-12
        body.append(f'<circle class="point" cx="{f.x(x):.1f}" cy="{f.y(y):.1f}" r="3.5" fill="{colour}" fill-opacity="0.55">'
                    f'<title>query {_esc(q)}: {a.label} {x:.3f}, {b.label} {y:.3f}</title></circle>')
    body.append(f'<text x="{f.left + 6}" y="{f.top + 14}" class="tick">{_esc(b.label)} better on {better}, worse on {worse}</text>')
    return _svg(f, f"per-query {metric}: {a.label} vs {b.label}", body, "scatter")


def interval_svg(rows: Sequence[tuple[str, BootstrapResult]], metric: str = "nDCG@10") -> str:
    """Each comparison's mean difference with its bootstrap interval, around zero."""
    lo = min(min(r.ci_low for _, r in rows), 0.0)
    hi = max(max(r.ci_high for _, r in rows), 0.0)
    pad = (hi - lo) * 0.1 or 0.01
    height = 56 + 34 * len(rows)
    f = _Frame(640, height, lo - pad, hi + pad, 0, len(rows), left=170, top=10, bottom=40)
    body = [f'<rect x="{f.left}" y="{f.top}" width="{f.width - f.left - f.right}" height="{f.height - f.top - f.bottom}" fill="#fff" stroke="#999"/>']
    for t in _ticks(f.x0, f.x1):
        x = f.x(t)
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{f.height - f.bottom}" stroke="#eee"/>')
        body.append(f'<text x="{x:.1f}" y="{f.height - f.bottom + 16}" text-anchor="middle" class="tick">{_fmt(t)}</text>')
    body.append(f'<line x1="{f.x(0):.1f}" x2="{f.x(0):.1f}" y1="{f.top}" y2="{f.height - f.bottom}" stroke="#333"/>')
    body.append(f'<text x="{(f.left + f.width - f.right) / 2:.1f}" y="{f.height - 6}" text-anchor="middle" class="axis">'
                f'difference in mean {_esc(metric)} (95% paired-bootstrap interval)</text>')
    for i, (label, r) in enumerate(rows):
        y = f.y(len(rows) - i - 0.5)
        colour = "#009E73" if r.ci_low > 0 else "#D55E00" if r.ci_high < 0 else "#555"
        body.append(f'<text x="{f.left - 8}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_esc(label)}</text>')
        body.append(f'<line class="interval" x1="{f.x(r.ci_low):.1f}" x2="{f.x(r.ci_high):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                    f'stroke="{colour}" stroke-width="4"><title>{_esc(label)}: {r.mean_difference:+.4f} '
                    f'[{r.ci_low:+.4f}, {r.ci_high:+.4f}], p = {r.p_value:.4f}</title></line>')
        body.append(f'<circle cx="{f.x(r.mean_difference):.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>')
    return _svg(f, "paired-bootstrap intervals", body, "intervals")


# ----------------------------------------------------------------------------- HTML
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;margin:0 0 12px}table{border-collapse:collapse;margin:8px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f5f5f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}.plots{display:flex;flex-wrap:wrap;gap:16px}
svg.plot{background:#fafafa;border:1px solid #e3e3e3}svg .tick{font-size:11px;fill:#444}svg .axis{font-size:12px;fill:#222}
.rel{color:#007a4d;font-weight:600}.note{color:#666;font-size:12px}ol.hits{margin:0;padding-left:20px}
.q{font-weight:600}
"""


def _hits(run: Mapping[str, float], qrels: Mapping[str, int], docs: Mapping[str, tuple[str, str]], n: int) -> tuple[str, int]:
    """The top ``n`` shown hits of one query as an HTML list, and how many were withheld."""
    items, withheld = [], 0
    for doc_id in trec_ranking(run):
        info = docs.get(doc_id)
        if info is None or is_restricted(info[1]):
            withheld += 1
            continue
        grade = qrels.get(doc_id, 0)
        mark = f' <span class="rel">✓ rel {grade}</span>' if grade > 0 else ""
        title = info[0] if len(info[0]) <= 90 else info[0][:87] + "…"
        items.append(f"<li><code>{_esc(doc_id)}</code> {_esc(title)}{mark}</li>")
        if len(items) == n:
            break
    return '<ol class="hits">' + "".join(items) + "</ol>", withheld


def disagreements(modes: Sequence[ModeRun], metric: str = "ndcg@10", limit: int = DISAGREEMENTS) -> list[tuple[str, float]]:
    """Query ids ordered by the spread (max − min) of ``metric`` across modes; ties by id."""
    spreads = []
    for q in modes[0].report.per_query:
        vals = [m.report.per_query.get(q, {}).get(metric, 0.0) for m in modes]
        spreads.append((q, max(vals) - min(vals)))
    spreads.sort(key=lambda t: (-t[1], t[0]))
    return [s for s in spreads if s[1] > 0][:limit]


def render_report(data: ReportData) -> str:
    """The report as one HTML string (see the module docstring for its sections)."""
    modes, base = data.modes, data.modes[0]
    out = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{_esc(data.title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_esc(data.title)}</h1>"]
    if data.subtitle:
        out.append(f'<p class="sub">{_esc(data.subtitle)}</p>')

    out.append("<h2>Metrics per mode</h2><table><tr><th>mode</th><th>nDCG@10</th><th>R@100</th><th>MRR@10</th>"
               "<th>queries</th><th>ms/query</th><th>details</th></tr>")
    best = max(m.report.ndcg_at_10 for m in modes)
    for m in modes:
        r = m.report
        nd = f"<b>{r.ndcg_at_10:.4f}</b>" if r.ndcg_at_10 == best else f"{r.ndcg_at_10:.4f}"
        ms = f"{m.ms_per_query:.1f}" if m.ms_per_query is not None else "–"
        details = ", ".join(f"{_esc(k)} {_esc(v)}" for k, v in m.details.items() if v not in (None, ""))
        out.append(f"<tr><td>{_esc(m.label)}</td><td class=\"num\">{nd}</td><td class=\"num\">{r.recall_at_100:.4f}</td>"
                   f"<td class=\"num\">{r.mrr_at_10:.4f}</td><td class=\"num\">{r.n_queries}</td><td class=\"num\">{ms}</td>"
                   f"<td>{details}</td></tr>")
    out.append("</table>")

    comparisons = [(f"{m.label} − {base.label}", paired_bootstrap(base.report.metric("ndcg@10"), m.report.metric("ndcg@10")))
                   for m in modes[1:]]
    out.append(f"<h2>Paired bootstrap against {_esc(base.label)}</h2>")
    if comparisons:
        out.append("<table><tr><th>comparison</th><th>difference</th><th>95% interval</th><th>p</th></tr>")
        for label, b in comparisons:
            out.append(f"<tr><td>{_esc(label)}</td><td class=\"num\">{b.mean_difference:+.4f}</td>"
                       f"<td class=\"num\">{b.ci_low:+.4f} … {b.ci_high:+.4f}</td><td class=\"num\">{b.p_value:.4f}</td></tr>")
        n = comparisons[0][1]
        out.append(f"</table><p class=\"note\">nDCG@10, {n.n_resamples:,} resamples of the {n.n_queries} queries, seed {n.seed}; "
                   "an interval that excludes 0 is drawn green (better) or red (worse).</p>")
        out.append('<div class="plots">' + interval_svg(comparisons) + "</div>")
    else:
        out.append('<p class="note">one mode only: evaluate several (e.g. --mode bm25,hybrid) to compare them.</p>')

    out.append('<h2>nDCG@k</h2><div class="plots">' + ndcg_curve_svg(modes) + "</div>")

    if len(modes) > 1:
        out.append(f"<h2>Per query: {_esc(base.label)} against each mode</h2><div class=\"plots\">")
        out += [scatter_svg(base, m) for m in modes[1:]]
        out.append('</div><p class="note">one point per query (nDCG@10); above the diagonal the other mode is better.</p>')

        rows = disagreements(modes)
        out.append("<h2>Where the modes disagree most</h2>")
        if not rows:
            out.append('<p class="note">the modes score every query the same.</p>')
        else:
            out.append("<table><tr><th>query</th>" + "".join(f"<th>{_esc(m.label)}</th>" for m in modes) + "</tr>")
            total_withheld = 0
            for q, _spread in rows:
                cells = []
                for m in modes:
                    lst, withheld = _hits(m.run.get(q, {}), data.qrels.get(q, {}), data.docs, HITS_SHOWN)
                    total_withheld += withheld
                    cells.append(f"<td>nDCG@10 <b>{m.report.per_query[q]['ndcg@10']:.3f}</b>{lst}</td>")
                out.append(f"<tr><td><span class=\"q\">{_esc(data.queries.get(q, ''))}</span><br>"
                           f"<span class=\"note\">query {_esc(q)}</span></td>" + "".join(cells) + "</tr>")
            out.append("</table>")
            if total_withheld:
                out.append(f'<p class="note">{total_withheld} hit(s) of RESTRICTED or unknown documents withheld.</p>')
    out.append('<p class="note">Generated by <code>ragspine eval --report</code>; self-contained (inline SVG, no scripts).</p>')
    out.append("</body></html>")
    return "\n".join(out)


def write_report(out_dir: str | Path, data: ReportData) -> Path:
    """Write ``index.html`` into ``out_dir`` (created if needed) and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_FILE
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_report(data), encoding="utf-8")
    tmp.replace(path)
    return path
