"""`ctxkit guard`: will the transcript fit the model, with room for the answer?"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterator
from typing import Any

import click
import orjson

from ctxkit.cli.options import (
    FiniteFloat,
    SectionedCommand,
    debug_option,
    echo_err,
    input_options,
    reading_note,
    section,
    tokenizer_options,
)
from ctxkit.errors import InputError
from ctxkit.gates.exits import FAIL_ON, combine_exit_codes
from ctxkit.recipes.triggers import RULES

# a table for people, one JSON verdict per transcript, and the CI formats (`report.ci`)
REPORT_FORMATS = ("table", "json", "github", "junit", "markdown")

EXIT_HELP = """\b
Exit codes:
  0  fits (ok or warn)
  3  compaction needed (compact; also warn with --fail-on warn)
  4  blocked (block)
  5  overflow, or no target fits (verdict final)
  6  structural errors found by --check (when the fit alone exits 0)
  7  --baseline: a region grew beyond its allowance (when the fit exits 0)
  1  runtime error (bad input)
  2  usage error (bad flag or config)"""


_targets_options = section(
    "Targets",
    click.option(
        "--model",
        "models",
        multiple=True,
        metavar="NAME",
        help="Target model, repeatable in order of preference (see models.toml).",
    ),
    click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=None,
        help="Policy limit in tokens (taken exactly; the smaller of it and the model's limit binds).",
    ),
    click.option("--window", type=click.IntRange(min=1), default=None, help="Context window (tokens)."),
    click.option(
        "--max-output",
        type=click.IntRange(min=0),
        default=None,
        help="Output reserve (default: the model's maximum output, else window/4).",
    ),
    click.option(
        "--buffer",
        type=click.IntRange(min=0),
        default=None,
        help="Safety buffer (default 8192, at most window/8).",
    ),
    click.option(
        "--agent", default=None, metavar="NAME", help="Use this agent's policy limit (config agents)."
    ),
    click.option(
        "--llm", default=None, metavar="TYPE", help="Use this LLM type's policy limit (config per_llm)."
    ),
    click.option(
        "--config",
        "config_path",
        default=None,
        metavar="FILE",
        help="YAML configuration (default ./ctxkit.yaml when present).",
    ),
)


_what_the_call_sends_options = section(
    "What the call sends",
    click.option(
        "--system",
        "system_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="A system prompt file, counted before the transcript.",
    ),
    click.option(
        "--tools",
        "tools_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Tool schemas: a JSON list (OpenAI or Anthropic shape); replaces the transcript's.",
    ),
    click.option(
        "--pending",
        "pending_file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Tool outputs about to be appended: JSON list of strings or {name, content}, or JSONL.",
    ),
)


_checks_options = section(
    "Checks",
    click.option(
        "--replay",
        "do_replay",
        is_flag=True,
        help="Replay the transcript message by message: when each threshold was first crossed.",
    ),
    click.option(
        "--check",
        "do_check",
        is_flag=True,
        help="Structural lint: orphaned results, missing results, duplicate ids, empty messages, bad ending.",
    ),
    click.option(
        "--as",
        "as_agents",
        multiple=True,
        type=click.Choice(tuple(RULES)),
        help="Apply this coding agent's own auto-compact trigger to each target's window (with "
        "--replay: where it would first have compacted, and how often); repeatable.",
    ),
    click.option(
        "--no-usage",
        "no_usage",
        is_flag=True,
        help="Ignore the provider usage a log records (by default its gap to the local count, the "
        "`unlogged` region, is added).",
    ),
    click.option(
        "--archive",
        "archive_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Where a file ctxkit compacted finds its original's recorded usage (default: the "
        "archive beside it, FILE.ctx.db).",
    ),
    click.option(
        "--tool-threshold",
        type=FiniteFloat(min=0.0, max=1.0, min_open=True),
        default=0.10,
        show_default=True,
        help="Warn when tool schemas alone pass this share of a target's effective window.",
    ),
)


_exit_options = section(
    "Exit",
    click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON),
        default="compact",
        show_default=True,
        help="The lowest status that exits non-zero.",
    ),
    click.option(
        "--warn-threshold", type=FiniteFloat(), default=None, help="Warn at this fraction of the limit (0.80)."
    ),
    click.option(
        "--compact-threshold", type=FiniteFloat(), default=None, help="Compact at this fraction (0.95)."
    ),
    click.option("--block-threshold", type=FiniteFloat(), default=None, help="Block at this fraction (0.98)."),
)


_baseline_ci_options = section(
    "Baseline (CI)",
    click.option(
        "--baseline",
        "baseline_path",
        default=None,
        metavar="FILE",
        help="A budget saved by `count --save-baseline`: fail (exit 7) when a region grows beyond "
        "its allowance; prints the diff table.",
    ),
    click.option(
        "--allow",
        "allow",
        multiple=True,
        metavar="REGION=N|P%",
        help="Override the baseline's allowance for a region (tokens or percent); repeatable.",
    ),
)


_report_options = section(
    "Report",
    click.option(
        "--format",
        "fmt",
        type=click.Choice(REPORT_FORMATS),
        default="table",
        show_default=True,
        help="table for people, json (one object per transcript per line) for machines; github "
        "(workflow-command annotations), junit (XML) or markdown (a pull-request summary) for CI.",
    ),
    click.option(
        "--details",
        is_flag=True,
        help="Several transcripts: each one's full verdict after the summary (default: the "
        "summary and the transcripts that do not pass).",
    ),
    click.option(
        "--junit",
        "junit_path",
        default=None,
        metavar="FILE",
        help="Also write the checks as JUnit XML (a case per transcript x target, and per baseline entry).",
    ),
    click.option(
        "--summary",
        "summary_path",
        default=None,
        metavar="FILE",
        help="Also write a Markdown summary (for a pull-request comment or $GITHUB_STEP_SUMMARY).",
    ),
    debug_option,
)


_input_options = section(
    "Input",
    input_options,
)


_tokens_options = section(
    "Tokens",
    tokenizer_options,
)


@click.command("guard", cls=SectionedCommand, epilog=EXIT_HELP)
@_targets_options
@_what_the_call_sends_options
@_checks_options
@_exit_options
@_baseline_ci_options
@_report_options
@_input_options
@_tokens_options
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
    from ctxkit.formats import ReadStats, expand_paths
    from ctxkit.engines.guard import evaluate_paths

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


def guard_settings(f: dict[str, Any], trace: Any = None) -> Any:
    """The flags as one `GuardSettings` (config with the threshold flags, the files read)."""
    from ctxkit.budget.resolve import from_log_applies
    from ctxkit.config.file import load_config
    from ctxkit.formats.extras import load_tools, read_text_file
    from ctxkit.engines.guard import GuardSettings, load_pending
    from ctxkit.tokens import CountOptions

    config = with_threshold_flags(
        load_config(f["config_path"]), f["warn_threshold"], f["compact_threshold"], f["block_threshold"]
    )
    if trace:
        trace(f"config: {config.source or 'defaults'}")
    defaults = CountOptions()
    return GuardSettings(
        config=config,
        system=read_text_file(f["system_file"]) if f["system_file"] else None,
        tools=tuple(load_tools(f["tools_file"])) if f["tools_file"] else None,
        pending=tuple(load_pending(f["pending_file"])) if f["pending_file"] else (),
        replay=f["do_replay"],
        check=f["do_check"],
        fail_on=f["fail_on"],
        count_opts=CountOptions(
            image_tokens=defaults.image_tokens if f["image_tokens"] is None else f["image_tokens"],
            tool_schema_scale=defaults.tool_schema_scale
            if f["tool_schema_scale"] is None
            else f["tool_schema_scale"],
        ),
        use_usage=not f["no_usage"],
        as_agents=tuple(f["as_agents"]),
        tool_threshold=f["tool_threshold"],
        archive=f["archive_path"],
        from_log=from_log_applies(
            config, models=f["models"], limit=f["limit"], window=f["window"],
            max_output=f["max_output"], buffer=f["buffer"], agent=f["agent"], llm=f["llm"],
        ),
    )


def guard_targets(config: Any, f: dict[str, Any]) -> list[Any]:
    """The targets in order of preference: each --model, else the one the flags and config give."""
    from ctxkit.budget.targets import resolve_target

    flags: dict[str, Any] = dict(
        config=config,
        context_window=f["window"],
        max_output_tokens=f["max_output"],
        buffer_tokens=f["buffer"],
        limit=f["limit"],
        agent=f["agent"],
        llm=f["llm"],
        tokenizer=f["tokenizer"],
    )
    return [resolve_target(m, **flags) for m in f["models"]] or [resolve_target(None, **flags)]


SHOWN_FAILING = 20  # transcripts listed under a dataset's summary (all with --details)


def _render(verdicts: Iterator[Any], f: dict[str, Any], fail_on: str, gate: Any, cases: list[Any]) -> list[int]:
    """Write the verdicts (one in full; several as a summary first, in the table format) and
    check each against the baseline; their exit codes."""
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
        cases.extend(_verdict_cases(verdict, fail_on, f["tool_threshold"]))
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
                failing.append(_failing_row(verdict, code))
            if details:
                texts.append(render_verdict(verdict, fail_on))
    if fmt == "table" and several:
        click.echo(_summary(codes, tally, failing, fail_on, details), nl=False)
        for text in texts:
            click.echo("")
            click.echo(text, nl=False)
    return codes


def _failing_row(verdict: Any, code: int) -> dict[str, Any]:
    t = verdict.transcript
    r = verdict.chosen or verdict.results[0]
    return {
        "line": t.line if t.line is not None else "-",
        "verdict": "fits" if verdict.chosen is not None else "final",
        "target": r.target.name,
        "status": r.status,
        "used": r.used,
        "limit": r.limit,
        "exit": code,
        "file": t.path or "<stdin>",  # last: a long path is cut, not the figures
    }


def _summary(
    codes: list[int], tally: dict[str, int], failing: list[dict[str, Any]], fail_on: str, details: bool
) -> str:
    """A dataset's summary: the total, then the transcripts that do not pass (the first few)."""
    from ctxkit.report.tables import counted, render_table

    counts = ", ".join(
        f"{name} {tally[name]}"
        for name in ("ok", "warn", "compact", "block", "overflow", "final")
        if name in tally
    )
    lines = [f"{counted(len(codes), 'transcript')}: {counts}; exit {combine_exit_codes(codes)}"]
    if failing:
        lines.append(f"{len(failing):,} do not pass (fail-on {fail_on}):")
        lines.append(render_table(failing[:SHOWN_FAILING]))
        if len(failing) > SHOWN_FAILING:
            lines.append(f"... and {len(failing) - SHOWN_FAILING:,} more")
    if not details:
        lines.append("(--details: each transcript's full verdict)")
    return "\n".join(lines) + "\n"


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


