"""Compact every real transcript with each embedder and compare needles, coherence and time.

    .venv/bin/python scripts/compare_embedders.py [--embedders lexical,static,minilm] [--json out.json]

The limit is a third of each transcript (at least 3,000 tokens) and the goal the settings' own
(the warn threshold), as in scripts/compact_realdata.py; the default chain and recovery. For each run it records: the
output's digest (equal digests = identical outputs), the derived needles still present
(scripts/replay_realdata.py's `derive_needles`: paths the agent used long after first seeing
them), the coherence of the output with the original measured by MiniLM for every embedder
(one yardstick, so the figures compare), the embedder's own coherence figure, and the time.
The issue's rule: static may be the default only if on every transcript it keeps the needles
MiniLM keeps and its MiniLM-measured coherence is within 0.02 of MiniLM's own run.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_realdata import derive_needles  # noqa: E402

from ctxkit.archive.store import Archive  # noqa: E402
from ctxkit.compaction import CompactSettings, coherence, compact  # noqa: E402
from ctxkit.config.file import Config  # noqa: E402
from ctxkit.config.settings import build_embedder  # noqa: E402
from ctxkit.embedders.relevance import get_embedder  # noqa: E402
from ctxkit.fidelity.truth import needle_retention  # noqa: E402
from ctxkit.formats import read_path  # noqa: E402
from ctxkit.tokens import count_transcript, get_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"
FOLDERS = ("claude-code", "codex", "mini-swe-agent", "openai-chat", "anthropic-messages", "sharegpt")


def digest(t: Any) -> str:
    """sha256 of the output's unit contents and tool calls."""
    h = hashlib.sha256()
    for u in t.units:
        h.update(orjson.dumps([u.role, u.content, [(c.name, c.arguments) for c in u.tool_calls]]))
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realdata", type=Path, default=REALDATA)
    ap.add_argument("--embedders", default="lexical,static,minilm")
    ap.add_argument("--fraction", type=float, default=0.33)
    ap.add_argument("--json", dest="json_path", type=Path, default=None)
    args = ap.parse_args()
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    tok = get_tokenizer("cl100k_base")
    yardstick = get_embedder("minilm")
    rows: list[dict[str, Any]] = []
    case = 0
    print(
        f"{'transcript':44} {'embedder':8} {'tokens':>7} {'after':>6} {'needles':>7} "
        f"{'kept':>4} {'coh(minilm)':>11} {'coh(own)':>8} {'s':>6}  digest"
    )
    for folder in FOLDERS:
        for path in sorted((args.realdata / folder).glob("*")):
            for t in read_path(str(path)):
                before = count_transcript(t, tok).total
                limit = max(int(before * args.fraction), 3000)
                if before <= CompactSettings(limit=limit).goal:
                    continue
                truth = {"needles": derive_needles(t, 10)}
                case += 1
                for name in names:
                    embedder = build_embedder(Config(), name)
                    t0 = time.perf_counter()
                    settings = CompactSettings(limit=limit, tokenizer=tok, embedder=embedder)
                    r = compact(t, settings, archive=Archive(":memory:"))
                    seconds = time.perf_counter() - t0
                    kept = needle_retention(r.transcript, truth)["present"]
                    row = {
                        "case": case,
                        "transcript": f"{folder}/{path.name}"[:44] + f"#{t.id[-6:]}",
                        "embedder": name,
                        "tokens": before,
                        "after": r.tokens_after,
                        "needles": len(truth["needles"]),
                        "kept": kept,
                        "coherence_minilm": coherence(t.units, r.transcript.units, yardstick),
                        "coherence_own": r.coherence,
                        "seconds": round(seconds, 3),
                        "digest": digest(r.transcript),
                    }
                    rows.append(row)
                    print(
                        f"{row['transcript'][:44]:44} {name:8} {before:>7,} {r.tokens_after:>6,} "
                        f"{row['needles']:>7} {kept:>4} {row['coherence_minilm']:>11.3f} "
                        f"{r.coherence:>8.3f} {seconds:>6.2f}  {row['digest']}",
                        flush=True,
                    )
    summarise(rows, names)
    if args.json_path:
        args.json_path.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0


def summarise(rows: list[dict[str, Any]], names: list[str]) -> None:
    """Totals per embedder, and each against minilm: same output, needles, coherence gap."""
    print()
    print(
        f"{'embedder':8} {'runs':>4} {'needles kept':>12} {'coh(minilm) mean':>16} "
        f"{'time s total':>12} {'same output as minilm':>21} {'needles < minilm':>16} "
        f"{'max coh gap':>11}"
    )
    ref = {r["case"]: r for r in rows if r["embedder"] == "minilm"}
    for name in names:
        mine = [r for r in rows if r["embedder"] == name]
        if not mine:
            continue
        pairs = [(r, ref[r["case"]]) for r in mine if r["case"] in ref]
        same = sum(r["digest"] == m["digest"] for r, m in pairs)
        fewer = sum(r["kept"] < m["kept"] for r, m in pairs)
        gap = max((m["coherence_minilm"] - r["coherence_minilm"] for r, m in pairs), default=0.0)
        print(
            f"{name:8} {len(mine):>4} "
            f"{sum(r['kept'] for r in mine):>5}/{sum(r['needles'] for r in mine):<6} "
            f"{statistics.mean(r['coherence_minilm'] for r in mine):>16.4f} "
            f"{sum(r['seconds'] for r in mine):>12.1f} "
            f"{f'{same}/{len(pairs)}' if pairs else '-':>21} {fewer if pairs else '-':>16} "
            f"{gap if pairs else 0.0:>11.4f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
