"""How well recorded usage predicts the next call: for every real log that records provider
usage, predict each call's input as the previous call's recorded input plus ctxkit's count of
what was added since (what `guard` does with the last recorded call), and report the error.

    .venv/bin/python scripts/usage_error.py [--realdata ../shared/realdata]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from ctxkit.counting import next_call_errors, recorded_usage
from ctxkit.formats import read_path
from ctxkit.tokens import count_transcript, get_tokenizer

FOLDERS = (
    "claude-code", "codex", "mini-swe-agent", "gemini-cli", "opencode", "copilot-cli", "aider",
    "openhands", "openai-chat", "anthropic-messages",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata")
    )
    args = ap.parse_args()
    tok = get_tokenizer()
    print(
        "| log | calls | local count | recorded (last call) | unlogged | next-call mean abs error | mean abs error % |"
    )
    print("|---|---|---|---|---|---|---|")
    errors: list[float] = []
    pcts: list[float] = []
    for folder in FOLDERS:
        for path in sorted((Path(args.realdata) / folder).glob("*")):
            if path.name in ("README.md", "SOURCES.json"):
                continue
            for t in read_path(str(path)):
                usage = recorded_usage(t, tok)
                if usage is None:
                    continue
                errs = next_call_errors(t, tok)
                calls = [c["input_tokens"] for c in t.metadata["provider_usage"]["calls"]][1:]
                pct = [abs(e) / c * 100 for e, c in zip(errs, calls, strict=True) if c]
                errors.extend(abs(e) for e in errs)
                pcts.extend(pct)
                mean = statistics.fmean(abs(e) for e in errs) if errs else float("nan")
                print(
                    f"| {folder}/{path.name[:40]} | {len(usage.fit.calls)} | {count_transcript(t, tok).total:,} "
                    f"| {usage.fit.last_recorded:,} | {usage.fit.fixed:,} | {mean:,.0f} | "
                    f"{statistics.fmean(pct) if pct else float('nan'):.2f} |"
                )
    print(
        f"\nall {len(errors)} predicted calls: mean |error| {statistics.fmean(errors):,.0f} tokens, "
        f"{statistics.fmean(pcts):.2f}% of the recorded input; median {statistics.median(errors):,.0f}"
    )


if __name__ == "__main__":
    main()
