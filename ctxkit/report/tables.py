"""Render rows (a list of flat dicts) for people (an aligned table) or machines (json, jsonl, csv).

Shared by every command that reports numbers (`count`, `guard`, `bench`), so they all look and
parse alike.

Example:
    >>> print(render_table([{"role": "user", "tokens": 1234}], ["role", "tokens"]))
    role  tokens
    ----  ------
    user   1,234
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ctxkit.english import counted

FORMATS = ("table", "json", "jsonl", "csv")


def default_format(stream: TextIO | None = None) -> str:
    """`table` when the stream (stdout by default) is a terminal, else `jsonl`."""
    stream = stream if stream is not None else sys.stdout
    try:
        return "table" if stream.isatty() else "jsonl"
    except (AttributeError, ValueError):
        return "jsonl"


def columns_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key of every row, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def format_cell(value: Any) -> str:
    """A value as people read it: thousands separators, one decimal, blank for None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if abs(value) < 0.05:
            return "0.0" if value == 0 or abs(value) < 0.005 else f"{value:.2g}"
        return f"{value:,.1f}"
    return str(value).replace("\n", " ")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, *, max_width: int = 60
) -> str:
    """An aligned text table: numbers right-aligned, text left-aligned, cells cut at max_width."""
    columns = list(columns) if columns is not None else columns_of(rows)
    if not columns:
        return ""
    cells = [[_cut(format_cell(row.get(c)), max_width) for c in columns] for row in rows]
    numeric = [
        any(_is_number(row.get(c)) for row in rows)
        and all(row.get(c) is None or _is_number(row.get(c)) for row in rows)
        for c in columns
    ]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def write_rows(
    rows: Sequence[dict[str, Any]],
    fmt: str,
    out: TextIO,
    columns: Sequence[str] | None = None,
) -> None:
    """Write rows to `out` as table, json (one array), jsonl (one object per line) or csv.

    `columns` chooses and orders the columns of a table or csv; json and jsonl carry whole rows.
    """
    import orjson

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt == "table":
        text = render_table(rows, columns)
        if text:
            out.write(text + "\n")
    elif fmt == "json":
        out.write(orjson.dumps(list(rows), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "jsonl":
        for row in rows:
            out.write(orjson.dumps(row).decode() + "\n")
    else:
        import csv  # here: the other formats start without it

        names = list(columns) if columns is not None else columns_of(rows)
        writer = csv.DictWriter(out, fieldnames=names, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


def reading_summary(stats: Any) -> str:
    """What the readers read and skipped, for people: "read 2 files, 91 records; skipped ..."."""
    parts = [f"read {counted(stats.files, 'file')}, {counted(stats.records, 'record')}"]
    skipped = []
    non_message = sum(stats.skipped_non_message.values())
    if non_message:
        kinds = ", ".join(
            f"{k} {v:,}"
            for k, v in sorted(
                stats.skipped_non_message.items(), key=lambda kv: (-kv[1], str(kv[0]))
            )
        )
        skipped.append(f"{counted(non_message, 'non-message record')} ({kinds})")
    if stats.skipped_sidechain:
        skipped.append(
            f"{counted(stats.skipped_sidechain, 'sidechain record')} (--include-sidechains keeps them)"
        )
    if stats.skipped_invalid:
        skipped.append(f"{counted(stats.skipped_invalid, 'invalid line')} (--skip-invalid)")
    files = list(getattr(stats, "skipped_files", ()))
    if files:
        more = f" and {len(files) - 3:,} more" if len(files) > 3 else ""
        skipped.append(", ".join(files[:3]) + more)
    if skipped:
        parts.append("skipped " + "; ".join(skipped))
    return "; ".join(parts)


def reading_note(stats: Any, *, verbose: bool = False) -> str | None:
    """The reading summary when it says something a user would not take for granted: lines,
    records or files left unread that hold (or may hold) what they meant to count (invalid
    lines skipped, a subagent's sidechain left out of the main thread, a file that is no
    transcript); with `verbose`, always. None: nothing to say (a quiet tool says nothing when
    all went as expected; a Claude Code log's bookkeeping records are not messages)."""
    files = getattr(stats, "skipped_files", ())
    if verbose or stats.skipped_invalid or stats.skipped_sidechain or files:
        return reading_summary(stats)
    return None
