"""Tables and pages for `ctxkit replay` (what each agent would have kept) and `ctxkit forensics`
(what the compactions in logs lost and cost): text for the terminal, and self-contained HTML in
the compaction page's style (`report.html`: inline CSS, no script, a Content-Security-Policy that
allows nothing else, every text from a log escaped).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ctxkit.english import counted
from ctxkit.report.html import _CSS, esc

MAX_DETAIL = 6  # compactions listed per agent in the terminal
_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
)


def _n(v: Any) -> str:
    return "—" if v is None else f"{v:,}"


def _share(v: Any) -> str:
    return "—" if v is None else f"{v:.2f}"


def _usd(v: Any) -> str:
    """Dollars as people write them: "$0.0012", "-$0.0012" (not "$-0.0012"), "$12.50"."""
    if v is None:
        return "—"
    sign, v = ("-", -v) if v < 0 else ("", v)
    return f"{sign}${v:,.4f}" if v < 1 else f"{sign}${v:,.2f}"


def _lost_gist(probes: Mapping[str, Any] | None) -> str:
    """`artifact 3, identifier 2` from a probe score's lost list."""
    if not probes:
        return ""
    counts: dict[str, int] = {}
    for p in probes.get("lost", []):
        counts[p["category"]] = counts.get(p["category"], 0) + 1
    return ", ".join(f"{k} {v}" for k, v in counts.items())


# --- replay ---------------------------------------------------------------------------------


