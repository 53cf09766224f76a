"""What people read: help without artefacts, English plurals, money as people write it, charts
with their axes named."""

from __future__ import annotations

from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.english import counted


def test_help_shows_no_empty_range_and_names_paths_as_unix_tools_do() -> None:
    for command in ("guard", "count", "compact", "fidelity", "replay", "forensics", "score-rl"):
        r = CliRunner().invoke(cli, [command, "--help"])
        assert r.exit_code == 0
        assert "None]" not in r.output, command
        assert r.output.splitlines()[0].endswith("[OPTIONS] [PATH]..."), command


def test_counted_says_one_thing_and_many_things() -> None:
    assert [counted(n, "check") for n in (0, 1, 2, 1200)] == [
        "0 checks", "1 check", "2 checks", "1,200 checks"
    ]
    assert counted(1, "match", "matches") == "1 match" and counted(2, "match", "matches") == "2 matches"


def test_money_carries_its_sign_before_the_dollar() -> None:
    from ctxkit.report.agents import _usd

    assert [_usd(v) for v in (-0.0012, 0.0012, 12.5, -12.5, None)] == [
        "-$0.0012", "$0.0012", "$12.50", "-$12.50", "—"
    ]


def test_the_replay_chart_names_its_axes() -> None:
    from ctxkit.report.agents import _chart

    run = {"label": "Claude Code", "call_tokens": [1_000, 60_000, 120_000]}
    svg = _chart({"window": 200_000, "baseline": {"label": "no compaction", "call_tokens": [1_000, 70_000, 140_000]},
                  "agents": [run]})
    assert "tokens sent per call" in svg and "model calls (1 to 3)" in svg
    assert ">0</text>" in svg and ">100k</text>" in svg and ">200k</text>" in svg
