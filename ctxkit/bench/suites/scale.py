"""The scale suite: count and compaction time and memory from 1k to 1M tokens (simulated
scenarios and real logs chained) and 25k to 200k tiny messages, each size in a fresh process,
against one tiktoken pass, and the growth exponent of each."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxkit.bench.harness import (
    MESSAGE_SIZES,
    PASS_TARGET,
    QUICK_MESSAGE_SIZES,
    REAL_CHAIN,
    REAL_CHAIN_SIZES,
    SCALE_SCENARIOS,
    SCALE_SIZES,
    TINY_MESSAGES,
    _clear,
    _raw_pass,
    _settings,
    _timed,
    _tok,
    cold_copy,
    loglog_slope,
    python_subprocess,
    raw_encoding,
    real_chain,
    tiny_messages,
)
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult, Table
from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript
from ctxkit.tokens import unit_texts

NAME = "scale"
REPEAT_UNDER_S = 0.5  # compactions shorter than this (CPU) are timed REPEATS times, cold
# on the token axes, up to 2 s (the 1M compactions): one reading of a 0.9 s compaction moved by
# half between two runs on a shared machine. The tiny-messages axis keeps 0.5 s (none of its
# sizes is that short), so the sizes whose slope is its figure are all timed alike.
REPEAT_UNDER_S_TOKENS = 2.0
REPEATS = 3
# --quick: one simulated scenario beside the real logs chained and the tiny messages
QUICK_SCALE_SCENARIOS = ("agent_session",)


def _vm_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so it measures from now on (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _scale_input(
    kind: str, size: int, seed: int = 0, realdata: str | None = None
) -> tuple[Transcript, int]:
    """One size of one axis of the scale suite, and the limit to compact it to: a simulated
    scenario at `size` tokens (its own limit), real logs chained to `size` tokens, or `size`
    tiny messages (a third of their tokens)."""
    from ctxkit.simulate import generate
    from ctxkit.tokens import count_transcript

    if kind == TINY_MESSAGES:
        t = tiny_messages(size)
    elif kind == REAL_CHAIN:
        chained = real_chain(size, Path(realdata) if realdata else None)
        if chained is None:
            raise CtxkitError("real logs: ../shared/realdata not found")
        t = chained
    else:
        t = generate(kind, seed=seed, tokens=size)
        return t, int(t.metadata["ground_truth"]["limit"])
    return t, max(2_000, count_transcript(t, _tok()).total // 3)


def _tiktoken_pass(enc: Any, texts: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of the faster way tiktoken reads the texts once, by each measure:
    one `encode_ordinary` per text, or its thread-pool batch (best of 3 each)."""
    runs = [_timed(lambda: [enc.encode_ordinary(x) for x in texts]) for _ in range(3)]
    runs += [_timed(lambda: _raw_pass(enc, texts)) for _ in range(3)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def scale_worker(
    scenario: str,
    tokens: int,
    seed: int = 0,
    light: bool = False,
    realdata: str | None = None,
    write_to: str | None = None,
) -> dict[str, Any]:
    """Measure one size in this (fresh) process: make the input, count, one tiktoken pass,
    compact. `scenario` is a simulated scenario, `real_chain` or `tiny_messages` (then `tokens`
    is a number of messages). With `write_to`, the input is written there too (ctxkit's JSONL),
    for `_process_pair` to compact and encode as files.

    A compaction under REPEAT_UNDER_S of CPU (REPEAT_UNDER_S_TOKENS on a token axis) is timed
    REPEATS times, each cold, and the best time kept (the tiktoken pass is the best of its runs
    too).

    Peak memory of the compaction is the process's peak RSS over the compaction minus the RSS
    before it (the kernel's high-water mark, reset first), plus (unless `light`) the Python heap
    peak that tracemalloc sees in a second, traced run and the time with an archive file.
    """
    from ctxkit.compaction import compact
    from ctxkit.tokens import count_transcript

    tok = _tok()
    enc = raw_encoding()
    # Warm up on a small input first, so lazy imports are not billed to the first size, and
    # load the fast counter: a process counts its first characters with the Python BPE and
    # loads the counter past them (`tokens.fast.SMALL_WORK_CHARS`), and whichever size
    # crossed that line was billed the load (a 10,000-token compaction took 0.11 s, not 0.006).
    # The tiktoken pass it is held against has its encoding loaded as well.
    small = 200 if scenario == TINY_MESSAGES else 2_000
    warm, warm_limit = _scale_input(scenario, small, seed + 1, realdata)
    compact(warm, _settings(warm_limit))
    getattr(tok, "counter", None)
    g_wall, _c, (t, limit) = _timed(lambda: _scale_input(scenario, tokens, seed, realdata))
    if write_to:
        from ctxkit.formats import write_path

        write_path([t], write_to)
    texts = [x for x in unit_texts(t.units)[0] if x]
    chars = sum(len(x) for x in texts)
    one, one_cpu = _tiktoken_pass(enc, texts)
    _clear()
    count_s = _timed(lambda: count_transcript(t, tok))[0]
    s = _settings(limit)
    repeat_under_s = REPEAT_UNDER_S if scenario == TINY_MESSAGES else REPEAT_UNDER_S_TOKENS
    m = _measure_compaction(t, s, repeat_under_s, light)
    import resource

    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result, wall, cpu = m.result, m.wall_s, m.cpu_s
    return {
        "scenario": scenario,
        "tokens_asked": tokens,
        "tokens": result.tokens_before,
        "units": len(t.units),
        "chars": chars,
        "limit": s.limit,
        "tokens_after": result.tokens_after,
        "fits": result.fits,
        "strategies": ",".join(result.strategies_applied),
        "generate_s": round(g_wall, 4),
        "tiktoken_pass_s": round(one, 5),
        "tiktoken_pass_cpu_s": round(one_cpu, 5),
        "count_s": round(count_s, 5),
        "compact_s": round(wall, 5),
        "compact_cpu_s": round(cpu, 5),
        "compact_file_archive_s": None if m.disk_wall_s is None else round(m.disk_wall_s, 5),
        "compact_over_tiktoken": round(wall / one, 2) if one else None,
        "compact_over_tiktoken_cpu": round(cpu / one_cpu, 2) if one_cpu else None,
        "rss_before_mb": round(m.rss_before_kib / 1024, 1) if m.rss_before_kib else None,
        "compact_peak_rss_delta_mb": round(max(0, m.peak_kib - m.rss_before_kib) / 1024, 2)
        if m.peak_kib and m.rss_before_kib
        else None,
        "compact_heap_peak_mb": None if m.heap_peak is None else round(m.heap_peak / 2**20, 2),
        "process_maxrss_mb": round(maxrss_kib / 1024, 1),
    }


@dataclass
class _CompactionRun:
    """One size's compaction as `scale_worker` measured it: the result, its best time, memory."""

    result: Any
    wall_s: float
    cpu_s: float
    rss_before_kib: int | None
    peak_kib: int | None
    heap_peak: int | None = None  # bytes, the Python heap's peak under tracemalloc
    disk_wall_s: float | None = None  # the same run with an archive file


def _measure_compaction(t: Transcript, s: Any, repeat_under_s: float, light: bool) -> _CompactionRun:
    """Compact `t` cold: its time (the best of REPEATS when under `repeat_under_s` of CPU), the
    peak RSS over it, and unless `light` the traced heap peak and the time with an archive file."""
    import tracemalloc

    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact

    def run(on_disk: bool = False, source: Transcript = t) -> Any:
        with (
            tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp,
            Archive(os.path.join(tmp, "a.ctx.db") if on_disk else ":memory:") as archive,
        ):
            return compact(source, s, archive=archive)

    _clear()
    gc.collect()
    rss_before = _vm_kib("VmRSS")
    reset = _reset_peak_rss()
    wall, cpu, result = _timed(run)
    peak = _vm_kib("VmHWM") if reset else None
    if cpu < repeat_under_s:
        # A short compaction is timed twice more, cold each time (`cold_copy`), and the best
        # kept, as the tiktoken pass it is held against is the best of its runs: one reading
        # of a 10-15 ms compaction moved by a tenth from run to run.
        for _ in range(REPEATS - 1):
            fresh = cold_copy(t)
            again = _timed(lambda: run(source=fresh))  # noqa: B023 (called at once)
            wall, cpu = min(wall, again[0]), min(cpu, again[1])
    out = _CompactionRun(result, wall, cpu, rss_before, peak)
    if not light:
        _clear()
        gc.collect()
        tracemalloc.start()
        run()
        out.heap_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        _clear()
        # What `ctxkit compact` pays on top: an archive file created, written and synced.
        out.disk_wall_s = _timed(lambda: run(on_disk=True))[0]
    return out


SCALE_TIMEOUT_S = 1800  # one size in its process; past this the size is reported as not done


def _scale_subprocess(
    scenario: str,
    tokens: int,
    light: bool = False,
    realdata: Path | None = None,
    write_to: str | None = None,
) -> dict[str, Any]:
    where = str(realdata) if realdata else None
    code = (
        "import json, sys\n"
        "from ctxkit.bench.suites.scale import scale_worker\n"
        f"print(json.dumps(scale_worker({scenario!r}, {int(tokens)}, light={light!r}, "
        f"realdata={where!r}, write_to={write_to!r})))\n"
    )
    try:
        out = python_subprocess(code, timeout_s=SCALE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CtxkitError(
            f"scale worker {scenario} {tokens:,}: did not finish in {SCALE_TIMEOUT_S} s"
        ) from None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["failed"])[-1]
        raise CtxkitError(f"scale worker {scenario} {tokens}: {tail}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# One tiktoken pass over a file, the whole process: tiktoken imported, its encoding loaded (the
# offline copy ctxkit's default tokenizer counts with), the file read and encoded as one text.
# The file's JSON (keys, quotes, escapes) is encoded too: more tokens than its messages hold,
# and still the faster pass, for one call reads it all (parsing the JSON and encoding each text
# took 1.5 to 3.9x as long at 1M tokens).
FILE_PASS = (
    "import sys, tiktoken\n"
    "enc = tiktoken.get_encoding(sys.argv[2])\n"
    "with open(sys.argv[1], encoding='utf-8') as f:\n"
    "    enc.encode_ordinary(f.read())\n"
)


def _process_pair(path: str, limit: int, work: str, repeats: int = REPEATS) -> dict[str, Any]:
    """`ctxkit compact FILE --limit L -o OUT` and one tiktoken pass over FILE (`FILE_PASS`),
    each a fresh process: CPU and wall seconds, best of `repeats` interleaved runs after one of
    each to warm the page cache. Each compaction writes a new output and archive in `work`."""
    from ctxkit.bench.processes import run_timed
    from ctxkit.tokens.loaders import DEFAULT_TOKENIZER, OFFLINE_ENCODINGS

    env = {**os.environ, "CTXKIT_CACHE_DIR": os.path.join(work, "cache")}
    encoding = OFFLINE_ENCODINGS.get(DEFAULT_TOKENIZER, DEFAULT_TOKENIZER)
    tiktoken_cmd = [sys.executable, "-c", FILE_PASS, path, encoding]
    runs: dict[str, list[tuple[float, float]]] = {"compact": [], "tiktoken": []}
    for i in range(repeats + 1):
        out = os.path.join(work, f"out-{i}.jsonl")
        compact_cmd = [sys.executable, "-m", "ctxkit", "compact", path, "--limit", str(limit), "-o", out]
        c, t = run_timed(compact_cmd, env), run_timed(tiktoken_cmd, env)
        if i:  # the first of each warmed the page cache
            runs["compact"].append(c)
            runs["tiktoken"].append(t)
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in runs.items()}
    return {
        "process_compact_s": round(best["compact"][0], 4),
        "process_compact_cpu_s": round(best["compact"][1], 4),
        "process_tiktoken_s": round(best["tiktoken"][0], 4),
        "process_tiktoken_cpu_s": round(best["tiktoken"][1], 4),
        "process_over_tiktoken_cpu": round(best["compact"][1] / best["tiktoken"][1], 2),
        "file_bytes": os.path.getsize(path),
        "process_runs": repeats,
    }


def _axes(opts: BenchOptions) -> list[tuple[str, tuple[int, ...], bool]]:
    """(kind, sizes, light) of each axis the scale suite runs."""
    sizes = opts.sizes or tuple(s for s in SCALE_SIZES if not opts.quick or s <= 100_000)
    scenarios = opts.scale_scenarios or (QUICK_SCALE_SCENARIOS if opts.quick else SCALE_SCENARIOS)
    axes = [(scenario, sizes, False) for scenario in scenarios]
    if opts.scale_scenarios is None:
        real = tuple(s for s in REAL_CHAIN_SIZES if not opts.quick or s <= 100_000)
        axes.append((REAL_CHAIN, opts.sizes or real, False))
        axes.append((TINY_MESSAGES, QUICK_MESSAGE_SIZES if opts.quick else MESSAGE_SIZES, True))
    return axes


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """1k to 1M tokens (simulated scenarios, real logs chained) and 25k to 200k tiny messages,
    one fresh process per size: time against one tiktoken pass, peak memory, log-log slope."""
    res = SuiteResult("scale")
    for scenario, sizes, light in _axes(opts):
        if scenario == REAL_CHAIN and not (opts.realdata and opts.realdata.is_dir()):
            res.skipped.append("real logs: not found (--realdata)")
            continue
        axis = "messages" if scenario == TINY_MESSAGES else "tokens"
        rows = _measure_sizes(opts, say, res, scenario, sizes, light)
        res.rows.extend(rows)
        # Fixed costs dominate the smallest size; the slope is taken from 10k up when it can be.
        key_x = "units" if axis == "messages" else "tokens"
        fit = [r for r in rows if r["tokens"] >= 10_000] if axis == "tokens" else rows
        fit = fit if len(fit) >= 2 else rows
        xs = [r[key_x] for r in fit]
        span = f"{min(xs):,}-{max(xs):,} {axis}" if xs else ""
        for key, label in (
            ("compact_s", "compaction time"),
            ("compact_cpu_s", "compaction CPU time"),
            ("count_s", "count time"),
            ("compact_peak_rss_delta_mb", "compaction peak memory (RSS)"),
            ("compact_heap_peak_mb", "compaction peak memory (Python heap)"),
        ):
            if any(r[key] is None for r in fit):
                continue
            slope = loglog_slope(xs, [float(r[key] or 0) for r in fit])
            if slope is not None:
                res.summary.append(
                    {"scenario": scenario, "measure": label, "slope": round(slope, 3), "span": span}
                )
        _size_figures(res, scenario, axis, rows)
        _growth_figures(res, scenario, axis, fit, xs, span)
    return res


def _measure_sizes(
    opts: BenchOptions,
    say: Progress,
    res: SuiteResult,
    scenario: str,
    sizes: Sequence[int],
    light: bool,
) -> list[dict[str, Any]]:
    """Each size of one axis in a fresh process, and from 10k tokens on also as a file in whole
    processes; a size that fails is a skipped line."""
    axis = "messages" if scenario == TINY_MESSAGES else "tokens"
    rows = []
    for size in sizes:
        say(f"scale: {scenario} {size:,} {axis}")
        # from 10k tokens on, the same input as a file, for the whole processes
        # (--quick: at the largest size only)
        files = axis == "tokens" and size >= 10_000 and (not opts.quick or size == max(sizes))
        with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as work:
            path = os.path.join(work, "input.jsonl") if files else None
            try:
                row = _scale_subprocess(scenario, size, light, opts.realdata, path)
            except CtxkitError as exc:
                res.skipped.append(str(exc))
                continue
            rows.append(row)
            if path is not None:
                say(f"scale: {scenario} {size:,} {axis}, whole processes")
                try:
                    repeats = opts.repeat or (1 if opts.quick else REPEATS)
                    row.update(_process_pair(path, row["limit"], work, repeats))
                except RuntimeError as exc:  # the in-process figures stand without it
                    res.skipped.append(f"scale: {scenario} {size:,} as a file: {exc}")
    return rows


def _size_figures(res: SuiteResult, scenario: str, axis: str, rows: list[dict[str, Any]]) -> None:
    """Per size (from 10k tokens on), compaction against one tiktoken pass, in this process and
    as whole processes on the file."""
    for r in rows:
        if axis == "tokens" and r["tokens_asked"] < 10_000:
            continue
        at = f"{r['tokens_asked']:,} {axis}"
        res.figures.append(
            Figure(
                f"{scenario}: compaction at {at} / one tiktoken pass (CPU)",
                r["compact_over_tiktoken_cpu"] or 0.0,
                "x",
                PASS_TARGET if axis == "tokens" else None,
                note=f"{r['compact_cpu_s']:.3g} s CPU for {r['tokens']:,} tokens in "
                f"{r['units']:,} units, pass {r['tiktoken_pass_cpu_s']:.3g} s; wall "
                f"{r['compact_s']:.3g} s, {r['compact_over_tiktoken']}x; peak RSS "
                f"+{r['compact_peak_rss_delta_mb']} MB",
            )
        )
        if r.get("process_over_tiktoken_cpu") is not None:
            res.figures.append(
                Figure(
                    f"{scenario}: `ctxkit compact` of the file at {at} / one tiktoken pass "
                    "over the same file, whole processes (CPU)",
                    r["process_over_tiktoken_cpu"],
                    "x",
                    PASS_TARGET,
                    note=f"{r['process_compact_cpu_s']:.3g} s CPU against "
                    f"{r['process_tiktoken_cpu_s']:.3g} s for {r['file_bytes']:,} bytes "
                    f"(best of {r.get('process_runs', REPEATS)}); wall {r['process_compact_s']:.3g} s against "
                    f"{r['process_tiktoken_s']:.3g} s",
                )
            )


def _growth_figures(
    res: SuiteResult, scenario: str, axis: str, fit: list[dict[str, Any]], xs: list[Any], span: str
) -> None:
    """The growth exponent of compaction CPU time over one axis, alone and (tiny messages)
    against one tiktoken pass."""
    slope = next(
        (
            x["slope"]
            for x in res.summary
            if x["scenario"] == scenario and x["measure"] == "compaction CPU time"
        ),
        None,
    )
    if slope is not None:
        res.figures.append(
            Figure(
                f"{scenario}: growth exponent of compaction CPU time in {axis}",
                slope,
                "log-log slope",
                LINEAR_SLOPE if axis == "messages" else None,
                note=f"1.0 is linear; {span}",
            )
        )
    # The same growth against one tiktoken pass over the same texts, measured beside each
    # size: on a shared machine the pass itself grows faster than linearly with the texts
    # (caches, memory), and what is ctxkit's own is what it adds to that.
    relative = loglog_slope(xs, [float(r["compact_over_tiktoken_cpu"] or 0) for r in fit])
    pass_slope = loglog_slope(xs, [float(r["tiktoken_pass_cpu_s"] or 0) for r in fit])
    if relative is not None and axis == "messages":
        res.figures.append(
            Figure(
                f"{scenario}: growth exponent in {axis} of compaction CPU time per tiktoken pass",
                round(1.0 + relative, 3),
                "log-log slope",
                LINEAR_SLOPE,
                note=f"1.0: grows as one tiktoken pass does (that pass's own exponent "
                f"{pass_slope:.2f}); {span}" if pass_slope is not None else span,
            )
        )


LINEAR_SLOPE = 1.15  # "linear in messages": time grows no faster than this power of them


def tables(s: SuiteResult) -> list[Table]:
    """Each size's measures, then the growth exponents."""
    if not s.rows:
        return []
    head = (
        "scenario", "tokens", "units", "tiktoken pass CPU s", "count s", "compact s",
        "compact CPU s", "x pass (CPU)", "processes x (CPU)", "peak RSS +MB", "heap MB",
        "strategies",
    )
    keys = (
        "scenario", "tokens", "units", "tiktoken_pass_cpu_s", "count_s", "compact_s",
        "compact_cpu_s", "compact_over_tiktoken_cpu", "process_over_tiktoken_cpu",
        "compact_peak_rss_delta_mb", "compact_heap_peak_mb", "strategies",
    )
    out: list[Table] = [(None, head, [tuple(r.get(k) for k in keys) for r in s.rows])]
    if s.summary:
        slopes: list[Sequence[Any]] = [
            (x["scenario"], x["measure"], x["slope"], x["span"]) for x in s.summary
        ]
        out.append((None, ("scenario", "measure", "log-log slope", "span"), slopes))
    return out
