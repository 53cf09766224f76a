"""The guard engine: statuses per target, choice among targets, pending plan, replay, check."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from proptest import examples

from ctxkit.budget import STATUSES, Target, status_rank
from ctxkit.budget.targets import resolve_target
from ctxkit.config.file import Config
from ctxkit.engines.guard import (
    GuardSettings,
    PendingOutput,
    evaluate,
    exit_code_for,
    plan_pending,
    threshold_history,
)
from ctxkit.errors import TokenizerError
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.tokens import CountOptions, TokenizerCache, count_transcript, get_tokenizer


def session(n: int = 6, words: int = 40) -> Transcript:
    units = [Unit(id="s", role="system", content="You are a helpful agent.")]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        units.append(
            Unit(
                id=f"u{i}",
                role=role,
                content=" ".join(f"word{j}" for j in range(words)),
                timestamp=1000.0 + 60 * i,
            )
        )
    return Transcript(units=units, id="t")


def window(limit: int) -> Target:
    return resolve_target(context_window=limit, max_output_tokens=0, buffer_tokens=0)


def total(t: Transcript) -> int:
    return count_transcript(t, get_tokenizer("cl100k_base")).total


@pytest.mark.parametrize(
    ("fraction", "status", "code"),
    [
        (0.5, "ok", 0),
        (0.85, "warn", 0),
        (0.96, "compact", 3),
        (0.99, "block", 4),
        (1.2, "overflow", 5),
    ],
)
def test_status_per_target(fraction: float, status: str, code: int) -> None:
    t = session()
    used = total(t)
    limit = round(used / fraction)
    v = evaluate(t, [window(limit)])
    r = v.results[0]
    assert (r.status, r.used, r.limit, r.remaining) == (status, used, limit, limit - used)
    assert r.used_fraction == pytest.approx(used / limit)
    assert v.exit_code() == code
    assert v.verdict == ("final" if status == "overflow" else "fits")


@pytest.mark.parametrize(
    ("status", "fail_on", "code"),
    [
        ("ok", "warn", 0),
        ("warn", "warn", 3),
        ("warn", "compact", 0),
        ("compact", "compact", 3),
        ("compact", "block", 0),
        ("block", "block", 4),
        ("block", "overflow", 0),
        ("overflow", "overflow", 5),
        ("overflow", "warn", 5),
    ],
)
def test_exit_codes(status: str, fail_on: str, code: int) -> None:
    assert exit_code_for(status, fail_on) == code


def test_first_target_that_fits_is_chosen() -> None:
    t = session()
    used = total(t)
    targets = [window(used - 1), window(used * 2), window(used * 3)]
    v = evaluate(t, targets)
    assert v.chosen_index == 1
    assert [r.decision for r in v.results] == ["does not fit", "chosen", "skipped"]
    none = evaluate(t, [window(used - 1), window(used - 2)])
    assert none.chosen is None and none.verdict == "final" and none.status == "overflow"
    assert none.exit_code() == 5 and none.exit_code("block") == 5


def test_system_and_tools_regions() -> None:
    t = session()
    tools = [{"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}]
    settings = GuardSettings(system="Extra instructions for the agent.", tools=tuple(tools))
    v = evaluate(t, [window(100000)], settings)
    base = evaluate(t, [window(100000)]).results[0].regions
    r = v.results[0].regions
    assert r["system"] > base["system"] and r["tools"] > 0 == base["tools"]
    assert r["history"] == base["history"]


def test_schemas_only_overflow_is_fitting() -> None:
    t = session()
    t.tools = [
        {
            "name": f"tool{i}",
            "description": "does a thing " * 20,
            "input_schema": {"type": "object"},
        }
        for i in range(3)
    ]
    counted = count_transcript(t, get_tokenizer("cl100k_base"))
    without = counted.total - counted.regions["tools"]
    v = evaluate(t, [window(without + 1)])
    r = v.results[0]
    assert r.schemas_only and r.fits and r.status == "block"
    assert any("only the tool schemas" in n for n in r.notes)
    # when the rest alone overflows too, it is a plain overflow
    v = evaluate(t, [window(without - 1)])
    assert v.results[0].status == "overflow" and not v.results[0].schemas_only


def test_pending_plan() -> None:
    tok = get_tokenizer("cl100k_base")
    cfg = Config()
    big = PendingOutput("run_tests", "PASSED test_x\n" * 600)  # > 4096 bytes
    small = PendingOutput("grep", "a.py:1: import os\n" * 40)
    tiny = PendingOutput("ls", "README.md")
    fits = plan_pending([big, small, tiny], 0, 100000, tok, CountOptions(), cfg)
    assert fits.fits_raw and [i.action for i in fits.items] == ["keep", "keep", "keep"]
    plan = plan_pending([big, small, tiny], 1000, 1600, tok, CountOptions(), cfg)
    assert not plan.fits_raw and plan.fits_after
    assert [i.action for i in plan.items] == ["offload", "keep", "keep"]
    # the small one is cut, not offloaded, when it is the only one over the room
    only_small = plan_pending([small], 0, small_tokens(small) - 20, tok, CountOptions(), cfg)
    item = only_small.items[0]
    assert item.action == "cut" and item.tokens_after == item.tokens - 20
    assert only_small.tokens_after == only_small.room


def small_tokens(p: PendingOutput) -> int:
    from ctxkit.tokens import count_units

    return count_units(
        [Unit(id="x", role="tool", type="tool_result", content=p.content, name=p.name)],
        get_tokenizer("cl100k_base"),
    )[0].total


def test_pending_counts_in_status() -> None:
    t = session()
    used = total(t)
    v = evaluate(t, [window(used + 200)], GuardSettings(pending=(PendingOutput("log", "line\n" * 400),)))
    r = v.results[0]
    assert r.status == "overflow" and r.regions["pending"] > 200
    assert r.pending is not None and r.pending.fits_after and r.pending.items[0].action == "cut"
    assert (
        r.pending.tokens_after == r.pending.room
    )  # cut to exactly what fits (2000 bytes: no offload)


def test_replay_first_crossings_and_over_hits() -> None:
    units = [Unit(id=f"u{i}", role="user", content="x", timestamp=100.0 * i) for i in range(10)]
    # each unit 10 tokens: totals 10, 20, ... 100 against a limit of 50
    rp = threshold_history(units, [10] * 10, 0, 50, resolve_target().thresholds)
    assert rp.first["warn"] == {"message": 4, "unit_id": "u3", "tokens": 40, "timestamp": 300.0}
    assert rp.first["block"]["message"] == 5 and rp.first["overflow"]["message"] == 6
    assert rp.by_status == {"ok": 3, "warn": 1, "compact": 0, "block": 1, "overflow": 5}
    assert rp.fires == 6 and rp.over_hits == 5
    assert rp.max_over_hits_per_hour == 5
    assert rp.trigger == {"message": 8, "unit_id": "u7", "timestamp": 700.0, "over_hits_in_hour": 3}


def test_replay_over_hits_spread_over_hours_do_not_trigger() -> None:
    units = [Unit(id=f"u{i}", role="user", content="x", timestamp=4000.0 * i) for i in range(6)]
    rp = threshold_history(units, [100] * 6, 0, 50, resolve_target().thresholds)
    assert rp.over_hits == 6 and rp.max_over_hits_per_hour == 1 and rp.trigger is None
    no_time = [Unit(id=f"u{i}", role="user", content="x") for i in range(4)]
    rp = threshold_history(no_time, [100] * 4, 0, 50, resolve_target().thresholds)
    assert rp.over_hits == 4 and rp.max_over_hits_per_hour is None and rp.trigger is None


def test_replay_through_evaluate_ends_at_the_total() -> None:
    t = session(n=10)
    used = total(t)
    v = evaluate(t, [window(used)], GuardSettings(replay=True))
    rp = v.results[0].replay
    assert rp is not None and rp.checks == len(t.units)
    assert rp.first["block"] is not None and rp.first["block"]["tokens"] == used
    assert rp.first["overflow"] is None


def test_replay_holds_the_unlogged_region_the_verdict_counts() -> None:
    """A Claude Code log records usage beyond what it shows (the system prompt and schemas,
    15,827 tokens): every replayed check holds it, as the verdict does, so the last check is
    the verdict's figure (the replay used to leave it out: "warn at 1,232 tokens" beside a
    verdict of 17,523 used)."""
    from pathlib import Path

    from ctxkit.formats import read_path

    (t,) = read_path(str(Path(__file__).parents[1] / "sample_transcripts" / "claude-code-session.jsonl"))
    v = evaluate(t, [window(17000)], GuardSettings(replay=True))
    r = v.results[0]
    rp = r.replay
    assert rp is not None and r.regions.get("unlogged", 0) > 15000
    assert rp.first["warn"] is not None and rp.first["warn"]["message"] == 1
    assert rp.first["overflow"] is not None and rp.first["overflow"]["tokens"] <= r.used
    lone = evaluate(t, [window(17000)], GuardSettings(replay=True, use_usage=False)).results[0]
    assert lone.replay is not None and lone.replay.first["warn"] is None


def test_the_replay_walks_through_every_recorded_call_to_the_verdict(realdata) -> None:
    """A log with recorded usage is walked through what the provider counted: after the unit
    each call followed, the walk is at that call's figure (what the agent pruned shows as a
    fall), and after the last unit at the verdict's (it used to add counts at the ratio alone
    and end 406 tokens short of the verdict on the sample)."""
    import itertools

    from ctxkit.counting import measure
    from ctxkit.engines.guard import walk_tokens
    from ctxkit.formats import read_path
    from ctxkit.tokens import count_transcript

    tok = get_tokenizer("cl100k_base")
    for name in ("pattern-stack__task-patterns", "JanDeDobbeleer__oh-my-posh"):
        path = next((realdata / "claude-code").glob(f"{name}*.jsonl"))
        (t,) = read_path(str(path))
        tc = count_transcript(t, tok)
        m = measure(t, tok, counted=tc)
        assert m.usage is not None
        fixed = 1000
        walked = [fixed + n for n in itertools.accumulate(walk_tokens(t, tc, m, fixed, tok))]
        # the last call after each unit (the last unit's figure is the verdict's)
        final = {after: recorded for recorded, _, after in m.usage.fit.calls}
        final.pop(len(walked) - 1, None)
        assert len(final) > 20
        assert all(walked[after] == recorded for after, recorded in final.items())
        assert walked[-1] == m.total
        used = evaluate(t, [window(10**7)], GuardSettings()).results[0].used
        assert used == m.total
        below = evaluate(t, [window(used - 1)], GuardSettings(replay=True)).results[0].replay
        assert below is not None and below.first["overflow"] is not None


def test_check_reports_problems_and_exit_6() -> None:
    t = session()
    t.units.append(
        Unit(id="r1", role="tool", type="tool_result", content="out", tool_call_id="nowhere")
    )
    v = evaluate(t, [window(100000)], GuardSettings(check=True))
    assert ("orphan_result", "r1") in {(p.kind, p.unit_id) for p in v.problems}
    assert v.exit_code() == 6
    assert evaluate(t, [window(100000)]).exit_code() == 0


def test_tokenizer_fallback_is_announced_and_explicit_choice_is_not_replaced() -> None:
    try:
        get_tokenizer("o200k_base")
        available = True
    except TokenizerError:
        available = False
    t = session()
    v = evaluate(t, [resolve_target("gpt-4o"), resolve_target("gpt-4o-mini")])
    if available:
        assert v.results[0].tokenizer == "o200k_base" and not v.warnings
    else:
        assert v.results[0].tokenizer == "cl100k_base (proxy: o200k_base unavailable offline)"
        assert len(v.warnings) == 1 and "counting with cl100k_base as a proxy" in v.warnings[0]
        with pytest.raises(TokenizerError):
            evaluate(t, [resolve_target("gpt-4o", tokenizer="o200k_base")])


def test_one_count_per_tokenizer() -> None:
    t = session()
    cache = TokenizerCache()
    v = evaluate(
        t,
        [window(10000), resolve_target("gpt-4-turbo"), resolve_target("gemini-2.5-pro")],
        tokenizers=cache,
    )
    assert len({r.used for r in v.results}) == 1  # all three count with cl100k_base, once
    assert v.results[2].tokenizer == "cl100k_base (proxy)"
    claude = evaluate(t, [resolve_target("claude-3-5-haiku")], tokenizers=cache).results[0]
    assert claude.tokenizer == "claude (estimate)" and claude.used > v.results[0].used


def test_debug_trace() -> None:
    lines: list[str] = []
    evaluate(session(), [resolve_target("gpt-4-turbo", limit=5000)], trace=lines.append)
    assert "target gpt-4-turbo: policy 5000 (--limit)" in lines
    assert lines[-1].startswith("decision: fits -> gpt-4-turbo (")


@settings(max_examples=examples(200), deadline=None)
@example(texts=["", ""], extra="0", tools=1, limit=27)  # at the limit, then over by schemas only
@given(
    texts=st.lists(st.text(min_size=0, max_size=60), min_size=1, max_size=8),
    extra=st.text(min_size=1, max_size=200),
    tools=st.integers(0, 3),
    limit=st.integers(20, 600),
)
def test_adding_tokens_never_improves_status(
    texts: list[str], extra: str, tools: int, limit: int
) -> None:
    units = [
        Unit(id=f"u{i}", role="user" if i % 2 == 0 else "assistant", content=s)
        for i, s in enumerate(texts)
    ]
    schemas = [{"name": f"t{i}", "description": "tool " * 5} for i in range(tools)]
    before = Transcript(units=list(units), tools=schemas)
    after = Transcript(units=[*units, Unit(id="new", role="tool", content=extra)], tools=schemas)
    target = resolve_target(
        context_window=limit, max_output_tokens=0, buffer_tokens=0, tokenizer="approx"
    )
    a = evaluate(before, [target]).results[0]
    b = evaluate(after, [target]).results[0]
    assert status_rank(b.status) >= status_rank(a.status)
    more_tools = Transcript(
        units=list(units), tools=[*schemas, {"name": "x", "description": extra}]
    )
    c = evaluate(more_tools, [target]).results[0]
    assert status_rank(c.status) >= status_rank(a.status)
    assert a.status in STATUSES


def test_tool_calls_count() -> None:
    t = session(n=2)
    with_call = Transcript(
        units=[
            *t.units,
            Unit(
                id="a",
                role="assistant",
                type="tool_call",
                tool_calls=[ToolCall("c1", "read", '{"path": "x"}')],
            ),
        ]
    )
    assert (
        evaluate(with_call, [window(10000)]).results[0].used
        > evaluate(t, [window(10000)]).results[0].used
    )


def test_pending_output_smaller_than_its_stub_is_cut() -> None:
    tok = get_tokenizer("cl100k_base")
    plan = plan_pending([PendingOutput("ls", "a.py")], 0, 3, tok, CountOptions(), Config())
    item = plan.items[0]
    assert item.action == "cut" and item.tokens_after == 3 and plan.fits_after


def test_replay_over_hits_with_unordered_timestamps() -> None:
    stamps = [0.0, 5000.0, 100.0, 200.0, 9000.0]
    units = [Unit(id=f"u{i}", role="user", content="x", timestamp=s) for i, s in enumerate(stamps)]
    rp = threshold_history(units, [100] * 5, 0, 50, resolve_target().thresholds)
    assert rp.max_over_hits_per_hour == 3
    assert rp.trigger is not None and rp.trigger["unit_id"] == "u3"


def test_thrash_warning_when_what_cannot_be_removed_reaches_the_threshold() -> None:
    """A system prompt at 96% of the limit: compaction cannot get under the compact threshold,
    so it would fire on every turn; at 85% it ends above its goal; at 30% nothing is said."""
    base = session()
    tok = get_tokenizer("cl100k_base")

    def with_system(words: int) -> Transcript:
        units = [Unit(id="s", role="system", content=" ".join(["rule"] * words)), *base.units[1:]]
        return base.replace(units=units)

    limit = 2000
    notes = {}
    for share in (0.96, 0.85, 0.30):
        words = 1
        while (
            count_transcript(
                with_system(words).replace(units=[with_system(words).units[0]]), tok
            ).total
            < share * limit
        ):
            words += 25
        v = evaluate(with_system(words), [window(limit)])
        notes[share] = [n for n in v.results[0].notes if n.startswith("thrash")]
    assert notes[0.96] and notes[0.96][0].endswith("compaction would repeat on every turn")
    assert notes[0.85] and notes[0.85][0].startswith("thrash risk: ")
    assert notes[0.30] == []
