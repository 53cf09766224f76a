"""Replay the real transcripts in ../shared/realdata through an agent loop, per strategy.

For each transcript and each chain (mask_observations, summarize_old, offload, the default
chain) it prints: model calls, compactions, tokens sent over the session (vs. without
compaction), peak context, final context, recovery, and the retention of *derived needles*.

Real transcripts carry no ground truth, so needles are derived: a file path that the agent
passes in a tool call, that first appeared in an earlier user message or tool output at least
`--gap` units before and not in the `--gap` units right before the call. The model needed that
path to make the call, so the question is whether it was still in the context (or recallable
from the archive) at that call.

Usage:
    .venv/bin/python scripts/replay_realdata.py [--limit 16000] [--json out.json]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from ctxkit.compaction import ChainOptions, CompactSettings
from ctxkit.formats import read_path
from ctxkit.model import Transcript
from ctxkit.replay import replay
from ctxkit.strategies import DEFAULT_CHAIN
from ctxkit.tokens import count_transcript, get_tokenizer

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"
FOLDERS = ("claude-code", "codex", "mini-swe-agent", "openai-chat", "anthropic-messages")
CHAINS: dict[str, tuple[str, ...]] = {
    "mask_observations": ("mask_observations",),
    "summarize_old": ("summarize_old",),
    "offload": ("offload",),
    "default": DEFAULT_CHAIN,
}
PATH_RX = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]{1,5}\b")


def derive_needles(t: Transcript, gap: int, max_needles: int = 25) -> list[dict[str, Any]]:
    """Paths used in a tool call long after they were first seen in a non-assistant unit."""
    units = t.units
    first: dict[str, int] = {}
    seen_at: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        text = u.content + " " + " ".join(c.arguments for c in u.tool_calls)
        for m in set(PATH_RX.findall(text)):
            seen_at.setdefault(m, []).append(i)
            if u.role != "assistant" and m not in first:
                first[m] = i
    needles: list[dict[str, Any]] = []
    used: set[str] = set()
    for i, u in enumerate(units):
        if u.role != "assistant" or not u.tool_calls:
            continue
        j = i
        while j > 0 and units[j - 1].role == "assistant":
            j -= 1
        if j == 0:
            continue
        args = " ".join(c.arguments for c in u.tool_calls)
        for path in sorted(set(PATH_RX.findall(args))):
            k = first.get(path)
            if path in used or k is None or k > j - gap:
                continue
            if any(j - gap <= s < j for s in seen_at[path]):
                continue  # seen again just before: not a long-range recall
            used.add(path)
            needles.append(
                {
                    "id": f"p{len(needles) + 1}",
                    "fact": path,
                    "unit_id": units[k].id,
                    "needed_by_unit_id": units[j - 1].id,
                    "pattern": re.escape(path),
                }
            )
    return needles[:max_needles]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=16000, help="limit for transcripts above it")
    ap.add_argument("--gap", type=int, default=10, help="units between a path and its use")
    ap.add_argument("--json", dest="json_path", default=None, help="also write rows as JSON")
    ap.add_argument("--chain", action="append", choices=sorted(CHAINS), default=None)
    args = ap.parse_args()
    if not REALDATA.is_dir():
        print(f"no real transcripts at {REALDATA}", file=sys.stderr)
        return 1
    tok = get_tokenizer()
    chains = args.chain or list(CHAINS)
    rows: list[dict[str, Any]] = []
    head = (
        f"{'transcript':46} {'tokens':>7} {'limit':>6} {'chain':17} {'calls':>5} {'cmp':>4} "
        f"{'sent':>10} {'no-compact':>11} {'saved':>6} {'peak':>6} {'final':>6} {'rec':>3} "
        f"{'needles':>7} {'present':>7} {'+recall':>7} {'ms':>7}"
    )
    print(head)
    for folder in FOLDERS:
        for path in sorted((REALDATA / folder).iterdir()):
            for t in read_path(str(path)):
                tokens = count_transcript(t, tok).total
                # Transcripts below the limit are replayed against half their size instead, so
                # every one is under pressure.
                limit = args.limit if tokens > args.limit * 1.25 else max(2000, tokens // 2)
                truth = {"needles": derive_needles(t, args.gap)}
                for name in chains:
                    t0 = time.perf_counter()
                    # the limit is on what the log holds (its tokens above): the usage it
                    # records beyond that (the unlogged region) is left out, as the limit was set
                    settings = CompactSettings(
                        limit=limit, options=ChainOptions(chain=CHAINS[name]), use_usage=False
                    )
                    r = replay(t, settings, truth=truth)
                    ms = (time.perf_counter() - t0) * 1000
                    ret = r.retention
                    row = {
                        "folder": folder,
                        "file": path.name,
                        "transcript": t.id,
                        "tokens": tokens,
                        "limit": limit,
                        "chain": name,
                        "calls": r.model_calls,
                        "compactions": r.compactions,
                        "tokens_sent": r.tokens_sent,
                        "tokens_sent_baseline": r.tokens_sent_baseline,
                        "peak": r.peak_tokens,
                        "final": r.final_tokens,
                        "recoveries": sum(1 for c in r.compaction_log if c.recovery),
                        "fits": r.fits,
                        "invariants_ok": r.invariants_ok,
                        "errors": r.errors,
                        "needles": ret["total"],
                        "present": ret["present"],
                        "recallable": ret["recallable"],
                        "time_ms": round(ms, 1),
                    }
                    rows.append(row)
                    saved = (
                        1 - r.tokens_sent / r.tokens_sent_baseline if r.tokens_sent_baseline else 0
                    )
                    label = (folder + "/" + path.name)[:46]
                    print(
                        f"{label:46} {tokens:>7,} {limit:>6,} {name:17} {r.model_calls:>5} "
                        f"{r.compactions:>4} {r.tokens_sent:>10,} {r.tokens_sent_baseline:>11,} "
                        f"{saved:>6.0%} {r.peak_tokens:>6,} {r.final_tokens:>6,} "
                        f"{row['recoveries']:>3} {ret['total']:>7} {ret['present']:>7} "
                        f"{ret['present'] + ret['recallable']:>7} {ms:>7.0f}"
                        + ("" if r.fits and r.invariants_ok else "  FAILED")
                    )
    print()
    print(
        f"{'chain':17} {'runs':>4} {'compactions':>11} {'tokens sent':>12} {'no-compact':>12} "
        f"{'saved':>6} {'recoveries':>10} {'needles':>7} {'present':>8} {'+recall':>8}"
    )
    for name in chains:
        mine = [r for r in rows if r["chain"] == name]
        sent = sum(r["tokens_sent"] for r in mine)
        base = sum(r["tokens_sent_baseline"] for r in mine)
        needles = sum(r["needles"] for r in mine)
        present = sum(r["present"] for r in mine)
        recall = sum(r["present"] + r["recallable"] for r in mine)
        print(
            f"{name:17} {len(mine):>4} {sum(r['compactions'] for r in mine):>11} {sent:>12,} "
            f"{base:>12,} {1 - sent / base:>6.0%} {sum(r['recoveries'] for r in mine):>10} "
            f"{needles:>7} {present / needles if needles else 1:>8.0%} "
            f"{recall / needles if needles else 1:>8.0%}"
        )
    failed = [r for r in rows if not (r["fits"] and r["invariants_ok"])]
    print(f"\n{len(rows)} replays, {len(failed)} failed")
    if args.json_path:
        Path(args.json_path).write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
