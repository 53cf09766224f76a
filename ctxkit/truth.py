"""Ground truth: sidecar records, reading and writing them, needle retention, pair checks."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxkit.fileio import atomic_writer
from ctxkit.model import Transcript, Unit


def truth_record(t: Transcript, file: str | None = None, line: int | None = None) -> dict[str, Any]:
    """One line of the sidecar file: the transcript id, where it was written, its ground truth.

    `file` is the transcript's file name (directory output), `line` its line in a file of
    several transcripts; formats without transcript ids (openai, anthropic) are matched by them.
    """
    return {"id": t.id, "file": file, "line": line, "ground_truth": t.metadata["ground_truth"]}


def write_truth(
    transcripts: Iterable[Transcript],
    path: str | os.PathLike[str],
    files: Sequence[str | None] | None = None,
) -> int:
    """Write the ground-truth sidecar (one JSON line per transcript) atomically; returns lines.

    With `files` (one name per transcript) each record names its file; without, records
    number the transcripts' lines in the one file they share (when there are several).
    """
    lines = truth_lines(transcripts, files)
    with atomic_writer(Path(path), "wb") as fh:
        for line in lines:
            fh.write(line)
    return len(lines)


def truth_lines(
    transcripts: Iterable[Transcript], files: Sequence[str | None] | None = None
) -> list[bytes]:
    """The sidecar's lines, as `write_truth` writes them."""
    items = list(transcripts)
    out = []
    for i, t in enumerate(items):
        if files is not None:
            rec = truth_record(t, file=files[i])
        else:
            rec = truth_record(t, line=i + 1 if len(items) > 1 else None)
        out.append(orjson.dumps(rec) + b"\n")
    return out


def read_truth(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read a sidecar file back: transcript id -> ground truth."""
    out: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                rec = orjson.loads(line)
                out[str(rec["id"])] = rec["ground_truth"]
    return out


def _unit_text(u: Unit) -> str:
    parts = [u.content, u.reasoning]
    parts += [c.arguments for c in u.tool_calls]
    return "\n".join(p for p in parts if p)


def needle_retention(
    t: Transcript,
    truth: Mapping[str, Any] | None = None,
    archive: Any = None,
    *,
    transcript_id: str | None = None,
) -> dict[str, Any]:
    """Which needles are still in `t` (or recallable from `archive`), by their patterns.

    `truth` defaults to `t.metadata["ground_truth"]`; `archive` is anything with
    `.list(transcript_id)` returning items that have `.content`, asked for `transcript_id`
    (default `t.id`; pass the original id when `t` was read back from a renamed file).
    """
    truth = truth if truth is not None else t.metadata.get("ground_truth", {})
    text = "\n".join(_unit_text(u) for u in t.units)
    archived: str | None = None
    if archive is not None:
        items = archive.list(transcript_id or t.id)
        archived = "\n".join(str(getattr(item, "content", "")) for item in items)
    rows = []
    for n in truth.get("needles", []):
        rx = re.compile(n["pattern"])
        present = rx.search(text) is not None
        recallable = not present and archived is not None and rx.search(archived) is not None
        rows.append({"id": n["id"], "present": present, "recallable": recallable})
    total = len(rows)
    present_n = sum(r["present"] for r in rows)
    recall_n = sum(r["recallable"] for r in rows)
    return {
        "total": total,
        "present": present_n,
        "recallable": recall_n,
        "lost": total - present_n - recall_n,
        "retention": present_n / total if total else 1.0,
        "retention_with_recall": (present_n + recall_n) / total if total else 1.0,
        "needles": rows,
    }


def pair_problems(t: Transcript) -> list[str]:
    """Tool pairing problems: duplicate ids, calls without results, results without calls."""
    problems: list[str] = []
    seen_units: set[str] = set()
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, u in enumerate(t.units):
        if u.id in seen_units:
            problems.append(f"{u.id}: duplicate unit id")
        seen_units.add(u.id)
        for c in u.tool_calls:
            if c.id in calls:
                problems.append(f"{u.id}: duplicate call id {c.id}")
            calls[c.id] = i
        if u.tool_call_id is not None:
            if u.tool_call_id not in calls:
                problems.append(f"{u.id}: result without its call {u.tool_call_id}")
            elif u.tool_call_id in answered:
                problems.append(f"{u.id}: second result for {u.tool_call_id}")
            answered.add(u.tool_call_id)
    problems += [f"call {cid} has no result" for cid in calls if cid not in answered]
    return problems
