"""`ctxkit agent`: the real agents as instruments, run offline against the recording provider."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ctxkit.agents.catalog import AGENTS
from ctxkit.agents.session import MODES
from ctxkit.cli.budget_options import limit_option
from ctxkit.cli.options import echo_err
from ctxkit.cli.output import format_option
from ctxkit.report.tables import default_format, write_rows

_FORMAT = format_option()
_NAMES = click.Choice(sorted(AGENTS))


def _run_options(f: Any) -> Any:
    f = click.option(
        "--mode", type=click.Choice(MODES), default="print", show_default=True,
        help="print: the headless run (claude -p, codex exec, gemini -p); interactive: the agent's "
        "terminal UI, driven in tmux (what an interactive session sends); stream: the headless run "
        "printing its JSON events (claude -p --output-format stream-json --verbose, codex exec --json), "
        "which `agent session` keeps as the log.",
    )(f)
    f = click.option("--keep", default=None, metavar="DIR",
                     help="Keep every request (JSON) and the agent's own logs in DIR.")(f)
    f = click.option("--tokenizer", default=None, help="Tokenizer to count with (default cl100k_base).")(f)
    f = click.option("--timeout", "timeout_s", type=float, default=180.0, show_default=True,
                     help="Seconds the agent may run.")(f)
    f = click.option("--model", default=None, help="The model the agent is asked to use.")(f)
    f = click.option(
        "--here", is_flag=True,
        help="Run in this folder with your own configuration of the agent (copied into a temporary "
        "home: its settings, instructions, MCP servers and skills), to measure what your setup sends.",
    )(f)
    return f


@click.group("agent")
def agent() -> None:
    """Run an installed agent offline against a local recording provider and count what it sends.

    The agent gets a dummy key and a base URL on 127.0.0.1; nothing leaves the machine. It runs in
    a temporary home unless --here is given.

    \b
    Examples:
      ctxkit agent install claude-code codex gemini-cli
      ctxkit agent probe claude-code
      ctxkit agent probe codex --here             # what your own Codex setup sends per call
      ctxkit agent resume claude-code small.jsonl # what resuming a (compacted) log sends
      ctxkit agent session gemini-cli -o logs/    # a real log of the pinned version, tool calls in it
    """


@agent.command("list")
@_FORMAT
def list_agents(fmt: str | None) -> None:
    """The agents, their pinned versions, and whether they are installed."""
    from ctxkit.agents.drivers import agents_dir, installed_version

    rows = [
        {
            "agent": a.name,
            "package": a.spec,
            "installed": installed_version(a) or "",
            "api": a.api,
            "log format": a.log_format,
        }
        for a in AGENTS.values()
    ]
    write_rows(rows, fmt or default_format(), sys.stdout)
    echo_err(f"installed in {agents_dir()} (CTXKIT_AGENTS_DIR to change)")


@agent.command("install")
@click.argument("names", nargs=-1, type=_NAMES)
def install_agents(names: tuple[str, ...]) -> None:
    """Install the pinned versions from npm (all of them without NAMES)."""
    from ctxkit.agents.catalog import get_agent
    from ctxkit.agents.drivers import agents_dir, install, is_installed

    chosen = [get_agent(n) for n in names] or list(AGENTS.values())
    missing = [a for a in chosen if not is_installed(a)]
    there = [a.spec for a in chosen if a not in missing]
    if there:
        echo_err(f"already installed: {', '.join(there)}")
    if not missing:
        echo_err(f"nothing to install ({agents_dir()})")
        return
    echo_err(f"installing {', '.join(a.spec for a in missing)} from npm ...")
    where = install(missing)
    echo_err(f"installed in {where}")


@agent.command("probe")
@click.argument("name", type=_NAMES)
@click.option("--prompt", default="Say hi.", show_default=True, help="The prompt to send.")
@_run_options
@_FORMAT
def probe_cmd(name: str, prompt: str, fmt: str | None, **flags: Any) -> None:
    """What the agent sends for one prompt, region by region.

    \b
    Regions: system (the system prompt), tools (built-in tool schemas), mcp (MCP tool schemas, by
    server), skills (the skills listing), reminders (what the agent adds around the prompt:
    environment, attachments, reminders), messages (the conversation).
    """
    from ctxkit.agents.catalog import get_agent
    from ctxkit.agents.session import ProbeOptions, probe

    report = probe(get_agent(name), ProbeOptions(prompt=prompt, **flags))
    _render(report, fmt)


@agent.command("resume")
@click.argument("name", type=_NAMES)
@click.argument("log", type=click.Path(dir_okay=False))
@click.option("--prompt", default="Continue.", show_default=True, help="The prompt to resume with.")
@limit_option("Say whether the request fits this many tokens (exit 5 when it does not).")
@_run_options
@_FORMAT
def resume_cmd(name: str, log: str, prompt: str, limit: int | None, fmt: str | None, **flags: Any) -> None:
    """Resume LOG in the agent and count the request it sends: does it carry the log's messages in
    order, with every tool call beside its result, and does it fit?"""
    from ctxkit.agents.catalog import get_agent
    from ctxkit.agents.session import ProbeOptions, resume

    report = resume(get_agent(name), log, ProbeOptions(prompt=prompt, **flags))
    _render(report, fmt)
    carried = report.extra["carried"]
    total = report.first.total
    echo_err(
        f"{log}: {report.label} {report.version} sent {carried['found']:,} of the log's "
        f"{carried['log_units']:,} messages ({'in order' if carried['in_order'] else 'out of order'}, "
        f"tool pairs {'intact' if carried['pairs_intact'] else 'broken'}); {total:,} tokens"
        + (f" against the limit {limit:,}" if limit else "")
    )
    if carried["missing"]:
        echo_err("not sent: " + "; ".join(carried["missing"]))
    if limit is not None and total > limit:
        raise click.exceptions.Exit(5)


@agent.command("session")
@click.argument("name", type=_NAMES)
@click.option("-o", "--output", required=True, help="Where to write the log (a file, or DIR/).")
@_run_options
def session_cmd(name: str, output: str, **flags: Any) -> None:
    """Drive the agent through a short scripted session (it writes, reads, edits and runs a file,
    for real, in its temporary home) and keep the log it wrote (--mode stream: the JSON events it
    printed)."""
    from ctxkit.agents.catalog import get_agent
    from ctxkit.agents.session import ProbeOptions, drive

    report = drive(get_agent(name), output, ProbeOptions(**flags))
    echo_err(
        f"{report.label} {report.version}: {len(report.counts)} calls, "
        f"{report.extra.get('steps_used', 0)} scripted steps; log written to {report.extra['log']}"
    )


def _render(report: Any, fmt: str | None) -> None:
    fmt = fmt or default_format()
    if fmt in ("json", "jsonl"):
        click.echo(json.dumps(report.to_dict(), indent=1 if fmt == "json" else None))
        return
    first = report.first
    rows = [{"region": k, "tokens": v} for k, v in first.regions.items()]
    rows.append({"region": "total (in the context)", "tokens": first.total})
    if first.deferred:
        rows.append({"region": f"deferred tools ({len(first.deferred)}, not loaded)", "tokens": first.deferred_tokens})
    echo_err(
        f"{report.label} {report.version} ({report.mode}), model {first.model or report.model}: "
        f"{len(report.counts)} call{'s' if len(report.counts) != 1 else ''}; max_tokens "
        f"{first.max_tokens if first.max_tokens is not None else 'not sent'}"
    )
    write_rows(rows, fmt, sys.stdout)
    if first.mcp_servers:
        write_rows([{"mcp server": k, "tokens": v} for k, v in first.mcp_servers.items()], fmt, sys.stdout)
