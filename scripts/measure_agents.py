"""Measure what the pinned agents send and write `ctxkit/budget/agents.toml`.

Runs `ctxkit agent probe` for each installed agent in print and interactive mode (the
interactive one needs tmux) against the recording provider, offline, and writes one row per
(agent, version, mode). Run it after bumping a pinned version in `ctxkit/agents/catalog.py`:

    CTXKIT_AGENTS_DIR=~/.cache/ctxkit/agents .venv/bin/python scripts/measure_agents.py
"""

from __future__ import annotations

import datetime
import shutil
import sys
from pathlib import Path

from ctxkit.agents.catalog import AGENTS
from ctxkit.agents.drivers import installed_version
from ctxkit.agents.session import ProbeOptions, probe

OUT = Path(__file__).resolve().parent.parent / "ctxkit" / "budget" / "agents.toml"
HEADER = """\
# What the pinned agents send on their first call, measured offline with the recording provider
# (`ctxkit agent probe NAME --mode MODE`; scripts/measure_agents.py writes this file). Tokens are
# cl100k_base counts of each region of the request: system (the system prompt), tools (built-in
# tool schemas), mcp (MCP tool schemas), skills (the skills listing), reminders (environment,
# attachments and reminders the agent adds around the prompt). max_tokens is what the request
# asked for (absent: not sent). A temporary home: no user configuration, no MCP servers.
"""


def main() -> int:
    date = datetime.date.today().isoformat()
    rows = []
    for agent in AGENTS.values():
        if installed_version(agent) != agent.version:
            print(f"skip {agent.name}: {agent.spec} not installed", file=sys.stderr)
            continue
        for mode in ("print", "interactive"):
            if mode == "interactive" and shutil.which("tmux") is None:
                print(f"skip {agent.name} interactive: no tmux", file=sys.stderr)
                continue
            first = probe(agent, ProbeOptions(mode=mode)).first
            r = first.regions
            rows.append(
                "[[measured]]\n"
                f'agent = "{agent.name}"\nversion = "{agent.version}"\nmode = "{mode}"\n'
                f'model = "{first.model or agent.model}"\ndate = "{date}"\n'
                f'how = "ctxkit agent probe {agent.name} --mode {mode}"\n'
                + (f"max_tokens = {first.max_tokens}\n" if first.max_tokens is not None else "")
                + f"system = {r['system']}\ntools = {r['tools']}\nmcp = {r['mcp']}\n"
                f"skills = {r['skills']}\nreminders = {r['reminders']}\n"
            )
            print(f"{agent.name} {mode}: {r}", file=sys.stderr)
    OUT.write_text(HEADER + "\n" + "\n".join(rows), encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
