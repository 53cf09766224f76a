"""The guard suite: how long a guard decision takes, and against what it decides."""

from __future__ import annotations

from ctxkit.bench.harness import (
    REAL_MIN_TOKENS,
    _clear,
    _label,
    _repeat,
    real_transcripts,
    standard_transcript,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult

NAME = "guard"


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """Time of one guard decision (count + budget + status) with a warm and a cold cache."""
    from ctxkit.budget.targets import resolve_target
    from ctxkit.config.file import Config
    from ctxkit.engines.guard import GuardSettings, evaluate
    from ctxkit.tokens import TokenizerCache

    res = SuiteResult("guard")
    cfg = Config()
    settings = GuardSettings(config=cfg)
    targets = [resolve_target("gpt-4o", config=cfg)]
    cache = TokenizerCache()
    std = standard_transcript()
    n = opts.repeats(50)
    evaluate(std, targets, settings, tokenizers=cache)
    warm = _repeat(lambda: evaluate(std, targets, settings, tokenizers=cache), n)
    cold = _repeat(
        lambda: evaluate(std, targets, settings, tokenizers=cache), opts.repeats(10), before=_clear
    )
    res.figures.append(
        Figure(
            f"guard decision, {len(std.units)}-unit transcript, cached",
            warm["mean_s"] * 1000,
            "ms",
            note="evaluate() against gpt-4o; what an agent loop pays per turn",
        )
    )
    res.figures.append(
        Figure(
            f"guard decision, {len(std.units)}-unit transcript, cold cache",
            cold["mean_s"] * 1000,
            "ms",
            note="first check of a transcript",
        )
    )
    both = [targets[0], resolve_target("gpt-4", config=cfg)]
    two = _repeat(lambda: evaluate(std, both, settings, tokenizers=cache), n)
    res.figures.append(
        Figure(
            "guard decision, two targets (gpt-4o, gpt-4), cached",
            two["mean_s"] * 1000,
            "ms",
        )
    )
    corpus = real_transcripts(opts.realdata, REAL_MIN_TOKENS)
    if corpus:
        biggest = max(corpus, key=lambda t: len(t.units))
        evaluate(biggest, targets, settings, tokenizers=cache)
        big = _repeat(lambda: evaluate(biggest, targets, settings, tokenizers=cache), opts.repeats(20))
        big_cold = _repeat(
            lambda: evaluate(biggest, targets, settings, tokenizers=cache),
            opts.repeats(5),
            before=_clear,
        )
        res.figures.append(
            Figure(
                f"guard decision, largest real transcript ({len(biggest.units)} units), cached",
                big["mean_s"] * 1000,
                "ms",
                note=_label(biggest),
            )
        )
        res.figures.append(
            Figure(
                f"guard decision, largest real transcript ({len(biggest.units)} units), cold cache",
                big_cold["mean_s"] * 1000,
                "ms",
            )
        )
    else:
        res.skipped.append("real transcripts: not found")
    return res