def _verdict_cases(verdict: Any, fail_on: str, tool_threshold: float) -> list[Any]:
    from ctxkit.gates.cases import verdict_cases

    return verdict_cases(verdict, fail_on, tool_threshold)


def _finish_gate(gate: Any, cases: list[Any], fmt: str) -> int:
    """Compare with the baseline: the diff (table, json), the cases; the exit code."""
    from ctxkit.gates.baseline import regression_exit
    from ctxkit.gates.cases import baseline_cases
    from ctxkit.report.ci import render_baseline

    diffs = gate.diffs()
    cases.extend(baseline_cases(diffs, gate.baseline.tokenizer))
    code = regression_exit(diffs)
    if fmt == "json":
        import orjson

        click.echo(orjson.dumps({"baseline": gate.path, "tokenizer": gate.baseline.tokenizer,
                                 "exit_code": code, "entries": [d.to_dict() for d in diffs]}).decode())
    elif fmt == "table":
        click.echo("\n" + render_baseline(diffs, gate.path, gate.baseline.tokenizer, code), nl=False)
    return code


def _write_ci(cases: list[Any], fmt: str, junit: str | None, summary: str | None, code: int) -> None:
    """The CI formats on stdout, and the --junit and --summary files (written atomically)."""
    from ctxkit.fileio import write_output
    from ctxkit.gates.cases import tally
    from ctxkit.report.ci import render_github, render_junit, render_markdown
    from ctxkit.report.tables import counted

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


