"""Fit the Claude tokenizer estimates per tokenizer family: Claude's recorded input growth between
consecutive calls against o200k_base's count of the same new messages, over every real Claude
Code log, each call assigned to the family of the model it records (models.toml's `tokenizer`:
`claude`, or `claude-4.7` for Opus 4.7 and later).

    .venv/bin/python scripts/fit_claude_factor.py [--realdata ../shared/realdata]

Per family and per model: the steps, the median ratio of steps that added over 1,000 tokens
(the tokenizer's own ratio: hidden per-turn growth, such as reminders, weighs little there),
the factor with the lowest next-call error, and the next-call error with o200k_base alone and
with the factor ctxkit uses (`CLAUDE_O200K_FACTOR`, `CLAUDE_47_O200K_FACTOR`).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from ctxkit.budget.models import find_model
from ctxkit.counting import estimate_calls, provider_calls
from ctxkit.formats import read_path
from ctxkit.tokens import get_tokenizer
from ctxkit.tokens.loaders import CLAUDE_47_O200K_FACTOR, CLAUDE_O200K_FACTOR

Step = tuple[int, int, int]  # (recorded growth, o200k growth, recorded input of the call)
USED = {"claude": CLAUDE_O200K_FACTOR, "claude-4.7": CLAUDE_47_O200K_FACTOR}


def steps_by_model(root: Path) -> dict[str, list[Step]]:
    tok = get_tokenizer("o200k_base")
    out: dict[str, list[Step]] = defaultdict(list)
    for path in sorted((root / "claude-code").glob("*.jsonl")):
        for t in read_path(str(path)):
            calls, est = provider_calls(t), estimate_calls(t, tok)
            for i in range(1, len(calls)):
                model = calls[i].get("model")
                if model is None or model != calls[i - 1].get("model"):
                    continue
                out[model].append(
                    (
                        calls[i]["input_tokens"] - calls[i - 1]["input_tokens"],
                        est[i] - est[i - 1],
                        calls[i]["input_tokens"],
                    )
                )
    return out


def error_pct(steps: list[Step], factor: float) -> float:
    return statistics.fmean(abs(dr - factor * de) / c * 100 for dr, de, c in steps)


def report(label: str, steps: list[Step], used: float | None) -> None:
    large = [dr / de for dr, de, _ in steps if de > 1000 and dr > 0]
    grid = [round(1.0 + 0.05 * k, 2) for k in range(21)]
    best = min(grid, key=lambda f: error_pct(steps, f))
    median = f"{statistics.median(large):.2f}" if large else "-"
    line = (
        f"{label}: {len(steps)} steps; large steps' median ratio {median}; next-call |error| "
        f"o200k alone {error_pct(steps, 1.0):.3f}%, lowest {error_pct(steps, best):.3f}% at {best}"
    )
    if used is not None:
        line += f", ctxkit's {used} {error_pct(steps, used):.3f}%"
    print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--realdata", default=str(Path(__file__).resolve().parents[2] / "shared" / "realdata")
    )
    by_model = steps_by_model(Path(ap.parse_args().realdata))
    families: dict[str, list[Step]] = defaultdict(list)
    for model, steps in sorted(by_model.items()):
        info, _ = find_model(model)
        family = info.tokenizer if info is not None else "unknown"
        families[family].extend(steps)
        report(f"  {model} ({family})", steps, USED.get(family))
    for family, steps in sorted(families.items()):
        report(f"family {family}", steps, USED.get(family))


if __name__ == "__main__":
    main()
