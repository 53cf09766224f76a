"""Render a `ctxkit bench --json` report as Markdown tables (the figures in BENCHMARKS.md).

Usage:
    .venv/bin/ctxkit bench --suite all --json -o bench.json
    .venv/bin/python scripts/bench_markdown.py bench.json > figures.md

Every number printed comes from the one report given; nothing is computed across runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ctxkit.bench import PEER_COLUMNS, fmt_value
from ctxkit.bench.suites.quality import peer_rows


def fmt(x: Any) -> str:
    """A Markdown cell: the bench table's number format, a dash for none, pipes escaped."""
    return "–" if x is None else fmt_value(x).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return out


def target(f: dict[str, Any]) -> str:
    if f["target"] is None:
        return "–"
    return ("< " if f["better"] == "lower" else "≥ ") + fmt(f["target"])


def status(f: dict[str, Any]) -> str:
    return "–" if f["passed"] is None else ("pass" if f["passed"] else "**miss**")


def render(report: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    m = report["machine"]
    lines = [
        f"Run {m['date_utc']} on {m['cpu_count']} cores ({m['cpu']}), {m['platform']}, "
        f"Python {m['python']}; load average (1, 5, 15 min) {m['load_average_start']} at the "
        f"start, {m.get('load_average_end')} at the end.",
        "",
        "Packages: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v) + ".",
    ]
    for name, s in report["suites"].items():
        lines += ["", f"### {name} ({s['time_s']:.0f} s)", ""]
        lines += table(
            ("figure", "measured", "unit", "target", "status", "how"),
            [
                (f["name"], f["value"], f["unit"], target(f), status(f), f["note"])
                for f in s["figures"]
            ],
        )
        if name == "quality" and s["summary"]:
            headers, rows = peer_rows(s["summary"], PEER_COLUMNS)
            lines += ["", *table(headers, rows)]
        if name == "compact" and s["rows"]:
            lines += [""]
            lines += table(
                ("transcript", "set", "units", "tokens", "limit", "after", "one tiktoken pass ms",
                 "compact ms", "multiple"),
                [
                    (r["transcript"], r["source"], r["units"], r["tokens"], r["limit"],
                     r["tokens_after"], r["tiktoken_pass_ms"], r["compact_ms"], r["multiple"])
                    for r in s["rows"]
                ],
            )  # fmt: skip
        if name == "scale" and s["rows"]:
            lines += [""]
            lines += table(
                ("scenario", "tokens", "units", "tiktoken pass s", "count s", "compact s",
                 "compact, file archive s", "× pass", "peak RSS +MB", "heap peak MB"),
                [
                    (r["scenario"], r["tokens"], r["units"], r["tiktoken_pass_s"], r["count_s"],
                     r["compact_s"], r["compact_file_archive_s"], r["compact_over_tiktoken"],
                     r["compact_peak_rss_delta_mb"], r["compact_heap_peak_mb"])
                    for r in s["rows"]
                ],
            )  # fmt: skip
            if s["summary"]:
                lines += [""]
                lines += table(
                    ("scenario", "measure", "log-log slope", "fitted over"),
                    [(x["scenario"], x["measure"], x["slope"], x["span"]) for x in s["summary"]],
                )
        for why in s["skipped"]:
            lines.append(f"\nSkipped: {why}")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Read the report and print it as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="JSON written by `ctxkit bench --json`")
    args = parser.parse_args()
    with open(args.report, encoding="utf-8") as fh:
        report = json.load(fh)
    sys.stdout.write(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
