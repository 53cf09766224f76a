"""The fidelity measures on hand-made transcripts: each one caught failing, and passing."""

from __future__ import annotations

import json

from ctxkit.engines.methods import ENGINE_RULES as RULES
from ctxkit.fidelity import measures as fidelity
from ctxkit.fidelity.measures import Share
from ctxkit.model import ToolCall, Transcript, Unit


def _t(*units: Unit) -> Transcript:
    return Transcript(list(units))


def _summary(text: str, uid: str = "ctxkit-summary-1", **meta: object) -> Unit:
    return Unit(uid, "user", "summary", text, meta=dict(meta))


def _session() -> Transcript:
    """A small agent session: a request, a read of src/app.py, a JSON result, two requests."""
    return _t(
        Unit("s", "system", content="You are a coding agent."),
        Unit("u1", "user", content="Please fix the crash in the parser."),
        Unit(
            "a1",
            "assistant",
            content="Reading it.",
            tool_calls=[ToolCall("c1", "read", json.dumps({"path": "src/app.py"}))],
        ),
        Unit(
            "r1",
            "tool",
            "tool_result",
            "def main():\n    parse(src/app.py)  # see lib/util.py\n",
            tool_call_id="c1",
        ),
        Unit("a2", "assistant", tool_calls=[ToolCall("c2", "api", '{"q": "users"}')]),
        Unit("r2", "tool", "tool_result", json.dumps({"users": [1, 2, 3]}), tool_call_id="c2"),
        Unit("a3", "assistant", content="Fixed it."),
        Unit("u2", "user", content="Now add a test for it."),
        Unit("a4", "assistant", content="Added tests/test_app.py."),
        Unit("u3", "user", content="Thanks, run them."),
    )


def _keep(t: Transcript, *ids: str) -> list[Unit]:
    return [u for u in t.units if u.id in ids]


def test_share_ratio_and_sum() -> None:
    assert Share(1, 4).ratio == 0.25
    assert Share(0, 0).ratio == 1.0
    assert Share(1, 2) + Share(2, 3) == Share(3, 5)


def test_needles_present_or_lost() -> None:
    t = _session()
    truth = {"needles": [{"id": "n1", "pattern": r"\"users\": \[1, 2, 3\]"}]}
    assert fidelity.needles(t, truth) == Share(1, 1)
    dropped = t.replace(units=[u for u in t.units if u.id != "r2"])
    assert fidelity.needles(dropped, truth) == Share(0, 1)
    assert fidelity.needles(t, None) is None and fidelity.needles(t, {"needles": []}) is None


def test_files_trail_in_the_summary() -> None:
    t = _session()
    rest = _keep(t, "s", "u1", "a3", "u2", "a4", "u3")
    named = t.replace(units=[*rest[:2], _summary("Read src/app.py and fixed parse."), *rest[2:]])
    assert fidelity.files_trail(t, named, RULES) == Share(1, 1)  # lib/util.py: only in an output
    silent = t.replace(units=[*rest[:2], _summary("Fixed the parser."), *rest[2:]])
    assert fidelity.files_trail(t, silent, RULES) == Share(0, 1)


def test_files_trail_without_a_summary_looks_at_the_whole_context() -> None:
    t = _session()
    dropped = t.replace(units=_keep(t, "s", "u1", "a2", "r2", "a3", "u2", "a4", "u3"))
    assert fidelity.files_trail(t, dropped, RULES) == Share(0, 1)  # src/app.py went with a1, r1
    mentioned = dropped.replace(
        units=[*dropped.units[:-1], Unit("u3", "user", content="Thanks, run them on src/app.py.")]
    )
    assert fidelity.files_trail(t, mentioned, RULES) == Share(1, 1)
    assert fidelity.files_trail(t, t, RULES) == Share(0, 0)  # nothing removed: nothing to trail


def test_user_verbatim_in_a_message_or_quoted_in_a_summary() -> None:
    t = _session()
    quoted = _summary("User asked: Please fix the crash in the parser. Then work.")
    kept = t.replace(units=[t.units[0], quoted, *_keep(t, "u2", "a4", "u3")])
    v = fidelity.user_verbatim(t, kept, RULES, count=len)
    assert v.all == Share(3, 3)
    paraphrased = t.replace(
        units=[t.units[0], _summary("User wanted a parser fix."), *_keep(t, "u2", "a4", "u3")]
    )
    assert fidelity.user_verbatim(t, paraphrased, RULES, count=len).all == Share(2, 3)
    cut = t.replace(units=[*_keep(t, "s", "u1", "u2"), Unit("u3", "user", content="Thanks, [...]")])
    assert fidelity.user_verbatim(t, cut, RULES, count=len).all == Share(2, 3)
    echoed = t.replace(
        units=[*_keep(t, "s", "u1", "u2"), Unit("a5", "assistant", content="Thanks, run them.")]
    )
    assert fidelity.user_verbatim(t, echoed, RULES, count=len).all == Share(2, 3)  # not a user's


