"""Where a cold default compaction's CPU goes, phase by phase, in tiktoken passes.

    .venv/bin/python scripts/compaction_phases.py KIND SIZE [--runs 5] [--realdata DIR]

KIND is a scale axis of `ctxkit bench --suite scale` (growing_session, agent_session,
long_chat, real_chain, tiny_messages) and SIZE its tokens (messages for tiny_messages). The
input is made as the suite makes it, a compaction of another input warms the imports, then
each run compacts a fresh copy of the input (new unit objects, every per-unit and count cache
emptied, an in-memory archive) with the chain's phases wrapped in CPU-time counters: no
profiler's overhead, so the parts add up to the run. The figures are CPU milliseconds and
passes: one tiktoken pass over the same texts, as the scale suite times it (the faster of
`encode_ordinary` per text and its batch, best of 3, in CPU seconds), is 1.0. The best run is
printed, with the median of all.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind")
    ap.add_argument("size", type=int)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--realdata", default=str(REALDATA))
    args = ap.parse_args()

    from ctxkit import strategies
    from ctxkit.archive.store import Archive
    from ctxkit.bench.harness import _settings, cold_copy, raw_encoding
    from ctxkit.bench.suites.scale import _scale_input, _tiktoken_pass
    from ctxkit.compaction import chain, compact
    from ctxkit.tokens import unit_texts

    spent: collections.Counter[str] = collections.Counter()

    def timed(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.process_time() - t0

        return run

    for name in ("_begin", "_result", "_recover", "check_invariants", "give_back"):
        setattr(chain, name, timed(getattr(chain, name), name))
    chain.coherence = timed(chain.coherence, "coherence (steps and final)")
    Archive.put_transcript = timed(Archive.put_transcript, "archive: the original")  # type: ignore[method-assign]
    Archive.put = timed(Archive.put, "archive: removed units")  # type: ignore[method-assign]
    for name, fn in list(strategies.STRATEGIES.items()):
        strategies.STRATEGIES[name] = timed(fn, f"strategy {name}")

    small = 200 if args.kind == "tiny_messages" else 2_000
    warm, warm_limit = _scale_input(args.kind, small, 1, args.realdata)
    compact(warm, _settings(warm_limit))
    original, limit = _scale_input(args.kind, args.size, 0, args.realdata)
    texts = [x for x in unit_texts(original.units)[0] if x]
    one = _tiktoken_pass(raw_encoding(), texts)[1]  # CPU seconds, as the scale suite measures

    runs: list[tuple[float, dict[str, float], Any]] = []
    for _ in range(args.runs):
        t = cold_copy(original)
        spent.clear()
        t0 = time.process_time()
        with Archive(":memory:") as archive:
            result = compact(t, _settings(limit), archive=archive)
        runs.append((time.process_time() - t0, dict(spent), result))
    runs.sort(key=lambda r: r[0])
    best, parts, result = runs[0]
    median = runs[len(runs) // 2][0]
    print(
        f"{args.kind} {args.size:,}: {len(original.units):,} units; one tiktoken pass "
        f"{one * 1000:.1f} ms; compaction {best * 1000:.1f} ms = {best / one:.2f} passes "
        f"(median {median * 1000:.1f} ms); {', '.join(result.strategies_applied)}"
    )
    print("  (coherence: every judged step's and the final one, which _result holds too)")
    for label, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {label:34} {seconds * 1000:9.2f} ms  {seconds / one:6.2f} passes")


if __name__ == "__main__":
    main()
