"""`count`'s tables for people: region, breakdown, cost and layout rows (dollars to four
decimals, long paths cut from the left), the --diff table and the --calibrate report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from ctxkit.report.tables import render_table, write_rows

if TYPE_CHECKING:
    from ctxkit.calibration import Calibration


def write_count_rows(rows: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    """Region, breakdown or cost rows in `fmt`; a table shows dollars and short labels."""
    if fmt == "table":
        rows = [short_labels(dollars(r)) for r in rows]
    write_rows(rows, fmt, out)


def write_layout_rows(
    layout_rows: list[dict[str, Any]], cost_rows: list[dict[str, Any]], fmt: str, out: TextIO
) -> None:
    """Sections or prompt-cache layouts; with --cost, the transcripts' cost rows after them."""
    rows = [dollars(r) for r in layout_rows] if fmt == "table" else layout_rows
    write_rows(rows, fmt, out)
    if cost_rows:
        if fmt == "table":
            out.write("\n")
        write_count_rows(cost_rows, fmt, out)


def write_diff_rows(rows: list[dict[str, Any]], fmt: str, out: TextIO) -> None:
    """`count --diff`'s rows; a table cuts long file names from the left."""
    if fmt == "table":
        rows = [{**r, "file": short_labels({"transcript": r["file"]})["transcript"]} for r in rows]
    write_rows(rows, fmt, out)


def dollars(row: dict[str, Any]) -> dict[str, Any]:
    """Dollar columns to four decimals in a table (a table would round $0.0055 to 0.0)."""
    return {k: f"{v:.4f}" if k.startswith("$") and isinstance(v, float) else v for k, v in row.items()}


def short_labels(row: dict[str, Any], width: int = 48) -> dict[str, Any]:
    """Cut long paths from the left for tables: the end of a path names the file."""
    label = row.get("transcript")
    if isinstance(label, str) and len(label) > width:
        return {**row, "transcript": "…" + label[-(width - 1) :]}
    return row


def _short_name(name: str) -> str:
    """A column label: the encoding without its `_base`, `max:<name>` as `max`."""
    return "max" if name.startswith("max:") else name.removesuffix("_base")


def write_calibration(cal: Calibration, fmt: str, out: TextIO) -> None:
    """`count --calibrate`: each call's provider count beside every tokenizer's, per session and
    per tokenizer (tables), or every row as JSON lines / CSV."""
    calls = cal.call_rows()
    summary = cal.summary()
    if fmt != "table":
        rows = (
            [{"kind": "call", **r} for r in calls]
            + [{"kind": "session", **r} for r in cal.sessions()]
            + [{"kind": "summary", **r} for r in summary]
        )
        write_rows(rows, fmt, out)
        return
    available = [n for n in cal.tokenizers if n not in cal.unavailable]
    many = len({r["transcript"] for r in calls}) > 1
    call_rows = []
    for r in calls:
        row: dict[str, Any] = {}
        if many:
            row["session"] = short_labels({"transcript": r["transcript"]}, 32)["transcript"]
        row["call"] = r["call"]
        row["after unit"] = r["after_unit"]
        row["provider"] = r["provider"]
        for n in available:
            short = _short_name(n)
            row[short] = r.get(f"est:{n}")
            row[f"{short} err%"] = r.get(f"err_pct:{n}")
            row[f"{short} adj%"] = r.get(f"adj_err_pct:{n}")
        call_rows.append(row)
    sources = sorted({str(r.get("source")) for r in calls})
    out.write(f"Input tokens per call: provider ({', '.join(sources)}) vs ctxkit estimates\n")
    out.write(render_table(call_rows) + "\n\n")
    summary_rows = [
        {
            "tokenizer": s["tokenizer"],
            "calls": s["calls"],
            "mean |err|": s["mean_abs_err"],
            "mean |err|%": s["mean_abs_err_pct"],
            "mean err%": s["mean_err_pct"],
            "offset": s["median_offset"],
            "adj |err|": s["mean_abs_err_adj"],
            "adj |err|%": s["mean_abs_err_pct_adj"],
            "adj err%": s["mean_err_pct_adj"],
        }
        for s in summary
        if "note" not in s
    ]
    if many:
        session_rows = []
        for r in cal.sessions():
            row = {"session": short_labels({"transcript": r["transcript"]}, 40)["transcript"]}
            row["calls"] = r.get("calls")
            for n in available:
                row[f"{_short_name(n)} offset"] = r.get(f"offset:{n}")
                row[f"{_short_name(n)} adj |err|%"] = r.get(f"adj_abs_err_pct:{n}")
            session_rows.append(row)
        out.write("Per session\n")
        out.write(render_table(session_rows) + "\n\n")
    out.write("Summary per tokenizer\n")
    out.write(render_table(summary_rows) + "\n")
    for s in summary:
        if "note" in s:
            out.write(f"{s['tokenizer']}: {s['note']}\n")
    out.write(
        "\nerr = estimate - provider. offset = median(provider - estimate) per session: the "
        "fixed part the log\ndoes not show (system prompt, tool schemas) and the tokenizers' "
        "difference on the content, together\n(`ctxkit count` and `guard` fit them apart: "
        "docs/guard.md). adj = error after adding each session's\noffset back.\n"
    )
