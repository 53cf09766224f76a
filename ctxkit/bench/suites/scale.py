"""The scale suite: count and compaction time and memory from 1k to 1M tokens, each size in a
fresh process, and the growth exponent of each."""

from __future__ import annotations

import gc
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from ctxkit.bench.harness import (
    SCALE_SCENARIOS,
    SCALE_SIZES,
    BenchOptions,
    Figure,
    Progress,
    SuiteResult,
    Table,
    _clear,
    _raw_pass,
    _settings,
    _timed,
    _tok,
    loglog_slope,
    python_subprocess,
    raw_encoding,
)
from ctxkit.errors import CtxkitError
from ctxkit.tokens import unit_texts

NAME = "scale"


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


def scale_worker(scenario: str, tokens: int, seed: int = 0) -> dict[str, Any]:
    """Measure one size in this (fresh) process: generate, count, one tiktoken pass, compact.

    Peak memory of the compaction is the process's peak RSS over the compaction minus the RSS
    before it (the kernel's high-water mark, reset first), plus the Python heap peak that
    tracemalloc sees in a second, traced run.
    """
    import tracemalloc

    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact
    from ctxkit.simulate import generate
    from ctxkit.tokens import count_transcript

    tok = _tok()
    enc = raw_encoding()
    # Warm up on a small transcript first, so lazy imports are not billed to the first size.
    warm = generate(scenario, seed=seed + 1, tokens=2_000)
    ws = _settings(int(warm.metadata["ground_truth"]["limit"]))
    compact(warm, ws)
    g_wall, _c, t = _timed(lambda: generate(scenario, seed=seed, tokens=tokens))
    texts = [x for x in unit_texts(t.units)[0] if x]
    chars = sum(len(x) for x in texts)
    one = min(_timed(lambda: _raw_pass(enc, texts))[0] for _ in range(3))
    _clear()
    count_s = _timed(lambda: count_transcript(t, tok))[0]
    s = _settings(int(t.metadata["ground_truth"]["limit"]))

    def run(on_disk: bool = False) -> Any:
        with (
            tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp,
            Archive(os.path.join(tmp, "a.ctx.db") if on_disk else ":memory:") as archive,
        ):
            return compact(t, s, archive=archive)

    _clear()
    gc.collect()
    rss_before = _vm_kib("VmRSS")
    reset = _reset_peak_rss()
    wall, cpu, result = _timed(run)
    peak = _vm_kib("VmHWM") if reset else None
    _clear()
    gc.collect()
    tracemalloc.start()
    run()
    heap_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    _clear()
    # What `ctxkit compact` pays on top: an archive file created, written and synced.
    disk_wall = _timed(lambda: run(on_disk=True))[0]
    import resource

    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
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
        "count_s": round(count_s, 5),
        "compact_s": round(wall, 5),
        "compact_cpu_s": round(cpu, 5),
        "compact_file_archive_s": round(disk_wall, 5),
        "compact_over_tiktoken": round(wall / one, 2) if one else None,
        "rss_before_mb": round(rss_before / 1024, 1) if rss_before else None,
        "compact_peak_rss_delta_mb": round(max(0, peak - rss_before) / 1024, 2)
        if peak and rss_before
        else None,
        "compact_heap_peak_mb": round(heap_peak / 2**20, 2),
        "process_maxrss_mb": round(maxrss_kib / 1024, 1),
    }


def _scale_subprocess(scenario: str, tokens: int) -> dict[str, Any]:
    code = (
        "import json, sys\n"
        "from ctxkit.bench.suites.scale import scale_worker\n"
        f"print(json.dumps(scale_worker({scenario!r}, {int(tokens)})))\n"
    )
    out = python_subprocess(code, timeout_s=3600)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["failed"])[-1]
        raise CtxkitError(f"scale worker {scenario} {tokens}: {tail}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """1k to 1M tokens, one fresh process per size: time, peak memory and the log-log slope."""
    res = SuiteResult("scale")
    sizes = opts.sizes or tuple(s for s in SCALE_SIZES if not opts.quick or s <= 100_000)
    for scenario in opts.scale_scenarios or SCALE_SCENARIOS:
        rows = []
        for size in sizes:
            say(f"scale: {scenario} {size:,} tokens")
            try:
                rows.append(_scale_subprocess(scenario, size))
            except CtxkitError as exc:
                res.skipped.append(str(exc))
        res.rows.extend(rows)
        # Fixed costs dominate the smallest size; the slope is taken from 10k up when it can be.
        fit = [r for r in rows if r["tokens"] >= 10_000]
        fit = fit if len(fit) >= 2 else rows
        xs = [r["tokens"] for r in fit]
        span = f"{min(xs):,}-{max(xs):,} tokens" if xs else ""
        for key, label in (
            ("compact_s", "compaction time"),
            ("count_s", "count time"),
            ("compact_peak_rss_delta_mb", "compaction peak memory (RSS)"),
            ("compact_heap_peak_mb", "compaction peak memory (Python heap)"),
        ):
            slope = loglog_slope(xs, [float(r[key] or 0) for r in fit])
            if slope is not None:
                res.summary.append(
                    {"scenario": scenario, "measure": label, "slope": round(slope, 3), "span": span}
                )
        if rows:
            top = rows[-1]
            res.figures.append(
                Figure(
                    f"{scenario}: compaction at {top['tokens']:,} tokens",
                    top["compact_s"],
                    "s",
                    note=f"{top['units']} units, peak RSS +{top['compact_peak_rss_delta_mb']} MB, "
                    f"{top['compact_over_tiktoken']}x one tiktoken pass",
                )
            )
            slope = next(
                (
                    x["slope"]
                    for x in res.summary
                    if x["scenario"] == scenario and x["measure"] == "compaction time"
                ),
                None,
            )
            if slope is not None:
                res.figures.append(
                    Figure(
                        f"{scenario}: growth exponent of compaction time",
                        slope,
                        "log-log slope",
                        note=f"1.0 is linear; {span}",
                    )
                )
    return res


def tables(s: SuiteResult) -> list[Table]:
    """Each size's measures, then the growth exponents."""
    if not s.rows:
        return []
    head = (
        "scenario", "tokens", "units", "tiktoken pass s", "count s", "compact s", "x pass",
        "peak RSS +MB", "heap MB", "strategies",
    )
    keys = (
        "scenario", "tokens", "units", "tiktoken_pass_s", "count_s", "compact_s",
        "compact_over_tiktoken", "compact_peak_rss_delta_mb", "compact_heap_peak_mb", "strategies",
    )
    out: list[Table] = [(None, head, [tuple(r[k] for k in keys) for r in s.rows])]
    if s.summary:
        slopes: list[Sequence[Any]] = [
            (x["scenario"], x["measure"], x["slope"], x["span"]) for x in s.summary
        ]
        out.append((None, ("scenario", "measure", "log-log slope", "span"), slopes))
    return out
