"""`ctxkit guard`: will the transcript fit the model, with room for the answer?"""

from __future__ import annotations

import math
import sys
from typing import Any

import click

from ctxkit.cli.options import (
    FiniteFloat,
    debug_option,
    echo_err,
    input_options,
    reading_summary,
    tokenizer_options,
)
from ctxkit.errors import InputError
from ctxkit.guard import FAIL_ON
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


@click.command("guard", epilog=EXIT_HELP)
@input_options
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="NAME",
    help="Target model, repeatable in order of preference (see models.toml).",
)
@click.option("--window", type=click.IntRange(min=1), default=None, help="Context window (tokens).")
@click.option(
    "--max-output",
    type=click.IntRange(min=0),
    default=None,
    help="Output reserve (default: the model's maximum output, else window/4).",
)
@click.option(
    "--buffer",
    type=click.IntRange(min=0),
    default=None,
    help="Safety buffer (default 8192, at most window/8).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Policy limit in tokens (taken exactly; the smaller of it and the model's limit binds).",
)
@click.option(
    "--agent", default=None, metavar="NAME", help="Use this agent's policy limit (config agents)."
)
@click.option(
    "--llm", default=None, metavar="TYPE", help="Use this LLM type's policy limit (config per_llm)."
)
@click.option(
    "--system",
    "system_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A system prompt file, counted before the transcript.",
)
@click.option(
    "--tools",
    "tools_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Tool schemas: a JSON list (OpenAI or Anthropic shape); replaces the transcript's.",
)
@click.option(
    "--pending",
    "pending_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Tool outputs about to be appended: JSON list of strings or {name, content}, or JSONL.",
)
@click.option(
    "--replay",
    "do_replay",
    is_flag=True,
    help="Replay the transcript message by message: when each threshold was first crossed.",
)
@click.option(
    "--check",
    "do_check",
    is_flag=True,
    help="Structural lint: orphaned results, missing results, duplicate ids, empty messages, bad ending.",
)
@click.option(
    "--as",
    "as_agents",
    multiple=True,
    type=click.Choice(tuple(RULES)),
    help="Apply this coding agent's own auto-compact trigger to each target's window (with "
    "--replay: where it would first have compacted, and how often); repeatable.",
)
@click.option(
    "--no-usage",
    "no_usage",
    is_flag=True,
    help="Ignore the provider usage a log records (by default the larger of it and the local "
    "count decides).",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    default="compact",
    show_default=True,
    help="The lowest status that exits non-zero.",
)
@click.option(
    "--warn-threshold", type=FiniteFloat(), default=None, help="Warn at this fraction of the limit (0.80)."
)
@click.option(
    "--compact-threshold", type=FiniteFloat(), default=None, help="Compact at this fraction (0.95)."
)
@click.option("--block-threshold", type=FiniteFloat(), default=None, help="Block at this fraction (0.98).")
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="YAML configuration (default ./ctxkit.yaml when present).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(REPORT_FORMATS),
    default="table",
    show_default=True,
    help="table for people, json (one object per transcript per line) for machines; github "
    "(workflow-command annotations), junit (XML) or markdown (a pull-request summary) for CI.",
)
@click.option(
    "--baseline",
    "baseline_path",
    default=None,
    metavar="FILE",
    help="A budget saved by `count --save-baseline`: fail (exit 7) when a region grows beyond "
    "its allowance; prints the diff table.",
)
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="REGION=N|P%",
    help="Override the baseline's allowance for a region (tokens or percent); repeatable.",
)
@click.option(
    "--junit",
    "junit_path",
    default=None,
    metavar="FILE",
    help="Also write the checks as JUnit XML (a case per transcript x target, and per baseline entry).",
)
@click.option(
    "--summary",
    "summary_path",
    default=None,
    metavar="FILE",
    help="Also write a Markdown summary (for a pull-request comment or $GITHUB_STEP_SUMMARY).",
)
@click.option(
    "--tool-threshold",
    type=FiniteFloat(min=0.0, max=1.0, min_open=True),
    default=0.10,
    show_default=True,
    help="Warn when tool schemas alone pass this share of a target's effective window.",
)
@tokenizer_options
@debug_option
@click.pass_context
def guard(ctx: click.Context, **kw: Any) -> None:
    """Check that each transcript fits the target model(s), with room for the answer.

    The limit is the model's effective limit (window - buffer - max output) or, when a config
    file is loaded or --limit/--agent/--llm is given, the smaller of that and the policy limit.
    Several --model targets: the first that fits is chosen; none fits = verdict final.

    \b
    Examples:
      ctxkit guard session.jsonl --model gpt-4o
      ctxkit guard session.jsonl --model gpt-4 --model gpt-4o --format json
      ctxkit guard session.jsonl --agent verification --pending outputs.json
      ctxkit guard session.jsonl --window 128000 --max-output 16384 --replay --check
      ctxkit guard prompts/system.md 'fixtures/*.jsonl' --baseline ctx-baseline.json --format github
    """
    code = run_guard(**kw)
    ctx.exit(code)


