"""OpenHands event streams and evaluation output: read, count, compact, expand, write back.

Every real file under ../shared/realdata/openhands goes through the CLI (count, compact to a
third with an archive, expand back); hand-made streams cover what the real files lack: JSONL
streams, datasets of evaluation lines, condensations, parallel calls, unpaired observations
and bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from conftest import REALDATA

from ctxkit.cli import cli
from ctxkit.errors import InputError
from ctxkit.formats import (
    ReadOptions,
    ReadStats,
    detect_format,
    read_path,
    read_text,
    write_transcripts,
)
from ctxkit.formats.openhands import COMPACTED
from ctxkit.formats.sdk import problems
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.structure import check
from ctxkit.tokens import count_transcript

FOLDER = REALDATA / "openhands"
REAL = sorted(p for p in FOLDER.iterdir() if p.suffix in (".json", ".jsonl")) if FOLDER.is_dir() else []


def written(ts: list[Transcript] | Transcript, fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts([ts] if isinstance(ts, Transcript) else ts, buf, fmt)
    return buf.getvalue()


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def events_of(text: str) -> list[dict[str, Any]]:
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [orjson.loads(x) for x in text.splitlines() if x.strip()]
    return doc["history"] if isinstance(doc, dict) else doc


def errors(t: Transcript) -> list[str]:
    return [str(p) for p in check(t) if p.severity == "error"]


# ---------------------------------------------------------------- real files


@pytest.mark.parametrize("path", REAL or [None], ids=lambda p: p.name[:60] if p else "absent")
def test_real_file_reads_counts_compacts_and_expands(path: Path | None, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if path is None:
        pytest.skip("../shared/realdata is absent")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.json"
    src.write_bytes(path.read_bytes())
    original_doc = orjson.loads(path.read_bytes())

    (t,) = read_path(str(src))
    assert t.source_format == "openhands" and t.units
    assert errors(t) == []
    assert problems("openhands", path.read_text()) == []
    history = original_doc["history"] if isinstance(original_doc, dict) else original_doc
    if history[0].get("action") == "system":
        assert t.units[0].role == "system" and t.units[0].content == history[0]["args"]["content"]
        assert t.tools == history[0]["args"]["tools"]
    if isinstance(original_doc, dict) and "instance_id" in original_doc:
        assert t.id == original_doc["instance_id"]
    # untouched: the same events back, event for event
    assert orjson.loads(written(t)) == original_doc

    result = run("count", "in.json")
    assert result.exit_code == 0, result.output
    counted = json.loads(result.stdout.splitlines()[-1])
    assert counted["format"] == "openhands" and counted["units"] == len(t.units)
    assert counted["system"] == (count_transcript(t).regions["system"])
    assert (counted["system"] > 0) == (history[0].get("action") == "system")
    by_role = [json.loads(x) for x in run("count", "in.json", "--by", "role").stdout.splitlines()]
    total = next(r for r in by_role if r["role"] == "total")["tokens"]
    assert total == sum(r["tokens"] for r in by_role if r["role"] != "total")
    assert total == count_transcript(t).total

    before = count_transcript(t).total
    target = before // 3
    result = run("compact", "in.json", "--limit", str(target), "--target", str(target), "--no-usage", "-o", "small.json")
    assert result.exit_code == 0, result.output
    small_text = (tmp_path / "small.json").read_text()
    assert problems("openhands", small_text) == []
    (small,) = read_path(str(tmp_path / "small.json"))
    assert small.source_format == "openhands" and errors(small) == []
    assert count_transcript(small).total <= target
    assert (tmp_path / "small.json.ctx.db").exists()

    result = run("expand", "small.json", "-o", "back.json")
    assert result.exit_code == 0, result.output
    back = (tmp_path / "back.json").read_text()
    assert back == written(list(read_path(str(src))))
    assert orjson.loads(back) == original_doc


# ---------------------------------------------------------------- hand-made streams


def ev(eid: int, **fields: Any) -> dict[str, Any]:
    return {"id": eid, "timestamp": f"2025-01-01T00:00:{eid:02d}", **fields}


def response(rid: str, text: str, calls: list[tuple[str, str, str]], prompt: int = 100) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": text,
        "tool_calls": [{"index": k, "id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                       for k, (cid, name, args) in enumerate(calls)]}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 5}}


def run_action(eid: int, cid: str, command: str, thought: str = "", rid: str | None = None,
               calls: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    calls = calls or [(cid, "execute_bash", json.dumps({"command": command}))]
    meta = {"function_name": "execute_bash", "tool_call_id": cid,
            "model_response": response(rid or f"r{eid}", thought, calls, prompt=100 * eid),
            "total_calls_in_response": len(calls)}
    return ev(eid, source="agent", message=f"Running command: {command}", action="run", tool_call_metadata=meta,
              args={"command": command, "is_input": False, "thought": thought, "blocking": False})


def run_obs(eid: int, cause: int, cid: str, output: str) -> dict[str, Any]:
    return ev(eid, source="agent", message="Command executed.", cause=cause, observation="run",
              tool_call_metadata={"function_name": "execute_bash", "tool_call_id": cid,
                                  "model_response": {"id": "x", "choices": []}, "total_calls_in_response": 1},
              content=output, extras={"command": "ls", "metadata": {"exit_code": 0}}, success=True)


def message(eid: int, source: str, text: str) -> dict[str, Any]:
    return ev(eid, source=source, message=text, action="message",
              args={"content": text, "image_urls": None, "wait_for_response": False})


SYSTEM = ev(0, source="agent", message="You are OpenHands.", action="system",
            args={"content": "You are OpenHands.", "tools": [{"type": "function", "function": {
                "name": "execute_bash", "parameters": {"type": "object", "properties": {}}}}],
                  "openhands_version": "0.35.0", "agent_class": "CodeActAgent"})


def stream() -> list[dict[str, Any]]:
    return [
        SYSTEM,
        message(1, "user", "Fix the failing test."),
        ev(2, source="user", message="Retrieving content", action="recall", args={"recall_type": "workspace_context",
                                                                                 "query": "Fix", "thought": ""}),
        ev(3, source="environment", message="Added workspace context", cause=2, observation="recall",
           content="Added workspace context", extras={"recall_type": "workspace_context", "date": "2025-01-01",
                                                      "microagent_knowledge": [{"name": "gh", "trigger": "git",
                                                                                "content": "Use the API."}]}),
        run_action(4, "c1", "pytest -x", "Run the tests first."),
        run_obs(5, 4, "c1", "E   AssertionError\n" * 40),
        ev(6, source="environment", message="", observation="agent_state_changed", content="",
           extras={"agent_state": "running"}),
        run_action(7, "c2", "cat a.py", "Look at the code."),
        run_obs(8, 7, "c2", "def f():\n    return 1\n" * 30),
        ev(9, source="agent", message="Done.", action="finish",
           args={"final_thought": "Fixed.", "outputs": {}, "thought": "The test passes now."}),
    ]


def lines(events: list[dict[str, Any]]) -> str:
    return "".join(orjson.dumps(e).decode() + "\n" for e in events)


def test_event_stream_as_jsonl_reads_and_writes_back_byte_for_byte() -> None:
    text = lines(stream())
    stats = ReadStats()
    (t,) = read_text(text, path="s.jsonl", stats=stats)
    assert (t.source_format, t.layout) == ("openhands", "lines")
    assert [(u.role, u.type if u.type in ("tool_call", "summary") else "") for u in t.units] == [
        ("system", ""), ("user", ""), ("user", ""), ("assistant", "tool_call"), ("tool", ""),
        ("assistant", "tool_call"), ("tool", ""), ("assistant", "")]
    assert t.units[2].content.startswith("<RUNTIME_INFORMATION>") and "Use the API." in t.units[2].content
    assert t.units[3].content == "Run the tests first."
    assert t.units[3].tool_calls == [ToolCall("c1", "execute_bash", '{"command": "pytest -x"}')]
    assert (t.units[4].tool_call_id, t.units[4].name) == ("c1", "execute_bash")
    assert t.units[-1].content == "The test passes now."
    assert t.tools == SYSTEM["args"]["tools"]
    assert stats.skipped_non_message == {"action:recall": 1, "observation:agent_state_changed": 1}
    assert [c["input_tokens"] for c in t.metadata["provider_usage"]["calls"]] == [400, 700]
    assert written(t) == text
    assert problems("openhands", text) == []
    assert detect_format(stream()) == "openhands"


def test_evaluation_dataset_of_two_lines() -> None:
    rows = [{"instance_id": f"repo__{n}", "instruction": "Fix it.", "history": stream(), "metrics": {},
             "test_result": {"git_patch": ""}} for n in (1, 2)]
    text = "".join(orjson.dumps(r).decode() + "\n" for r in rows)
    ts = read_text(text, path="output.jsonl")
    assert [(t.id, t.layout, t.line) for t in ts] == [("repo__1", "dataset", 1), ("repo__2", "dataset", 2)]
    assert all(t.envelope["instruction"] == "Fix it." for t in ts)
    assert [orjson.loads(x) for x in written(ts).splitlines()] == rows
    assert problems("openhands", written(ts)) == []


def test_changed_units_keep_their_events_and_made_up_units_become_events() -> None:
    (t,) = read_text(lines(stream()), path="s.jsonl")
    units = list(t.units)
    units[4] = units[4].replace(content="[execute_bash output, archived as ref-1]")  # a masked result
    units[3] = units[3].replace(content="Tests first.")  # the assistant's text
    summary = Unit(id="sum", role="user", type="summary", content="Earlier: tests ran (ref-2).")
    note = Unit(id="n", role="assistant", content="Next, the code.")
    out = written(t.replace(units=[*units[:5], summary, note, *units[5:]]))
    assert problems("openhands", out) == []
    events = events_of(out)
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids))
    by_kind = {(e.get("action") or e.get("observation")): e for e in events}
    assert by_kind["condense"]["content"] == "Earlier: tests ran (ref-2)."
    assert by_kind["message"]["args"]["content"] in ("Fix the failing test.", "Next, the code.")
    obs = [e for e in events if e.get("observation") == "run"]
    assert obs[0]["content"] == "[execute_bash output, archived as ref-1]"
    first = next(e for e in events if e.get("action") == "run")
    assert first["args"]["thought"] == "Tests first."
    assert first["tool_call_metadata"]["model_response"]["choices"][0]["message"]["content"] == "Tests first."
    actions = {e["tool_call_metadata"]["tool_call_id"]: e["id"] for e in events if e.get("action") == "run"}
    assert [o["cause"] for o in obs] == [actions["c1"], actions["c2"]]  # causes follow the new ids
    (back,) = read_text(out, path="s.jsonl")
    assert [u.content for u in back.units] == [u.content for u in [*units[:5], summary, note, *units[5:]]]
    assert back.units[5].type == "summary"


def test_made_up_tool_result_and_call_from_another_format() -> None:
    t = Transcript(units=[
        Unit(id="s", role="system", content="Be brief."),
        Unit(id="u", role="user", content="List files."),
        Unit(id="a", role="assistant", content="Looking.", tool_calls=[ToolCall("k1", "ls", '{"path": "."}'),
                                                                      ToolCall("k2", "cat", '{"path": "a"}')]),
        Unit(id="r1", role="tool", content="a.py", tool_call_id="k1", name="ls"),
        Unit(id="r2", role="tool", content="print(1)", tool_call_id="k2", name="cat"),
        Unit(id="b", role="assistant", content="One file."),
    ], source_format="openai", tools=[{"type": "function", "function": {"name": "ls", "parameters": {}}}])
    out = written(t, "openhands")
    assert problems("openhands", out) == []
    events = events_of(out)
    assert [e.get("action") or e.get("observation") for e in events] == [
        "system", "message", "call_tool_mcp", "call_tool_mcp", "mcp", "mcp", "message"]
    assert events[0]["args"]["tools"] == t.tools
    (back,) = read_text(out, "openhands")
    assert [(u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id) for u in back.units] == [
        ("system", "Be brief.", [], None), ("user", "List files.", [], None),
        ("assistant", "Looking.", [{"id": "k1", "name": "ls", "arguments": '{"path": "."}'}], None),
        ("assistant", "", [{"id": "k2", "name": "cat", "arguments": '{"path": "a"}'}], None),
        ("tool", "a.py", [], "k1"), ("tool", "print(1)", [], "k2"), ("assistant", "One file.", [], None)]
    assert len(back.metadata.get("provider_usage", {}).get("calls", [])) == 0


def test_parallel_calls_share_one_response() -> None:
    calls = [("p1", "execute_bash", '{"command": "ls"}'), ("p2", "execute_bash", '{"command": "pwd"}')]
    events = [message(1, "user", "Look around."),
              run_action(2, "p1", "ls", "Two at once.", rid="R", calls=calls), run_obs(3, 2, "p1", "a.py"),
              run_action(4, "p2", "pwd", "Two at once.", rid="R", calls=calls), run_obs(5, 4, "p2", "/w")]
    (t,) = read_text(json.dumps(events), path="p.json")
    assert [(u.content, [c.id for c in u.tool_calls]) for u in t.units[1:]] == [
        ("Two at once.", ["p1"]), ("a.py", []), ("", ["p2"]), ("/w", [])]
    assert len(t.metadata["provider_usage"]["calls"]) == 1  # one model call
    units = list(t.units)
    units[1] = units[1].replace(content="Both.")
    out = events_of(written(t.replace(units=units)))
    texts = [e["tool_call_metadata"]["model_response"]["choices"][0]["message"]["content"]
             for e in out if e.get("action") == "run"]
    assert texts == ["Both.", "Both."]  # OpenHands keeps the last action's copy of the response


def condensed_stream(offset: int = 2) -> list[dict[str, Any]]:
    base = stream()
    cond = ev(10, source="agent", message="Summary", action="condensation",
              args={"forgotten_event_ids": None, "forgotten_events_start_id": 4, "forgotten_events_end_id": 5,
                    "summary": "The tests failed on an assertion.", "summary_offset": offset})
    return [*base[:9], cond, run_action(11, "c3", "pytest", "Again."), run_obs(12, 11, "c3", "1 passed"),
            {**base[9], "id": 13}]


def test_condensation_is_read_as_openhands_shows_it() -> None:
    stats = ReadStats()
    (t,) = read_text(json.dumps(condensed_stream()), path="c.json", stats=stats)
    assert [u.type == "summary" for u in t.units].index(True) == 2  # system, user, then the summary
    assert t.units[2].content == "The tests failed on an assertion."
    assert stats.skipped_non_message[COMPACTED] == 2
    assert stats.skipped_non_message["action:condensation"] == 1
    assert "Run the tests first." not in [u.content for u in t.units]
    assert errors(t) == []
    assert orjson.loads(written(t)) == condensed_stream()
    (full,) = read_text(json.dumps(condensed_stream()), ReadOptions(include_compacted=True), path="c.json")
    assert len(full.units) == len(t.units) + 2  # the forgotten call and result, read back
    assert orjson.loads(written(full)) == condensed_stream()


def test_condensation_after_compaction_stays_consistent() -> None:
    (t,) = read_text(json.dumps(condensed_stream()), path="c.json")
    units = list(t.units)
    # a placeholder before the summary shifts every later id; the summary is changed
    made = Unit(id="m", role="user", type="placeholder", content="[1 turn archived as ref-9]")
    i = next(k for k, u in enumerate(units) if u.type == "summary")
    units[i] = units[i].replace(content="Shorter summary.")
    out = events_of(written(t.replace(units=[*units[:1], made, *units[1:]])))
    assert problems("openhands", out) == []
    cond = next(e for e in out if e.get("action") == "condensation")
    assert cond["args"]["summary"] == "Shorter summary."
    assert cond["args"]["summary_offset"] == 3  # system, placeholder, user
    forgotten = [e for e in out if e["id"] in range(cond["args"]["forgotten_events_start_id"],
                                                    cond["args"]["forgotten_events_end_id"] + 1)]
    assert [e.get("action") or e.get("observation") for e in forgotten] == ["run", "run"]
    (back,) = read_text(json.dumps(out), path="c.json")
    assert [u.content for u in back.units][:4] == ["You are OpenHands.", "[1 turn archived as ref-9]",
                                                   "Fix the failing test.", "Shorter summary."]
    # dropped by ctxkit: the condensation no longer carries it
    kept = [u for u in t.units if u.type != "summary"]
    out = events_of(written(t.replace(units=kept)))
    cond = next(e for e in out if e.get("action") == "condensation")
    assert cond["args"]["summary"] is None and cond["args"]["summary_offset"] is None
    assert problems("openhands", out) == []


def test_unpaired_observation_is_a_user_message_with_a_warning() -> None:
    events = [message(1, "user", "Hi."), run_obs(2, 99, "zz", "stray output")]
    stats = ReadStats()
    (t,) = read_text(json.dumps(events), path="u.json", stats=stats)
    assert [(u.role, u.tool_call_id) for u in t.units] == [("user", None), ("user", None)]
    assert any("answers no action before it" in w for w in stats.warnings)
    assert problems("openhands", json.dumps(events))  # the checker names the dangling cause


def test_ipython_images_and_user_commands() -> None:
    events = [
        message(1, "user", "Plot it."),
        ev(2, source="user", message="Running command: ls", action="run", args={"command": "ls", "thought": ""}),
        ev(3, source="agent", message="ok", cause=2, observation="run", content="a.py",
           extras={"command": "ls", "metadata": {"exit_code": 0}}),
        ev(4, source="agent", message="", action="run_ipython", args={"code": "plot()", "thought": "Plot."}),
        ev(5, source="agent", message="", cause=4, observation="run_ipython",
           content="done\n![image](data:image/png;base64,iVBORw0KGgo" + "A" * 5000 + ")", extras={"code": "plot()"}),
    ]
    (t,) = read_text(json.dumps(events), path="i.json")
    assert t.units[1].content == "User executed the command:\nls" and t.units[1].role == "user"
    assert t.units[2].role == "user"  # the output of the user's own command
    assert t.units[3].tool_calls[0].name == "run_ipython" and t.units[3].content == "Plot."
    assert t.units[4].role == "tool" and "already displayed to user" in t.units[4].content
    assert len(t.units[4].content) < 200
    assert orjson.loads(written(t)) == events


@pytest.mark.parametrize(("text", "line", "problem"), [
    (lines([message(1, "user", "hi")]) + '{"foo": 1}\n', 2, "expected an OpenHands event"),
    (lines([message(1, "user", "hi")]) + '{"id": 2, "action": \n', 2, "not valid JSON"),
])
def test_bad_input_names_file_and_line(tmp_path: Path, text: str, line: int, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        list(read_path(str(path), "openhands"))
    assert (err.value.path, err.value.line) == (str(path), line)
    assert problem in err.value.problem


def test_forced_on_another_format_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat.json").write_text('[{"role": "user", "content": "hi"}]')
    result = run("count", "chat.json", "--from", "openhands")
    assert result.exit_code == 1
    assert "chat.json" in result.output and "expected an OpenHands event" in result.output
    assert "Traceback" not in result.output


def test_sample_evaluation_output(repo_root: Path) -> None:
    """The sample in sample_transcripts (always present): system prompt and tools, recall, usage."""
    path = repo_root / "sample_transcripts" / "openhands-eval-ponyc-4595.json"
    doc = orjson.loads(path.read_bytes())
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert (t.id, t.layout) == ("ponylang__ponyc-4595", "object")
    assert [f["function"]["name"] for f in t.tools] == ["execute_bash", "think", "finish", "str_replace_editor"]
    assert [u.role for u in t.units[:3]] == ["system", "user", "user"]
    assert "<EXTRA_INFO>" in t.units[2].content and "GITHUB_TOKEN" in t.units[2].content
    assert stats.skipped_non_message == {"action:recall": 1}
    calls = [c for u in t.units for c in u.tool_calls]
    assert len(calls) == 22 and {c.name for c in calls} == {"execute_bash", "str_replace_editor", "think"}
    assert sum(1 for u in t.units if u.role == "tool") == 22 and errors(t) == []
    finish = doc["history"][-1]
    assert (t.units[-1].role, t.units[-1].content) == ("assistant", finish["args"]["thought"])
    assert len(t.metadata["provider_usage"]["calls"]) == 23
    assert t.metadata["provider_usage"]["calls"][-1]["input_tokens"] == 33459
    assert set(t.envelope) == {"instance_id", "test_result", "instruction", "metadata", "metrics", "error",
                               "instance"}
    assert written(t) != path.read_text() and orjson.loads(written(t)) == doc  # re-indented, same JSON


def early_flat() -> dict[str, Any]:
    """An early (OpenDevin) output line: flat events, no ids, sources or causes."""
    return {"instruction": "Fix it.", "git_patch": "", "history": [
        {"content": "Add a license.", "images_urls": None, "wait_for_response": False, "action": "message"},
        {"command": "touch LICENSE", "thought": "Create it.", "keep_prompt": True, "action": "run",
         "is_confirmed": "confirmed"},
        {"content": "root@host:/workspace # ", "command_id": -1, "command": "touch LICENSE", "exit_code": 0,
         "observation": "run"},
        {"code": "print(open('LICENSE').read())", "thought": "Check.", "action": "run_ipython",
         "kernel_init_code": "from agentskills import *"},
        {"content": "MIT License\n" * 50, "code": "print(...)", "observation": "run_ipython"},
        {"outputs": {}, "thought": "Added.", "action": "finish"},
    ]}


def test_early_flat_events_pair_by_order_and_stay_flat() -> None:
    doc = early_flat()
    (t,) = read_text(json.dumps(doc), path="old.json")
    assert [(u.role, [c.name for c in u.tool_calls], u.tool_call_id is not None) for u in t.units] == [
        ("user", [], False), ("assistant", ["run"], False), ("tool", [], True), ("assistant", ["run_ipython"], False),
        ("tool", [], True), ("assistant", [], False)]
    assert json.loads(t.units[1].tool_calls[0].arguments) == {"command": "touch LICENSE"}
    assert errors(t) == [] and problems("openhands", doc) == []
    assert orjson.loads(written(t)) == doc
    units = list(t.units)
    units[4] = units[4].replace(content="[output archived as ref-5]")
    units[0] = units[0].replace(content="Add an MIT license.")
    made = Unit(id="m", role="user", type="summary", content="Earlier: created LICENSE.")
    out = orjson.loads(written(t.replace(units=[*units[:3], made, *units[3:]])))
    assert problems("openhands", out) == []
    assert not any("id" in e or "args" in e for e in out["history"])  # the stream's own shape
    assert out["history"][0]["content"] == "Add an MIT license."
    assert out["history"][3] == {"observation": "condense", "content": "Earlier: created LICENSE.", "extras": {}}
    assert out["history"][5]["content"] == "[output archived as ref-5]"
    (back,) = read_text(json.dumps(out), path="old.json")
    assert [u.content for u in back.units] == [u.content for u in [*units[:3], made, *units[3:]]]


def test_early_pairs_of_action_and_observation() -> None:
    """Evaluation output of 2024: `history` as [action, observation] pairs, null partners."""
    no_obs = {"message": "No observation", "observation": "null", "content": "", "extras": {}}
    history = [
        [message(1, "user", "Fix the test."), no_obs],
        [run_action(2, "c1", "pytest", "Run it."), run_obs(3, 2, "c1", "E   AssertionError\n" * 60)],
        [run_action(4, "c2", "cat a.py", "Read it."), run_obs(5, 4, "c2", "def f(): pass\n" * 40)],
        [ev(6, source="agent", message="Done.", action="finish", args={"outputs": {}, "thought": "Fixed."}), no_obs],
    ]
    doc = {"instance_id": "old__1", "instruction": "Fix the test.", "history": history}
    assert detect_format(doc) == "openhands"
    stats = ReadStats()
    (t,) = read_text(json.dumps(doc), path="old.json", stats=stats)
    assert [u.role for u in t.units] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert stats.skipped_non_message == {"observation:null": 2}
    assert orjson.loads(written(t)) == doc and problems("openhands", doc) == []
    units = list(t.units)
    units[2] = units[2].replace(content="[pytest output archived as ref-7]")
    summary = Unit(id="s", role="user", type="summary", content="Earlier: the test failed.")
    out = orjson.loads(written(t.replace(units=[units[0], summary, *units[3:]])))  # the first run dropped
    assert problems("openhands", out) == []
    assert all(isinstance(p, list) and len(p) == 2 for p in out["history"])
    assert out["history"][1][0] == {"message": "No action", "action": "null", "args": {}}
    assert out["history"][1][1]["observation"] == "condense"
    (back,) = read_text(json.dumps(out), path="old.json")
    assert [u.content for u in back.units] == [u.content for u in [units[0], summary, *units[3:]]]


def test_knowledge_recall_shows_a_microagent_once() -> None:
    gh = {"name": "gh", "trigger": "git", "content": "Use the API."}
    events = [
        message(1, "user", "Push it to git."),
        ev(2, source="environment", message="Added workspace context", cause=None, observation="recall",
           content="", extras={"recall_type": "workspace_context", "microagent_knowledge": [gh]}),
        message(3, "user", "And git tag it."),
        ev(4, source="environment", message="Added microagent knowledge", cause=None, observation="recall",
           content="", extras={"recall_type": "knowledge", "microagent_knowledge": [gh]}),
    ]
    stats = ReadStats()
    (t,) = read_text(json.dumps(events), path="k.json", stats=stats)
    assert [u.content.count("Use the API.") for u in t.units] == [0, 1, 0]  # the second recall shows nothing
    assert stats.skipped_non_message == {"observation:recall": 1}
    assert orjson.loads(written(t)) == events


# ---------------------------------------------------------------- properties

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from proptest import examples  # noqa: E402

_TEXT = st.text(alphabet="abc xyz\n{}\"é", max_size=30)


@st.composite
def event_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Streams of messages, tool calls (one or two per response) with results, silent events
    and an optional condensation: what OpenHands writes."""
    events: list[dict[str, Any]] = []
    if draw(st.booleans()):
        events.append(SYSTEM)
    nid = len(events)
    events.append(message(nid, "user", draw(_TEXT)))
    for step in range(draw(st.integers(0, 6))):
        nid = len(events)
        kind = draw(st.sampled_from(["call", "parallel", "say", "state"]))
        if kind == "say":
            events.append(message(nid, draw(st.sampled_from(["user", "agent"])), draw(_TEXT)))
        elif kind == "state":
            events.append(ev(nid, source="environment", message="", observation="agent_state_changed", content="",
                             extras={"agent_state": "running"}))
        else:
            n = 2 if kind == "parallel" else 1
            calls = [(f"c{step}_{k}", "execute_bash", json.dumps({"command": f"ls {k}"})) for k in range(n)]
            said = draw(_TEXT)  # one response: its text in every action's copy, the thought on the first
            for k, (cid, _, _) in enumerate(calls):
                a = len(events)
                action = run_action(a, cid, f"ls {k}", said, rid=f"r{step}", calls=calls)
                action["args"]["thought"] = said if k == 0 else ""
                events.append(action)
                events.append(run_obs(a + 1, a, cid, draw(_TEXT)))
    if len(events) > 4 and draw(st.booleans()):
        first = 1 + (events[0] is SYSTEM)
        last = draw(st.integers(first, len(events) - 2))
        events.append(ev(len(events), source="agent", message="", action="condensation",
                         args={"forgotten_event_ids": None, "forgotten_events_start_id": first,
                               "forgotten_events_end_id": last, "summary": draw(_TEXT) or "s",
                               "summary_offset": first}))
        events.append(message(len(events), "user", draw(_TEXT)))
    return events


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event_streams(), st.data())
def test_round_trip_and_compaction_property(events: list[dict[str, Any]], data: st.DataObject) -> None:
    text = lines(events)
    (t,) = read_text(text, path="p.jsonl")
    assert written(t) == text  # untouched: byte for byte
    assert problems("openhands", text) == []
    # a compaction-like edit: drop whole blocks, change texts, add made-up units
    units: list[Unit] = []
    for u in t.units:
        if u.role == "tool":
            if units and units[-1].tool_calls and data.draw(st.booleans()):
                units.append(u.replace(content=f"[archived {u.id}]"))
            elif any(c.id == u.tool_call_id for v in units for c in v.tool_calls):
                units.append(u)
            continue
        if u.tool_calls and data.draw(st.booleans()):
            continue  # dropped with its results (no call left for them)
        if data.draw(st.integers(0, 4)) == 0:
            units.append(Unit(id=f"m{len(units)}", role=data.draw(st.sampled_from(["user", "assistant"])),
                              type=data.draw(st.sampled_from(["summary", "placeholder", "message"])),
                              content=f"made {len(units)}"))
        units.append(u.replace(content=u.content + " (edited)") if data.draw(st.booleans()) and u.role != "system"
                     and not u.tool_calls else u)
    out = written(t.replace(units=units))
    assert problems("openhands", out) == []
    (back,) = read_text(out, path="p.jsonl")
    assert [u.content for u in back.units if u.content] == [u.content for u in units if u.content]
    assert errors(back) == []
