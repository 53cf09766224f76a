"""`ctxkit guard`: will the transcript fit the model, with room for the answer?

Flags (`guard_options`) -> `GuardSettings` and targets (`cli.requests`) -> `engines.guard` ->
the verdicts rendered (`report.guard`), checked against a baseline and written for CI."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

import click
import orjson

from ctxkit.cli.guard_options import EXIT_HELP, guard_options
from ctxkit.cli.options import echo_err, reading_note
from ctxkit.cli.requests import guard_settings, guard_targets
from ctxkit.cli.sections import SectionedCommand
from ctxkit.errors import InputError
from ctxkit.gates.exits import combine_exit_codes
from ctxkit.report.guard import dataset_summary, failing_row, render_verdict


@click.command("guard", cls=SectionedCommand, epilog=EXIT_HELP)
@guard_options
@click.pass_context
def guard(ctx: click.Context, paths: tuple[str, ...], read_opts: Any, **f: Any) -> None:
    """Check that each transcript fits the target model(s), with room for the answer.

    With no budget named, a log is checked against its own target: the model it records, under
    the budget of the agent that wrote it. Else the limit is the model's effective limit (window
    - buffer - max output) or, when the config sets default_limit or --limit/--agent/--llm is
    given, the smaller of that and the policy limit.
    Several --model targets: the first that fits is chosen; none fits = verdict final.
    A dataset gets a summary first: the total, then each transcript that does not pass.

    \b
    Examples:
      ctxkit guard session.jsonl --model gpt-4o
      ctxkit guard session.jsonl --model gpt-4 --model gpt-4o --format json
      ctxkit guard session.jsonl --agent verification --pending outputs.json
      ctxkit guard session.jsonl --window 128000 --max-output 16384 --replay --check
      ctxkit guard dataset.jsonl --limit 8000 --details
      ctxkit guard prompts/system.md 'fixtures/*.jsonl' --baseline ctx-baseline.json --format github
    """
    from ctxkit.engines.guard import evaluate_paths
    from ctxkit.formats import ReadStats, expand_paths

    trace = (lambda msg: echo_err(f"debug: {msg}")) if f["debug"] else None
    settings = guard_settings(f, trace)
    targets = guard_targets(settings.config, f)
    gate = _open_gate(f, paths)
    cases: list[Any] = []
    stats = ReadStats()
    verdicts = evaluate_paths(paths, read_opts, targets, settings, stats=stats, trace=trace)
    codes = _render(verdicts, f, settings.fail_on, gate, cases)
    if gate is not None and codes:
        codes.append(_finish_gate(gate, cases, f["fmt"]))
    note = reading_note(stats, verbose=f["debug"])
    if note:
        echo_err(note)
    if not codes:
        raise InputError(", ".join(expand_paths(paths)), None, "no transcript found in the input")
    code = combine_exit_codes(codes)
    _write_ci(cases, f["fmt"], f["junit_path"], f["summary_path"], code)
    ctx.exit(code)



def _render(verdicts: Iterator[Any], f: dict[str, Any], fail_on: str, gate: Any, cases: list[Any]) -> list[int]:
    """Write the verdicts (one in full; several as a summary first, in the table format) and
    check each against the baseline; their exit codes."""
    from ctxkit.gates.cases import verdict_cases

    fmt, details = f["fmt"], f["details"]
    warned: set[str] = set()
    codes: list[int] = []
    head = list(itertools.islice(verdicts, 2))
    several = len(head) > 1
    texts: list[str] = []
    failing: list[dict[str, Any]] = []
    tally: dict[str, int] = {}
    for verdict in itertools.chain(head, verdicts):
        for w in verdict.warnings:
            if w not in warned:
                warned.add(w)
                echo_err(w)
        code = verdict.exit_code(fail_on)
        codes.append(code)
        key = verdict.status if verdict.chosen is not None else "final"
        tally[key] = tally.get(key, 0) + 1
        # measured as evaluated: with the --system prompt before it and the --tools beside it
        entry = gate.add(verdict.transcript) if gate is not None else None
        cases.extend(verdict_cases(verdict, fail_on, f["tool_threshold"]))
        if fmt == "json":
            d = verdict.to_dict(fail_on)
            if entry is not None:
                d["baseline_entry"] = entry.to_dict()
            click.echo(orjson.dumps(d).decode())
        elif fmt != "table":
            continue  # the CI formats are written once, at the end
        elif not several:
            click.echo(render_verdict(verdict, fail_on), nl=False)
        else:
            if code:
                failing.append(failing_row(verdict, code))
            if details:
                texts.append(render_verdict(verdict, fail_on))
    if fmt == "table" and several:
        click.echo(dataset_summary(codes, tally, failing, fail_on, details), nl=False)
        for text in texts:
            click.echo("")
            click.echo(text, nl=False)
    return codes



# --- gates and CI output ------------------------------------------------------------------------


def _open_gate(kw: dict[str, Any], paths: tuple[str, ...]) -> Any:
    """The baseline check of this run (None without --baseline); output files checked first."""
    from ctxkit.fileio import check_paths
    from ctxkit.formats import expand_paths
    from ctxkit.gates.baseline import BaselineCheck, parse_allow

    outputs = {"--junit": kw["junit_path"], "--summary": kw["summary_path"]}
    if any(outputs.values()):
        inputs = {"PATH": expand_paths(paths), "--baseline": kw["baseline_path"]}
        check_paths(inputs, outputs)
    allow = parse_allow(kw["allow"])
    if kw["baseline_path"] is None:
        if allow:
            from ctxkit.errors import UsageError

            raise UsageError("--allow sets the allowances of --baseline; give --baseline FILE")
        return None
    return BaselineCheck.open(
        kw["baseline_path"],
        allow=allow,
        tokenizer=kw["tokenizer"],
        image_tokens=kw["image_tokens"],
        tool_schema_scale=kw["tool_schema_scale"],
        use_usage=not kw["no_usage"],
    )



def _finish_gate(gate: Any, cases: list[Any], fmt: str) -> int:
    """Compare with the baseline: the diff (table, json), the cases; the exit code."""
    from ctxkit.gates.baseline import regression_exit
    from ctxkit.gates.cases import baseline_cases
    from ctxkit.report.ci import render_baseline

    diffs = gate.diffs()
    cases.extend(baseline_cases(diffs, gate.baseline.tokenizer))
    code = regression_exit(diffs)
    if fmt == "json":
        click.echo(orjson.dumps({"baseline": gate.path, "tokenizer": gate.baseline.tokenizer,
                                 "exit_code": code, "entries": [d.to_dict() for d in diffs]}).decode())
    elif fmt == "table":
        click.echo("\n" + render_baseline(diffs, gate.path, gate.baseline.tokenizer, code), nl=False)
    return code


def _write_ci(cases: list[Any], fmt: str, junit: str | None, summary: str | None, code: int) -> None:
    """The CI formats on stdout, and the --junit and --summary files (written atomically)."""
    from ctxkit.atomic import write_output
    from ctxkit.english import counted
    from ctxkit.gates.cases import tally
    from ctxkit.report.ci import render_github, render_junit, render_markdown

    counts = tally(cases)
    line = f"ctxkit guard: {counted(len(cases), 'check')}, {counts['failed']} failed, {counts['skipped']} skipped; exit {code}"
    if fmt == "github":
        click.echo(render_github(cases, line), nl=False)
    elif fmt == "junit":
        click.echo(render_junit(cases, "ctxkit guard"), nl=False)
    elif fmt == "markdown":
        click.echo(render_markdown(cases, "ctxkit guard", f"exit {code}"), nl=False)
    if junit:
        write_output(junit, render_junit(cases, "ctxkit guard").encode())
    if summary:
        write_output(summary, render_markdown(cases, "ctxkit guard", f"exit {code}").encode())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(guard())
