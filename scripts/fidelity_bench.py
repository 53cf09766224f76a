"""Probe recall of ctxkit's compaction and of its peers, with the goal as a knob.

    .venv/bin/python scripts/fidelity_bench.py [--budgets 3,6,10] [--target-share 0.8 | --at-threshold]
        [--peers drop_oldest,codex_cli] [--json rows.json] [FILES...]

The same measurement as `ctxkit bench --suite fidelity` (`ctxkit.engines.fidelity`): each
transcript of ../shared/realdata (at least --min-tokens, datasets of many chats aside), or the
files given, compacted to 1/3, 1/6 and 1/10 of its own tokens by ctxkit and by every peer, each
result scored by the original's probes; a case no method could fit validly is left out. Every
method has the same room: ctxkit aims at the budget itself, as every peer fills it. The knobs
measure ctxkit's other goals: `--at-threshold` one token under the guard's compact threshold (what
`compact --limit` aims at), `--target-share 0.8` the warn threshold (README, "What the model can
still do").
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path

from ctxkit.compaction import CompactSettings
from ctxkit.engines import fidelity as compare
from ctxkit.errors import CtxkitError
from ctxkit.fidelity import probes as P
from ctxkit.formats import read_path
from ctxkit.tokens import count_transcript, get_tokenizer

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--budgets", default="3,6,10", help="budgets as 1/N of each transcript")
    ap.add_argument("--min-tokens", type=int, default=3000)
    ap.add_argument("--peers", default=",".join(compare.all_methods()[1:]))
    ap.add_argument("--target-share", type=float, default=None, help="ctxkit aims at this share of the budget")
    ap.add_argument(
        "--at-threshold", action="store_true", help="ctxkit aims one under the compact threshold of the budget"
    )
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args()
    files = args.files or sorted(
        f for f in glob.glob(str(REALDATA / "*" / "*")) if not f.endswith(("README.md", "SOURCES.json"))
    )
    methods, missing = compare.available(["ctxkit", *[p for p in args.peers.split(",") if p]])
    for note in missing:
        print(f"skipped {note}", file=sys.stderr)
    tok = get_tokenizer()
    rows: list[compare.Row] = []
    for path in files:
        try:
            found = list(read_path(path))
        except CtxkitError as exc:
            print(f"skip {Path(path).name}: {str(exc).splitlines()[0][:120]}", file=sys.stderr)
            continue
        if len(found) > 3:
            continue  # a dataset of short chats
        for t in found:
            n = count_transcript(t, tok).total
            if n < args.min_tokens:
                continue
            probes = P.extract(t)
            for share in (int(x) for x in args.budgets.split(",")):
                budget = n // share
                target = None if args.at_threshold else budget
                if args.target_share:
                    target = int(budget * args.target_share)
                settings = CompactSettings(limit=budget, target=target)
                for m in methods:
                    row, _ = compare.score_method(m, t, budget, probes, settings if m == "ctxkit" else None)
                    row.share, row.transcript = share, Path(path).name
                    rows.append(row)
            print(f"{Path(path).name[:70]} {n:,} tokens, {len(probes)} probes", file=sys.stderr)
    summary = compare.summarize(rows)
    head = ["method", "budget", "cases", "recall", *P.CATEGORIES, "refused", "invalid"]
    print("  ".join(f"{h:>8}" if h != "method" else f"{h:36}" for h in head))
    for line in summary:
        cells = [f"{line['label'][:36]:36}", f"{line['budget']:>8}", f"{line['cases']:>8}", f"{line['recall']:8.3f}"]
        cells += [f"{line[c]:8.3f}" if line[c] is not None else f"{'-':>8}" for c in P.CATEGORIES]
        cells += [f"{line['refused']:>8}", f"{line['invalid']:>8}"]
        print("  ".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in rows], indent=1))


if __name__ == "__main__":
    main()
