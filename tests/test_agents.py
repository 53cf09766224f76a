"""`guard --as AGENT`: each coding agent's own auto-compaction trigger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.budget.triggers import RULES, forecast, get_rule
from ctxkit.cli import cli
from ctxkit.errors import UsageError


@pytest.mark.parametrize(
    ("agent", "window", "max_output", "trigger"),
    [
        ("claude-code", 200_000, 64_000, 167_000),  # the documented 83.5% of 200k
        ("claude-code", 200_000, 8_192, 178_808),
        ("codex", 272_000, 128_000, 244_800),
        ("gemini-cli", 1_048_576, 65_536, 524_288),
        ("opencode", 200_000, 64_000, 148_000),
        ("opencode", 128_000, 16_384, 95_232),
        ("cline", 200_000, 64_000, 160_000),
        ("cline", 128_000, 16_384, 98_000),
        ("roo-code", 200_000, 64_000, 140_000),
        ("aider", 128_000, 16_384, 6_976),
        ("aider", 1_000_000, 32_000, 8_192),
    ],
)
def test_triggers_follow_each_agents_source(
    agent: str, window: int, max_output: int, trigger: int
) -> None:
    assert RULES[agent].trigger(window, max_output) == trigger


def test_unknown_agent_lists_the_known() -> None:
    with pytest.raises(UsageError, match="unknown agent 'cursor'; known: aider, claude-code"):
        get_rule("cursor")


def test_forecast_counts_compactions_and_restarts_from_what_is_kept() -> None:
    rule = RULES["gemini-cli"]  # keeps 30% of the history
    f = forecast(rule, 1000, 100, used=700, unit_tokens=[100] * 10, fixed_tokens=0)
    assert f.trigger == 500 and f.compacts_now
    # 500 at unit 4 -> keeps 150; +100 each: 550 at unit 8 -> keeps 165; ends at 265
    assert (f.first_at, f.compactions) == (4, 2)


def test_claude_code_forecast_lands_near_where_claude_code_compacted(realdata: Path) -> None:
    """A real Claude Code log (1.0.57) that compacted once, replayed with its recorded usage:
    the replay's figure where Claude Code compacted is what the provider recorded there, and the
    forecast (today's trigger, W - min(O, 20k) - 13k = 167,000) fires a few turns later: this
    version compacted at 155,671, before today's trigger."""
    from ctxkit.counting import provider_calls
    from ctxkit.formats import ReadOptions, read_path

    log = (
        realdata
        / "claude-code"
        / "conneroisu__templar__logs-chat-json@a46211b7__session-b9712494.jsonl"
    )
    r = CliRunner().invoke(
        cli,
        [
            "guard",
            str(log),
            "--model",
            "claude-sonnet-4",
            "--as",
            "claude-code",
            "--replay",
            "--include-compacted",
            "--format",
            "json",
        ],
        catch_exceptions=False,
    )
    (target,) = json.loads(r.stdout)["targets"]
    (agent,) = target["agents"]
    (t,) = read_path(str(log), ReadOptions(include_compacted=True))
    (summary_at,) = [i for i, u in enumerate(t.units) if u.type == "summary"]
    assert agent["trigger"] == 167_000 and agent["compactions"] == 1
    last = max((c for c in provider_calls(t) if c["after_unit"] < summary_at), key=lambda c: c["after_unit"])
    assert last["input_tokens"] == 155_671
    assert 0 < agent["first_at"] - summary_at <= 15


def test_guard_as_says_when_each_agent_compacts() -> None:
    sample = Path(__file__).parents[1] / "sample_transcripts" / "tau-bench-airline.json"
    r = CliRunner().invoke(
        cli,
        ["guard", str(sample), "--model", "gpt-4o", "--as", "aider", "--as", "codex"],
        catch_exceptions=False,
    )
    lines = [line for line in r.stdout.splitlines() if line.startswith("as ")]
    assert lines == [
        "as aider on gpt-4o: compacts at 6,976 (history budget min(max((W - O) / 16, 1024), 8192)); "
        "at 8,117 it would compact now",
        "as codex on gpt-4o: compacts at 115,200 (0.9 W (or model_auto_compact_token_limit, capped "
        "at 0.9 W)); at 8,117 it would not yet",
    ]