def with_threshold_flags(
    config: Any, warn: float | None, compact: float | None, block: float | None
) -> Any:
    """The config with threshold flags applied; a bad value names the flag."""
    from ctxkit.config.file import ROOT
    from ctxkit.errors import ConfigError, UsageError

    try:
        return config.with_overrides(
            warning_threshold=warn, compact_threshold=compact, block_threshold=block
        )
    except ConfigError as exc:
        text = str(exc)
        for key, flag in (
            ("warning_threshold", "--warn-threshold"),
            ("compact_threshold", "--compact-threshold"),
            ("block_threshold", "--block-threshold"),
        ):
            text = text.replace(f"{ROOT}.{key}", flag).replace(key, flag)
        raise UsageError(text) from None


# --- the table for people ---------------------------------------------------------------------


def _pct(frac: float) -> float | None:
    return round(frac * 100, 1) if math.isfinite(frac) else None


def _render_agents(verdict: Any) -> list[str]:
    out = []
    for r in verdict.results:
        for a in r.agents:
            line = (
                f"as {a.agent} on {r.target.name}: compacts at {a.trigger:,} ({a.formula}); "
                f"at {a.used:,} it {'would compact now' if a.compacts_now else 'would not yet'}"
            )
            if a.compactions is not None:
                units = verdict.transcript.units
                if a.first_at is None:
                    line += "; over the transcript: never"
                else:
                    line += (
                        f"; over the transcript: first at message {a.first_at + 1} "
                        f"({units[a.first_at].id}), {a.compactions} time"
                        + ("s" if a.compactions != 1 else "")
                    )
            out.append(line)
    return out


