"""The compaction chain: fits, invariants, recovery, determinism and lossless expand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkit import structure
from ctxkit.archive.store import Archive
from ctxkit.budget import compaction_goal
from ctxkit.compaction import ChainOptions, CompactSettings, compact, expand_chain
from ctxkit.errors import BreakerFailed, UsageError
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES
from ctxkit.tokens import count_transcript, get_tokenizer

TOK = get_tokenizer("cl100k_base")

REAL = {
    "claude-code": "claude-code/d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "mini-swe-agent": "mini-swe-agent/SWE-agent__mini-swe-agent__PR-814__django__django-11039.traj.json",
    "tau-bench": "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json",
    "codex": "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
    "anthropic": "anthropic-messages/DERIVED__pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.messages.json",
}


def _load(realdata: Path, key: str) -> Transcript:
    return next(read_path(str(realdata / REAL[key])))


def _session(n_turns: int = 12, p1: bool = True) -> Transcript:
    """A made-up agent session: requests, parallel tool calls, big outputs, a P1 plan."""
    units: list[Unit] = [Unit(id="sys", role="system", content="You are a careful coding agent.")]
    units.append(Unit(id="u0", role="user", content="Fix the failing login test in auth/login.py."))
    if p1:
        units.append(
            Unit(
                id="plan",
                role="assistant",
                type="plan_ref",
                priority=1,
                content="To Do List:\n- [ ] reproduce\n- [ ] fix",
            )
        )
    for i in range(n_turns):
        calls = [
            ToolCall(f"c{i}a", "Read", '{"path": "auth/login.py"}'),
            ToolCall(f"c{i}b", "Bash", '{"cmd": "pytest"}'),
        ]
        units.append(
            Unit(
                id=f"a{i}",
                role="assistant",
                type="tool_call",
                content=f"Step {i}: reading.",
                tool_calls=calls,
            )
        )
        code = "\n".join(
            f"def handler_{i}_{k}(request):\n    return check(request, {k})\n" for k in range(30)
        )
        log = "\n".join(
            ["collecting ... collected 40 items"]
            + [f"tests/test_login.py::test_{k} PASSED" for k in range(60)]
        )
        log += "\nE   AssertionError: expected 200, got 401"
        units.append(
            Unit(
                id=f"r{i}a",
                role="tool",
                type="code",
                content=code,
                tool_call_id=f"c{i}a",
                name="Read",
            )
        )
        units.append(
            Unit(
                id=f"r{i}b",
                role="tool",
                type="log",
                content=log,
                tool_call_id=f"c{i}b",
                name="Bash",
            )
        )
        units.append(
            Unit(
                id=f"m{i}",
                role="assistant",
                content=f"The handler {i} rejects the token; trying the next fix.",
            )
        )
        units.append(
            Unit(
                id=f"q{i}",
                role="user",
                content=f"Keep going with step {i + 1}, and keep the API stable.",
            )
        )
    return Transcript(units=units, id="session-1")


def _records(units) -> list[dict]:
    """Unit records without the token cache (a count, not content)."""
    return [{k: v for k, v in u.to_dict().items() if k != "tokenCount"} for u in units]


def _assert_lossless(original: Transcript, result, archive: Archive) -> None:
    assert result.invariants == {"ok": True, "violations": []}
    assert not structure.pairs_intact(original.units, result.transcript.units)
    restored = archive.restore(result.transcript)
    assert _records(restored.units) == _records(original.units)


def test_default_chain_fits_and_restores(tmp_path: Path) -> None:
    t = _session()
    total = count_transcript(t, TOK).total
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(t, CompactSettings(limit=total // 3, tokenizer=TOK), archive=archive)
        assert result.changed and result.fits
        # one token under the guard's compact threshold: the guard passes the result
        assert result.tokens_after <= result.target == compaction_goal(total // 3)
        assert result.p1_kept == result.p1_total == 1
        _assert_lossless(t, result, archive)
    # system prompt, first and last requests verbatim
    by_id = {u.id: u for u in result.transcript.units}
    for uid in ("sys", "u0", f"q{11}", "plan"):
        assert by_id[uid].content == next(u.content for u in t.units if u.id == uid)


def test_fitting_transcript_is_unchanged() -> None:
    t = _session(2)
    result = compact(t, CompactSettings(limit=100000, tokenizer=TOK), archive=Archive(":memory:"))
    assert not result.changed and result.transcript is t and result.steps == []
    assert "unchanged" in result.summary_line()


def test_same_input_same_output(tmp_path: Path) -> None:
    t = _session()
    outs = []
    for name in ("a.db", "b.db"):
        with Archive(str(tmp_path / name)) as archive:
            r = compact(t, CompactSettings(limit=3000, tokenizer=TOK), archive=archive)
            outs.append([u.to_dict() for u in r.transcript.units])
    assert outs[0] == outs[1]


def test_recovery_error_raises_breaker_failed() -> None:
    t = _session()
    opts = ChainOptions(chain=("offload",), recovery_mode="error")
    with pytest.raises(BreakerFailed, match="BREAKER_FAILED"):
        compact(
            t, CompactSettings(limit=600, options=opts, tokenizer=TOK), archive=Archive(":memory:")
        )


@pytest.mark.parametrize("mode", ["fresh_start", "truncate"])
def test_recovery_modes_fit_and_keep_last_request(mode: str, tmp_path: Path) -> None:
    t = _session()
    opts = ChainOptions(chain=("offload",), recovery_mode=mode)
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(
            t, CompactSettings(limit=400, options=opts, tokenizer=TOK), archive=archive
        )
        assert result.recovery == mode and result.fits
        units = result.transcript.units
        assert units[0].id == "sys"
        assert units[-1].content == t.units[-1].content
        restored = archive.restore(result.transcript)
        assert _records(restored.units) == _records(t.units)
    if mode == "fresh_start":
        handover = next(u for u in units if u.type == "summary")
        assert "plan" in handover.content  # the P1 unit is named in the handover


def test_limit_below_system_prompt_is_a_clear_error() -> None:
    t = _session()
    t.units[0] = t.units[0].replace(content="rule " * 400)
    with pytest.raises(UsageError, match="system prompt and tool schemas alone take"):
        compact(t, CompactSettings(limit=100, tokenizer=TOK), archive=Archive(":memory:"))


def test_unknown_strategy_lists_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'squash'; known: .*summarize_old"):
        expand_chain(["squash"])
    assert expand_chain(["hybrid"]) == DEFAULT_CHAIN


@pytest.mark.parametrize("key", sorted(REAL))
def test_real_transcripts_default_chain(realdata: Path, key: str, tmp_path: Path) -> None:
    t = _load(realdata, key)
    total = count_transcript(t, TOK).total
    limit = max(total // 3, 2500)
    with Archive(str(tmp_path / "a.db")) as archive:
        settings = CompactSettings(limit=limit, tokenizer=TOK, use_usage=False)
        result = compact(t, settings, archive=archive)
        assert result.fits and result.tokens_after <= result.target
        _assert_lossless(t, result, archive)
        assert result.p1_kept == result.p1_total


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_each_strategy_alone_on_real_transcripts(realdata: Path, name: str, tmp_path: Path) -> None:
    """Each strategy as the whole chain (truncate as the safety net): invariants and expand hold."""
    for key in ("claude-code", "mini-swe-agent", "tau-bench", "codex"):
        t = _load(realdata, key)
        total = count_transcript(t, TOK).total
        opts = ChainOptions(chain=(name,), recovery_mode="truncate")
        with Archive(str(tmp_path / f"{name}-{key}.db")) as archive:
            result = compact(
                t,
                CompactSettings(
                    limit=max(total // 2, 2500), options=opts, tokenizer=TOK, use_usage=False
                ),
                archive=archive,
            )
            assert result.fits
            _assert_lossless(t, result, archive)


# --- property: expand(compact(x)) == x for every strategy ------------------------------------

words = st.sampled_from(
    "alpha beta gamma delta error path/to/file.py def class return fixed test".split()
)
text = st.lists(words, min_size=1, max_size=60).map(" ".join)


@st.composite
def sessions(draw: st.DrawFn) -> Transcript:
    units = [Unit(id="sys", role="system", content="system prompt")]
    n = draw(st.integers(min_value=1, max_value=8))
    for i in range(n):
        units.append(
            Unit(
                id=f"u{i}",
                role="user",
                content=draw(text),
                priority=draw(st.sampled_from([None, None, 1])),
            )
        )
        k = draw(st.integers(min_value=0, max_value=3))
        calls = [ToolCall(f"c{i}_{j}", "Bash", "{}") for j in range(k)]
        units.append(
            Unit(
                id=f"a{i}",
                role="assistant",
                content=draw(text),
                tool_calls=calls,
                type="tool_call" if k else "message",
            )
        )
        for j in range(k):
            body = draw(st.lists(text, min_size=1, max_size=40).map("\n".join))
            units.append(
                Unit(
                    id=f"r{i}_{j}",
                    role="tool",
                    type="tool_result",
                    content=body,
                    tool_call_id=f"c{i}_{j}",
                    name="Bash",
                )
            )
    units.append(Unit(id="last", role="user", content=draw(text)))
    return Transcript(units=units, id="prop")


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(t=sessions(), fraction=st.floats(min_value=0.2, max_value=0.9))
def test_expand_of_compact_is_identity(name: str, t: Transcript, fraction: float) -> None:
    total = count_transcript(t, TOK).total
    floor = count_transcript(t.replace(units=[t.units[0]]), TOK).total
    limit = max(int(total * fraction), floor + 200)
    archive = Archive(":memory:")
    result = compact(
        t,
        CompactSettings(
            limit=limit,
            options=ChainOptions(chain=(name,), recovery_mode="truncate"),
            tokenizer=TOK,
        ),
        archive=archive,
    )
    assert result.invariants["ok"], result.invariants
    assert not structure.pairs_intact(t.units, result.transcript.units)
    restored = archive.restore(result.transcript) if result.changed else t
    assert _records(restored.units) == _records(t.units)


def test_fresh_start_keeps_the_recent_work_that_fits(tmp_path: Path) -> None:
    """Handover of the dropped part, then the latest whole blocks: not just the last request."""
    t = _session()
    opts = ChainOptions(chain=("offload",), recovery_mode="fresh_start")
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(
            t, CompactSettings(limit=2500, options=opts, tokenizer=TOK), archive=archive
        )
        assert result.recovery == "fresh_start" and result.fits
        units = result.transcript.units
        # the first request word for word, the handover after it, then the recent work
        assert [u.id for u in units[:3]] == ["sys", t.units[1].id, "ctxkit-handover"]
        assert units[1].content == t.units[1].content
        assert units[2].content.startswith("[This session continues from earlier work")
        tail = units[3:]
        assert len(tail) > 1 and tail[-1].id == t.units[-1].id
        # the tail is the original's own suffix, verbatim and in order
        assert _records(tail) == _records(t.units[len(t.units) - len(tail) :])
        assert "plan" in units[2].content  # the dropped P1 unit is named in the handover
        assert _records(archive.restore(result.transcript).units) == _records(t.units)


def test_fresh_start_without_a_request_keeps_the_last_action_and_what_came_back(tmp_path: Path) -> None:
    """A log that opens with the agent's own summary and goes on from it, no request of the
    user's after it (a never-seen Claude Code session, restaurant-app): the fresh start keeps
    the latest units, the last action and its result among them, beside a handover of the
    summary; it kept the handover and the closing line (555 of 1,161 tokens here), the last
    action lost, a call too large for the minimal form's half of the room."""
    summary = " ".join(f"Step {i}: reviewed module m{i}.py and noted its latency." for i in range(200))
    todos = [{"content": f"Analyze the latency of endpoint /api/v{i}", "status": "pending"} for i in range(30)]
    t = Transcript(units=[
        Unit("s0", "user", type="summary", content="This session is being continued from a previous conversation.\n" + summary),
        Unit("a1", "assistant", content="I'll track the analysis.",
             tool_calls=[ToolCall("c1", "TodoWrite", json.dumps({"todos": todos}))]),
        Unit("r1", "tool", content="Todos have been modified successfully.", tool_call_id="c1"),
        Unit("a2", "assistant", content="5-hour limit reached."),
    ], id="no-request")
    budget = count_transcript(t, TOK).total // 3
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(t, CompactSettings(limit=budget, target=budget, tokenizer=TOK), archive=archive)
        assert result.recovery == "fresh_start" and result.fits
        units = result.transcript.units
        assert units[0].type == "summary" and "archived as" in units[0].content
        assert _records(units[1:]) == _records(t.units[1:])
        assert _records(archive.restore(result.transcript).units) == _records(t.units)