def replay_rows(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per agent (no compaction first): the figures the table and the page show."""
    rows = []
    for a in [table["baseline"], *table["agents"]]:
        rows.append(
            {
                "agent": a["label"],
                "trigger": a["trigger"],
                "compactions": a["compactions"],
                "edits": a["edits"],
                "tokens_sent": a["tokens_sent"],
                "peak": a["peak_tokens"],
                "over": a["over_window_calls"],
                "kept": a["probes_kept_mean"],
                "kept_min": a["probes_kept_min"],
                "final": a["probes_final"]["recall"] if a["probes_final"] else None,
                "usd": a["cost"]["usd"] if a["cost"] else None,
            }
        )
    return rows


def _header(table: Mapping[str, Any]) -> str:
    line = (
        f"{table['transcript']}: {table['units']:,} messages; window {table['window']:,}, max output "
        f"{table['max_output']:,} ({table['model']})"
    )
    if table.get("unlogged_tokens"):
        line += f"; +{table['unlogged_tokens']:,} tokens per call the log never shows"
    return line


def replay_text(table: Mapping[str, Any]) -> str:
    """The terminal table of one session's replay, with each agent's compactions below it."""
    rows = replay_rows(table)
    priced = any(r["usd"] is not None for r in rows)
    head = [
        "agent",
        "fires at",
        "compactions",
        "edits",
        "tokens sent",
        "peak",
        "over",
        "probes kept (min)",
        "at end",
    ]
    if priced:
        head.append("cost")
    cells = []
    for r in rows:
        kept = "—" if r["kept"] is None else f"{r['kept']:.2f} ({r['kept_min']:.2f})"
        row = [
            r["agent"],
            _n(r["trigger"]),
            str(r["compactions"]),
            str(r["edits"]),
            _n(r["tokens_sent"]),
            _n(r["peak"]),
            str(r["over"]),
            kept,
            _share(r["final"]),
        ]
        if priced:
            row.append(_usd(r["usd"]))
        cells.append(row)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    lines = [_header(table), f"summaries: {table['summary_by']}", ""]
    fmt = lambda row: "  ".join(  # noqa: E731
        (v.ljust(w) if i == 0 else v.rjust(w))
        for i, (v, w) in enumerate(zip(row, widths, strict=True))
    ).rstrip()
    lines.append(fmt(head))
    lines.extend(fmt(c) for c in cells)
    details = []
    for a in table["agents"]:
        comps = [c for c in a["log"] if c["kind"] == "compaction"]
        for c in comps[:MAX_DETAIL]:
            lost = _lost_gist(c.get("probes"))
            details.append(
                f"  {a['label']} before call {c['call']}: {c['tokens_before']:,} -> {c['tokens_after']:,} tokens"
                + (f", summary {c['summary_tokens']:,}" if c["summary_tokens"] else "")
                + (
                    f", {c['cache_write_tokens']:,} written to the cache"
                    if c.get("cache_write_tokens") is not None
                    else ""
                )
                + (f"; probes {c['probes']['recall']:.2f}" if c.get("probes") else "")
                + (f", lost {lost}" if lost else "")
            )
        if len(comps) > MAX_DETAIL:
            details.append(
                f"  {a['label']}: {len(comps) - MAX_DETAIL} more compactions (--format json)"
            )
        if a.get("error"):
            details.append(f"  {a['label']}: {a['error']}")
    if details:
        lines += ["", "compactions:", *details]
    return "\n".join(lines) + "\n"


def _short_tokens(n: int) -> str:
    """A tick label: 0, 950, 12k, 1.05M."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}".rstrip("0").rstrip(".") + "M"
    if n >= 1_000:
        return f"{n / 1_000:.0f}k"
    return str(n)


def _chart(table: Mapping[str, Any], width: int = 900, height: int = 260) -> str:
    """Context size at each call, one line per agent, the window as a red line (inline SVG)."""
    series = [table["baseline"], *table["agents"]]
    calls = max((len(a["call_tokens"]) for a in series), default=0)
    top = max([table["window"], *(max(a["call_tokens"], default=0) for a in series)]) or 1
    if calls < 2:
        return ""
    pad = 44

    def xy(i: int, v: int) -> str:
        return f"{pad + i * (width - 2 * pad) / (calls - 1):.1f},{height - pad - v * (height - 2 * pad) / top:.1f}"

    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="context per call">'
    ]
    # the y axis: tokens sent per call, with ticks at 0, half and the top
    parts.append(
        f'<line x1="{pad}" x2="{pad}" y1="{pad}" y2="{height - pad}" stroke="#5f6b76" stroke-width="0.5"/>'
        f'<line x1="{pad}" x2="{width - pad}" y1="{height - pad}" y2="{height - pad}" stroke="#5f6b76" stroke-width="0.5"/>'
    )
    for tick in (0, top // 2, top):
        ty = height - pad - tick * (height - 2 * pad) / top
        parts.append(
            f'<text x="{pad - 4}" y="{ty + 4:.1f}" font-size="10" fill="#5f6b76" text-anchor="end">'
            f'{_short_tokens(tick)}</text>'
        )
    parts.append(
        f'<text x="12" y="{height / 2:.1f}" font-size="11" fill="#5f6b76" text-anchor="middle" '
        f'transform="rotate(-90 12 {height / 2:.1f})">tokens sent per call</text>'
    )
    wy = height - pad - table["window"] * (height - 2 * pad) / top
    parts.append(
        f'<line x1="{pad}" x2="{width - pad}" y1="{wy:.1f}" y2="{wy:.1f}" stroke="#d0312d" stroke-dasharray="4 3"/>'
    )
    parts.append(
        f'<text x="{pad}" y="{wy - 4:.1f}" font-size="11" fill="#d0312d">window {table["window"]:,}</text>'
    )
    for k, a in enumerate(series):
        color = "#bab0ac" if k == 0 else _COLORS[(k - 1) % len(_COLORS)]
        pts = " ".join(xy(i, v) for i, v in enumerate(a["call_tokens"]))
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"><title>{esc(a["label"])}</title></polyline>'
        )
    parts.append(
        f'<text x="{pad}" y="{height - 12}" font-size="11" fill="#5f6b76">model calls (1 to {calls:,}) →</text></svg>'
    )
    legend = "".join(
        f'<span class="key" style="background:{"#bab0ac" if k == 0 else _COLORS[(k - 1) % len(_COLORS)]}"></span>{esc(a["label"])}'
        for k, a in enumerate(series)
    )
    return "\n".join(parts) + f'<div class="legend">{legend}</div>'