def _render_usage(verdict: Any) -> list[str]:
    """What the provider recorded beside the local count, once per distinct figure."""
    out: list[str] = []
    seen: set[tuple[int, int]] = set()
    for r in verdict.results:
        u = r.usage
        if u is None or (u.recorded, u.estimated) in seen:
            continue
        seen.add((u.recorded, u.estimated))
        which = f"its original (in {u.origin})" if u.origin else "the log"
        line = (
            f"usage: {which} records {u.recorded:,} input tokens at its last call; ctxkit counts "
            f"{u.estimated:,} for that context ({r.tokenizer}); {u.explain()} (--no-usage "
            "decides on the local count)"
        )
        out.append(line)
    from ctxkit.formats import FORMATS

    fmt = FORMATS.get(verdict.transcript.source_format)
    if not out and fmt is not None and fmt.omits:
        from ctxkit.budget.agents import agent_of_format, measured_for

        agent = agent_of_format(fmt.name)
        known = measured_for(agent, "interactive") if agent else None
        sends = (
            f" ({known.agent} {known.version} sends {known.per_call:,} tokens of them per call "
            f"with no user configuration: measured, `ctxkit agent probe {known.agent}`)"
            if known is not None
            else ""
        )
        out.append(
            f"note: this {fmt.label} log records no usage and never logs {fmt.omits}{sends}; the "
            "count leaves them out (give --system/--tools)"
        )
    recorded = verdict.recorded_model
    from ctxkit.budget.models import find_model

    named = {find_model(r.target.name)[1] or r.target.name for r in verdict.results}
    if recorded is not None and recorded["matched"] not in named and recorded["name"] not in named:
        if recorded["matched"]:
            out.append(
                f"model: the log records {recorded['name']} ({recorded['matched']} in "
                f"models.toml, window {recorded['context_window']:,}); --model "
                f"{recorded['matched']} checks against its window and tokenizer"
            )
        else:
            close = recorded["suggestions"]
            hint = f" (nearest: {', '.join(close)})" if close else ""
            out.append(
                f"model: the log records {recorded['name']}, which models.toml does not list"
                f"{hint}; give --window and --max-output to check against it"
            )
    return out


