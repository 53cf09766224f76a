"""Every real transcript through read, write, compact and expand: what comes back.

    .venv/bin/python scripts/roundtrip_realdata.py [--realdata DIR] [--json] [FILE ...]

For each file (default: every file under ../shared/realdata but its README and SOURCES): the
format detected, transcripts, units and tokens (cl100k_base, what the log holds), whether
writing what was read gives the file back (`bytes`: byte for byte; `records`: the same JSON
records, formatted otherwise; `no`), and whether `ctxkit compact` to a third of its tokens (plus
what its recorded usage says it never shows, the unlogged region `count` adds) then `ctxkit
expand` does. `--json` prints one object per file with the SHA-256 of the compacted and the
expanded output.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.counting import measure
from ctxkit.formats import read_path, write_transcripts
from ctxkit.tokens import count_transcript, get_tokenizer

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"


def files(root: Path) -> list[Path]:
    """The transcripts under `root` (its notes left out), sorted."""
    return sorted(p for p in root.glob("*/*") if p.is_file())


def parsed(data: bytes) -> object:
    """The records of a file: its JSON document, its JSONL lines, or its text."""
    try:
        return json.loads(data)
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError:
        return data


def same(a: bytes, b: bytes) -> str:
    """"bytes" when identical, "records" when the same JSON records, else "no"."""
    if a == b:
        return "bytes"
    return "records" if parsed(a) == parsed(b) else "no"


def roundtrip(path: Path, tmp: Path) -> dict[str, object]:
    """What one file gives back through each step."""
    tok = get_tokenizer("cl100k_base")
    data = path.read_bytes()
    ts = list(read_path(str(path)))
    buf = io.StringIO()
    write_transcripts(ts, buf)
    tokens = [count_transcript(t, tok).total for t in ts]
    row: dict[str, object] = {
        "file": f"{path.parent.name}/{path.name}",
        "format": ts[0].source_format if ts else "-",
        "transcripts": len(ts),
        "units": sum(len(t.units) for t in ts),
        "tokens": sum(tokens),
        "rewritten": same(buf.getvalue().encode("utf-8"), data),
    }
    # a third of what the log holds, plus what it never shows (recorded usage beyond the local
    # count, the unlogged region): the limit and the target `count` and `compact` read alike
    unlogged = [measure(t, tok).unlogged for t in ts]
    big = max(range(len(ts)), key=lambda k: tokens[k] + unlogged[k]) if ts else None
    limit = tokens[big] + unlogged[big] if big is not None else 1
    target = unlogged[big] + max(tokens[big] // 3, 1) if big is not None else 1
    src = tmp / ("in" + "".join(path.suffixes[-1:]))
    src.write_bytes(data)
    small = tmp / ("small" + src.suffix)
    back = tmp / ("back" + src.suffix)
    run = CliRunner().invoke
    res = run(cli, ["compact", str(src), "--limit", str(limit), "--target", str(target),
                    "-o", str(small)], catch_exceptions=False)
    if res.exit_code != 0:
        row["error"] = res.stderr.strip().splitlines()[-1:]
        return row
    res = run(cli, ["expand", str(small), "-o", str(back)], catch_exceptions=False)
    if res.exit_code != 0:
        row["error"] = res.stderr.strip().splitlines()[-1:]
        return row
    row["compacted_sha256"] = hashlib.sha256(small.read_bytes()).hexdigest()
    row["expanded_sha256"] = hashlib.sha256(back.read_bytes()).hexdigest()
    row["expanded"] = same(back.read_bytes(), data)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realdata", type=Path, default=REALDATA)
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.paths or files(args.realdata)
    if not args.json:
        print(f"{'file':<60} {'format':<12} {'conv':>4} {'units':>6} {'tokens':>9} {'rewrite':>7} {'expand':>7}")
    for path in paths:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                row = roundtrip(path, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - a report of every file, whatever breaks
                row = {"file": f"{path.parent.name}/{path.name}", "error": f"{type(exc).__name__}: {exc}"[:200]}
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        if "format" not in row:
            print(f"{str(row['file'])[:60]:<60} {row['error']}", flush=True)
            continue
        print(
            f"{str(row['file'])[:60]:<60} {row['format']:<12} {row['transcripts']:>4} {row['units']:>6,} "
            f"{row['tokens']:>9,} {row['rewritten']:>7} {row.get('expanded', '-'):>7}"
            + (f"  {row['error']}" if "error" in row else ""),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
