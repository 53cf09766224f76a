"""Model-ready check (issue 11): can what `ctxkit compact` hands back go straight to a model?

    PYTHONPATH=$PWD .venv/bin/python scripts/model_ready.py [--json PATH] [--jobs 2]

Every real transcript in ../shared/realdata that ctxkit reads, and every `ctxkit simulate`
scenario (generated into a temporary folder, in --sim-formats), is compacted to a third of its
size with default settings, through the CLI as a user runs it:

    ctxkit compact FILE --limit N --target N/3 -o OUT --archive DB

where N is the transcript's own token count (`ctxkit count --no-usage`: the tokens compaction
sees, without a log's unlogged system prompt). Each output is then checked: written in the
input's format (the output's format detected), valid against the SDK types of the input's
provider (`ctxkit.formats.sdk`; "n/a" while it is absent, or for ctxkit's own units format), `ctxkit
expand` gives back the input's units (role, content, tool calls), and the `ctxkit.fidelity.measures`
measures, taken on the library's compaction of the same transcript with the same settings
(meta included; the `cli=lib` column says whether the CLI wrote exactly that result).

A dataset (several conversations in one file) is split into one file per conversation, its
largest --max-conversations kept; the table shows one row per input file, the summary counts
transcripts. A file of a format ctxkit does not read is listed as skipped.
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

REALDATA = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "realdata"
)
SIM_FORMATS = "openai,anthropic"


# ---------------------------------------------------------------- running the CLI


def _cli(args: Sequence[str]) -> tuple[int, str]:
    """Run `ctxkit ARGS` in this process (click's CliRunner); (exit code, last stderr line)."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    result = CliRunner().invoke(cli, list(args), catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return 1, f"{type(result.exception).__name__}: {result.exception}"
    lines = [x for x in (result.stderr or "").splitlines() if x.strip()]
    return result.exit_code, lines[-1] if lines else ""


def _sdk_problems(fmt: str, text: str) -> list[str] | None:
    """The output check of format `fmt` (its `validate`, `ctxkit.formats.sdk.problems`); None
    for ctxkit's own units format, which no provider reads."""
    from ctxkit.formats import FORMATS

    if fmt == "units" or fmt not in FORMATS:
        return None
    return list(FORMATS[fmt].validate(text))


def _unit_key(u: Any) -> tuple[Any, ...]:
    return (u.role, u.content, [(c.id, c.name, c.arguments) for c in u.tool_calls], u.tool_call_id)


# ---------------------------------------------------------------- one transcript


def check_one(path: str, label: str, source: str, work: str, user_budget: int | None) -> dict[str, Any]:
    """Compact one single-transcript file through the CLI and measure everything."""
    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact
    from ctxkit.config.settings import compact_settings
    from ctxkit.engines.methods import ENGINE_RULES
    from ctxkit.errors import CtxkitError
    from ctxkit.fidelity import measures as fidelity
    from ctxkit.fidelity.truth import read_with_truth
    from ctxkit.formats import ReadOptions, read_path, write_transcripts
    from ctxkit.tokens import count_transcript, get_tokenizer

    started = time.perf_counter()
    tok = get_tokenizer()
    # Compacted as the CLI reads it (a sidecar's P1 marks are not applied: `compact` does not
    # read one); the ground truth is only for the needles.
    (t,) = list(read_path(path))
    (with_truth,) = list(read_with_truth([path]))
    truth = with_truth.metadata.get("ground_truth")
    n = count_transcript(t, tok).total
    target = max(1, n // 3)
    row: dict[str, Any] = {
        "file": label,
        "source": source,
        "format": t.source_format,
        "units": len(t.units),
        "tokens": n,
        "target": target,
    }
    os.makedirs(work, exist_ok=True)
    ext = os.path.splitext(path)[1] or ".json"
    out, back = os.path.join(work, f"out{ext}"), os.path.join(work, f"back{ext}")
    db = os.path.join(work, "out.ctx.db")
    code, err = _cli(
        ["compact", path, "--limit", str(n), "--target", str(target), "-o", out, "--archive", db]
    )
    if code != 0:
        row["error"] = f"compact exit {code}: {err}"
        return row

    with open(out, encoding="utf-8") as fh:
        written = fh.read()
    got = list(read_path(out))
    row["format_out"] = got[0].source_format if got else None
    # Plain text messages are both OpenAI and Anthropic: a compacted Anthropic transcript with
    # no tool block left is detected as openai. It is in the input's format when it reads as
    # that format (forced) with the same layout and passes that provider's checks below.
    try:
        forced = list(read_path(out, ReadOptions(format=t.source_format)))
    except CtxkitError:
        forced = []
    same = len(got) == 1 and got[0].source_format == t.source_format
    row["format_ok"] = (same or len(forced) == 1) and (got or forced)[0].layout == t.layout
    row["tokens_after"] = count_transcript(got[0], tok).total if got else None
    # Checked as the input's format: an output in another format fails (it cannot be sent
    # where the input came from) rather than escaping as "n/a".
    problems = _sdk_problems(t.source_format, written)
    if problems is not None and not row["format_ok"]:
        problems.insert(0, f"written as {row['format_out']}, not {t.source_format}")
    row["sdk_ok"] = None if problems is None else not problems
    row["sdk_problems"] = (problems or [])[:3]

    code, err = _cli(["expand", out, "--archive", db, "-o", back])
    if code != 0:
        row["expand_ok"] = False
        row["expand_error"] = err
    else:
        restored = list(read_path(back))
        row["expand_ok"] = len(restored) == 1 and [_unit_key(u) for u in restored[0].units] == [
            _unit_key(u) for u in t.units
        ]
        with open(back, "rb") as fh, open(path, "rb") as src:
            row["expand_bytes_equal"] = fh.read() == src.read()

    # The same compaction in the library: the transcript with its meta, for the measures.
    settings = compact_settings(limit=n, target=target)
    with Archive(":memory:") as archive:
        result = compact(t, settings, archive=archive)
    buf = io.StringIO()
    write_transcripts([result.transcript], buf)
    row["cli_same"] = buf.getvalue() == written if result.changed else written == _read(path)
    row["recovery"] = result.recovery
    row["strategies"] = ",".join(result.strategies_applied)
    f = fidelity.measure(
        t,
        result.transcript,
        ENGINE_RULES,
        truth=truth,
        target=target,
        tokens_after=row["tokens_after"],
        user_budget_tokens=user_budget,
        count=tok.count,
    )
    row["fidelity"] = f.to_dict()
    row["time_s"] = round(time.perf_counter() - started, 3)
    return row


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


# ---------------------------------------------------------------- files


def split_dataset(path: str, work: str, keep: int) -> list[str]:
    """A dataset's conversations as one file each (same format: a JSON array of one, or one
    JSONL line), the `keep` largest by size; [] when the file is not such a dataset."""
    text = _read(path)
    try:
        doc = json.loads(text)
        items = [json.dumps([x], ensure_ascii=False) for x in doc] if isinstance(doc, list) else []
        ext = ".json"
    except ValueError:
        items = [line for line in text.splitlines() if line.strip()]
        ext = ".jsonl"
    order = sorted(range(len(items)), key=lambda i: -len(items[i]))[:keep]
    os.makedirs(work, exist_ok=True)
    out = []
    for i in sorted(order):
        name = os.path.join(work, f"conv{i:05d}{ext}")
        with open(name, "w", encoding="utf-8") as fh:
            fh.write(items[i] + "\n")
        out.append(name)
    return out


def check_file(
    path: str, label: str, source: str, work: str, user_budget: int | None, max_conversations: int
) -> dict[str, Any]:
    """One input file: its runs (one per transcript), or why it was skipped."""
    from ctxkit.errors import CtxkitError
    from ctxkit.formats import read_path

    try:
        count = sum(1 for _ in read_path(path))
    except CtxkitError as exc:
        why = str(exc).splitlines()[0].replace(path, "").lstrip(":0123456789 ")
        return {"file": label, "skipped": why[:100]}
    if count == 1:
        runs = [check_one(path, label, source, work, user_budget)]
    else:
        parts = split_dataset(path, os.path.join(work, "split"), max_conversations)
        runs = [
            check_one(
                p,
                f"{label}#{os.path.basename(p)[4:9].lstrip('0') or '0'}",
                source,
                os.path.join(work, f"c{k}"),
                user_budget,
            )
            for k, p in enumerate(parts)
        ]
    return {"file": label, "transcripts_in_file": count, "runs": runs}


def inputs(realdata: str, sims: Sequence[str]) -> list[tuple[str, str, str]]:
    """(path, label, source) of every input: the real files, then the scenario files."""
    out = []
    for path in sorted(glob.glob(os.path.join(realdata, "*", "*"))):
        folder = os.path.basename(os.path.dirname(path))
        out.append((path, f"{folder}/{os.path.basename(path)}", "real"))
    for folder in sims:
        for path in sorted(glob.glob(os.path.join(folder, "*"))):
            if not path.endswith("truth.jsonl"):
                fmt = os.path.basename(folder).removeprefix("sim-")
                out.append((path, f"sim/{fmt}/{os.path.basename(path)}", "simulated"))
    return out


def _check_file_star(args: tuple[Any, ...]) -> dict[str, Any]:
    return check_file(*args)


# ---------------------------------------------------------------- report


def _share(kept: int, total: int) -> str:
    return f"{kept}/{total}" if total else "-"


def _pct(kept: int, total: int) -> str:
    return f"{kept}/{total} ({100 * kept / total:.0f}%)" if total else "-"


def _yn(v: Any) -> str:
    return "n/a" if v is None else ("ok" if v else "NO")


def _short(label: str, width: int = 48) -> str:
    """`folder/…end-of-name`: the ends of real file names tell them apart."""
    if len(label) <= width:
        return label
    folder, _, name = label.partition("/")
    keep = max(8, width - len(folder) - 2)
    return f"{folder}/…{name[-keep:]}"


COLUMNS = (
    "file", "fmt", "tokens", "target", "after/t", "format", "sdk", "expand", "cli=lib",
    "needles", "files", "users", "in budget", "last req", "longer", "bad json", "edited",
    "same-role", "sum>1st",
)  # fmt: skip


def file_row(entry: dict[str, Any]) -> list[str]:
    """One table row for a file: its runs added up (a dataset's conversations together)."""
    runs = entry["runs"]
    ok = [r for r in runs if "error" not in r]
    fids = [r["fidelity"] for r in ok]

    def total(get: Callable[[dict[str, Any]], dict[str, int] | None]) -> str:
        shares = [s for s in (get(f) for f in fids) if s]
        return (
            _share(sum(s["kept"] for s in shares), sum(s["total"] for s in shares))
            if shares
            else "-"
        )

    def flags(key: str, rows: Sequence[dict[str, Any]]) -> str:
        vals = [r[key] for r in rows if r.get(key) is not None]
        if not vals:
            return "n/a"
        return _yn(all(vals)) if len(rows) == 1 else f"{sum(map(bool, vals))}/{len(vals)}"

    ratios = [f["target_ratio"] for f in fids if f["target_ratio"] is not None]
    label = entry["file"] + (
        f" ({len(runs)} of {entry['transcripts_in_file']})" if len(runs) > 1 else ""
    )
    if not ok:
        return [
            _short(label),
            runs[0].get("format", "?"),
            "",
            "",
            "",
            runs[0].get("error", "")[:80],
        ]
    return [
        _short(label),
        ok[0]["format"],
        f"{max(r['tokens'] for r in ok):,}",
        f"{max(r['target'] for r in ok):,}",
        f"{max(ratios):.2f}" if ratios else "-",
        flags("format_ok", ok),
        flags("sdk_ok", ok),
        flags("expand_ok", ok),
        flags("cli_same", ok),
        total(lambda f: f["needles"]),
        total(lambda f: f["files_trail"]),
        total(lambda f: f["user_verbatim"]["all"]),
        total(lambda f: f["user_verbatim"]["in_budget"]),
        flags("last_request_verbatim", fids),
        str(sum(len(f["longer_placeholders"]) for f in fids)),
        str(sum(len(f["broken_json"]) for f in fids)),
        str(sum(len(f["edited_calls"]) for f in fids)),
        str(sum(len(f["new_same_role"]) for f in fids)),
        flags("summary_after_first_request", fids),
    ] + ([f"({len(runs) - len(ok)} failed)"] if len(ok) < len(runs) else [])


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows if i < len(r))]) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        cells = [c.ljust(widths[i]) if i < len(widths) else c for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def summarize(entries: Sequence[dict[str, Any]], user_budget: int | None) -> dict[str, Any]:
    """The figures of the issue's "done when", over all transcripts (runs)."""
    runs = [r for e in entries for r in e.get("runs", [])]
    ok = [r for r in runs if "error" not in r]
    fids = [r["fidelity"] for r in ok]

    def count(key: str, rows: Sequence[dict[str, Any]]) -> dict[str, int]:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return {"kept": sum(map(bool, vals)), "total": len(vals)}

    def add(get: Callable[[dict[str, Any]], dict[str, int] | None]) -> dict[str, int]:
        shares = [s for s in map(get, fids) if s]
        return {"kept": sum(s["kept"] for s in shares), "total": sum(s["total"] for s in shares)}

    def items(key: str) -> dict[str, int]:
        return {
            "count": sum(len(f[key]) for f in fids),
            "transcripts": sum(1 for f in fids if f[key]),
        }

    ratios = [f["target_ratio"] for f in fids if f["target_ratio"] is not None]
    skipped: dict[str, int] = {}
    for e in entries:
        if "skipped" in e:
            folder = e["file"].split("/")[0]
            skipped[folder] = skipped.get(folder, 0) + 1
    return {
        "files": sum(1 for e in entries if "runs" in e),
        "transcripts": len(runs),
        "real": sum(1 for r in runs if r["source"] == "real"),
        "simulated": sum(1 for r in runs if r["source"] == "simulated"),
        "errors": [f"{r['file']}: {r['error']}" for r in runs if "error" in r],
        "skipped": skipped,
        "format_ok": count("format_ok", ok),
        "sdk_ok": count("sdk_ok", ok),
        "sdk_unchecked": sum(1 for r in ok if r.get("sdk_ok") is None),
        "expand_ok": count("expand_ok", ok),
        "cli_same": count("cli_same", ok),
        "longer_placeholders": items("longer_placeholders"),
        "broken_json": items("broken_json"),
        "edited_calls": items("edited_calls"),
        "new_same_role": items("new_same_role"),
        "summary_after_first_request": count("summary_after_first_request", fids),
        "target_ratio": {
            "median": round(statistics.median(ratios), 4) if ratios else None,
            "max": round(max(ratios), 4) if ratios else None,
            "min": round(min(ratios), 4) if ratios else None,
            "above_1": sum(1 for x in ratios if x > 1.0),
            "below_0.9": sum(1 for x in ratios if x < 0.9),
        },
        "user_verbatim": add(lambda f: f["user_verbatim"]["all"]),
        "user_verbatim_in_budget": add(lambda f: f["user_verbatim"]["in_budget"]),
        "user_budget_tokens": user_budget,
        "last_request_verbatim": count("last_request_verbatim", fids),
        "needles": add(lambda f: f["needles"]),
        "files_trail": add(lambda f: f["files_trail"]),
    }


def summary_lines(s: dict[str, Any]) -> list[str]:
    from ctxkit.english import counted

    def p(key: str) -> str:
        return _pct(s[key]["kept"], s[key]["total"])

    def items(key: str) -> str:
        return f"{s[key]['count']} in {counted(s[key]['transcripts'], 'transcript')}"

    tr = s["target_ratio"]
    skipped = ", ".join(f"{k} {counted(v, 'file')}" for k, v in sorted(s["skipped"].items())) or "none"
    sdk = p("sdk_ok") + (f"; {s['sdk_unchecked']} not checked (n/a)" if s["sdk_unchecked"] else "")
    lines = [
        f"{counted(s['transcripts'], 'transcript')} ({s['real']} real, {s['simulated']} simulated) in "
        f"{counted(s['files'], 'file')}; skipped (no reader): {skipped}",
        f"  compaction failed:                   {len(s['errors'])}",
        f"  written in the input's format:       {p('format_ok')}",
        f"  valid against the SDK types:         {sdk}",
        f"  expand round-trip equals the input:  {p('expand_ok')}",
        f"  placeholders longer than original:   {items('longer_placeholders')}",
        f"  JSON outputs made invalid:           {items('broken_json')}",
        f"  edited tool-call arguments:          {items('edited_calls')}",
        f"  same-role turns not in the input:    {items('new_same_role')}",
        f"  summary after the first request:     {p('summary_after_first_request')}",
        f"  tokens after / target:               median {tr['median']}, max {tr['max']}, "
        f"min {tr['min']} ({tr['above_1']} above 1.0, {tr['below_0.9']} below 0.9)",
        f"  user messages verbatim:              {p('user_verbatim')}; within the "
        + (f"{s['user_budget_tokens']:,}-token" if s["user_budget_tokens"] else "engine's (min(20k, 25% of target))")
        + f" budget {p('user_verbatim_in_budget')}",
        f"  last request verbatim:               {p('last_request_verbatim')}",
        f"  needles present (scenarios):         {p('needles')}",
        f"  files-touched trail:                 {p('files_trail')}",
        f"  CLI output = library result:         {p('cli_same')}",
    ]
    lines += [f"  error: {e}" for e in s["errors"][:10]]
    return lines


# ---------------------------------------------------------------- main


def generate_scenarios(
    folder: str, formats: Sequence[str], scenarios: Sequence[str] = ("all",)
) -> list[str]:
    """The simulate scenarios (default every one), once per format, through the CLI; the
    folders written."""
    out = []
    names = [x for name in scenarios for x in ("-s", name)]
    for fmt in formats:
        target = os.path.join(folder, f"sim-{fmt}") + os.sep
        code, err = _cli(["simulate", *names, "--format", fmt, "-o", target])
        if code != 0:
            raise SystemExit(f"simulate --format {fmt} failed: {err}")
        out.append(target.rstrip(os.sep))
    return out


def run(args: argparse.Namespace, work: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    budget = args.user_budget  # None: the engine's budget for each target
    formats = [f for f in args.sim_formats.split(",") if f]
    sims = generate_scenarios(work, formats, args.scenario or ["all"]) if formats else []
    todo = [
        (path, label, source, os.path.join(work, "runs", str(i)), budget, args.max_conversations)
        for i, (path, label, source) in enumerate(inputs(args.realdata, sims))
        if not args.only or any(x in label for x in args.only)
    ]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            entries = list(pool.map(_check_file_star, todo))
    else:
        entries = []
        for item in todo:
            print(f"  {item[1]}", file=sys.stderr, flush=True)
            entries.append(check_file(*item))
    return entries, summarize(entries, budget)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", default=REALDATA, help="folder of real transcripts")
    parser.add_argument(
        "--sim-formats",
        default=SIM_FORMATS,
        help="simulate output formats, comma-separated ('' for none)",
    )
    parser.add_argument(
        "-s", "--scenario", action="append", help="simulate only this scenario (repeatable)"
    )
    parser.add_argument(
        "--only", action="append", help="only inputs whose label contains this (repeatable)"
    )
    parser.add_argument(
        "--max-conversations", type=int, default=20, help="a dataset's largest N conversations"
    )
    parser.add_argument(
        "--user-budget",
        type=int,
        default=None,
        help="user-message budget in tokens (default: the engine's for each target, "
        "summarize.user_message_budget)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="files checked in N processes")
    parser.add_argument("--json", dest="json_path", help="write the raw figures here")
    parser.add_argument("--keep", help="work in this folder and keep it (outputs, archives)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        entries, summary = run(args, os.path.abspath(args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="model-ready-") as work:
            entries, summary = run(args, work)
    rows = [file_row(e) for e in entries if "runs" in e]
    print("\n".join(table(rows, COLUMNS)))
    reasons: dict[str, str] = {}
    for e in entries:
        if "skipped" in e:
            reasons.setdefault(e["file"].split("/")[0], e["skipped"])
    for folder, why in sorted(reasons.items()):
        print(f"skipped {folder}/ (no reader; e.g. {why})")
    print()
    print("\n".join(summary_lines(summary)))
    print(f"  time: {time.perf_counter() - started:.1f} s")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump({"summary": summary, "files": entries}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
