"""`compact(request)`: the one call behind `ctxkit compact`, on either engine.

A file run reads one input (a transcript, or a dataset one conversation at a time) into one
output and one archive through `compaction.run`, then writes the report and the page beside
them. A directory run cuts the inputs into shards and runs each through `compaction.run` into
its own output and archive shard: here, one after the other, or as Ray tasks with
`--engine ray`; the same directory either way. `replay` is `--replay`.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxkit.atomic import AtomicSet, atomic_set, atomic_writer, spooled_input, write_output
from ctxkit.compaction.result import CompactResult, Event, Failure
from ctxkit.compaction.run import ArchiveTarget, RunSummary, run
from ctxkit.engines.request import CompactRequest
from ctxkit.errors import UsageError
from ctxkit.fileio import check_paths, check_writable
from ctxkit.formats import ReadStats
from ctxkit.report.tables import reading_note

Say = Callable[[str], None]  # a message for people (the CLI's stderr)


@dataclass
class CompactOutcome:
    """What a compact run did, to render: the summary, one line per conversation (a file run;
    failures included, in input order), the archive written (None: nothing archived), what
    the readers read and skipped, and of a directory run its shards (0 for a file run), input
    files, output files and archive shards written."""

    summary: RunSummary = field(default_factory=RunSummary)
    lines: list[tuple[str, str]] = field(default_factory=list)
    archive: str | None = None
    stats: ReadStats = field(default_factory=ReadStats)
    shards: int = 0
    inputs: int = 0
    outputs: int = 0
    archives: int = 0

    @property
    def exit_code(self) -> int:
        """0, or `PARTIAL_EXIT` when some conversations could not be compacted."""
        return PARTIAL_EXIT if self.summary.failures else 0


# A dataset run wrote the conversations it could and names each one it could not.
PARTIAL_EXIT = 3


def compact(request: CompactRequest, say: Say) -> CompactOutcome:
    """Run `request` (a file run or a directory run, see the module); what it did, to render.

    `say` takes the messages for people (explanations, broken invariants, notes)."""
    if not request.directory:
        return compact_file(request, say)
    map_shards = None
    if request.engine == "ray":
        from ctxkit.engines.ray import shard_mapper

        map_shards = shard_mapper(request.ray)
    return compact_directory(request, say, map_shards)


def compact_file(request: CompactRequest, say: Say) -> CompactOutcome:
    """A file run (see the module)."""
    from ctxkit.formats import check_depth, read_path

    source, output, dry = request.inputs[0], request.output, request.dry_run
    archive_file = request.archive_file
    check_paths(
        {"PATH": source, "--config": request.settings.config_path},
        {
            "-o": None if dry else output,
            "--archive": None if dry else archive_file,
            "--report": request.report,
            "--html": request.html,
            "--events": request.events,
        },
    )
    settings = _with_truth_limits(request.settings.build(progress=request.progress, warn=say), source)
    # Nothing is written unless everything can be: check the outputs before any work.
    if not dry:
        check_writable(output)
    for path, what in ((request.report, "report"), (request.html, "html"), (request.events, "events")):
        if path and path != "-":
            check_writable(path, what)
    outcome = CompactOutcome(archive=None if dry else archive_file)
    seen = _Seen(request, say, truth=_truth_for(source) if request.report or request.html else None)
    seen.settings = settings

    def before_commit() -> None:
        if seen.summary.failures and not seen.summary.written:
            # every conversation left out: a failed run, which leaves nothing behind (no empty
            # output, no archive it made)
            raise _NothingWritten
        # --report and --html are whole before the archive commits: one that cannot be
        # written fails the run, leaving no output and no archive rows
        _stage_reports(side, request, seen.reports, None if dry else archive_file)

    try:
        with (
            spooled_input(source, request.read_opts.max_input_mb) as path,
            _event_sink(request.events, request.verbose, say) as observe,
            atomic_set() as side,
        ):
            reader = read_path(path, request.read_opts, stats=outcome.stats, label=_label(source, path))
            # A dataset is read, compacted and written one conversation at a time: memory follows
            # the largest conversation, not the file. Two are read ahead to know which it is.
            head = [check_depth(t) for t in itertools.islice(reader, 2)]  # before the archive exists
            if not head:
                _say_reading(outcome.stats, request, say)
                raise UsageError(f"{source}: no transcript to compact")
            if request.recall_tool:
                settings = _with_recall_tool(settings, request, head[0], say)
            results: Any = itertools.chain(head, (check_depth(t) for t in reader))
            if len(head) > 1 and request.progress:
                from tqdm import tqdm

                results = tqdm(results, unit="conv", file=sys.stderr)
            from ctxkit.compaction.sinks import transcript_output

            outcome.summary = run(
                results,
                settings.with_output_format(request.to_format),
                sink=transcript_output(output, path, request.to_format, discard=dry),
                archive=ArchiveTarget(":memory:" if dry else archive_file),
                jobs=request.jobs,
                observe=observe,
                on_result=seen.add,
                keep_going=len(head) > 1,
                before_commit=before_commit,
            )
    except _NothingWritten:
        outcome.summary = seen.summary
        outcome.archive = None
    _say_reading(outcome.stats, request, say)
    outcome.lines = seen.lines
    if not outcome.summary.changed:
        outcome.archive = None
    if seen.own_limits:
        say(_own_limits_note(seen.own_limits, sidecar_for_input(source)))
    return outcome


def sidecar_for_input(source: str) -> str | None:
    """The ground truth `simulate` wrote beside an input, when there is one."""
    from ctxkit.fidelity.truth import sidecar_for

    found = sidecar_for(source) if source != "-" else None
    return str(found) if found is not None else None


def _with_truth_limits(settings: Any, source: str) -> Any:
    """`settings` with the scenario limits of the ground truth beside `source` (used where no
    limit is given: `CompactSettings.truth_limit`)."""
    sidecar = sidecar_for_input(source) if settings.from_log else None
    if sidecar is None:
        return settings
    from ctxkit.fidelity.truth import read_truth_records

    return settings.with_truth_limits(read_truth_records(sidecar))


def _own_limits_note(n: int, sidecar: str | None) -> str:
    """Said when scenarios were compacted to the limits their ground truth records."""
    from ctxkit.english import counted

    where = f" (ground truth: {sidecar})" if sidecar else ""
    whose = "its scenario's own limit" if n == 1 else "their scenarios' own limits"
    return f"ctxkit: {counted(n, 'simulated conversation')} compacted to {whose}{where}; --limit N sets another"


def compact_directory(request: CompactRequest, say: Say, map_shards: Any = None) -> CompactOutcome:
    """A directory run (see the module): the shards one after the other here, or through
    `map_shards` (the Ray engine's)."""
    from ctxkit.engines import check_shard_dir
    from ctxkit.engines.dataset import CompactJob, compact_shards, map_here, merge_stats
    from ctxkit.engines.shards import SHARD_BYTES, plan_shards

    output = request.output
    check_shard_dir(output)
    check_paths({"PATH": list(request.inputs), "--config": request.settings.config_path}, {"-o": output})
    request.settings.build(warn=say)  # a bad flag fails here, once
    shard_bytes = request.ray.shard_bytes if request.ray is not None else SHARD_BYTES
    workers = request.ray.parallelism if request.ray is not None else None
    shards = plan_shards(
        list(request.inputs), request.read_opts, shard_bytes=shard_bytes, workers=workers
    )
    _check_no_input_replaced(shards, output)
    job = CompactJob(
        os.path.abspath(output),
        request.settings.portable(),
        request.read_opts,
        request.to_format,
        fault=request.ray.fault if request.ray is not None else None,
        jobs=request.jobs,
    )
    outcome = CompactOutcome(archive=output, shards=len(shards), inputs=len(request.inputs))
    own_limits, truths = 0, set()
    for tally in compact_shards(shards, job, map_shards or map_here):
        own_limits += tally.get("own_limits", 0)
        if tally.get("own_limits"):
            rel = os.path.relpath(tally["truth"])
            truths.add(tally["truth"] if rel.startswith("..") else rel)
        part = RunSummary.from_dict(tally)
        outcome.summary.merge(part)
        merge_stats(outcome.stats, tally["stats"])
        outcome.outputs += part.written > 0
        outcome.archives += part.changed > 0
        for v in part.violations:
            say(f"ctxkit: invariant violated in {v} (step rejected)")
        outcome.lines += [(f.label or f.transcript_id, _failed_line(f)) for f in part.failures]
    _say_reading(outcome.stats, request, say)
    if own_limits:
        say(_own_limits_note(own_limits, ", ".join(sorted(truths))))
    if not outcome.summary.conversations:
        raise UsageError(f"{', '.join(request.inputs)}: no transcript to compact")
    return outcome


def _check_no_input_replaced(shards: Any, output: str) -> None:
    """A usage error when an output (or its archive) would take an input's place: `-o` the
    inputs' own folder, where outputs keep their inputs' names."""
    from ctxkit.engines.shards import archive_shard_path

    inputs = {os.path.realpath(s.path): s.label or s.path for s in shards}
    for s in shards:
        for name in (s.name, archive_shard_path(s.name)):
            taken = inputs.get(os.path.realpath(os.path.join(output, name)))
            if taken is not None:
                raise UsageError(
                    f"-o {output}: the output {name} would replace the input {taken} (outputs "
                    "keep their inputs' names); give another -o DIR"
                )


def _say_reading(stats: ReadStats, request: CompactRequest, say: Say) -> None:
    """What the readers left unread, when it is worth a line (`reading_note`; all with -v)."""
    note = reading_note(stats, verbose=request.verbose)
    if note:
        say(note)


def _with_recall_tool(settings: Any, request: CompactRequest, first: Any, say: Say) -> Any:
    """The settings with the recall tool in the output format's shape; unchanged, with a note,
    for a format whose files carry no tool schemas."""
    from ctxkit.archive.recall_tool import recall_tool_for, serving_hint
    from ctxkit.formats import output_format_for

    fmt = output_format_for(first, request.to_format)
    tool = recall_tool_for(fmt)
    if tool is None:
        say(f"ctxkit: {fmt} files carry no tool schemas; {serving_hint(request.archive_file)}")
        return settings
    return settings.with_added_tools(tool)


def _failed_line(f: Failure) -> str:
    """"left out: <why>" (the id, which the line is printed after, taken out of the why)."""
    message = f.message
    for head in ("", "BREAKER_FAILED: "):
        for name in (f.transcript_id, f.label):
            if name and message.startswith(f"{head}{name}: "):
                message = head + message[len(head) + len(name) + 2 :]
    return f"left out: {message}"


class _NothingWritten(Exception):
    """Every conversation of a dataset was left out: the run is undone."""


class _Seen:
    """What a streamed run keeps of each result: its line and report, not its transcript.

    With reports, each is the detailed one (`compaction.trace.detailed_report`: per-unit records
    with their text and the final prompt), which the HTML page is built from.
    """

    def __init__(self, request: CompactRequest, say: Say, truth: Any = None) -> None:
        self.request, self.say, self.truth = request, say, truth
        self.lines: list[tuple[str, str]] = []
        self.reports: list[dict[str, Any]] = []
        self.summary = RunSummary()
        self.own_limits = 0  # conversations compacted to their scenario's own limit
        self.settings: Any = None

    def add(self, r: CompactResult | Failure, archive: Any) -> None:
        """Take note of `r` (explain it, report broken invariants)."""
        self.summary.add(r)
        if isinstance(r, Failure):
            self.lines.append((r.label or r.transcript_id, _failed_line(r)))
            return
        original = r.original if r.original is not None else r.transcript
        if self.settings is not None and self.settings.truth_limit(original) is not None:
            self.own_limits += 1
        if self.request.explain:
            for line in explain_steps(r):
                self.say(line)
        for v in r.invariants["violations"]:
            self.say(f"ctxkit: invariant violated in {r.transcript.id}: {v} (step rejected)")
        self.lines.append((r.transcript.id, r.summary_line()))
        if self.request.report or self.request.html:
            from ctxkit.compaction.trace import detailed_report

            truth = self.truth.match(original) if self.truth is not None else None
            self.reports.append(
                detailed_report(r, output_format=self.request.to_format, truth=truth, archive=archive)
            )


def explain_steps(result: CompactResult) -> Iterator[str]:
    """`--explain`: a line per step of the chain."""
    for s in result.steps:
        if s.applied and s.saved < 0:  # give_back: what the passes took beyond the goal
            back = f"{-s.saved:,} tokens back ({s.tokens_before:,} -> {s.tokens_after:,})"
            yield f"  then {s.strategy}: {back}, {s.note}, {s.time_ms:.1f} ms"
            continue
        if s.applied:
            what = f"saved {s.saved:,} tokens ({s.tokens_before:,} -> {s.tokens_after:,})"
        else:
            what = s.note
        refs = f", {len(s.refs)} refs" if s.refs else ""
        yield f"  pass {s.iteration} {s.strategy}: {what}{refs}, {s.time_ms:.1f} ms"


def _stage_reports(
    side: AtomicSet, request: CompactRequest, reports: list[dict[str, Any]], archive: str | None
) -> None:
    """The JSON report and the HTML page, written in full into the run's atomic set (renamed
    into place with it; stdout and devices get their bytes now)."""
    if request.report and reports:
        report: dict[str, Any] = reports[0] if len(reports) == 1 else {"transcripts": reports}
        report["archive"] = archive
        report["dry_run"] = request.dry_run
        with side.open(request.report, "wb") as f:
            f.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    if request.html and reports:
        from ctxkit.report.html import render_html

        for r in reports:
            r["archive"] = archive
        with side.open(request.html, "wb") as f:
            f.write(render_html(reports).encode("utf-8"))
    side.write_streams()


@contextmanager
def _event_sink(path: str | None, verbose: bool, say: Say) -> Iterator[Any]:
    """The chain's observer: phase messages with -v, JSON events to a file or stderr."""
    if path and path != "-":
        # Whole or nothing, like every output: the events of a failed run are not left half.
        with atomic_writer(path) as stream:
            yield _observer(stream, verbose, say)
        return
    yield _observer(sys.stderr if path == "-" else None, verbose, say)


def _observer(out: Any, verbose: bool, say: Say) -> Any:
    if out is None and not verbose:
        return None

    def observe(event: Event) -> None:
        if verbose:
            say(event.message)
        if out is not None:
            out.write(orjson.dumps(event.to_dict()).decode() + "\n")
            out.flush()

    return observe


def _label(source: str, path: str) -> str | None:
    """The input's name in ids and messages when it was spooled to a temp file."""
    if path == source:
        return None
    return "<stdin>" if source == "-" else source


def _truth_for(source: str) -> Any:
    """The ground truth `ctxkit simulate` wrote beside the input, to mark needles and P1 units
    on the page (it does not change the compaction); None when there is none."""
    from ctxkit.fidelity.truth import TruthMatcher, read_truth_records, sidecar_for

    sidecar = sidecar_for(source)
    return TruthMatcher(read_truth_records(sidecar), sidecar) if sidecar is not None else None


@dataclass
class ReplayOutcome:
    """What `--replay` did: each transcript's replay, and its cost on each `--cost` model."""

    results: list[Any]
    costs: list[list[dict[str, Any]]]


def replay(request: CompactRequest, say: Say) -> ReplayOutcome:
    """`--replay`: the replay report (JSON) to the output; the results, to render."""
    from ctxkit.budget.models import priced_model
    from ctxkit.replay import replay_cost, replay_path

    source = request.inputs[0]
    check_paths(
        {"PATH": source, "--config": request.settings.config_path},
        {"-o": request.output, "--archive": request.archive, "--report": request.report},
    )
    settings = request.settings.build(progress=request.progress, warn=say)
    priced = [priced_model(name, "--cost") for name in request.cost_models]
    with spooled_input(source, request.read_opts.max_input_mb) as path:
        results = replay_path(
            path,
            settings,
            request.read_opts,
            archive_path=request.archive,
            label=_label(source, path),
            sidecar_of=source,
            warn=say,
        )
    costs = [[replay_cost(r, m) for m in priced] for r in results]
    reports = [r.to_dict(include_transcript=True) for r in results]
    if priced:
        for report, cost in zip(reports, costs, strict=True):
            report["cost"] = cost
    doc: dict[str, Any] = reports[0] if len(reports) == 1 else {"transcripts": reports}
    write_output(request.output, orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return ReplayOutcome(results, costs)
