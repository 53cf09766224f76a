"""guard -> compact -> guard at one limit on every real log that records provider usage: the
three commands must decide on one figure (`counting.measure`).

    .venv/bin/python scripts/budget_roundtrip.py [--realdata ../shared/realdata] [--fraction 3]
        [--above-unlogged] [--model-from-log]

Per log: `count`'s total, `guard` at a limit of total / FRACTION (exit code), `compact` at that
limit (its "after", or why it refused), `count` of its output and `guard` of its output (exit
code). `--above-unlogged` puts the limit at the unlogged region plus a FRACTION of the rest
instead (divided by the compact threshold, so that the units have that room), which is where
compaction has work to do on a log whose unlogged region alone is over total / FRACTION.
`--model-from-log` passes the model each log records (`--model`), its window and tokenizer.
Prints a Markdown table; exits 1 when a row does not converge (guard of the output not 0 after
a compaction, or compact's figure not `count`'s).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.formats import read_path

FOLDERS = (
    "claude-code",
    "codex",
    "mini-swe-agent",
    "gemini-cli",
    "opencode",
    "copilot-cli",
    "aider",
    "openhands",
)


def logs_with_usage(root: Path) -> list[tuple[Path, str | None]]:
    """Every file under the agent folders whose reader finds recorded usage, with the model the
    log records as models.toml names it (by name, else by family: `budget.resolve.model_of`,
    as the log's own target finds it)."""
    from ctxkit.budget.resolve import model_of

    out = []
    for folder in FOLDERS:
        for path in sorted((root / folder).glob("*")) if (root / folder).is_dir() else []:
            try:
                transcripts = list(read_path(str(path)))
            except Exception:  # a format ctxkit does not read yet
                continue
            for t in transcripts[:1]:
                usage = t.metadata.get("provider_usage") or {}
                if usage.get("calls"):
                    _, matched, _ = model_of(t)
                    out.append((path, matched or None))
    return out


def run(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args)
    return r.exit_code, r.stdout, r.stderr


def count_total(path: Path, extra: list[str]) -> dict:
    code, out, err = run(["count", str(path), "--format", "jsonl", *extra])
    if code != 0:
        raise SystemExit(f"count {path}: {err}")
    return json.loads(out.splitlines()[-1])


def row_for(path: Path, model: str | None, fraction: float, above: bool, use_model: bool) -> dict:
    flags = ["--model", model] if use_model and model else []
    tok = []
    if flags:
        from ctxkit.budget.targets import resolve_target

        tok = ["--tokenizer", resolve_target(model).tokenizer]
    before = count_total(path, tok)
    total, unlogged = before["total"], before.get("unlogged", 0)
    if above:
        limit = math.ceil((unlogged + (total - unlogged) / fraction + 1) / 0.95)
    else:
        limit = total // int(fraction)
    g1, _, _ = run(["guard", str(path), "--limit", str(limit), *flags])
    row = {
        "log": f"{path.parent.name}/{path.name[:44]}",
        "model": model or "",
        "total": total,
        "unlogged": unlogged,
        "limit": limit,
        "guard": g1,
    }
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / ("out" + "".join(path.suffixes[-1:]))
        report = Path(tmp) / "report.json"
        code, _, err = run(
            ["compact", str(path), "--limit", str(limit), "-o", str(out), "--report", str(report),
             *flags]
        )
        if code != 0:
            row["compact"] = "refused: " + err.strip().splitlines()[-1].split(": ", 2)[-1]
            row["after"] = row["count of output"] = row["guard of output"] = ""
            row["ok"] = code in (1, 2)
            return row
        after = json.loads(report.read_text())["tokens"]["after"]
        counted = count_total(out, tok)["total"]
        g2, _, _ = run(["guard", str(out), "--limit", str(limit), *flags])
    row.update(compact="compacted" if after != total else "unchanged", after=after)
    row["count of output"] = counted
    row["guard of output"] = g2
    row["ok"] = counted == after and (g2 == 0 or (g1 == 0 and after == total))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata")
    )
    ap.add_argument("--fraction", type=float, default=3)
    ap.add_argument("--above-unlogged", action="store_true")
    ap.add_argument("--model-from-log", action="store_true")
    a = ap.parse_args()
    rows = [
        row_for(p, m, a.fraction, a.above_unlogged, a.model_from_log)
        for p, m in logs_with_usage(Path(a.realdata))
    ]
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in r.values()) + " |")
    sys.exit(0 if all(r["ok"] for r in rows) else 1)


if __name__ == "__main__":
    main()
