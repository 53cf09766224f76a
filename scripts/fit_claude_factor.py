"""Fit the `claude` tokenizer estimate: Claude's recorded input growth between consecutive calls
against o200k_base's count of the same new messages, over every real Claude Code log.

    .venv/bin/python scripts/fit_claude_factor.py [--realdata ../shared/realdata]

Prints the pooled factor (what `CLAUDE_O200K_FACTOR` is set to), the next-call error with and
without it, and the error when each log is left out of the fit (the honest figure).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from ctxkit.counting import estimate_calls, provider_calls
from ctxkit.formats import read_path
from ctxkit.tokens import get_tokenizer

Step = tuple[int, int, int]  # (recorded growth, o200k growth, recorded input of the call)


def steps_of(root: Path) -> list[list[Step]]:
    tok = get_tokenizer("o200k_base")
    logs = []
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        for t in read_path(str(path)):
            calls, est = provider_calls(t), estimate_calls(t, tok)
            logs.append(
                [
                    (
                        calls[i]["input_tokens"] - calls[i - 1]["input_tokens"],
                        est[i] - est[i - 1],
                        calls[i]["input_tokens"],
                    )
                    for i in range(1, len(calls))
                ]
            )
    return logs


def fit(logs: list[list[Step]]) -> float:
    # steps that added real text (> 200 tokens) and grew the recorded input
    kept = [(dr, de) for steps in logs for dr, de, _ in steps if de > 200 and dr > 0]
    return sum(dr for dr, _ in kept) / sum(de for _, de in kept)


def error_pct(steps: list[Step], factor: float) -> list[float]:
    return [abs(dr - factor * de) / c * 100 for dr, de, c in steps]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata")
    )
    logs = steps_of(Path(ap.parse_args().realdata))
    factor = fit(logs)
    n = sum(1 for steps in logs for dr, de, _ in steps if de > 200 and dr > 0)
    print(
        f"{len(logs)} Claude Code logs, {sum(map(len, logs))} call-to-call steps, {n} used in the fit"
    )
    print(f"pooled factor (Claude tokens per o200k token): {factor:.3f}")
    for f, label in ((1.0, "o200k_base alone"), (factor, f"o200k_base x {factor:.2f}")):
        errs = [e for steps in logs for e in error_pct(steps, f)]
        print(
            f"next-call mean |error|, {label}: {statistics.fmean(errs):.3f}% of the recorded input"
        )
    left_out = [
        e for i, steps in enumerate(logs) for e in error_pct(steps, fit(logs[:i] + logs[i + 1 :]))
    ]
    print(
        f"next-call mean |error|, each log left out of the fit: {statistics.fmean(left_out):.3f}%"
    )


if __name__ == "__main__":
    main()