def test_fresh_start_tries_shorter_recent_runs_when_p1_names_need_room(tmp_path: Path) -> None:
    """Every unit P1: the handover must name each dropped one, so a shorter recent run is kept."""
    from ctxkit.simulate import generate

    t = generate("all_p1", seed=0)
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(t, CompactSettings(limit=4000, tokenizer=TOK), archive=archive)
        assert result.recovery == "fresh_start" and result.fits
        assert result.p1_kept >= result.p1_total // 3  # not just the last request
        handover = next(u for u in result.transcript.units if u.type == "summary")
        kept = {u.id for u in result.transcript.units}
        for u in t.units:
            if u.is_p1 and u.id not in kept:
                assert u.id in handover.content


def test_pinned_units_stay_byte_for_byte_and_the_new_summary_follows_them() -> None:
    """An agent loop's cached head (`CompactSettings.pinned`): the first request and the
    summary an earlier compaction left stay as they were, the new summary goes after them and
    does not roll the earlier one in; without pinning the two are merged into one."""
    from ctxkit.simulate import generate

    t = generate("growing_session", seed=1, tokens=12000)
    units = list(t.units)
    half = len(units) // 2
    settings = CompactSettings(limit=4000, target=3000, tokenizer=TOK)
    first = list(compact(t.replace(units=units[:half]), settings).transcript.units)
    head = max(k + 1 for k, u in enumerate(first) if u.type == "summary")
    grown = t.replace(units=[*first, *units[half:]])

    pinned = compact(grown, settings.replace(pinned=head))
    after = list(pinned.transcript.units)
    assert pinned.fits and pinned.recovery is None
    assert [(u.id, u.content) for u in after[:head]] == [(u.id, u.content) for u in first[:head]]
    assert after[head].type == "summary" and after[head].id != first[head - 1].id
    # it says it stands for what came after the summary above, whose own line stays as it was
    assert after[head].content.startswith("[Later work, compacted to fit the context after the summary above: ")
    assert first[head - 1].content.startswith("[This session continues from earlier work")
    assert [u.id for u in after].count(first[head - 1].id) == 1

    merged = list(compact(grown, settings).transcript.units)
    assert first[head - 1].id not in {u.id for u in merged}
    assert sum(u.type == "summary" for u in merged) == 1
