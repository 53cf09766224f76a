"""The compacted conversation reads as one: made-up units take the role that alternates with
their neighbours or join the message before, and what the goal did not need comes back."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from ctxkit.archive import Archive
from ctxkit.compaction import CompactSettings, compact
from ctxkit.compaction.arrange import arrange, give_back, made_up
from ctxkit.formats import read_path
from ctxkit.model import ToolCall, Unit
from ctxkit.strategies.base import Context, State
from ctxkit.tokens import CountOptions, count_transcript, get_tokenizer

TOK = get_tokenizer("cl100k_base")


def _summary(uid: str = "s") -> Unit:
    return Unit(uid, "user", "summary", "[summary]", meta={"strategy": "summarize_old", "refs": []})


def _call(uid: str, cid: str) -> list[Unit]:
    return [
        Unit(uid, "assistant", tool_calls=[ToolCall(cid, "bash", '{"command": "ls"}')]),
        Unit(uid + "r", "tool", content="a.py", tool_call_id=cid),
    ]


def test_a_summary_between_two_user_turns_is_the_assistant_s() -> None:
    units = [Unit("q1", "user", content="first"), _summary(), Unit("q2", "user", content="second")]
    out = arrange(units)
    assert out[1].role == "assistant" and not out[1].meta.get("join")
    assert out[0] is units[0] and out[2] is units[2]


def test_a_summary_before_an_assistant_step_joins_the_first_request() -> None:
    units = [Unit("sys", "system", content="sys"), Unit("q1", "user", content="first"), _summary(), *_call("a", "c1")]
    out = arrange(units)
    assert out[2].role == "user" and out[2].meta["join"] is True


def test_a_unit_opening_the_conversation_is_the_user_s_and_takes_the_next_user_turn() -> None:
    units = [Unit("sys", "system", content="sys"), _summary(), Unit("q", "user", content="go on")]
    out = arrange(units)
    assert out[1].role == "user" and not out[1].meta.get("join")
    assert out[2].meta["join"] is True and out[2].content == "go on"


def test_after_tool_results_a_note_before_an_assistant_step_joins_them() -> None:
    units = [Unit("q", "user", content="go"), *_call("a", "c1"), _summary(), *_call("b", "c2")]
    out = arrange(units)
    assert out[3].role == "user" and out[3].meta["join"] is True


def test_read_units_are_never_made_up() -> None:
    (t,) = list(read_path(sorted(glob.glob("/work/shared/realdata/openai-chat/*.json"))[0])) if glob.glob(
        "/work/shared/realdata/openai-chat/*.json") else [None]
    if t is None:
        pytest.skip("no real data beside the checkout")
    assert not any(made_up(u) for u in t.units)


def _state(units: list[Unit], target: int) -> State:
    ctx = Context(tokenizer=TOK, count_opts=CountOptions(), archive=None, transcript_id="t", query="")
    return State(tuple(units), target=target, ctx=ctx)


def test_give_back_restores_newest_first_within_the_goal() -> None:
    long = "word " * 200
    original = [Unit("q", "user", content="go"), Unit("a1", "assistant", content=long), Unit("a2", "assistant", content=long)]
    shrunk = [original[0], original[1].replace(content="short"), original[2].replace(content="short")]
    full = _state(original, 10_000).tokens()
    # room for one of the two: the newest comes back, the older stays short
    state = _state(shrunk, full - 150)
    back = give_back(state, original)
    assert back.units[2].content == long and back.units[1].content == "short"
    assert back.tokens() <= state.target
    # no room: nothing changes
    tight = _state(shrunk, _state(shrunk, 1).tokens())
    assert give_back(tight, original) is tight


REAL = sorted(
    f for f in glob.glob("/work/shared/realdata/*/*")
    if any(k in f for k in ("/claude-code/", "/codex/", "/openai-chat/", "/anthropic-messages/", "/mini-swe-agent/"))
)


@pytest.mark.slow
@pytest.mark.parametrize("path", REAL, ids=[Path(p).name[:40] for p in REAL])
def test_real_transcripts_compacted_to_a_third_alternate_and_land_on_the_target(path: str, tmp_path: Path) -> None:
    (t,) = list(read_path(path))
    n = count_transcript(t, TOK).total
    with Archive(str(tmp_path / "a.db")) as archive:
        result = compact(t, CompactSettings(limit=n, target=n // 3, tokenizer=TOK), archive=archive)
    units = result.transcript.units
    original_ids = [u.id for u in t.units]

    def turn(u: Unit) -> str:
        return "assistant" if u.role == "assistant" else "system" if u.role == "system" else "user"

    for a, b in zip(units, units[1:], strict=False):
        if b.meta.get("join") or turn(a) != turn(b) or a.role == "system":
            continue
        # a same-side pair the input had next to each other (two user records in a row...)
        assert a.id in original_ids and b.id in original_ids, (a.id, b.id)
        assert original_ids.index(b.id) == original_ids.index(a.id) + 1 or a.role == "tool" or b.role == "tool"
    if result.recovery is None and result.target < n:
        assert 0.8 <= result.tokens_after / result.target <= 1.0