def _replay_section(k: int, table: Mapping[str, Any]) -> Iterator[str]:
    yield f'<section class="session" id="s{k}"><h2>{esc(table["transcript"])}</h2>'
    yield f'<p class="lead">{esc(_header(table))}<br>summaries: {esc(table["summary_by"])}</p>'
    rows = replay_rows(table)
    priced = any(r["usd"] is not None for r in rows)
    yield '<table class="agents"><thead><tr><th>agent</th><th class="num">fires at</th><th class="num">compactions</th>'
    yield '<th class="num">edits</th><th class="num">tokens sent</th><th class="num">peak</th><th class="num">calls over window</th>'
    yield (
        '<th class="num">probes kept (min)</th><th class="num">at end</th>'
        + ('<th class="num">cost</th>' if priced else "")
        + "</tr></thead><tbody>"
    )
    for r, a in zip(rows, [table["baseline"], *table["agents"]], strict=True):
        kept = "—" if r["kept"] is None else f"{r['kept']:.2f} ({r['kept_min']:.2f})"
        yield (
            f'<tr data-agent="{esc(a["agent"])}" data-compactions="{r["compactions"]}" data-sent="{r["tokens_sent"]}">'
            f'<td title="{esc(a["rule"])}">{esc(r["agent"])}</td><td class="num">{_n(r["trigger"])}</td>'
            f'<td class="num">{r["compactions"]}</td><td class="num">{r["edits"]}</td><td class="num">{_n(r["tokens_sent"])}</td>'
            f'<td class="num">{_n(r["peak"])}</td><td class="num">{r["over"]}</td><td class="num">{kept}</td>'
            f'<td class="num">{_share(r["final"])}</td>'
            + (f'<td class="num">{_usd(r["usd"])}</td>' if priced else "")
            + "</tr>"
        )
    yield "</tbody></table>"
    yield _chart(table)
    for a in table["agents"]:
        log = a["log"]
        events = f"{len(log)} event" + ("" if len(log) == 1 else "s")
        yield f'<details class="agent"><summary><b>{esc(a["label"])}</b>: {esc(a["rule"])} — {events}</summary>'
        if a.get("source"):
            yield f'<p class="source">Rule read from {esc(a["source"])} (cited in docs/agents.md).</p>'
        if log:
            yield '<table class="log"><thead><tr><th class="num">call</th><th>what</th><th class="num">before</th><th class="num">after</th><th class="num">summary</th><th class="num">probes</th><th>lost</th></tr></thead><tbody>'
            for c in log:
                probes = c.get("probes")
                lost = "; ".join(
                    f"{p['category']}: {p['key']}" for p in (probes or {}).get("lost", [])[:20]
                )
                yield (
                    f'<tr class="ev ev-{esc(c["kind"])}"><td class="num">{c["call"]}</td><td>{esc(c["kind"])}: {esc(c["note"])}</td>'
                    f'<td class="num">{_n(c["tokens_before"])}</td><td class="num">{_n(c["tokens_after"])}</td>'
                    f'<td class="num">{_n(c["summary_tokens"] or None)}</td>'
                    f'<td class="num">{_share(probes["recall"]) if probes else "—"}</td><td class="lost">{esc(lost)}</td></tr>'
                )
            yield "</tbody></table>"
        yield "</details>"
    yield "</section>"


# --- forensics ------------------------------------------------------------------------------


