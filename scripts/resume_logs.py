"""Resume real logs in their agent and compare what it sends with ctxkit's count of the log.

Each Claude Code, Codex and Gemini CLI log (by its format) is resumed in the pinned agent against
the recording provider; with `--compact 2,3,6` each is first compacted to a half, a third and a
sixth of its room for messages and the compacted file is resumed. Per row: ctxkit's count of the
log's messages and its figure, what the agent sent (messages, and the whole request with its
own overhead), whether every message went in order with its tool pairs, and the limit.

    CTXKIT_AGENTS_DIR=~/.cache/ctxkit/agents .venv/bin/python scripts/resume_logs.py ../shared/realdata
    CTXKIT_AGENTS_DIR=~/.cache/ctxkit/agents .venv/bin/python scripts/resume_logs.py ../shared/realdata --compact 2,3,6
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from ctxkit.agents.catalog import AGENTS
from ctxkit.agents.drivers import installed_version
from ctxkit.agents.session import ProbeOptions, resume
from ctxkit.counting import measure
from ctxkit.errors import CtxkitError
from ctxkit.formats import ReadOptions, read_path
from ctxkit.report.tables import write_rows
from ctxkit.tokens import count_transcript, get_tokenizer

BY_FORMAT = {a.log_format: a for a in AGENTS.values() if a.name in ("claude-code", "codex", "gemini-cli")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--compact", default="", help="shares of the room for messages, e.g. 2,3,6")
    args = ap.parse_args()
    shares = [int(x) for x in args.compact.split(",") if x.strip()]
    tok = get_tokenizer()
    files: list[Path] = []
    for p in map(Path, args.paths):
        files += sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
    rows = []
    for path in files:
        try:
            (t,) = list(read_path(str(path), ReadOptions()))[:1]
        except (CtxkitError, ValueError):
            continue
        agent = BY_FORMAT.get(t.source_format)
        if agent is None or installed_version(agent) != agent.version:
            continue
        m = measure(t, tok)
        todo = [(path, None)]
        with tempfile.TemporaryDirectory() as tmp:
            for share in shares:
                limit = m.unlogged + (m.total - m.unlogged) // share
                out = Path(tmp) / f"{share}{''.join(path.suffixes)}"
                done = subprocess.run(
                    [sys.executable, "-m", "ctxkit", "compact", str(path), "--limit", str(limit), "-o", str(out)],
                    capture_output=True, text=True,
                )
                todo.append((out if done.returncode == 0 else None, (share, limit, done.stderr.strip()[:80])))
            for log, how in todo:
                if log is None:
                    rows.append({"log": path.name[:40], "share": f"1/{how[0]}", "limit": how[1], "note": how[2]})
                    continue
                (lt,) = list(read_path(str(log), ReadOptions()))[:1]
                report = resume(agent, log, ProbeOptions(prompt="Continue.", timeout_s=180))
                first, carried = report.first, report.extra["carried"]
                rows.append({
                    "log": path.name[:40],
                    "agent": agent.name,
                    "share": f"1/{how[0]}" if how else "whole",
                    "figure": measure(lt, tok).total,
                    "limit": how[1] if how else None,
                    "counted msgs": count_transcript(lt, tok).total,
                    "sent msgs": first.regions["messages"],
                    "request": first.total,
                    "carried": f"{carried['found']}/{carried['log_units']}",
                    "in order": carried["in_order"],
                    "pairs": carried["pairs_intact"],
                    "fits": (first.total <= how[1]) if how else None,
                })
    write_rows(rows, "table", sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
