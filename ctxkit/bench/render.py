"""Rendering a bench report: the table and the plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxkit.bench.harness import BenchReport, Figure, SuiteResult
from ctxkit.bench.peers import PEER_LABELS, PEERS
from ctxkit.errors import UsageError


def fmt_value(x: Any) -> str:
    """A figure as the tables show it: thousands separators, three significant figures when small."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if x == 0:
            return "0"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        if abs(x) >= 0.1:
            return f"{x:.2f}"
        return f"{x:.3g}"
    return str(x)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[fmt_value(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    for r in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return out


def _target(f: Figure) -> str:
    if f.target is None:
        return "-"
    sign = "<" if f.better == "lower" else ">="
    return f"{sign} {fmt_value(f.target)}"


PEER_COLUMNS = (
    ("peer", "peer"),
    ("source", "set"),
    ("transcripts", "n"),
    ("fits", "fits"),
    ("tokens_after_over_goal", "tokens/goal"),
    ("time_ms_median", "time ms (median)"),
    ("broken_pairs", "broken pairs"),
    ("p1_kept", "P1 kept (mean)"),
    ("all_p1_kept", "all P1 kept"),
    ("needle_retention", "needles"),
    ("needle_retention_with_recall", "+recall"),
    ("last_request_kept", "last req."),
    ("coherence_lexical", "coh. lexical"),
    ("coherence_minilm", "coh. minilm"),
)

# The fidelity table: what each peer kept of what a model needs to go on (`ctxkit.fidelity`).
FIDELITY_COLUMNS = (
    ("peer", "peer"),
    ("source", "set"),
    ("transcripts", "n"),
    ("needle_retention", "needles present"),
    ("files_trail", "files-touched trail"),
    ("user_verbatim", "user msgs verbatim"),
    ("user_verbatim_in_budget", "in budget"),
    ("last_request_verbatim", "last req. verbatim"),
)


def peer_rows(
    summary: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]
) -> tuple[list[str], list[list[Any]]]:
    """The headers and rows of a per-peer table: the columns some summary line has."""
    cols = [c for c in columns if any(c[0] in r for r in summary)]
    rows = []
    for r in summary:
        vals = []
        for key, _h in cols:
            v = r.get(key)
            if key in ("fits", "last_request_kept", "last_request_verbatim"):
                v = f"{v}/{r['transcripts']}"
            elif key == "all_p1_kept":
                v = f"{v}/{r['transcripts_with_p1']}" if r["transcripts_with_p1"] else None
            elif key == "peer":
                v = PEER_LABELS.get(str(v), v)
            vals.append(v)
        rows.append(vals)
    return [h for _k, h in cols], rows


def render_table(report: BenchReport) -> str:
    """The report for people: machine notes, then per suite its figures and tables."""
    m = report.machine
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v)
    lines = [
        f"ctxkit bench  {m['date_utc']}  {m['cpu_count']} cores ({m['cpu']}), Python {m['python']}",
        f"  {pk}",
        f"  load average at start {m.get('load_average_start')}, at end {m.get('load_average_end')}",
    ]
    for name, s in report.suites.items():
        lines += ["", f"== {name} ({s.time_s:.1f} s) =="]
        if s.figures:
            lines += _table(
                ("figure", "value", "unit", "target", "status", "note"),
                [(f.name, f.value, f.unit, _target(f), f.status(), f.note) for f in s.figures],
            )
        if name == "quality" and s.summary:
            lines.append("")
            lines += _table(*peer_rows(s.summary, PEER_COLUMNS))
            lines += ["", "fidelity (share kept; per transcript, then averaged):"]
            lines += _table(*peer_rows(s.summary, FIDELITY_COLUMNS))
        elif name == "scale" and s.rows:
            lines.append("")
            lines += _table(
                (
                    "scenario",
                    "tokens",
                    "units",
                    "tiktoken pass s",
                    "count s",
                    "compact s",
                    "x pass",
                    "peak RSS +MB",
                    "heap MB",
                    "strategies",
                ),
                [
                    (
                        r["scenario"],
                        r["tokens"],
                        r["units"],
                        r["tiktoken_pass_s"],
                        r["count_s"],
                        r["compact_s"],
                        r["compact_over_tiktoken"],
                        r["compact_peak_rss_delta_mb"],
                        r["compact_heap_peak_mb"],
                        r["strategies"],
                    )
                    for r in s.rows
                ],
            )
            if s.summary:
                lines.append("")
                lines += _table(
                    ("scenario", "measure", "log-log slope", "span"),
                    [(x["scenario"], x["measure"], x["slope"], x["span"]) for x in s.summary],
                )
        elif name == "compact" and s.rows:
            lines.append("")
            lines += _table(
                (
                    "transcript",
                    "set",
                    "tokens",
                    "limit",
                    "after",
                    "tiktoken ms",
                    "compact ms",
                    "x pass",
                ),
                [
                    (
                        r["transcript"],
                        r["source"],
                        r["tokens"],
                        r["limit"],
                        r["tokens_after"],
                        r["tiktoken_pass_ms"],
                        r["compact_ms"],
                        r["multiple"],
                    )
                    for r in s.rows
                ],
            )
        for why in s.skipped:
            lines.append(f"  skipped: {why}")
    return "\n".join(lines) + "\n"