def forensics_text(sessions: Sequence[Mapping[str, Any]]) -> str:
    """The terminal report: sessions most loss first, then each compaction."""
    if not sessions:
        return "no compaction found in these logs\n"
    lines = [f"{counted(len(sessions), 'session')} with compactions, the most lost first", ""]
    head = [
        "session",
        "compactions",
        "lost probes",
        "re-read files",
        "summary tokens",
        "cost",
        "priced as",
    ]
    cells = [
        [
            s["source"].rsplit("/", 1)[-1] or s["transcript"],
            str(len(s["compactions"])),
            "—" if s["lost_probes"] is None else str(s["lost_probes"]),
            str(s["rereads"]),
            " > ".join(
                f"{c['summary_tokens']:,}" if c["summary_readable"] else "encrypted"
                for c in s["compactions"]
            ),
            _usd(s["usd"]) if s["priced_as"] else "—",
            s["priced_as"] or "—",
        ]
        for s in sessions
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(  # noqa: E731
        (v.ljust(w) if i in (0, 6) else v.rjust(w))
        for i, (v, w) in enumerate(zip(row, widths, strict=True))
    ).rstrip()
    lines.append(fmt(head))
    lines.extend(fmt(c) for c in cells)
    for s in sessions:
        lines += [
            "",
            f"{s['source'] or s['transcript']} ({s['format']}, {s['model'] or 'model not named'})",
        ]
        if s.get("note"):
            lines.append(f"  note: {s['note']}")
        for c in s["compactions"]:
            lines.extend(_compaction_lines(c))
        best = max(s.get("compaction_points") or [], key=lambda r: r["net_usd"], default=None)
        if best is not None:
            lines.append(
                f"  compacting at each call: best after call {best['call']} ({best['input_tokens']:,} tokens), "
                f"{_usd(best['net_usd'])} saved by the {'next compaction' if best.get('until') == 'compaction' else 'end of the session'}"
            )
    return "\n".join(lines) + "\n"


def _compaction_lines(c: Mapping[str, Any]) -> list[str]:
    rec = (
        f"{_n(c['recorded_tokens_before'])} -> {_n(c['recorded_tokens_after'])} recorded"
        if c["recorded_tokens_before"] is not None
        else "not recorded"
    )
    out = [
        f"  #{c['number']} {c['trigger'] or ''}".rstrip()
        + f": {rec}; counted {c['tokens_before']:,} -> {c['tokens_after']:,}; summary {c['summary_tokens']:,} tokens"
        + ("" if c["summary_readable"] else " (encrypted)")
        + (f", {c['kept_messages']} messages kept" if c["kept_messages"] else "")
    ]
    p = c.get("probes")
    if p is None:
        out.append("     lost: the history before it is not in this log")
    else:
        gist = _lost_gist(p)
        out.append(
            f"     probes kept {p['recall']:.2f}"
            + (f"; lost {len(p['lost'])}: {gist}" if gist else "")
        )
        for q in p["lost"][:3]:
            out.append(f"       - {q['category']}: {q['key'][:100]}")
    if c["rereads"]:
        names = ", ".join(x.rsplit("/", 1)[-1] for x in c["rereads"][:6]) + (
            " ..." if len(c["rereads"]) > 6 else ""
        )
        out.append(f"     re-read {len(c['rereads'])} files ({c['reread_calls']} reads): {names}")
    e = c.get("economics")
    if e:
        paid = (
            f"paid back after {e['break_even_calls']} calls"
            if e["paid_back"]
            else "never paid back"
        ) + f" ({_usd(e['saved_usd'])} net over {e['calls_after']} calls)"
        carry = (
            f"; carrying on would have overflowed the window at call {e['carry_overflow_call']}"
            if e["carry_overflow_call"]
            else ""
        )
        out.append(
            f"     cost {_usd(e['usd_cost'])}: summary call {_usd(e['summary_call_usd'])}, cache rewrite "
            f"{_usd(e['rewrite_usd'])} ({e['cache_write_after']:,} written, {e['cache_read_after']:,} read); {paid}{carry}"
        )
    return out


def _forensics_section(k: int, s: Mapping[str, Any]) -> Iterator[str]:
    yield f'<section class="session" id="s{k}"><h2>{esc(s["source"] or s["transcript"])}</h2>'
    priced = f"; priced as {esc(s['priced_as'])}" if s["priced_as"] else "; not priced"
    yield f'<p class="lead">{esc(s["format"])}, {esc(s["model"] or "model not named")}{priced}'
    if s.get("note"):
        yield f"<br>{esc(s['note'])}"
    yield "</p>"
    yield '<table class="compactions"><thead><tr><th>#</th><th class="num">recorded before</th><th class="num">after</th>'
    yield '<th class="num">summary</th><th class="num">probes kept</th><th class="num">lost</th><th class="num">re-read files</th>'
    yield '<th class="num">cost</th><th>paid back</th></tr></thead><tbody>'
    for c in s["compactions"]:
        p, e = c.get("probes"), c.get("economics")
        paid = (
            "—"
            if not e
            else (f"after {e['break_even_calls']} calls" if e["paid_back"] else "never")
        )
        yield (
            f'<tr class="compaction" data-lost="{len(p["lost"]) if p else 0}" data-rereads="{len(c["rereads"])}">'
            f'<td>{c["number"]}</td><td class="num">{_n(c["recorded_tokens_before"])}</td><td class="num">{_n(c["recorded_tokens_after"])}</td>'
            f'<td class="num">{_n(c["summary_tokens"]) if c["summary_readable"] else "encrypted"}</td><td class="num">{_share(p["recall"]) if p else "—"}</td>'
            f'<td class="num">{len(p["lost"]) if p else "—"}</td><td class="num">{len(c["rereads"])}</td>'
            f'<td class="num">{_usd(e["usd_cost"]) if e else "—"}</td><td>{paid}</td></tr>'
        )
    yield "</tbody></table>"
    for c in s["compactions"]:
        p = c.get("probes")
        gist = (
            "the history before it is not in this log"
            if p is None
            else _lost_gist(p) or "nothing lost"
        )
        yield f'<details class="compaction-detail"><summary>#{c["number"]}: {esc(gist)}</summary>'
        for line in _compaction_lines(c)[1:]:
            yield f'<div class="now">{esc(line.strip())}</div>'
        if p and p["lost"]:
            yield (
                '<ul class="lost">'
                + "".join(f"<li>{esc(q['category'])}: {esc(q['key'])}</li>" for q in p["lost"])
                + "</ul>"
            )
        if c["rereads"]:
            yield (
                '<p>re-read:</p><ul class="rereads">'
                + "".join(f"<li>{esc(x)}</li>" for x in c["rereads"])
                + "</ul>"
            )
        yield "</details>"
    yield "</section>"


# --- pages ----------------------------------------------------------------------------------

_EXTRA_CSS = """
.chart{display:block;margin:10px 0;max-width:100%;height:auto;border:1px solid var(--line)}
table.agents,table.compactions{width:auto}.lost{overflow-wrap:anywhere}details.agent,details.compaction-detail{margin:6px 0}
.legend .key{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px}
p.source{margin:4px 0 4px 18px;color:var(--mute);font-size:.9em}
"""


def page(title: str, sections: Sequence[str], lead: str = "") -> str:
    """A self-contained page: inline CSS, no script, a CSP that allows nothing else."""
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    body = "\n".join(sections)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}{_EXTRA_CSS}</style></head>\n<body>\n"
        f"<header><h1>{esc(title)}</h1>{f'<p class=lead>{esc(lead)}</p>' if lead else ''}</header>\n<main>\n{body}\n</main>\n</body></html>\n"
    )


def replay_page(tables: Sequence[Mapping[str, Any]]) -> str:
    """The page of `ctxkit replay --html`: one section per session."""
    sections = ["\n".join(_replay_section(k, t)) for k, t in enumerate(tables)]
    return page("ctxkit replay: what each agent would have kept", sections)


def forensics_page(sessions: Sequence[Mapping[str, Any]]) -> str:
    """The page of `ctxkit forensics --html`: sessions most loss first."""
    sections = ["\n".join(_forensics_section(k, s)) for k, s in enumerate(sessions)]
    if not sessions:
        sections = ["<p>No compaction found in these logs.</p>"]
    return page("ctxkit forensics: what the compactions in these logs lost and cost", sections)


__all__ = ["forensics_page", "forensics_text", "page", "replay_page", "replay_rows", "replay_text"]
