"""Digests of what the default compaction writes, over real and simulated transcripts: run it
before and after a change that should not change outputs (a speed-up), and compare.

    .venv/bin/python scripts/output_digests.py OUT.json [--quick] [--norm-refs] [--realdata DIR]
    .venv/bin/python scripts/output_digests.py --compare BEFORE.json AFTER.json

Cases: every transcript of ../shared/realdata of 2,000 tokens or more at a third, a sixth and
a tenth of its tokens (`--quick`: a third and a tenth), five simulated scenarios at 10k and 100k
tokens with their own limits, real logs chained to 10k and 100k tokens, 3,000 tiny messages.
A case's digest covers the compacted units (ids, roles, types, content, calls, meta), each
step (strategy, applied, note, tokens, refs), the tokens after, the coherence, the recovery,
the invariants, the note and the archive's (unit id, ref) rows; a case that raises records its
message. `--norm-refs` blanks the refs' digits, for a change that changes refs on purpose (the
refs' order then still counts, the digits not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
_REF = re.compile(rb"ref-[0-9]{18,}")


def _digest(result: Any, archive: Any, norm_refs: bool) -> str:
    import orjson

    units = [
        [u.id, u.role, u.type, u.content, [[c.id, c.name, c.arguments] for c in u.tool_calls],
         u.tool_call_id, dict(sorted(u.meta.items()))]
        for u in result.transcript.units
    ]
    steps = [[s.strategy, s.applied, s.note, s.tokens_after, s.refs] for s in result.steps]
    stored = sorted((a.unit_id, a.ref) for a in archive.list())
    blob = orjson.dumps(
        [units, steps, result.tokens_after, result.coherence, result.recovery, result.fits,
         result.invariants, stored, result.note],
        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
        default=str,
    )
    if norm_refs:
        blob = _REF.sub(b"REF", blob)
    return hashlib.sha1(blob).hexdigest()[:16]


def _cases(quick: bool, realdata: Path) -> Iterator[tuple[str, Any, int]]:
    from ctxkit.bench.harness import real_chain, real_transcripts, tiny_messages
    from ctxkit.simulate import generate
    from ctxkit.tokens import count_transcript, get_tokenizer

    tok = get_tokenizer()
    for t in real_transcripts(realdata, 2000):
        total = count_transcript(t, tok).total
        for share in (3, 10) if quick else (3, 6, 10):
            yield f"{t.metadata.get('bench_source', t.id)}#{t.id}@1/{share}", t, max(1000, total // share)
    sizes = (10_000,) if quick else (10_000, 100_000)
    for kind in ("growing_session", "agent_session", "long_chat", "parallel_tools", "giant_tool_output"):
        for size in sizes:
            t = generate(kind, seed=0, tokens=size)
            yield f"{kind}@{size}", t, int(t.metadata["ground_truth"]["limit"])
    for size in sizes:
        chained = real_chain(size, realdata)
        if chained is not None:
            yield f"real_chain@{size}", chained, max(2000, count_transcript(chained, tok).total // 3)
    t = tiny_messages(3000)
    yield "tiny@3000", t, count_transcript(t, tok).total // 3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--norm-refs", action="store_true")
    ap.add_argument("--realdata", default=str(REALDATA))
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        differ = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
        for k in differ:
            print(f"differs: {k}")
        print(f"{len(differ)} of {len(set(before) | set(after))} cases differ")
        return 1 if differ else 0
    if not args.out:
        ap.error("give OUT.json, or --compare BEFORE AFTER")

    from ctxkit.archive.store import Archive
    from ctxkit.bench.harness import _settings
    from ctxkit.compaction import compact
    from ctxkit.errors import CtxkitError

    digests: dict[str, str] = {}
    started = time.perf_counter()
    for name, t, limit in _cases(args.quick, Path(args.realdata)):
        try:
            with Archive(":memory:") as archive:
                result = compact(t, _settings(limit), archive=archive)
                digests[name] = _digest(result, archive, args.norm_refs)
        except CtxkitError as exc:
            digests[name] = f"error: {str(exc)[:200]}"
    Path(args.out).write_text(json.dumps(digests, indent=1, sort_keys=True))
    print(f"{len(digests)} cases in {time.perf_counter() - started:.1f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
