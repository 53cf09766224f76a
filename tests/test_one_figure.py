"""One figure for one file: count, guard, compact, `compact --replay`, fidelity and the library
agree on a log that records usage, through a pipe as through files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from ctxkit.cli import cli

SAMPLE = Path(__file__).parents[1] / "sample_transcripts" / "claude-code-session.jsonl"
LIMIT = 17_900  # the log counts 17,509: 15,178 of it fixed, so a compaction has some room


def _invoke(args: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _count(path: str) -> dict:
    code, out, err = _invoke(["count", path, "--format", "jsonl"])
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    return row


def test_a_piped_compaction_is_counted_guarded_and_expanded_as_compact_said(
    tmp_path: Path, monkeypatch
) -> None:
    """`cat log | ctxkit compact > small.jsonl`: the archive goes to the user's data folder (not
    the working directory), and count, guard and expand of small.jsonl find it there."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    code, out, err = _invoke(["compact", "--limit", str(LIMIT)], stdin=SAMPLE.read_bytes())
    assert code == 0, err
    after = int(err.splitlines()[0].split("-> ")[1].split(" /")[0].replace(",", ""))
    assert sorted(os.listdir(tmp_path)) == ["data"]  # nothing in the working directory
    assert (data / "ctxkit" / "piped.ctx.db").is_file()
    small = tmp_path / "small.jsonl"
    small.write_text(out)
    assert _count(str(small))["total"] == after
    code, out, _ = _invoke(["guard", str(small), "--limit", str(after - 1)])
    assert code == 5  # the figure decides, not the file's own partial count
    code, out, _ = _invoke(["guard", str(small), "--limit", str(LIMIT)])
    assert code == 0
    code, out, err = _invoke(["expand", str(small)])
    assert code == 0, err
    assert out == SAMPLE.read_text()


def test_replay_fidelity_and_the_library_give_counts_figures(tmp_path: Path) -> None:
    from ctxkit.compaction import CompactSettings, compact
    from ctxkit.counting import measure
    from ctxkit.formats import read_path
    from ctxkit.tokens import get_tokenizer

    before = _count(str(SAMPLE))["total"]
    small = tmp_path / "small.jsonl"
    code, _, err = _invoke(["compact", str(SAMPLE), "--limit", str(LIMIT), "-o", str(small)])
    assert code == 0, err
    after = _count(str(small))["total"]

    code, out, err = _invoke(["compact", "--replay", str(SAMPLE), "--limit", str(LIMIT)])
    assert code == 0, err
    replayed = json.loads(out)
    replayed = replayed[0] if isinstance(replayed, list) else replayed
    assert replayed["original_tokens"] == before

    code, out, err = _invoke(["fidelity", str(SAMPLE), str(small), "--format", "json"])
    assert code == 0, err
    (row,) = json.loads(out)
    assert (row["tokens_before"], row["tokens_after"]) == (before, after)

    (t,) = read_path(str(SAMPLE))
    assert measure(t, get_tokenizer()).total == before
    result = compact(t, CompactSettings(limit=LIMIT))
    assert (result.tokens_before, result.tokens_after) == (before, after)


def test_the_readmes_library_example_runs_on_the_bundled_sample(tmp_path: Path, monkeypatch) -> None:
    """The Python block under "As a library" in the README, run as it stands from the checkout's
    root (the archive it writes goes to a temporary folder)."""
    import contextlib
    import io
    import re

    root = Path(__file__).parents[1]
    text = (root / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## As a library\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    code = block.group(1).replace('"session.ctx.db"', repr(str(tmp_path / "session.ctx.db")))
    monkeypatch.chdir(root)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("17509 ")
    assert "15,178 fixed" in lines[1]
    assert lines[2].startswith("Context reduced 17,509 -> ")


def test_the_chain_aims_at_the_figure_it_is_judged_by(realdata: Path, tmp_path: Path) -> None:
    """Where recorded usage applies, the figure leaves out the reasoning of earlier turns (the
    agents do not send it back) and counts what stands before ctxkit's own summary (the first
    request: Claude Code sends it). The chain counts the same way, so the last step's figure is
    the figure of the output (`count` of it) within rounding, and a handover's first request is
    in it."""
    for name, limit in (("applab-nl__dmux", 60_000), ("FSM1__cipher-box", 60_000)):
        log = next((realdata / "claude-code").glob(f"{name}*.jsonl"))
        out, report = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        code, _, err = _invoke(["compact", str(log), "--limit", str(limit), "-o", str(out),
                                "--report", str(report)])
        assert code == 0, err
        rep = json.loads(report.read_text())
        last = [s for s in rep["steps"] if s["applied"]][-1]
        assert rep["tokens"]["after"] == _count(str(out))["total"]
        # the chain's own sum rounds each unit's unseen content at the ratio: within a few
        # tokens (it was 1,101 under the figure when it counted earlier turns' reasoning)
        assert abs(last["tokens_after"] - rep["tokens"]["after"]) <= 8
    # the first request before a fresh start's handover is counted
    log = next((realdata / "claude-code").glob("applab-nl__dmux*.jsonl"))
    code, _, err = _invoke(["compact", str(log), "--limit", "45000", "-o", str(out)])
    assert code == 0, err
    from ctxkit.counting import context_tokens
    from ctxkit.formats import read_path
    from ctxkit.tokens import count_transcript, get_tokenizer

    (t,) = read_path(str(out))
    tok = get_tokenizer()
    assert [u.type for u in t.units[:2]] == ["message", "summary"]
    assert context_tokens(t, tok) == count_transcript(t, tok).total - _earlier_reasoning(t, tok)


def _earlier_reasoning(t, tok) -> int:
    from ctxkit.structure import is_user_request
    from ctxkit.tokens import count_units

    last = max(i for i, u in enumerate(t.units) if u.role == "user" and is_user_request(u))
    return sum(c.reasoning for c in count_units(t.units[:last], tok))