def plot(report: BenchReport, path: str) -> None:
    """Chart the scale curve and the peer comparison into a PNG or SVG file (atomic write)."""
    scale = report.suites.get("scale")
    quality = report.suites.get("quality")
    if not (scale and scale.rows) and not (quality and quality.summary):
        raise UsageError("--plot charts the scale and quality suites; run one of them")
    suffix = Path(path).suffix.lower()
    if suffix not in (".png", ".svg"):
        raise UsageError(f"--plot {path}: give a .png or .svg file name")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if scale and scale.rows:
        panels += ["time", "memory"]
    if quality and quality.summary:
        panels += ["quality", "peer_time"]
    cols = 2
    rows_n = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows_n, cols, figsize=(13, 5 * rows_n), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, panel in zip(flat, panels, strict=False):
        if panel == "time" and scale:
            _plot_scale_time(ax, scale)
        elif panel == "memory" and scale:
            _plot_scale_memory(ax, scale)
        elif panel == "quality" and quality:
            _plot_quality(ax, quality)
        elif panel == "peer_time" and quality:
            _plot_peer_time(ax, quality)
    for ax in flat[len(panels) :]:
        ax.set_visible(False)
    m = report.machine
    fig.suptitle(
        f"ctxkit bench, {m['date_utc']}: {m['cpu_count']} cores, Python {m['python']}, "
        f"load {m.get('load_average_start')}",
        fontsize=11,
    )
    fig.tight_layout()
    from ctxkit.fileio import atomic_writer

    with atomic_writer(path, "wb") as fh:
        fig.savefig(fh, format=suffix[1:], dpi=110)
    plt.close(fig)


