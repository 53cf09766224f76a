"""Probe recall of ctxkit's default compaction and of its peers on real transcripts.

    .venv/bin/python scripts/fidelity_bench.py [--budgets 3,6,10] [--json out.json] [FILES...]

Each transcript (every one in ../shared/realdata of at least --min-tokens tokens, unless files
are given) is compacted to 1/3, 1/6 and 1/10 of its own tokens by ctxkit (default settings,
`--limit B`) and by every peer in `ctxkit.recipes.RECIPES` (budget B); the probes of the
original (`ctxkit.fidelity.probes`) score each result. Prints the mean recall per method and
budget, per category, and refusals.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import time
from pathlib import Path

from ctxkit.archive.store import Archive
from ctxkit.compaction import CompactSettings, compact
from ctxkit.errors import CtxkitError
from ctxkit.fidelity import probes as P
from ctxkit.formats import read_path
from ctxkit.recipes import RECIPES, Fit
from ctxkit.structure import pairs_intact
from ctxkit.tokens import count_transcript, get_tokenizer

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def transcripts(files, min_tokens, tok):
    for f in files:
        try:
            ts = list(read_path(f))
        except CtxkitError as e:
            print(f"skip {f}: {e}", file=sys.stderr)
            continue
        if len(ts) > 3:
            continue  # a dataset of short chats
        for t in ts:
            n = count_transcript(t, tok).total
            if n >= min_tokens:
                yield f, t, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--budgets", default="3,6,10")
    ap.add_argument("--min-tokens", type=int, default=3000)
    ap.add_argument("--json")
    ap.add_argument("--target-at-limit", action="store_true")
    ap.add_argument("--target-share", type=float, default=None, help="ctxkit aims at this share of the budget")
    ap.add_argument("--peers", default=",".join(RECIPES))
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    files = args.files or sorted(
        f for f in glob.glob(str(REALDATA / "*" / "*")) if not f.endswith(("README.md", "SOURCES.json"))
    )
    tok = get_tokenizer()
    rows = []
    for path, t, n in transcripts(files, args.min_tokens, tok):
        probes = P.extract(t)
        for div in [int(x) for x in args.budgets.split(",")]:
            budget = n // div
            fit = Fit(tok)
            methods = {"ctxkit": None, **{k: RECIPES[k] for k in args.peers.split(",") if k}}
            for name, peer in methods.items():
                t0 = time.perf_counter()
                row = {"file": Path(path).name[:60], "tokens": n, "div": div, "budget": budget, "method": name}
                try:
                    if peer is None:
                        target = budget if args.target_at_limit else None
                        if args.target_share:
                            target = int(budget * args.target_share)
                        s = CompactSettings(limit=budget, target=target)
                        with Archive(":memory:") as arch:
                            out = compact(t, s, archive=arch).transcript
                    else:
                        out = peer.run(t, budget, fit)
                except (CtxkitError, ImportError) as e:
                    row.update(error=str(e)[:200], recall=0.0)
                    rows.append(row)
                    continue
                sc = P.score(probes, out)
                after = count_transcript(out, tok).total
                kept_ids = {u.id: u for u in out.units}
                system_kept = all(
                    u.id in kept_ids and kept_ids[u.id].content == u.content
                    for u in t.units if u.role == "system"
                )
                row.update(
                    system_kept=system_kept,
                    recall=sc.recall,
                    cats={c: sc.category(c) for c in P.CATEGORIES if sc.total.get(c)},
                    after=after, fits=after <= budget, broken=len(pairs_intact(t.units, out.units)),
                    ms=round((time.perf_counter() - t0) * 1000),
                    lost=[(p.category, p.key[:80]) for p in sc.lost][:40],
                )
                rows.append(row)
        print(f"{Path(path).name[:70]} {n} probes={len(probes)}", file=sys.stderr)
    # a case no method could fit (the system prompt alone is over the budget) is left out
    # valid: fits, no tool pair broken, the system prompt kept verbatim
    feasible = {
        (r["file"], r["div"]) for r in rows if r.get("fits") and not r.get("broken") and r.get("system_kept")
    }
    skipped = {(r["file"], r["div"]) for r in rows} - feasible
    print(f"{len(feasible)} cases; {len(skipped)} infeasible (no method fits) left out")
    rows = [r for r in rows if (r["file"], r["div"]) in feasible]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    divs = sorted({r["div"] for r in rows})
    print(f"{'method':20}" + "".join(f"  1/{d:<5}" for d in divs) + "  " + "  ".join(f"{c[:6]:>6}" for c in P.CATEGORIES) + "  refused unfit broken")
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        line = f"{m:20}"
        for d in divs:
            rs = [r["recall"] for r in mine if r["div"] == d]
            line += f"  {statistics.mean(rs):.3f} "
        for c in P.CATEGORIES:
            vals = [r["cats"][c] for r in mine if "cats" in r and c in r["cats"]]
            line += f"  {statistics.mean(vals):6.3f}" if vals else "       -"
        line += f"  {sum(1 for r in mine if 'error' in r):7} {sum(1 for r in mine if 'fits' in r and not r['fits']):5} {sum(r.get('broken', 0) > 0 for r in mine):6}"
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
