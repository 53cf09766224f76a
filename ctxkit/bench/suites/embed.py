"""The embed suite: MiniLM load (a fresh process) and embedding per unit; static and lexical
beside it."""

from __future__ import annotations

import subprocess
import tempfile

from ctxkit.bench.harness import (
    _repeat,
    cache_dir_env,
    python_subprocess,
    real_transcripts,
    torch_threads,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult
from ctxkit.errors import CtxkitError

NAME = "embed"


def embed_texts(opts: BenchOptions, n: int = 50, chars: int = 800) -> tuple[list[str], str]:
    """n distinct unit texts cut to `chars` (~200 tokens each): real ones when present."""
    texts: list[str] = []
    for t in real_transcripts(opts.realdata):
        if t.source_format != "claude-code":
            continue
        for u in t.units:
            text = u.content[:chars]
            if u.role != "system" and len(text) >= chars // 2 and text not in texts:
                texts.append(text)
            if len(texts) == n:
                return texts, "real Claude Code units"
    from ctxkit.simulate import generate

    texts = []
    for u in generate("agent_session", seed=0, tokens=40_000).units:
        text = u.content[:chars]
        if len(text) >= chars // 2 and text not in texts:
            texts.append(text)
        if len(texts) == n:
            break
    return texts, "simulated agent-session units"


def _seconds_in_fresh_process(code: str) -> tuple[float | None, str]:
    """Run `code` (which prints its seconds last) in a fresh Python; (seconds, "") or (None, why)."""
    try:
        out = python_subprocess(code, timeout_s=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1]
    return float(out.stdout.strip().splitlines()[-1]), ""


def _minilm_load_subprocess() -> tuple[float | None, str]:
    """Seconds to import sentence-transformers and load MiniLM in a fresh process."""
    return _seconds_in_fresh_process(
        "import time; t = time.perf_counter()\n"
        "from ctxkit.embedders.minilm import load_sentence_model\n"
        "load_sentence_model()\n"
        "print(time.perf_counter() - t)\n"
    )


def _static_load_subprocess() -> tuple[float | None, str]:
    """Seconds to import numpy, load the static table and embed one text in a fresh process."""
    return _seconds_in_fresh_process(
        "import time; t = time.perf_counter()\n"
        "from ctxkit.embedders import get_embedder\n"
        "get_embedder('static').embed(['warm up'])\n"
        "print(time.perf_counter() - t)\n"
    )


# torch's import and the weights take 10-30 s on 2 cores, and torch in the process slows every
# suite after it (each garbage collection walks its objects): --quick leaves MiniLM out
QUICK_NO_MINILM = "not in --quick (loading torch takes 10-30 s on 2 cores); the full run measures it"


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """MiniLM load (fresh process) and batched embedding per unit; static and lexical beside it."""
    from ctxkit import embedders
    from ctxkit.tokens import count_text

    res = SuiteResult("embed")
    texts, source = embed_texts(opts)
    tokens = sum(count_text(x) for x in texts)
    lexical = embedders.get_embedder("lexical", cache=False)
    lex = _repeat(lambda: lexical.embed(texts), opts.repeats(5))
    about = f"{source}, {tokens:,} tokens"
    _static(opts, res, texts, about)
    if opts.quick:
        res.skipped.append(f"minilm: {QUICK_NO_MINILM}")
    else:
        say("embed: loading MiniLM in a fresh process")
        _minilm(opts, res, texts, about)
    res.figures.append(
        Figure(
            f"lexical (BM25) embedding per unit, batch of {len(texts)}",
            lex["median_s"] * 1000 / len(texts),
            "ms/unit",
            100.0,
            note="the offline fallback",
        )
    )
    return res


def _static(opts: BenchOptions, res: SuiteResult, texts: list[str], about: str) -> None:
    """The static embedder: its load in a fresh process, and its embedding per unit, cold."""
    from ctxkit import embedders

    static_load_s, static_why = _static_load_subprocess()
    if static_load_s is None:
        res.skipped.append(f"static: {static_why}")
        return
    from ctxkit.embedders.static import load_table

    def fresh_static() -> None:
        load_table().wordpiece.clear()  # cold: every word split again
        embedders.get_embedder("static").embed(texts)

    st = _repeat(fresh_static, opts.repeats(5))
    res.figures.append(
        Figure(
            "static load (numpy + table, fresh process)",
            static_load_s * 1000,
            "ms",
            note="once per process; excluded from the per-unit figure",
        )
    )
    res.figures.append(
        Figure(
            f"static (distilled MiniLM) embedding per unit, batch of {len(texts)}",
            st["median_s"] * 1000 / len(texts),
            "ms/unit",
            100.0,
            note=f"{about}, cold word cache, median of {st['runs']}",
        )
    )


def _minilm(opts: BenchOptions, res: SuiteResult, texts: list[str], about: str) -> None:
    """MiniLM: its load in a fresh process, its embedding per unit without a cache, and from
    the SQLite cache."""
    from ctxkit import embedders

    load_s, why = _minilm_load_subprocess()
    if load_s is None:
        res.skipped.append(f"minilm: {why}")
        return
    res.figures.append(
        Figure(
            "minilm load (import + weights, fresh process)",
            load_s * 1000,
            "ms",
            note="once per process; excluded from the per-unit figure",
        )
    )
    try:
        model = embedders.get_embedder("minilm", cache=False)
    except CtxkitError as exc:
        res.skipped.append(f"minilm: {exc}")
        return
    model.embed(texts[:2])  # first call allocates; not part of the steady state

    def fresh() -> None:
        embedders.get_embedder("minilm", cache=False).embed(texts)

    run = _repeat(fresh, opts.repeats(5))
    res.figures.append(
        Figure(
            f"minilm embedding per unit, batch of {len(texts)}",
            run["median_s"] * 1000 / len(texts),
            "ms/unit",
            100.0,
            note=f"{about}, no cache, median of {run['runs']}; "
            f"CPU {run['cpu_best_s'] * 1000 / len(texts):.1f} ms/unit",
            detail={"batch_ms": run["median_s"] * 1000, "units": len(texts)},
        )
    )
    threads = torch_threads()
    if threads:
        res.figures[-1].detail["torch_threads"] = threads
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp, cache_dir_env(tmp):
        cached = embedders.get_embedder("minilm")
        cached.embed(texts)
        again = embedders.get_embedder("minilm")
        hit = _repeat(lambda: again.embed(texts), opts.repeats(5))
    res.figures.append(
        Figure(
            "minilm embedding per unit, from the SQLite cache",
            hit["median_s"] * 1000 / len(texts),
            "ms/unit",
            100.0,
            note="a rerun over the same texts",
        )
    )
