"""Each agent's policy (`recipes.policies`) checked by hand from its cited rule on small logs, and
the session replay (`recipes.session`) on every real agent log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxkit.counting import Fit
from ctxkit.formats import ReadOptions, read_path
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.recipes import anthropic_policies as AP
from ctxkit.recipes import open_source_policies as OP
from ctxkit.recipes.baselines import CLEARED
from ctxkit.recipes.policy_base import Env
from ctxkit.recipes.session import (
    AGENTS,
    CTXKIT,
    ReplayOptions,
    SessionRequest,
    replay_session,
    request_for,
)
from ctxkit.replay import call_points
from ctxkit.structure import is_request
from ctxkit.tokens import get_tokenizer

TOK = get_tokenizer("cl100k_base")


def _fit() -> Fit:
    return Fit(TOK)


def _summarize(units, target, previous=None):  # type: ignore[no-untyped-def]
    return f"SUMMARY of {len(units)} units"


def _env(window: int, max_output: int = 0, t: Transcript | None = None) -> Env:
    return Env(window, max_output, _fit(), t or Transcript(units=[]), _summarize)


def _session(
    turns: int, result_words: int = 400, request_words: int = 20, read: bool = False
) -> Transcript:
    """A coding session: a request per turn, then a shell call (or a Read) and its output."""
    units: list[Unit] = [Unit("sys", "system", content="You are a coding agent.")]
    for k in range(turns):
        units.append(
            Unit(
                f"u{k}",
                "user",
                content=f"request {k}: please fix module_{k} " + "detail " * request_words,
            )
        )
        call = (
            ToolCall(f"c{k}", "Read", json.dumps({"file_path": f"/repo/src/mod_{k}.py"}))
            if read
            else ToolCall(f"c{k}", "bash", json.dumps({"command": f"cat src/mod_{k}.py"}))
        )
        units.append(Unit(f"a{k}", "assistant", content=f"Looking at mod_{k}.", tool_calls=[call]))
        units.append(
            Unit(
                f"r{k}",
                "tool",
                content=f"line of mod_{k} " * result_words,
                tool_call_id=f"c{k}",
                name="bash",
            )
        )
        units.append(Unit(f"d{k}", "assistant", content=f"Done with {k}."))
    return Transcript(units=units, id="hand")


def _first_call_at_or_over(t: Transcript, trigger: int) -> int:
    """By hand: the first model call whose context (everything so far) reaches `trigger`."""
    fit = _fit()
    for k, i in enumerate(call_points(t.units)):
        if fit.total(t, t.units[:i]) >= trigger:
            return k
    raise AssertionError("never reached")


def _request(agents: tuple[str, ...], window: int, max_output: int = 0) -> SessionRequest:
    return SessionRequest(
        agents=agents, window=window, max_output=max_output, summarizer=_summarize, unlogged=0
    )


# --- Codex CLI ---------------------------------------------------------------------------------


def test_codex_compacts_at_nine_tenths_and_keeps_requests_and_the_handoff_summary() -> None:
    t = _session(12)
    window = 16_000
    table = replay_session(t, _request(("codex",), window))
    run = table.runs[0]
    first = run.compaction_log[0]
    assert first.call == _first_call_at_or_over(t, window * 9 // 10)
    assert run.trigger == 14_400
    # the compacted history: the system prompt, every request so far (well under 20k), the summary
    fit = _fit()
    assert first.tokens_before >= 14_400
    kept = [u for u in t.units[: first.unit_index] if u.role in ("system", "user")]
    text = OP.CODEX_PREFIX + "\n" + f"SUMMARY of {first.unit_index} units"
    assert first.tokens_after == fit.total(
        t, [*kept, Unit("x", "user", type="summary", content=text)]
    )


def test_codex_history_takes_requests_newest_first_within_20k() -> None:
    env = _env(1_000_000)
    requests = [Unit(f"u{k}", "user", content=f"ask {k} " + "word " * 6_000) for k in range(6)]
    out = OP.codex_history([Unit("s", "system", content="sys"), *requests], "S", env)
    kept = [u for u in out if u.role == "user" and u.type != "summary"]
    whole = [u for u in kept if u in requests]
    assert [u.id for u in whole] == ["u3", "u4", "u5"]  # 3 x ~6k tokens fit; the 4th is cut
    cut = kept[0]
    assert cut.id == "u2" and "tokens truncated" in cut.content
    assert sum(TOK.count(u.content) for u in whole) <= OP.CODEX_USER_TOKENS
    assert out[-1].type == "summary" and out[-1].content == "S" and out[0].role == "system"


# --- Claude Code -------------------------------------------------------------------------------


def test_claude_code_fires_at_window_less_output_reserve_less_13k() -> None:
    t = _session(40, result_words=300)
    window, max_output = 60_000, 8_000
    trigger = window - min(max_output, 20_000) - 13_000
    run = replay_session(t, _request(("claude-code",), window, max_output)).runs[0]
    assert run.trigger == trigger == 39_000
    first = run.compaction_log[0]
    assert first.call == _first_call_at_or_over(t, trigger)
    assert first.tokens_after < trigger  # what it keeps leaves room to work


def test_claude_code_keeps_summary_recent_messages_and_rereads_files() -> None:
    t = _session(40, result_words=300, read=True)
    env = _env(60_000, 8_000, t)
    ctx = list(t.units[:120])
    step = AP.claude_code(ctx, env)
    assert [e.kind for e in step.edits] == ["compaction"]
    summary = step.context[1]
    assert summary.type == "summary" and summary.content.startswith(AP.CC_PREFIX)
    recent = [u for u in step.context if u.id in {v.id for v in ctx}][1:]  # system first
    assert recent == ctx[len(ctx) - len(recent) :]  # the newest messages, verbatim and in order
    fit = _fit()
    assert sum(fit.unit(u) for u in recent) <= AP.CC_RECENT["max_tokens"]
    files = [u for u in step.context if u.type == "code"]
    # the 5 newest files read before what is kept, newest first, each with what the read returned
    kept_ids = {u.id for u in recent}
    older_reads = [int(u.id[1:]) for u in ctx if u.id.startswith("r") and u.id not in kept_ids]
    expected = sorted(older_reads, reverse=True)[: AP.CC_FILES]
    assert [u.content.split(" was read")[0] for u in files] == [
        f"Note: /repo/src/mod_{k}.py" for k in expected
    ]
    assert all(f"line of mod_{k}" in u.content for k, u in zip(expected, files, strict=True))


def test_claude_code_microcompact_after_an_idle_hour_keeps_the_newest_five_results() -> None:
    t = _session(8, result_words=50)
    ctx = [u.replace(timestamp=1000.0 + k) for k, u in enumerate(t.units)]
    env = _env(1_000_000, 8_000, t)
    env.last_answer, env.now = 1000.0, 1000.0 + 3601
    step = AP.claude_code(ctx, env)
    cleared = [u.id for u in step.context if u.content == CLEARED]
    assert cleared == ["r0", "r1", "r2"] and [e.kind for e in step.edits] == ["microcompact"]
    env.now = 1000.0 + 3599  # within the hour: the cache is warm, nothing is cleared
    assert AP.claude_code(ctx, env).edits == []


# --- Gemini CLI ---------------------------------------------------------------------------------


def test_gemini_split_follows_find_compress_split_point() -> None:
    u = lambda i, role, n, calls=(): Unit(f"m{i}", role, content="x" * n, tool_calls=list(calls))  # noqa: E731
    history = [u(0, "user", 100), u(1, "assistant", 100), u(2, "user", 100), u(3, "assistant", 700)]
    # characters 140, 140, 140, 740 (40 for the JSON around each): 70% is 812, reached at no user
    # message, and the history ends on an answer without calls: everything is compressed
    assert OP.gemini_split(history) == 4
    history[3] = u(3, "assistant", 700, [ToolCall("c", "run", "{}")])
    assert OP.gemini_split(history) == 2  # ...else the last user message seen
    history = [u(0, "user", 700), u(1, "assistant", 100), u(2, "user", 100), u(3, "assistant", 100)]
    assert OP.gemini_split(history) == 2  # 840 >= 812 before m2


def test_gemini_masks_tool_outputs_past_the_newest_50k() -> None:
    units: list[Unit] = []
    for k in range(12):
        units.append(Unit(f"a{k}", "assistant", tool_calls=[ToolCall(f"c{k}", "read_file", "{}")]))
        units.append(
            Unit(
                f"r{k}", "user", content=f"out {k} " + "lorem ipsum " * 4_000, tool_call_id=f"c{k}"
            )
        )
    env = _env(1_000_000)
    fit = env.fit
    # by hand: newest first, the last Content (r11) never counted; the result that crosses 50k
    # and every older one can go
    protected, boundary, expected = 0, False, []
    for k in range(10, -1, -1):
        cost = fit.unit(units[2 * k + 1])
        if not boundary:
            protected += cost
            if protected <= OP.GEMINI_PROTECT:
                continue
            boundary = True
        expected.append(f"r{k}")
    out, n = OP.gemini_mask(units, env)
    masked = [u.id for u in out if u.content.startswith("<tool_output_masked>")]
    assert sorted(masked) == sorted(expected) and n == len(expected) > 0
    assert all(len(u.content) < 1_000 for u in out if u.id in masked)


# --- OpenHands ----------------------------------------------------------------------------------


def test_openhands_condenses_past_240_events_to_first_two_summary_and_newest_117() -> None:
    t = _session(70, result_words=5, request_words=2)  # 281 units, each one event
    run = replay_session(t, _request(("openhands",), 10_000_000)).runs[0]
    first = run.compaction_log[0]
    # by hand: the first call with more than 240 events in the view
    points = call_points(t.units)
    assert first.unit_index == next(i for i in points if i > 240)
    env = _env(10_000_000, 0, t)
    step = OP.openhands(list(t.units[: first.unit_index]), env)
    out = step.context
    assert [u.id for u in out[:2]] == ["sys", "u0"] and out[2].type == "summary"
    assert len(out) - 3 <= 240 // 2 - 2 - 1
    assert out[3:] == list(t.units[first.unit_index - (len(out) - 3) : first.unit_index])


# --- opencode -----------------------------------------------------------------------------------


def test_opencode_prunes_outputs_beyond_40k_when_it_saves_20k() -> None:
    t = _session(12, result_words=2_500)  # ~5k tokens per output
    env = _env(1_000_000, 0, t)
    ctx = list(t.units)
    out, n = OP.opencode_prune(ctx, env)
    # by hand: skip the two newest user turns, then sum outputs newest first; past 40k they go
    total, expected = 0, []
    for k in range(9, -1, -1):
        cost = TOK.count(ctx[4 * k + 3].content)
        total += cost
        if total > OP.OPENCODE_PROTECT:
            expected.append(f"r{k}")
    assert sorted(u.id for u in out if u.content == CLEARED) == sorted(expected) and n == len(
        expected
    )
    small = _session(12, result_words=200)
    assert OP.opencode_prune(list(small.units), _env(1_000_000, 0, small)) == (list(small.units), 0)


# --- Anthropic API ------------------------------------------------------------------------------


def test_clear_tool_uses_clears_all_but_three_server_side_over_100k() -> None:
    t = _session(40, result_words=1_200)
    env = _env(1_000_000, 0, t)
    ctx = list(t.units)
    assert env.tokens(ctx) > AP.CLEAR_TRIGGER
    step = AP.anthropic_clear_tool_uses(ctx, env)
    assert step.context == ctx  # the client keeps its history
    assert step.sent is not None
    kept = [u.id for u in step.sent if u.role == "tool" and u.content != CLEARED]
    assert kept == ["r37", "r38", "r39"]
    assert AP.anthropic_clear_tool_uses(ctx[:40], env).edits == []  # under 100k: nothing


def test_server_compaction_keeps_the_summary_only() -> None:
    t = _session(60, result_words=1_000)
    env = _env(1_000_000, 0, t)
    step = AP.anthropic_compaction(list(t.units), env)
    assert [u.role for u in step.context] == ["system", "assistant"] and step.context[
        1
    ].type == "summary"


# --- the replay ---------------------------------------------------------------------------------


def test_every_agent_replays_and_the_table_holds_its_figures() -> None:
    t = _session(40, result_words=300)
    table = replay_session(
        t, SessionRequest(agents=AGENTS, window=30_000, max_output=4_000, unlogged=0)
    )
    assert [r.agent for r in table.runs] == list(AGENTS)
    calls = len(call_points(t.units))
    for r in table.runs:
        d = r.to_dict()
        assert d["model_calls"] == calls and d["tokens_sent"] == sum(d["call_tokens"])
        assert d["tokens_sent"] <= table.baseline.tokens_sent
        if r.agent in ("claude-code", "codex", "opencode", "openhands", CTXKIT):
            assert r.compactions > 0 and d["probes_kept_mean"] is not None
            assert all(0 <= c.probes.recall <= 1 for c in r.compaction_log if c.probes)
    assert table.baseline.over_window > 0


def test_unknown_agent_names_the_known_ones() -> None:
    with pytest.raises(Exception, match="claude-code"):
        replay_session(_session(2), SessionRequest(agents=("cursor",)))


AGENT_LOG_DIRS = (
    "claude-code", "codex", "gemini-cli", "opencode", "openhands", "copilot-cli", "aider",
    "mini-swe-agent", "swe-agent",
)
_REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
_LOGS = sorted(
    f"{d}/{p.name}"
    for d in AGENT_LOG_DIRS
    if (_REALDATA / d).is_dir()
    for p in (_REALDATA / d).iterdir()
    if p.is_file()
)
# the long sessions outgrow the windows: every summarizing agent compacts on them
# Logs that reach the agents' triggers in the window of the model they record (Codex runs the
# savekirk log's gpt-5.4 with 272,000 tokens: its 83k never reaches one)
_LONG = {
    "claude-code/FSM1__cipher-box__checkpoints-v1__af-1dd25ebb3e-8@9db16e5e.jsonl",
}


@pytest.mark.parametrize("rel", _LOGS or ["(no realdata)"])
def test_every_agent_runs_on_every_real_agent_log(realdata: Path, rel: str) -> None:
    """What `ctxkit replay --as all LOG` does: the window of the model the log names (else the
    default), what the log never shows taken from its recorded usage."""
    for t in list(read_path(str(realdata / rel), ReadOptions(include_compacted=True)))[:1]:
        table = replay_session(t, request_for(t, ReplayOptions(agents=AGENTS)))
        assert [r.agent for r in table.runs] == list(AGENTS)
        for r in table.runs:
            assert len(r.call_tokens) == len(table.baseline.call_tokens) > 0, r.agent
            assert r.tokens_sent <= table.baseline.tokens_sent and r.final is not None
            for c in r.compaction_log:
                assert c.probes is not None and c.tokens_after <= c.tokens_before, r.agent
            if rel in _LONG and r.agent in (
                "claude-code",
                "codex",
                "opencode",
                "openhands",
                CTXKIT,
            ):
                assert r.compactions > 0, r.agent


def test_codex_figures_on_a_small_real_log_by_hand(realdata: Path) -> None:
    """A real Claude Code session (templar, 30 messages, 29.6k tokens) under Codex's rule with a
    20k window: the first compaction comes at the first model call whose context reaches
    0.9 x 20,000, and
    leaves the system prompt, every request so far (well under Codex's 20k) and the summary."""
    path = realdata / "claude-code/conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl"
    (t,) = list(read_path(str(path), ReadOptions()))
    run = replay_session(t, _request(("codex",), 20_000, 2_000)).runs[0]
    assert run.trigger == 18_000
    first = run.compaction_log[0]
    assert first.call == _first_call_at_or_over(t, 18_000)
    assert first.tokens_before == _fit().total(t, t.units[: first.unit_index])
    before = t.units[: first.unit_index]
    requests = [u for u in before if u.role == "system" or (is_request(u) and u.type != "summary")]
    assert sum(TOK.count(u.content) for u in requests if u.role != "system") < OP.CODEX_USER_TOKENS
    text = OP.CODEX_PREFIX + "\n" + f"SUMMARY of {first.unit_index} units"
    assert first.tokens_after == _fit().total(
        t, [*requests, Unit("x", "user", type="summary", content=text)]
    )
    # every call before it sent everything so far; the one after it sent what Codex kept
    calls = call_points(t.units)
    assert run.call_tokens[: first.call] == [
        _fit().total(t, t.units[:i]) for i in calls[: first.call]
    ]


def test_a_codex_log_replays_under_the_window_it_records(realdata: Path) -> None:
    """The replay's window is the one budget resolver's (`budget.resolve.log_target`): a Codex
    rollout records what it allows the model (95% of the window), so gpt-5.4's 272,000 under
    Codex, not the 1,050,000 models.toml lists for the model through the API."""
    from ctxkit.budget.resolve import log_target

    path = next((realdata / "codex").glob("savekirk__session-bridge*.jsonl"))
    (t,) = list(read_path(str(path)))
    request = request_for(t, ReplayOptions(agents=("codex",)))
    target = log_target(t)
    assert target is not None and request.window == target.context_window == 272_000
    assert request_for(t, ReplayOptions(agents=("codex",), window=50_000)).window == 50_000
