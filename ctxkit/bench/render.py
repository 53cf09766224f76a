"""Rendering a bench report: the table and the plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxkit.bench.peers import PEER_LABELS, PEERS
from ctxkit.bench.records import BenchReport, Figure, SuiteResult, Table, fmt_value
from ctxkit.bench.suites import TABLES
from ctxkit.errors import UsageError


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


def _no_tables(_s: SuiteResult) -> list[Table]:
    return []


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
        for caption, head, rows in TABLES.get(name, _no_tables)(s):
            lines.append("")
            if caption:
                lines.append(caption)
            lines += _table(head, rows)
        for why in s.skipped:
            lines.append(f"  skipped: {why}")
    for name, why in (report.options.get("left_out") or {}).items():
        lines += ["", f"== {name}: left out by --quick ({why}) =="]
    return "\n".join(lines) + "\n"


# One colour per peer in every panel; the scale suite's scenarios get colours of their own.
# one colour per peer, from the registry's order (matplotlib's tab10): a new peer gets its own
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")
PEER_COLORS = {p: _PALETTE[k % len(_PALETTE)] for k, p in enumerate(PEERS)}
_SCENARIO_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")

# (title, unit, value of one summary line or None when not measured); one measure per panel
_PEER_MEASURES: tuple[tuple[str, str, Any], ...] = (
    ("transcripts that fit the goal", "share of transcripts", lambda x: x["fits"] / (x["transcripts"] or 1)),
    ("needles kept (in context or recallable)", "share", lambda x: x.get("needle_retention_with_recall")),
    ("needles in context", "share", lambda x: x.get("needle_retention")),
    ("P1 units kept (mean)", "share", lambda x: x.get("p1_kept")),
    ("last request kept", "share of transcripts", lambda x: x["last_request_kept"] / (x["transcripts"] or 1)),
    (
        "tool call/result pairs intact",
        "share of transcripts",
        lambda x: 1 - x["transcripts_with_broken_pairs"] / (x["transcripts"] or 1),
    ),
    ("coherence, lexical embedder", "similarity 0-1", lambda x: x.get("coherence_lexical")),
    ("coherence, minilm embedder", "similarity 0-1", lambda x: x.get("coherence_minilm")),
    ("tokens after / goal", "ratio (1 = on the goal)", lambda x: x.get("tokens_after_over_goal")),
    ("time to fit the budget", "ms per transcript (median)", lambda x: x.get("time_ms_median")),
)

# (row key, title, unit): the scale suite, one measure per panel, log-log
_SCALE_MEASURES = (
    ("compact_s", "compaction time", "seconds"),
    ("count_s", "count time, cold cache", "seconds"),
    ("compact_peak_rss_delta_mb", "peak RSS growth during compaction", "MB"),
)


def plot(report: BenchReport, path: str) -> None:
    """Chart the scale suite and the peer comparison into a PNG or SVG file (atomic write):
    one measure per panel, one colour per peer throughout, bars only on linear axes."""
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

    cols = 4
    scale_rows = 1 if scale and scale.rows else 0
    peer_rows = -(-(len(_PEER_MEASURES) + 1) // cols) if quality and quality.summary else 0
    fig = plt.figure(figsize=(17, 3.9 * (scale_rows + peer_rows) + 1.2))
    grid = fig.add_gridspec(scale_rows + peer_rows, cols)
    if scale_rows and scale:
        for i, (key, title, unit) in enumerate(_SCALE_MEASURES):
            _plot_scale(fig.add_subplot(grid[0, i]), scale, key, title, unit)
        _scale_note(fig.add_subplot(grid[0, 3]), scale)
    if peer_rows and quality:
        axes = [
            fig.add_subplot(grid[scale_rows + k // cols, k % cols])
            for k in range(len(_PEER_MEASURES) + 1)
        ]
        for ax, measure in zip(axes, _PEER_MEASURES, strict=False):
            _plot_peer_measure(ax, quality, *measure)
        _peer_legend(axes[len(_PEER_MEASURES)], quality)
    m = report.machine
    embedder = report.options.get("embedder") or _default_embedder()
    fig.suptitle(
        f"ctxkit bench, {m.get('date_utc')}: {m.get('cpu_count')} cores, Python "
        f"{m.get('python')}, load {m.get('load_average_start')}\n"
        f"ctxkit chain: relevance by the {embedder} embedder (the default); coherence scored "
        "by the lexical (BM25) and minilm (all-MiniLM-L6-v2) embedders",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    from ctxkit.atomic import atomic_writer

    with atomic_writer(path, "wb") as fh:
        fig.savefig(fh, format=suffix[1:], dpi=100)
    plt.close(fig)


def _default_embedder() -> str:
    from ctxkit.embedders import DEFAULT_EMBEDDER

    return DEFAULT_EMBEDDER


def _plot_scale(ax: Any, scale: SuiteResult, key: str, title: str, unit: str) -> None:
    scenarios = list(dict.fromkeys(r["scenario"] for r in scale.rows))
    for k, scenario in enumerate(scenarios):
        rs = [r for r in scale.rows if r["scenario"] == scenario and r.get(key) is not None]
        if not rs:
            continue
        label = scenario
        if key == "compact_s":
            slope = next(
                (
                    x["slope"]
                    for x in scale.summary
                    if x["measure"] == "compaction time" and x["scenario"] == scenario
                ),
                None,
            )
            label += f" (slope {slope:.2f})" if slope is not None else ""
        ax.plot(
            [r["tokens"] for r in rs],
            [max(float(r[key]), 1e-3 if unit == "MB" else 1e-5) for r in rs],
            "o-",
            color=_SCENARIO_COLORS[k % len(_SCENARIO_COLORS)],
            label=label,
        )
    if key == "compact_s":
        lo = min(r["tokens"] for r in scale.rows)
        hi = max(r["tokens"] for r in scale.rows)
        base = min(r["compact_s"] for r in scale.rows if r["tokens"] == lo)
        ax.plot(
            [lo, hi], [base, base * hi / lo], color="black", alpha=0.25, lw=3, label="linear (slope 1)"
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("transcript size (tokens, log)")
    ax.set_ylabel(f"{unit} (log)")
    ax.set_title(f"Scale: {title}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def _scale_note(ax: Any, scale: SuiteResult) -> None:
    ax.axis("off")
    lines = ["Scale suite: one fresh process per size;", "lines are the simulated scenarios."]
    big = max(scale.rows, key=lambda r: r["tokens"])
    lines.append(f"Largest: {big['tokens']:,} tokens, {big['units']:,} units.")
    lines.append(f"Compaction / one tiktoken pass: {big.get('compact_over_tiktoken')}x")
    ax.text(0, 0.9, "\n".join(lines), va="top", fontsize=9)


def _plot_peer_measure(ax: Any, quality: SuiteResult, title: str, unit: str, value: Any) -> None:
    sources = list(dict.fromkeys(r["source"] for r in quality.summary))
    peers = [p for p in PEERS if any(r["peer"] == p for r in quality.summary)]
    width = 0.8 / max(1, len(peers))
    share = unit.startswith(("share", "similarity"))
    values: dict[tuple[int, int], float] = {}
    for k, peer in enumerate(peers):
        for i, source in enumerate(sources):
            line = next(
                (r for r in quality.summary if r["peer"] == peer and r["source"] == source), None
            )
            v = value(line) if line is not None else None
            if v is not None:
                values[(k, i)] = float(v)
    top = max([*values.values(), 0.0]) or 1.0
    for (k, i), v in values.items():
        x = i + (k - (len(peers) - 1) / 2) * width
        ax.bar(x, v, width, color=PEER_COLORS.get(peers[k], "grey"))
        # the value on every bar: a 0 reads as 0, not as a missing bar
        label = f"{v:.2f}" if share or v < 10 else f"{v:.0f}"
        ax.text(x, v, label, ha="center", va="bottom", fontsize=6.5, rotation=90 if share else 0)
    for i in range(len(sources)):
        if not any((k, i) in values for k in range(len(peers))):
            ax.text(i, (1.05 if share else top) / 2, "not measured\n(no ground truth)",
                    ha="center", va="center", fontsize=8, color="grey")  # fmt: skip
    counts = {r["source"]: r["transcripts"] for r in quality.summary}
    ax.set_xticks(range(len(sources)))
    ax.set_xticklabels([f"{s}\n({counts[s]} transcripts)" for s in sources], fontsize=8)
    ax.set_xlim(-0.5, len(sources) - 0.5)
    ax.set_ylim(0, 1.18 if share else top * 1.2)
    if share:
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    if title.startswith("tokens after"):
        ax.axhline(1.0, color="black", lw=1, alpha=0.5)
    ax.set_ylabel(unit, fontsize=8)
    ax.set_title(f"Peers: {title}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def _peer_legend(ax: Any, quality: SuiteResult) -> None:
    from matplotlib.patches import Patch

    ax.axis("off")
    peers = [p for p in PEERS if any(r["peer"] == p for r in quality.summary)]
    handles = [Patch(color=PEER_COLORS.get(p, "grey"), label=PEER_LABELS.get(p, p)) for p in peers]
    ax.legend(handles=handles, loc="center", title="peers (same colour in every panel)", fontsize=9)
