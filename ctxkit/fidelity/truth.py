"""Ground truth: sidecar records, reading and writing them, needle retention, pair checks."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxkit.atomic import atomic_writer
from ctxkit.errors import InputError
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
    return {str(rec["id"]): rec["ground_truth"] for rec in read_truth_records(path)}


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
    present_n = sum(r["present"] for r in rows)
    recall_n = sum(r["recallable"] for r in rows)
    return {**retention_totals(len(rows), present_n, recall_n), "needles": rows}


def retention_totals(total: int, present: int, recallable: int) -> dict[str, Any]:
    """Needle totals: present, recallable (not present but in the archive), lost, and the
    retention ratios without and with recall (1.0 when there is no needle)."""
    return {
        "total": total,
        "present": present,
        "recallable": recallable,
        "lost": total - present - recallable,
        "retention": present / total if total else 1.0,
        "retention_with_recall": (present + recallable) / total if total else 1.0,
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


# --- matching sidecar records to transcripts ----------------------------------------------


def sidecar_for(path: str) -> Path | None:
    """The ground-truth file `ctxkit simulate` writes beside a transcript, when there is one."""
    if path == "-":
        return None
    p = Path(path)
    for cand in (p.with_name(p.name.split(".")[0] + ".truth.jsonl"), p.parent / "truth.jsonl"):
        if cand.is_file() and cand != p:
            return cand
    return None


def read_truth_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a sidecar file, in order: {id, file, line, ground_truth}."""
    from ctxkit.fileio import max_input_bytes, too_large

    where = os.fspath(path)
    limit = max_input_bytes()
    records: list[dict[str, Any]] = []
    held = 0
    try:
        with open(where, "rb") as fh:
            for n, raw in enumerate(iter(lambda: fh.readline(limit + 1), b""), 1):
                held += len(raw)
                if held > limit:  # a sidecar is held whole: /dev/zero ends here, not in memory
                    raise InputError(where, n, too_large(limit, "sidecar"))
                if not raw.strip():
                    continue
                try:
                    rec = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise InputError(where, n, f"not valid JSON: {exc}") from None
                if not isinstance(rec, dict) or "id" not in rec or "ground_truth" not in rec:
                    raise InputError(
                        where, n, "not a ground-truth record {id, file, line, ground_truth}"
                    )
                records.append(rec)
    except OSError as exc:
        raise InputError(where, None, f"cannot read: {exc.strerror or exc}") from None
    return records


