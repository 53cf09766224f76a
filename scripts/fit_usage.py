"""How well `fixed + ratio x counted` explains the recorded usage of real logs (`budget.fit`).

For every log that records the provider's usage: the calls, the log's own first call, the fixed
part (never above that first call), the ratio, the steps the two cannot explain, the worst call
after the steps, and the calls still off by more than 5%. Then the totals.

    .venv/bin/python scripts/fit_usage.py ../shared/realdata            # every file under it
    .venv/bin/python scripts/fit_usage.py held-out/ --format jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ctxkit.counting import recorded_usage
from ctxkit.errors import CtxkitError
from ctxkit.formats import ReadOptions, read_path
from ctxkit.tokens import get_tokenizer


def rows(paths: list[Path]):
    tok = get_tokenizer()
    for path in paths:
        try:
            transcripts = list(read_path(str(path), ReadOptions()))
        except CtxkitError:
            continue
        for t in transcripts[:1]:
            usage = recorded_usage(t, tok)
            if usage is None or len(usage.fit.calls) < 2:
                continue
            f = usage.fit
            first = (t.metadata.get("provider_usage") or {}).get("first") or {}
            yield {
                "log": path.name,
                "format": t.source_format,
                "calls": len(f.calls),
                "first_call": int(first.get("input_tokens") or f.first_recorded),
                "fixed": f.fixed,
                "ratio": round(f.ratio, 3),
                "steps": len(f.steps),
                "worst_pct": round(100 * f.worst, 1),
                "unexplained_calls": len(f.unexplained()),
            }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--format", choices=("table", "jsonl"), default="table")
    args = ap.parse_args()
    files: list[Path] = []
    for p in map(Path, args.paths):
        files += sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
    out = list(rows(files))
    if args.format == "jsonl":
        for r in out:
            print(json.dumps(r))
    else:
        from ctxkit.report.tables import write_rows

        write_rows(out, "table", sys.stdout)
    agents = [r for r in out if r["format"] in ("claude-code", "codex", "gemini-cli", "opencode")]
    print(
        f"{len(out)} logs ({len(agents)} of coding agents), {sum(r['calls'] for r in out):,} calls; "
        f"fixed above the first call: {sum(r['fixed'] > r['first_call'] for r in out)}; "
        f"logs with a call off by more than 5%: {sum(r['unexplained_calls'] > 0 for r in out)} "
        f"({sum(r['unexplained_calls'] > 0 for r in agents)} of coding agents), "
        f"{sum(r['unexplained_calls'] for r in out)} calls",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