def render_verdict(verdict: Any, fail_on: str) -> str:
    """The human report of one verdict: a row per target, then the why, the decision and notes."""
    from ctxkit.report.tables import render_table

    t = verdict.transcript
    where = t.path or "<stdin>"
    if t.line is not None:
        where += f":{t.line}"
    lines = [f"{where}: {len(t.units)} units"]
    rows = []
    for r in verdict.results:
        rows.append(
            {
                "target": r.target.name,
                "status": r.status,
                "decision": r.decision,
                "used": r.used,
                "limit": r.limit,
                "bound by": r.bound_by,
                "remaining": r.remaining,
                "used %": _pct(r.used_fraction),
                **{k: v for k, v in r.regions.items()},
                "tokenizer": r.tokenizer,
            }
        )
    lines.append(render_table(rows))
    for r in verdict.results:
        tg = r.target
        if tg.bound_by == "agent":
            bounds = tg.thresholds.bounds(tg.limit)
            why = (
                f"limit {tg.name}: {tg.limit:,}, the most {tg.agent} sends on a window of "
                f"{tg.context_window:,} (the log's own model and agent); compact from "
                f"{bounds['compact']:,}"
            )
        else:
            why = (
                f"limit {tg.name}: {tg.limit:,} bound by {tg.bound_by}; model {tg.effective_limit:,} = "
                f"window {tg.context_window:,} - buffer {tg.buffer_tokens:,} - max output {tg.max_output_tokens:,}"
            )
        if tg.policy_limit is not None:
            why += f"; policy {tg.policy_limit:,} ({tg.policy_rule})"
        lines.append(why)
    code = verdict.exit_code(fail_on)
    if verdict.chosen is not None:
        lines.append(f"verdict: fits {verdict.chosen.target.name} ({verdict.status}), exit {code}")
    else:
        lines.append(f"verdict: final, no target fits, exit {code}")
    errors = verdict.structural_errors() if verdict.checked else []
    if errors:
        lines[-1] += f"; --check found {len(errors)} structural errors"
    lines.extend(_render_usage(verdict))
    lines.extend(_render_agents(verdict))
    for r in verdict.results:
        for note in r.notes:
            lines.append(f"note {r.target.name}: {note}")
    for r in verdict.results:
        if r.pending is not None:
            lines.extend(_render_pending(r))
    for r in verdict.results:
        if r.replay is not None:
            lines.extend(_render_replay(r, fail_on))
    if verdict.checked:
        if not verdict.problems:
            lines.append("check: no structural problems")
        for p in verdict.problems:
            sev = getattr(p, "severity", "error")
            lines.append(f"check {sev}: {p.kind} [{p.unit_id}]: {p.message}")
    return "\n".join(lines) + "\n"


def _render_pending(r: Any) -> list[str]:
    from ctxkit.report.tables import render_table

    plan = r.pending
    head = (
        f"pending {r.target.name}: {plan.tokens:,} tokens in {len(plan.items)} outputs, room {plan.room:,}: "
        + ("fits as is" if plan.fits_raw else f"would overflow by {plan.tokens - plan.room:,}")
    )
    lines = [head]
    if not plan.fits_raw:
        rows = [
            {
                "#": i.index + 1,
                "name": i.name,
                "bytes": i.bytes,
                "tokens": i.tokens,
                "action": i.action,
                "after": i.tokens_after,
            }
            for i in plan.items
        ]
        lines.append(render_table(rows))
        lines.append(
            f"pending {r.target.name}: after the plan {plan.tokens_after:,} tokens, "
            + (f"status {plan.status_after}" if plan.fits_after else "still over: compact first")
        )
    return lines


def _render_replay(r: Any, fail_on: str) -> list[str]:
    rp = r.replay
    parts = []
    for status in ("warn", "compact", "block", "overflow"):
        f = rp.first[status]
        if f is None:
            parts.append(f"{status} never")
        else:
            parts.append(
                f"{status} at message {f['message']} ({f['unit_id']}, {f['tokens']:,} tokens)"
            )
    crossed = any(rp.first[s] is not None for s in ("warn", "compact", "block", "overflow"))
    summary = "first " + ", ".join(parts) if crossed else "no threshold crossed"
    lines = [f"replay {r.target.name}: {rp.checks} checks; {summary}"]
    lines.append(
        f"replay {r.target.name}: the guard would fire {rp.fires} times (fail-on {fail_on}); "
        f"{rp.over_hits} over-hits"
        + (
            f", at most {rp.max_over_hits_per_hour} in one hour"
            if rp.max_over_hits_per_hour is not None
            else ", no timestamps to place them in time"
        )
        + (
            f"; more than 2 in 1 hour first at message {rp.trigger['message']} ({rp.trigger['unit_id']})"
            if rp.trigger
            else ""
        )
    )
    return lines


if __name__ == "__main__":  # pragma: no cover
    sys.exit(guard())