def test_user_verbatim_needs_the_whole_text_not_a_longer_word() -> None:
    t = _t(Unit("u1", "user", content="ok"), Unit("a1", "assistant", content="done"))
    inside = t.replace(units=[_summary("We look at the logs.")])
    assert fidelity.user_verbatim(t, inside, RULES, count=len).all == Share(0, 1)
    quoted = t.replace(units=[_summary('User said "ok".')])
    assert fidelity.user_verbatim(t, quoted, RULES, count=len).all == Share(1, 1)


def test_user_verbatim_budget_takes_the_newest_and_stops_at_the_first_too_big() -> None:
    t = _session()  # request lengths 35, 22, 17 characters
    assert [u.id for u in fidelity.newest_within(fidelity.user_requests(t), 40, len, RULES)] == [
        "u2",
        "u3",
    ]
    assert [u.id for u in fidelity.newest_within(fidelity.user_requests(t), 16, len, RULES)] == []
    lost_old = t.replace(units=_keep(t, "s", "u2", "a4", "u3"))
    v = fidelity.user_verbatim(t, lost_old, RULES, budget_tokens=40, count=len)
    assert v.all == Share(2, 3) and v.in_budget == Share(2, 2)
    lost_new = t.replace(units=_keep(t, "s", "u1", "u3"))
    assert fidelity.user_verbatim(t, lost_new, RULES, budget_tokens=40, count=len).in_budget == Share(1, 2)


def test_last_request_verbatim() -> None:
    t = _session()
    assert fidelity.last_request_verbatim(t, t)
    cut = t.replace(units=[*t.units[:-1], Unit("u3", "user", content="Thanks, [...]")])
    assert not fidelity.last_request_verbatim(t, cut)
    as_assistant = t.replace(
        units=[*t.units[:-1], Unit("x", "assistant", content="Thanks, run them.")]
    )
    assert not fidelity.last_request_verbatim(t, as_assistant)


def test_longer_placeholders_one_unit_and_a_run() -> None:
    t = _session()
    short = t.units[3].replace(type="placeholder", content="[read, 33 B]", meta={"ref": "ref-1"})
    long = t.units[3].replace(
        type="placeholder", content="[masked " + "x" * 60 + "]", meta={"ref": "ref-1"}
    )
    assert (
        fidelity.longer_placeholders(t, t.replace(units=[*t.units[:3], short, *t.units[4:]])) == []
    )
    assert fidelity.longer_placeholders(t, t.replace(units=[*t.units[:3], long, *t.units[4:]])) == [
        "r1"
    ]
    run = Unit(
        "ctxkit-removed-1",
        "user",
        "placeholder",
        "[2 messages removed: ref-2 ref-3 ref-4]",
        meta={"refs": ["ref-2", "ref-3"], "removed_ids": ["u3"]},
    )
    assert fidelity.longer_placeholders(t, t.replace(units=[*t.units[:-1], run])) == [
        "ctxkit-removed-1"
    ]
    run2 = Unit(
        "ctxkit-removed-2", "user", "placeholder", "[2 removed]", meta={"removed_ids": ["a4", "u3"]}
    )
    assert fidelity.longer_placeholders(t, t.replace(units=[*t.units[:-2], run2])) == []
    # a compressed call: a note in the content, the arguments shorter, the unit smaller
    a1 = t.units[2]
    big = a1.replace(tool_calls=[ToolCall("c1", "read", json.dumps({"path": "x" * 200}))])
    t2 = t.replace(units=[*t.units[:2], big, *t.units[3:]])
    noted = big.replace(
        content="Reading it. [compressed: ref-5]",
        tool_calls=[ToolCall("c1", "read", '{"path": "x[...]"}')],
        meta={"ref": "ref-5"},
    )
    assert (
        fidelity.longer_placeholders(t2, t2.replace(units=[*t.units[:2], noted, *t.units[3:]]))
        == []
    )
    grown = noted.replace(tool_calls=big.tool_calls, meta={"ref": "ref-5"})
    assert fidelity.longer_placeholders(
        t2, t2.replace(units=[*t.units[:2], grown, *t.units[3:]])
    ) == ["a1"]


