"""The claims ctxkit's compactions make, checked against the original log: a markdown report.

    .venv/bin/python scripts/claims_report.py [--budgets 3,6,10] [--min-tokens 3000]
        [--unseen DIR] [--json rows.json] [-o report.md] [FILES...]

Each transcript of ../shared/realdata (at least --min-tokens, datasets of many chats aside), the
logs under --unseen, or the files given, is compacted by ctxkit's default chain to 1/3, 1/6 and
1/10 of its own tokens with the recorded usage ignored (`--no-usage`, as `ctxkit fidelity
--limit` and `ctxkit bench --suite fidelity` budget), and every claim of the text the
compaction wrote is checked against the original (`ctxkit.fidelity.claims`). The report gives
the claims and false claims per budget and per kind, per log, then every false claim with its
quote, why it is false and the original's words; probe recall is given beside precision.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ctxkit.atomic import atomic_writer
from ctxkit.engines.methods import CTXKIT, run_method
from ctxkit.errors import CtxkitError
from ctxkit.fidelity import claims as C
from ctxkit.fidelity import probes as P
from ctxkit.formats import read_path
from ctxkit.tokens import count_transcript, get_tokenizer

ROOT = Path(__file__).resolve().parents[1]
REALDATA = ROOT.parent / "shared" / "realdata"
PER_KIND = 100  # distinct false claims quoted per kind (the rest counted)


def _files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(set, path) of every log to measure."""
    out: list[tuple[str, str]] = []
    if args.files:
        return [("given", f) for f in args.files]
    skip = ("README.md", "SOURCES.json", "SOURCES.md")
    realdata = Path(args.realdata) if args.realdata else REALDATA
    out += [("realdata", f) for f in sorted(glob.glob(str(realdata / "*" / "*"))) if not f.endswith(skip)]
    for d in args.unseen or []:
        out += [("unseen", f) for f in sorted(glob.glob(str(Path(d) / "**" / "*"), recursive=True))
                if Path(f).is_file() and not f.endswith(skip)]
    return out


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    tok = get_tokenizer()
    rows: list[dict[str, Any]] = []
    shares = [int(x) for x in args.budgets.split(",")]
    for group, path in _files(args):
        name = Path(path).name
        try:
            found = list(read_path(path))
        except CtxkitError as exc:
            print(f"skip {name}: {str(exc).splitlines()[0][:120]}", file=sys.stderr)
            continue
        if len(found) > 3:
            continue  # a dataset of short chats
        for k, t in enumerate(found):
            n = count_transcript(t, tok).total
            if n < args.min_tokens:
                continue
            label = name if len(found) == 1 else f"{name}#{k}"
            probes = P.extract(t)
            for share in shares:
                row: dict[str, Any] = {"set": group, "log": label, "format": t.source_format, "share": share,
                                       "tokens": n, "budget": n // share}
                ran = run_method(CTXKIT, t, n // share)  # the one run, on what the log holds
                if ran.result is None:
                    row["error"] = str(ran.error).splitlines()[0][:200]
                    rows.append(row)
                    continue
                result = ran.result
                row["compact_s"] = round(ran.time_ms / 1000, 2)
                score = C.check(t, result)
                row["recall"] = round(P.score(probes, result).recall, 4)
                row["claims"] = score.to_dict()
                row["inserted_units"] = len(C.inserted(t, result))
                row["first_request"] = first_request(t, result, n // share, tok)
                rows.append(row)
            print(f"{label[:70]} {n:,} tokens: " + ", ".join(
                f"1/{r['share']} {r['claims']['false']}/{r['claims']['total']} false" if "claims" in r else f"1/{r['share']} {r.get('error')}"
                for r in rows if r["log"] == label), file=sys.stderr)
    return rows


def first_request(t: Any, result: Any, budget: int, tok: Any) -> str:
    """Whether the first request the user typed is in the compacted context whole: "whole",
    "cut" (it fits a quarter of the room but is not there whole), "too big" (it does not fit
    a quarter of the room) or "none" (the log has no typed request). The room is what the
    compaction's goal leaves beside what always stays: the system prompt and the tool schemas
    (issue 38: "kept verbatim whenever it fits in a quarter of the room")."""
    from ctxkit.compaction import CompactSettings
    from ctxkit.fidelity.evidence import norm, typed_text

    # the task since the user last cleared the conversation (`/clear`: the agent starts anew)
    cleared = [i for i, u in enumerate(t.units) if u.role == "user" and (
        u.content.strip() in ("/clear", "/reset", "/new") or "<command-name>/clear</command-name>" in u.content)]
    start = cleared[-1] + 1 if cleared else 0
    def asked(u: Any) -> bool:  # typed, and no command to the agent (`/add f`, `/drop f`)
        text = typed_text(u)
        return bool(text) and not re.match(r"/[\w-]+(?:\s|$)", text)

    first = next((u for u in t.units[start:] if asked(u)), None) or next((u for u in t.units if asked(u)), None)
    if first is None:
        return "none"
    text = norm(first.content)
    if any(text in norm(u.content) for u in result.units):
        return "whole"
    fixed = count_transcript(t.replace(units=[u for u in t.units if u.role == "system"]), tok).total
    room = CompactSettings(limit=budget).goal - fixed
    return "too big" if tok.count(first.content) > room // 4 else "cut"


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True,
                              text=True, check=True).stdout.strip()[:100]
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def report(rows: list[dict[str, Any]], command: str, at: str | None = None, notes: str = "") -> str:
    ok = [r for r in rows if "claims" in r]
    out = [
        "# Claims of ctxkit's compactions, checked against the original logs",
        "",
        f"Generated {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC by `{command}` "
        f"at `{at or _commit()}`.",
        "",
        "Every log compacted by ctxkit's default chain to 1/N of its own tokens (`--no-usage`, the "
        "budget `ctxkit fidelity --limit` and the fidelity bench use); every claim of the text the "
        "compaction wrote (summaries, recaps, placeholders) checked against the ORIGINAL log by "
        "`ctxkit.fidelity.claims` (which imports nothing of facts/summarizers/strategies). "
        "Precision = true claims / all claims; recall = the fidelity probes kept.",
        "",
        *([notes.rstrip(), ""] if notes else []),
        "## By budget",
        "",
        "| budget | sets | cases | refused | claims | false | precision | cases with a false claim | mean recall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for share in sorted({r["share"] for r in rows}):
        for group in sorted({r["set"] for r in rows}) + ["all"]:
            mine = [r for r in rows if r["share"] == share and (group == "all" or r["set"] == group)]
            good = [r for r in mine if "claims" in r]
            total = sum(r["claims"]["total"] for r in good)
            false = sum(r["claims"]["false"] for r in good)
            recall = sum(r["recall"] for r in good) / len(good) if good else 0.0
            out.append(
                f"| 1/{share} | {group} | {len(mine)} | {len(mine) - len(good)} | {total} | {false} | "
                f"{(1 - false / total) if total else 1:.3f} | {sum(1 for r in good if r['claims']['false'])} | {recall:.3f} |"
            )
    out += ["", "## The first request (kept whole wherever it fits a quarter of the room?)", "",
            "| budget | whole | cut although it fits | too big for a quarter | cases cut |", "|---|---|---|---|---|"]
    for share in sorted({r["share"] for r in rows}):
        mine = [r for r in ok if r["share"] == share]
        firsts = Counter(r.get("first_request") for r in mine)
        cut = ", ".join(r["log"][:40] for r in mine if r.get("first_request") == "cut")
        out.append(f"| 1/{share} | {firsts['whole']} | {firsts['cut']} | {firsts['too big']} | {cut or '-'} |")
    out += ["", "## False claims by kind (all budgets)", "", "| kind | claims | false | share false |", "|---|---|---|---|"]
    kinds: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    for r in ok:
        for k, v in r["claims"]["by_kind"].items():
            kinds[k] += v["claims"]
            bad[k] += v["false"]
    for k in C.KINDS:
        if kinds[k]:
            out.append(f"| {k} | {kinds[k]} | {bad[k]} | {bad[k] / kinds[k]:.1%} |")
    out += ["", "## Per log", "", "| set | log | tokens | " + " | ".join(f"1/{s} false/claims" for s in sorted({r['share'] for r in rows})) + " |",
            "|---|---|---|" + "---|" * len({r['share'] for r in rows})]
    by_log: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_log[r["log"]].append(r)
    for log, rs in by_log.items():
        cells = []
        for r in sorted(rs, key=lambda x: x["share"]):
            cells.append(f"{r['claims']['false']}/{r['claims']['total']}" if "claims" in r else "refused")
        out.append(f"| {rs[0]['set']} | {log[:80]} | {rs[0]['tokens']:,} | " + " | ".join(cells) + " |")
    out += ["", "## Every false claim, with its quote", "",
            "The same claim of the same log at several budgets is listed once, with its budgets.", ""]
    grouped: dict[str, dict[tuple[str, str, str], tuple[list[int], dict[str, Any]]]] = defaultdict(dict)
    for r in ok:
        for c in r["claims"].get("false_claims", []):
            key = (r["log"], c["claim"], c["why"])
            shares, _ = grouped[c["kind"]].setdefault(key, ([], c))
            shares.append(r["share"])
    for kind in C.KINDS:
        items = list(grouped.get(kind, {}).items())
        if not items:
            continue
        out += [f"### {kind} ({sum(len(v[0]) for _, v in items)} false claims, {len(items)} distinct)", ""]
        for (log, _, _), (shares, c) in items[:PER_KIND]:
            at = ", ".join(f"1/{s}" for s in shares)
            out.append(f"- **{log[:60]} @ {at}** (unit {c['unit']}): `{_md(c['claim'])}`  \n  why: {c['why']}"
                       + (f"  \n  evidence: `{_md(c['evidence'])}`" if c["evidence"] else ""))
        if len(items) > PER_KIND:
            out.append(f"- ... and {len(items) - PER_KIND} more (all in the JSON rows)")
        out.append("")
    refused = [r for r in rows if "claims" not in r]
    if refused:
        out += ["## Refused", ""] + [f"- {r['log']} @ 1/{r['share']}: {r['error']}" for r in refused] + [""]
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("`", "'").replace("|", "\\|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--budgets", default="3,6,10", help="budgets as 1/N of each transcript's tokens")
    ap.add_argument("--min-tokens", type=int, default=3000)
    ap.add_argument("--realdata", help="the real logs (default ../shared/realdata beside the checkout)")
    ap.add_argument("--unseen", action="append", help="a folder of logs the project has never seen (repeatable)")
    ap.add_argument("--json", help="write every row here")
    ap.add_argument("--notes", help="a markdown file put under the report's header (how to read it)")
    ap.add_argument("--at", help="the code measured, for the report's header (default: this checkout's HEAD)")
    ap.add_argument("-o", "--output", default="-", help="the markdown report (default stdout)")
    args = ap.parse_args()
    rows = measure(args)
    command = "scripts/claims_report.py " + " ".join(sys.argv[1:])
    notes = Path(args.notes).read_text() if args.notes else ""
    text = report(rows, command.strip(), args.at, notes)
    if args.json:
        with atomic_writer(args.json) as f:
            json.dump(rows, f, indent=1)
    if args.output == "-":
        sys.stdout.write(text + "\n")
    else:
        with atomic_writer(args.output) as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