def _plot_scale_time(ax: Any, scale: SuiteResult) -> None:
    for scenario in dict.fromkeys(r["scenario"] for r in scale.rows):
        rs = [r for r in scale.rows if r["scenario"] == scenario]
        xs = [r["tokens"] for r in rs]
        ax.plot(xs, [r["compact_s"] for r in rs], "o-", label=f"compact ({scenario})")
        ax.plot(xs, [r["count_s"] for r in rs], "s--", label=f"count, cold ({scenario})")
        ax.plot(
            xs,
            [r["tiktoken_pass_s"] for r in rs],
            ":",
            color="grey",
            label=f"one tiktoken pass ({scenario})",
        )
    lo = min(r["tokens"] for r in scale.rows)
    hi = max(r["tokens"] for r in scale.rows)
    base = min(r["compact_s"] for r in scale.rows if r["tokens"] == lo)
    ax.plot(
        [lo, hi], [base, base * hi / lo], color="black", alpha=0.25, lw=3, label="linear (slope 1)"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("transcript tokens")
    ax.set_ylabel("seconds")
    slopes = ", ".join(
        f"{x['scenario']} {x['slope']:.2f}"
        for x in scale.summary
        if x["measure"] == "compaction time"
    )
    ax.set_title(f"Scale: time (compaction slope {slopes})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _plot_scale_memory(ax: Any, scale: SuiteResult) -> None:
    for scenario in dict.fromkeys(r["scenario"] for r in scale.rows):
        rs = [r for r in scale.rows if r["scenario"] == scenario]
        xs = [r["tokens"] for r in rs]
        ax.plot(
            xs,
            [max(r["compact_peak_rss_delta_mb"] or 0, 0.01) for r in rs],
            "o-",
            label=f"peak RSS growth ({scenario})",
        )
        ax.plot(
            xs,
            [max(r["compact_heap_peak_mb"], 0.01) for r in rs],
            "s--",
            label=f"Python heap peak ({scenario})",
        )
        ax.plot(
            xs,
            [r["chars"] / 2**20 for r in rs],
            ":",
            color="grey",
            label=f"transcript text MB ({scenario})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("transcript tokens")
    ax.set_ylabel("MB")
    ax.set_title("Scale: peak memory of one compaction", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def _plot_quality(ax: Any, quality: SuiteResult) -> None:
    sim = [r for r in quality.summary if r["source"] == "simulated"] or quality.summary
    metrics = [
        ("fits", "fits"),
        ("needle_retention_with_recall", "needles (+recall)"),
        ("needle_retention", "needles in context"),
        ("p1_kept", "P1 kept"),
        ("last_request_kept", "last request kept"),
        ("pairs_ok", "pairs intact"),
        ("coherence_lexical", "coherence (lexical)"),
        ("coherence_minilm", "coherence (minilm)"),
    ]
    metrics = [
        m
        for m in metrics
        if m[0] in ("fits", "last_request_kept", "pairs_ok") or any(m[0] in r for r in sim)
    ]
    width = 0.8 / max(1, len(sim))
    for k, line in enumerate(sim):
        n = line["transcripts"] or 1
        vals = []
        for key, _label_text in metrics:
            if key in ("fits", "last_request_kept"):
                vals.append(line[key] / n)
            elif key == "pairs_ok":
                vals.append(1 - line["transcripts_with_broken_pairs"] / n)
            else:
                vals.append(line.get(key) or 0.0)
        xs = [i + k * width for i in range(len(metrics))]
        ax.bar(xs, vals, width, label=PEER_LABELS.get(line["peer"], line["peer"]))
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(metrics))])
    ax.set_xticklabels([m[1] for m in metrics], rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1.3)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("share (higher is better)")
    source = sim[0]["source"] if sim else ""
    ax.set_title(
        f"Peers on {source} transcripts ({sim[0]['transcripts'] if sim else 0})", fontsize=10
    )
    ax.legend(fontsize=7, loc="upper center", ncol=2)
    ax.grid(True, axis="y", alpha=0.3)


def _plot_peer_time(ax: Any, quality: SuiteResult) -> None:
    sources = list(dict.fromkeys(r["source"] for r in quality.summary))
    width = 0.8 / max(1, len(PEERS))
    for k, peer in enumerate(PEERS):
        vals = []
        for s in sources:
            line = next(
                (r for r in quality.summary if r["peer"] == peer and r["source"] == s), None
            )
            vals.append(max((line or {}).get("time_ms_median") or 0.001, 0.001))
        ax.bar([i + k * width for i in range(len(sources))], vals, width, label=PEER_LABELS[peer])
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sources))])
    ax.set_xticklabels([f"{s} transcripts" for s in sources])
    ax.set_yscale("log")
    ax.set_ylabel("median time per transcript, ms (log)")
    ax.set_title("Peers: time to fit the budget", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", which="both", alpha=0.3)