class TruthMatcher:
    """Finds each transcript's record in a sidecar: by id, else by (file, line), else by its
    position among the transcripts of its file.

    `simulate`'s openai and anthropic files carry no transcript id (a reader names them after
    the file, `x#2` for the second of a file), so the record's `file` (directory output) and
    `line` (several transcripts in one file) are what tie them to their ground truth.
    `records` may also be `read_truth`'s id -> ground truth mapping (no file or line then).
    """

    def __init__(
        self,
        records: Sequence[Mapping[str, Any]] | Mapping[str, Any],
        source: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(records, Mapping):
            records = [{"id": k, "ground_truth": v} for k, v in records.items()]
        self.records = [dict(r) for r in records]
        self.source = os.fspath(source) if source is not None else None
        self._by_id = {str(r["id"]): i for i, r in enumerate(self.records)}
        self._position: dict[str | None, int] = {}
        self._claimed: set[int] = set()

    def match(self, t: Transcript, count: int | None = None) -> dict[str, Any] | None:
        """The ground truth of `t` (the next transcript of its file), or None.

        `count` is how many transcripts the file holds, when known: matching by position then
        needs exactly as many records for that file, so one record is never spread over
        several transcripts by guesswork.
        """
        k = self._position.get(t.path, 0)
        self._position[t.path] = k + 1
        i = self._find(t, k, count)
        if i is None:
            return None
        self._claimed.add(i)
        return dict(self.records[i]["ground_truth"])

    def _find(self, t: Transcript, k: int, count: int | None) -> int | None:
        if t.id in self._by_id:
            return self._by_id[t.id]
        name = os.path.basename(t.path) if t.path else None
        for i, r in enumerate(self.records):
            file, line = r.get("file"), r.get("line")
            if file is None and line is None:
                continue
            if (file is None or file == name) and line == t.line:
                return i
        own = [i for i, r in enumerate(self.records) if name is not None and r.get("file") == name]
        if not own:
            own = [i for i, r in enumerate(self.records) if r.get("file") is None]
        if count is not None and len(own) != count:
            return None
        if k < len(own) and own[k] not in self._claimed:
            return own[k]
        return None


_GENERATED_ID = re.compile(r"u(\d+)")


def truth_priorities(t: Transcript, truth: Mapping[str, Any]) -> Transcript:
    """`t` with priority 1 on every unit the ground truth lists in `p1_ids` (a copy when
    anything changes).

    Formats without priorities (openai, anthropic) lose the P1 marks `simulate` gave; its
    unit ids are `u<position>`, and a reader that names a unit otherwise (anthropic's top-level
    system prompt is `system`) keeps the positions, so an id not found by name is found by
    position when the transcript has as many units as the one generated.
    """
    p1 = {str(i) for i in truth.get("p1_ids") or ()}
    if not p1:
        return t
    ids = {u.id for u in t.units}
    last = _GENERATED_ID.fullmatch(str(truth.get("final_request_id", "")))
    by_position = last is not None and int(last.group(1)) + 1 == len(t.units)
    units = list(t.units)
    changed = False
    for i, u in enumerate(units):
        name = f"u{i}"
        hit = u.id in p1 or (by_position and name in p1 and name not in ids)
        if hit and u.priority != 1:
            units[i] = u.replace(priority=1)
            changed = True
    return t.replace(units=units) if changed else t


def attach_truth(
    transcripts: Sequence[Transcript],
    truth: Sequence[Mapping[str, Any]] | Mapping[str, Any] | TruthMatcher,
    *,
    warn: Callable[[str], None] | None = None,
) -> int:
    """Put each transcript's ground truth into its metadata and mark its P1 units; returns how
    many transcripts matched no record (`warn` is told once when some did not).

    `truth` is a sidecar's records (`read_truth_records`), `read_truth`'s mapping, or a
    `TruthMatcher`; see `TruthMatcher` for how records are matched. The transcripts are
    changed in place.
    """
    matcher = truth if isinstance(truth, TruthMatcher) else TruthMatcher(truth)
    per_file: dict[str | None, int] = {}
    for t in transcripts:
        per_file[t.path] = per_file.get(t.path, 0) + 1
    missed: list[str] = []
    for t in transcripts:
        found = matcher.match(t, per_file[t.path])  # also counts t's position in its file
        if "ground_truth" in t.metadata:
            found = t.metadata["ground_truth"]
        elif found is None:
            missed.append(t.id)
            continue
        t.metadata["ground_truth"] = found
        if found:
            t.units = truth_priorities(t, found).units
    if missed and warn is not None:
        warn(no_truth_message(missed[0], matcher.source, len(missed)))
    return len(missed)


def no_truth_message(transcript_id: str, source: str | None, misses: int = 1) -> str:
    """The warning for transcripts that match no ground-truth record."""
    where = f" in {source}" if source else ""
    more = f" (and {misses - 1} more)" if misses > 1 else ""
    return (
        f"warning: no ground-truth record{where} matches {transcript_id}{more} "
        "(by id, file and line, or position); scored without ground truth"
    )


def read_with_truth(
    paths: Sequence[str],
    opts: Any = None,
    *,
    truth_path: str | None = None,
    stats: Any = None,
    label: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> Iterator[Transcript]:
    """Transcripts from files (read lazily), each with its ground truth in
    `metadata["ground_truth"]` and its P1 units marked, from `truth_path` or the sidecar
    `ctxkit simulate` wrote beside the file (see `TruthMatcher`). `warn` is told once when a
    transcript matches no record. `score-rl` and `compact --replay` read their inputs here.
    """
    from ctxkit.formats import ReadStats, expand_paths, read_path

    explicit = TruthMatcher(read_truth_records(truth_path), truth_path) if truth_path else None
    found: dict[str, TruthMatcher] = {}  # a directory's truth.jsonl serves all its files
    warned = False
    stats = stats if stats is not None else ReadStats()
    files = expand_paths(list(paths))
    if len(files) > 1:
        # a directory of `simulate` output holds its ground-truth sidecars too
        files = [f for f in files if not f.endswith(("/truth.jsonl", ".truth.jsonl"))]
    for path in files:
        matcher = explicit
        if matcher is None:
            sidecar = sidecar_for(path)
            if sidecar is not None:
                key = str(sidecar)
                if key not in found:
                    found[key] = TruthMatcher(read_truth_records(sidecar), sidecar)
                matcher = found[key]
        for t in read_path(path, opts, stats=stats, label=label):
            if matcher is not None and not match_truth(t, matcher):
                if not warned and warn is not None:
                    warn(no_truth_message(t.id, matcher.source))
                    warned = True
            yield t


def match_truth(t: Transcript, matcher: TruthMatcher) -> bool:
    """Give `t` its ground truth from `matcher` (unless it carries its own) in
    `metadata["ground_truth"]`, with its P1 units marked; False when there is none."""
    truth = matcher.match(t)
    if "ground_truth" in t.metadata:
        truth = t.metadata["ground_truth"]
    elif truth is not None:
        t.metadata["ground_truth"] = truth
    else:
        return False
    if truth:
        t.units = truth_priorities(t, truth).units
    return True