def test_broken_json_counts_damage_not_placeholders() -> None:
    t = _session()
    r2 = t.units[5]
    elided = r2.replace(content='{"users": [1, {"...": "2 more items"}]}')
    assert fidelity.broken_json(t, t.replace(units=[*t.units[:5], elided, *t.units[6:]])) == []
    damaged = r2.replace(content='{"users": [1, ... 2 more items]}\n[compressed]')
    assert fidelity.broken_json(t, t.replace(units=[*t.units[:5], damaged, *t.units[6:]])) == ["r2"]
    masked = r2.replace(type="placeholder", content="[api output, 24 B]", meta={"ref": "ref-9"})
    assert fidelity.broken_json(t, t.replace(units=[*t.units[:5], masked, *t.units[6:]])) == []
    # a result that was not JSON before cannot break
    r1 = t.units[3].replace(content="def main(): [...]")
    assert fidelity.broken_json(t, t.replace(units=[*t.units[:3], r1, *t.units[4:]])) == []


def test_edited_calls() -> None:
    t = _session()
    assert fidelity.edited_calls(t, t) == []
    a1 = t.units[2]
    edited = a1.replace(
        tool_calls=[ToolCall("c1", "read", '{"path": "src/[... 3 lines omitted]"}')]
    )
    assert fidelity.edited_calls(t, t.replace(units=[*t.units[:2], edited, *t.units[3:]])) == ["c1"]
    renamed = a1.replace(tool_calls=[ToolCall("c1", "cat", a1.tool_calls[0].arguments)])
    assert fidelity.edited_calls(t, t.replace(units=[*t.units[:2], renamed, *t.units[3:]])) == [
        "c1"
    ]
    # a call removed whole with its result is not an edit
    assert (
        fidelity.edited_calls(t, t.replace(units=_keep(t, "s", "u1", "a3", "u2", "a4", "u3"))) == []
    )


def test_new_same_role_turns() -> None:
    t = _session()
    assert fidelity.new_same_role(t, t) == []  # u1 -> a1, r1 -> a2: no two of one role
    # dropping a3 puts r2 (tool) before u2 (user): different roles, fine
    assert fidelity.new_same_role(t, t.replace(units=[u for u in t.units if u.id != "a3"])) == []
    # dropping u2 puts a3 next to a4: two assistant turns the input did not have
    assert fidelity.new_same_role(t, t.replace(units=[u for u in t.units if u.id != "u2"])) == [
        ("a3", "a4")
    ]
    # a summary as its own user turn before the first request
    summary = _summary("Earlier: a fix.")
    before = t.replace(units=[t.units[0], summary, *t.units[1:]])
    assert fidelity.new_same_role(t, before) == [("ctxkit-summary-1", "u1")]
    # the same summary joined to the request's message is one turn
    joined = t.replace(
        units=[t.units[0], t.units[1], _summary("Earlier: a fix.", join=True), *t.units[2:]]
    )
    assert fidelity.new_same_role(t, joined) == []


def test_same_role_pairs_in_the_input_are_not_new() -> None:
    t = _t(
        Unit("u1", "user", content="one"),
        Unit("u2", "user", content="two"),
        Unit("a1", "assistant", content="three"),
        Unit("u3", "user", content="four"),
    )
    assert fidelity.new_same_role(t, t) == []
    placeholder = t.units[1].replace(type="placeholder", content="[x]", meta={"ref": "ref-1"})
    assert fidelity.new_same_role(t, t.replace(units=[t.units[0], placeholder, *t.units[2:]])) == []
    assert fidelity.new_same_role(t, t.replace(units=[t.units[0], t.units[3]])) == [("u1", "u3")]


def test_summary_after_the_first_request() -> None:
    t = _session()
    assert fidelity.summary_after_first_request(t, t)  # no summary
    after = t.replace(units=[*t.units[:2], _summary("Earlier: a fix."), *t.units[7:]])
    assert fidelity.summary_after_first_request(t, after)
    before = t.replace(units=[t.units[0], _summary("Earlier: a fix."), *t.units[1:2], *t.units[7:]])
    assert not fidelity.summary_after_first_request(t, before)
    request_gone = t.replace(units=[t.units[0], _summary("Earlier: a fix."), *t.units[7:]])
    assert not fidelity.summary_after_first_request(t, request_gone)


def test_measure_gathers_everything() -> None:
    t = _session()
    t.metadata["ground_truth"] = {"needles": [{"id": "n1", "pattern": "crash in the parser"}]}
    f = fidelity.measure(t, t, RULES, target=100, tokens_after=95, count=len)
    d = f.to_dict()
    assert d["needles"] == {"kept": 1, "total": 1}
    assert d["user_verbatim"]["all"] == {"kept": 3, "total": 3}
    assert d["last_request_verbatim"] and d["summary_after_first_request"]
    assert (
        d["longer_placeholders"]
        == d["broken_json"]
        == d["edited_calls"]
        == d["new_same_role"]
        == []
    )
    assert f.target_ratio == 0.95
    assert json.loads(json.dumps(d)) == d
