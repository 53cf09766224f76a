"""The count suite: token estimation per text and count throughput against raw tiktoken, for
cl100k_base and o200k_base."""

from __future__ import annotations

from collections.abc import Sequence

from ctxkit.bench.harness import (
    QUICK_SCENARIOS,
    _clear,
    _raw_pass,
    _repeat,
    _timed,
    _tok,
    raw_encoding,
    real_transcripts,
    standard_transcript,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult
from ctxkit.english import counted
from ctxkit.model import Transcript
from ctxkit.tokens import CountOptions, speaker_name, unit_texts
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER

NAME = "count"
O200K = "o200k_base"  # the encoding of OpenAI's newer models, counted beside the default


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """Token estimation per call and throughput against raw tiktoken on the same texts."""
    from ctxkit.tokens import count_transcript

    res = SuiteResult("count")
    tok = _tok()
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
    source = counted(len(corpus), "real transcript")
    if opts.quick and corpus:
        corpus = _first(corpus, QUICK_COUNT_TOKENS)
        source = (
            f"{counted(len(corpus), 'real transcript')} (quick: the first "
            f"{QUICK_COUNT_TOKENS:,} tokens' worth of {source})"
        )
    if not corpus:
        from ctxkit.simulate import generate

        corpus = [generate(s, seed=0) for s in QUICK_SCENARIOS]
        source = f"{len(corpus)} simulated transcripts (no real data)"
    batches = [[x for x in unit_texts(t.units)[0] if x] for t in corpus]
    reps = opts.repeats(7)
    for name in COUNT_ENCODINGS:
        res.figures += _against_tiktoken(name, corpus, batches, source, copts, reps)
    return res


# --quick times counting on the first real transcripts up to this many tokens (the full run on
# all of them, 1.8M tokens)
QUICK_COUNT_TOKENS = 600_000


def _first(corpus: Sequence[Transcript], tokens: int) -> list[Transcript]:
    """The first transcripts of `corpus` until they hold `tokens` tokens (at least one)."""
    from ctxkit.tokens import count_transcript, get_tokenizer

    tok = get_tokenizer(DEFAULT_TOKENIZER)
    out: list[Transcript] = []
    total = 0
    for t in corpus:
        if out and total >= tokens:
            break
        out.append(t)
        total += count_transcript(t, tok).total
    return out


COUNT_ENCODINGS = (DEFAULT_TOKENIZER, O200K)
COUNT_TARGET = 5.0  # counting at five times raw tiktoken, exactly (issue 23)


def _against_tiktoken(
    name: str,
    corpus: Sequence[Transcript],
    batches: list[list[str]],
    source: str,
    copts: CountOptions,
    reps: int,
) -> list[Figure]:
    """ctxkit's `count_transcript` of every transcript against raw tiktoken on the same texts,
    in the same run: tiktoken's faster way (one `encode_ordinary` per text, or
    `encode_ordinary_batch` per transcript on every core), interleaved runs, best of `reps`;
    and whether ctxkit's totals less its per-message constants are tiktoken's token count."""
    from ctxkit.tokens import count_transcript, get_tokenizer

    tok = get_tokenizer(name)
    enc = raw_encoding(name)
    raw_tokens = sum(len(enc.encode_ordinary(x)) for b in batches for x in b)
    tok.count_many([x for b in batches for x in b][:50])  # past the load, as a warm process
    counted = 0
    for t in corpus:
        result = count_transcript(t, tok, copts)
        counted += sum(uc.total - uc.images for uc in result.units)
        counted -= copts.tokens_per_message * len(t.units)
        counted -= copts.tokens_per_name * sum(1 for u in t.units if speaker_name(u))

    def loop() -> None:
        for b in batches:
            for x in b:
                enc.encode_ordinary(x)

    def batch() -> None:
        for b in batches:
            _raw_pass(enc, b)

    def ours() -> None:
        for t in corpus:
            count_transcript(t, tok, copts)

    runs: dict[str, list[tuple[float, float]]] = {"loop": [], "batch": [], "ours": []}
    for _ in range(reps):  # interleaved, so every side sees the same machine load
        for key, fn in (("loop", loop), ("batch", batch), ("ours", ours)):
            _clear()
            runs[key].append(_timed(fn)[:2])
    best = {k: min(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: min(c for _, c in v) for k, v in runs.items()}
    raw_s = min(best["loop"], best["batch"])
    raw_cpu = min(cpu["loop"], cpu["batch"])
    exact = counted == raw_tokens
    return [
        Figure(
            f"raw tiktoken throughput ({name})",
            raw_tokens / raw_s,
            "tokens/s",
            note=f"{source}, {raw_tokens:,} tokens, best of {reps}: encode_ordinary per text "
            f"{best['loop']:.3g} s, encode_ordinary_batch {best['batch']:.3g} s",
        ),
        Figure(
            f"ctxkit count_transcript throughput ({name}), cold cache",
            raw_tokens / best["ours"],
            "tokens/s",
            note="same texts, count cache cleared before each run",
        ),
        Figure(
            f"count throughput / raw tiktoken ({name})",
            raw_s / best["ours"],
            "ratio",
            COUNT_TARGET,
            better="higher",
            note=f"against tiktoken's faster way, same run; CPU-time ratio {raw_cpu / cpu['ours']:.2f}"
            + ("; counts exact" if exact else f"; COUNT MISMATCH {counted} vs {raw_tokens}"),
            detail={
                "raw_s": raw_s,
                "raw_loop_s": best["loop"],
                "raw_batch_s": best["batch"],
                "ctxkit_s": best["ours"],
                "raw_cpu_s": raw_cpu,
                "ctxkit_cpu_s": cpu["ours"],
                "tokens_identical": exact,
            },
        ),
    ]