def run_guard(**kw: Any) -> int:
    """Read the flags, evaluate every transcript, write the report; the combined exit code."""
    from ctxkit.budget.targets import resolve_target
    from ctxkit.config.file import load_config
    from ctxkit.formats import ReadStats, expand_paths
    from ctxkit.formats.extras import load_tools, read_text_file
    from ctxkit.gates.inputs import read_inputs
    from ctxkit.guard import combine_exit_codes, evaluate, load_pending
    from ctxkit.tokens import CountOptions, TokenizerCache

    debug = kw["debug"]
    trace = (lambda msg: echo_err(f"debug: {msg}")) if debug else None
    config = with_threshold_flags(
        load_config(kw["config_path"]),
        kw["warn_threshold"],
        kw["compact_threshold"],
        kw["block_threshold"],
    )
    if trace:
        trace(f"config: {config.source or 'defaults'}")
    flags: dict[str, Any] = dict(
        config=config,
        context_window=kw["window"],
        max_output_tokens=kw["max_output"],
        buffer_tokens=kw["buffer"],
        limit=kw["limit"],
        agent=kw["agent"],
        llm=kw["llm"],
        tokenizer=kw["tokenizer"],
    )
    targets = [resolve_target(m, **flags) for m in kw["models"]] or [resolve_target(None, **flags)]
    defaults = CountOptions()
    opts = CountOptions(
        image_tokens=defaults.image_tokens if kw["image_tokens"] is None else kw["image_tokens"],
        tool_schema_scale=(
            defaults.tool_schema_scale
            if kw["tool_schema_scale"] is None
            else kw["tool_schema_scale"]
        ),
    )
    system = read_text_file(kw["system_file"]) if kw["system_file"] else None
    tools = load_tools(kw["tools_file"]) if kw["tools_file"] else None
    pending = load_pending(kw["pending_file"]) if kw["pending_file"] else None
    fmt, fail_on = kw["fmt"], kw["fail_on"]
    gate = _open_gate(kw)
    cases: list[Any] = []

    tokenizers = TokenizerCache()
    warned: set[str] = set()
    codes: list[int] = []
    tally: dict[str, int] = {}
    stats = ReadStats()
    first = True
    for t in read_inputs(kw["paths"], kw["read_opts"], stats):
        verdict = evaluate(
            t,
            targets,
            config,
            system=system,
            tools=tools,
            pending=pending,
            do_replay=kw["do_replay"],
            check=kw["do_check"],
            fail_on=fail_on,
            opts=opts,
            tokenizers=tokenizers,
            trace=trace,
            use_usage=not kw["no_usage"],
            as_agents=kw["as_agents"],
            tool_threshold=kw["tool_threshold"],
        )
        for w in verdict.warnings:
            if w not in warned:
                warned.add(w)
                echo_err(w)
        codes.append(verdict.exit_code(fail_on))
        key = verdict.status if verdict.chosen is not None else "final"
        tally[key] = tally.get(key, 0) + 1
        # measured as evaluated: with the --system prompt before it and the --tools beside it
        entry = gate.add(verdict.transcript) if gate is not None else None
        cases.extend(_verdict_cases(verdict, fail_on, kw["tool_threshold"]))
        if fmt == "json":
            import orjson

            d = verdict.to_dict(fail_on)
            if gate is not None and entry is not None:
                d["baseline_entry"] = entry.to_dict()
            click.echo(orjson.dumps(d).decode())
        elif fmt == "table":
            if not first:
                click.echo("")
            click.echo(render_verdict(verdict, fail_on), nl=False)
        first = False
    if fmt == "table" and len(codes) > 1:
        counts = ", ".join(
            f"{name} {tally[name]}"
            for name in ("ok", "warn", "compact", "block", "overflow", "final")
            if name in tally
        )
        click.echo(f"\n{len(codes)} transcripts: {counts}; exit {combine_exit_codes(codes)}")
    if gate is not None and tally:
        codes.append(_finish_gate(gate, cases, fmt))
    if stats.skipped_invalid or sum(stats.skipped_non_message.values()) or stats.skipped_sidechain:
        echo_err(reading_summary(stats))
    if not tally:
        names = ", ".join(expand_paths(kw["paths"]))
        raise InputError(names, None, "no transcript found in the input")
    code = combine_exit_codes(codes)
    _write_ci(cases, fmt, kw["junit_path"], kw["summary_path"], code)
    return code


# --- gates and CI output ------------------------------------------------------------------------


def _open_gate(kw: dict[str, Any]) -> Any:
    """The baseline check of this run (None without --baseline); output files checked first."""
    from ctxkit.fileio import check_paths
    from ctxkit.formats import expand_paths
    from ctxkit.gates.baseline import BaselineCheck, parse_allow

    outputs = {"--junit": kw["junit_path"], "--summary": kw["summary_path"]}
    if any(outputs.values()):
        inputs = {"PATH": expand_paths(kw["paths"]), "--baseline": kw["baseline_path"]}
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

    counts = tally(cases)
    line = f"ctxkit guard: {len(cases)} checks, {counts['failed']} failed, {counts['skipped']} skipped; exit {code}"
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
        line = (
            f"usage: the log records {u.recorded:,} input tokens at its last call ({u.calls:,} "
            f"calls); ctxkit counts {u.estimated:,} for that context ({r.tokenizer})"
        )
        if u.unlogged:
            line += (
                f"; {u.unlogged:,} unlogged (system prompt and tool schemas the log never shows) "
                "carried forward: decided on recorded usage (--no-usage ignores it)"
            )
        else:
            line += "; decided on the local count"
        out.append(line)
    from ctxkit.formats import FORMATS

    fmt = FORMATS.get(verdict.transcript.source_format)
    if not out and fmt is not None and fmt.omits:
        out.append(
            f"note: this {fmt.label} log records no usage and never logs {fmt.omits}; the count "
            "leaves them out (give --system/--tools)"
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
