"""The count suite: token estimation per text and count throughput against raw tiktoken."""

from __future__ import annotations

from ctxkit.bench.harness import (
    QUICK_SCENARIOS,
    BenchOptions,
    Figure,
    Progress,
    SuiteResult,
    _clear,
    _raw_pass,
    _repeat,
    _timed,
    _tok,
    raw_encoding,
    real_transcripts,
    standard_transcript,
)
from ctxkit.tokens import CountOptions, speaker_name, unit_texts

NAME = "count"


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """Token estimation per call and throughput against raw tiktoken on the same texts."""
    from ctxkit.tokens import count_transcript

    res = SuiteResult("count")
    tok = _tok()
    enc = raw_encoding()
    copts = CountOptions()
    std = standard_transcript()
    texts = [x for x in unit_texts(std.units)[0] if x]

    # per message: one tok.count per unit text, as a caller estimating message by message
    def per_text() -> None:
        for x in texts:
            tok.count(x)

    n = opts.repeats(20)
    warm = _repeat(per_text, n)
    cold = _repeat(per_text, n, before=_clear)
    res.figures.append(
        Figure(
            "token estimation per text, cached",
            warm["mean_s"] * 1000 / len(texts),
            "ms/call",
            5.0,
            note=f"mean over {len(texts)} texts of a {len(std.units)}-unit transcript, {n} runs",
        )
    )
    res.figures.append(
        Figure(
            "token estimation per text, cold cache",
            cold["mean_s"] * 1000 / len(texts),
            "ms/call",
            note="cache cleared before each run (the 5 ms target is for cached calls)",
        )
    )
    count_transcript(std, tok, copts)
    whole_warm = _repeat(lambda: count_transcript(std, tok, copts), max(n, 50))
    whole_cold = _repeat(lambda: count_transcript(std, tok, copts), n, before=_clear)
    tokens = count_transcript(std, tok, copts).total
    res.figures.append(
        Figure(
            f"token estimation, whole {len(std.units)}-unit transcript, cached",
            whole_warm["mean_s"] * 1000,
            "ms/call",
            5.0,
            note=f"count_transcript on {tokens:,} tokens (the guard's per-turn check)",
        )
    )
    res.figures.append(
        Figure(
            f"token estimation, whole {len(std.units)}-unit transcript, cold cache",
            whole_cold["mean_s"] * 1000,
            "ms/call",
            note="every text encoded (the 5 ms target is for cached calls)",
        )
    )

    corpus = real_transcripts(opts.realdata)
    source = f"{len(corpus)} real transcripts"
    if opts.quick and corpus:
        corpus = corpus[:40]
        source = f"{len(corpus)} real transcripts (quick: first 40)"
    if not corpus:
        from ctxkit.simulate import generate

        corpus = [generate(s, seed=0) for s in QUICK_SCENARIOS]
        source = f"{len(corpus)} simulated transcripts (no real data)"
    batches = [[x for x in unit_texts(t.units)[0] if x] for t in corpus]
    raw_tokens = sum(len(ids) for b in batches for ids in enc.encode_ordinary_batch(b))
    counted = 0
    for t in corpus:
        result = count_transcript(t, tok, copts)
        counted += sum(uc.total - uc.images for uc in result.units)
        counted -= copts.tokens_per_message * len(t.units)
        counted -= copts.tokens_per_name * sum(1 for u in t.units if speaker_name(u))

    def raw() -> None:
        for b in batches:
            _raw_pass(enc, b)

    def ours() -> None:
        for t in corpus:
            count_transcript(t, tok, copts)

    reps = opts.repeats(7)
    raw_runs: list[float] = []
    our_runs: list[float] = []
    raw_cpu: list[float] = []
    our_cpu: list[float] = []
    for _ in range(reps):  # interleaved, so both sides see the same machine load
        w, c, _ = _timed(raw)
        raw_runs.append(w)
        raw_cpu.append(c)
        _clear()
        w, c, _ = _timed(ours)
        our_runs.append(w)
        our_cpu.append(c)
    raw_s, our_s = min(raw_runs), min(our_runs)
    res.figures.append(
        Figure(
            "raw tiktoken throughput (encode_ordinary_batch)",
            raw_tokens / raw_s,
            "tokens/s",
            note=f"{source}, {raw_tokens:,} tokens, best of {reps}",
        )
    )
    res.figures.append(
        Figure(
            "ctxkit count_transcript throughput, cold cache",
            raw_tokens / our_s,
            "tokens/s",
            note="same texts, cache cleared before each run",
        )
    )
    res.figures.append(
        Figure(
            "count throughput / raw tiktoken",
            raw_s / our_s,
            "ratio",
            0.8,
            better="higher",
            note=f"same run, best of {reps} each; CPU-time ratio {min(raw_cpu) / min(our_cpu):.2f}"
            + ("" if counted == raw_tokens else f"; COUNT MISMATCH {counted} vs {raw_tokens}"),
            detail={
                "raw_s": raw_s,
                "ctxkit_s": our_s,
                "raw_cpu_s": min(raw_cpu),
                "ctxkit_cpu_s": min(our_cpu),
                "tokens_identical": counted == raw_tokens,
            },
        )
    )
    return res
