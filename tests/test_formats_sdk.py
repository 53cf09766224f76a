"""Written transcripts against the providers' own SDK types (`ctxkit.formats.sdk`): every real
transcript and every simulate scenario, in its own format and in every other, before and after
compaction; joins, datasets and the app-log conventions."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import REALDATA
from test_formats import carried

from ctxkit.archive.store import Archive
from ctxkit.compaction import CompactSettings, compact
from ctxkit.formats import WRITABLE, read_path, read_text, write_transcripts
from ctxkit.formats.sdk import problems
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.simulate import SCENARIOS, generate
from ctxkit.tokens import count_transcript

CHECKED = tuple(f for f in WRITABLE if f != "units")  # units is ctxkit's own: no SDK type
FOLDERS = ("claude-code", "codex", "openai-chat", "anthropic-messages", "mini-swe-agent", "sharegpt", "openhands",
           "swe-agent", "gemini-cli", "opencode", "copilot-cli")
REAL_FILES = sorted(
    str(p.relative_to(REALDATA)) for folder in FOLDERS for p in (REALDATA / folder).iterdir()
    if p.suffix in (".json", ".jsonl", ".traj")
) if REALDATA.is_dir() else []


def written(ts: list[Transcript], fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts(ts, buf, fmt)
    return buf.getvalue()


def unanswered(ts: list[Transcript]) -> set[str]:
    """Calls the input itself never answered (mini-swe-agent's last call before `exit`)."""
    calls = {c.id for t in ts for u in t.units for c in u.tool_calls}
    results = {u.tool_call_id for t in ts for u in t.units if u.role == "tool"}
    return calls - results


def new_problems(fmt: str, text: str, ts: list[Transcript]) -> list[str]:
    """Problems of the written text that the input did not have already."""
    known = unanswered(ts)
    # ShareGPT numbers its calls on reading: an unanswered call has a new id there.
    return [p for p in problems(fmt, text) if not any(cid in p for cid in known)
            and not (known and "has no result" in p and "as openai" in p)]


# ---------------------------------------------------------------- the checker itself


def test_problems_openai_refuses_what_the_api_refuses() -> None:
    ok = [{"role": "user", "content": "hi"},
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
          {"role": "assistant", "content": "One file."}]
    assert problems("openai", ok) == []
    assert problems("openai", {"messages": ok, "tools": [
        {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]}) == []
    bad = [dict(ok[0]), {**ok[1], "reasoning_content": "hm"}, ok[2], {"role": "assistant", "content": ""}]
    assert problems("openai", bad) == [
        "message 2: key `reasoning_content` is not accepted in a request",
        "message 4: empty assistant message",
    ]
    assert problems("openai", [ok[0], ok[2]]) == ["message 2: tool result c1 answers no call of the assistant message before"]
    assert problems("openai", ok[:2] + [ok[0]]) == ["message 2: tool call c1 has no result"]
    found = problems("openai", [{"role": "exit", "content": "x"}])
    assert found and all(p.startswith("message 1: ") for p in found)


def test_problems_anthropic_rules_beyond_the_types() -> None:
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
    assert problems("anthropic", [{"role": "user", "content": "go"}, call, result]) == []
    assert problems("anthropic", [call, result]) == ["message 1: the first message must be the user's"]
    assert problems("anthropic", [{"role": "user", "content": "go"}, call, {"role": "user", "content": "?"}]) == [
        "message 2: tool_use t1 has no tool_result in the next message"]
    late = {"role": "user", "content": [{"type": "text", "text": "and"}, *result["content"]]}
    assert "a tool_result block after other content" in problems("anthropic", [{"role": "user", "content": "go"}, call, late])[0]
    assert problems("anthropic", [{"role": "user", "content": ""}]) == ["message 1: empty content"]
    unsigned = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "x"}]}
    found = problems("anthropic", [{"role": "user", "content": "go"}, unsigned])
    assert found and all(p.startswith("message 2: ") for p in found)  # no member of the union fits


def test_problems_app_logs() -> None:
    def cc(uuid: str, parent: str | None, role: str, content: Any) -> dict[str, Any]:
        return {"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": "s",
                "message": {"role": role, "content": content}}

    good = [cc("a", None, "user", "hi"), cc("b", "a", "assistant", [{"type": "text", "text": "yo"}])]
    assert problems("claude-code", good) == []
    assert problems("claude-code", [good[0], {**good[1], "parentUuid": "zz"}]) == [
        "record 2: parentUuid 'zz' is no earlier record"]
    rollout = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}},
        {"timestamp": "t", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}},
        {"timestamp": "t", "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "c9", "output": "x"}},
        {"timestamp": "t", "type": "compacted", "payload": {"message": ""}},
    ]
    assert problems("codex", rollout) == [
        "record 3: output c9 answers no call before it", "record 4: compacted record without its summary message"]
    assert problems("sharegpt", {"conversations": [{"from": "observation", "value": "x"}]}) == [
        "turn 1: observation without a function_call before it"]


# ---------------------------------------------------------------- real transcripts


@pytest.mark.parametrize("name", REAL_FILES)
def test_realdata_written_in_every_format_is_valid(realdata: Path, name: str) -> None:
    ts = list(read_path(str(realdata / name)))
    own = ts[0].source_format
    text = written(ts)  # the default: the input's own format
    # Read and written back unchanged, a file keeps what the API would refuse in it already
    # (mini-swe-agent's final `exit` role); nothing else may be wrong.
    before = set(problems(own, (realdata / name).read_text(encoding="utf-8")))
    assert [p for p in new_problems(own, text, ts) if p not in before] == []
    back = read_text(text, own, path=name)
    assert [carried(b, own, same=True) for b in back] == [carried(t, own, same=True) for t in ts]
    for fmt in CHECKED:
        if fmt != own:
            assert new_problems(fmt, written(ts, fmt), ts) == [], fmt


def test_codex_as_openai_has_no_reasoning_content_nor_empty_content(realdata: Path) -> None:
    (path,) = sorted((realdata / "codex").glob("*rollout-*.jsonl"))
    doc = orjson.loads(written(list(read_path(str(path))), "openai"))
    messages = doc["messages"]
    assert not any("reasoning_content" in m for m in messages)
    assert not any(m.get("content") == "" for m in messages)
    assert all(m["content"] is None for m in messages if m.get("tool_calls") and m.get("content") is None)


@pytest.mark.slow
@pytest.mark.parametrize("name", REAL_FILES)
def test_realdata_compacted_is_valid_in_every_format(realdata: Path, tmp_path: Path, name: str) -> None:
    ts = list(read_path(str(realdata / name)))[:3]  # a dataset: its first conversations
    archive = Archive(str(tmp_path / "a.db"))
    out = []
    for t in ts:
        tokens = count_transcript(t).total
        out.append(compact(t, CompactSettings(limit=tokens, target=max(tokens // 3, 1), use_usage=False), archive=archive).transcript)
    archive.close()
    own = ts[0].source_format
    text = written(out)
    assert new_problems(own, text, ts) == []
    # read back whole (a Claude Code summary linked to the request before it cuts nothing)
    back = read_text(text, own, path=name)
    assert len(back) == len(out)
    for t, b in zip(out, back, strict=True):
        text_back = "\n".join(u.content for u in b.units)
        assert all(u.content in text_back for u in t.units if u.role != "system" or own != "claude-code")
    for fmt in CHECKED:
        assert new_problems(fmt, written(out, fmt), ts) == [], fmt


# ---------------------------------------------------------------- simulate scenarios


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenarios_written_in_every_format_are_valid(scenario: str) -> None:
    t = generate(scenario, seed=1, tokens=3000)
    for fmt in CHECKED:
        assert new_problems(fmt, written([t], fmt), [t]) == [], fmt


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenarios_compacted_are_valid_in_every_format(scenario: str, tmp_path: Path) -> None:
    t = generate(scenario, seed=1)
    tokens = count_transcript(t).total
    with_archive = Archive(str(tmp_path / "a.db"))
    result = compact(t, CompactSettings(limit=tokens, target=tokens // 3), archive=with_archive)
    with_archive.close()
    for fmt in CHECKED:
        assert new_problems(fmt, written([result.transcript], fmt), [t]) == [], fmt


# ---------------------------------------------------------------- joins


def _joined_transcript(source_format: str = "units") -> Transcript:
    units = [
        Unit(id="s", role="system", content="Be brief."),
        Unit(id="u0", role="user", content="Fix the bug."),
        Unit(id="sum", role="user", type="summary", content="Earlier: the tests failed.", meta={"join": True}),
        Unit(id="a0", role="assistant", content="", tool_calls=[ToolCall("c1", "ls", "{}")]),
        Unit(id="r0", role="tool", content="a.py", tool_call_id="c1", name="ls"),
        Unit(id="p0", role="user", type="placeholder", content="[2 turns archived]", meta={"join": True}),
        Unit(id="a1", role="assistant", content="Done."),
        Unit(id="a2", role="assistant", content="[note]", meta={"join": True}),
    ]
    return Transcript(units=units, source_format=source_format)


def _parsed(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return [orjson.loads(x) for x in text.splitlines()]


def _messages(text: str) -> list[Any]:
    parsed = _parsed(text)
    return parsed["messages"] if isinstance(parsed, dict) else parsed


def _roles(fmt: str, text: str) -> list[str]:
    if fmt in ("aider", "specstory"):
        return [u.role for t in read_text(text, fmt) for u in t.units]
    parsed = _parsed(text)
    if fmt == "atif":
        return [step["source"] for step in parsed["steps"]]
    if fmt == "claude-code":
        return [r["type"] for r in parsed if r["type"] in ("user", "assistant")]
    if fmt == "codex":
        return [r["payload"].get("role") or r["payload"]["type"] if r["type"] == "response_item" else r["type"]
                for r in parsed if r["type"] in ("response_item", "compacted")]
    if fmt == "sharegpt":
        return [turn["from"] for turn in parsed["conversations"]]
    if fmt == "openhands":
        events = parsed["history"] if isinstance(parsed, dict) else parsed
        return [{"user": "user", "agent": "assistant"}[e["source"]] if e.get("action") == "message"
                else e.get("action") or e["observation"] for e in events]
    if fmt == "swe-agent":
        return [m["role"] for m in parsed["history"]]
    if fmt == "gemini-cli":
        return [m["type"] for m in parsed["messages"]]
    if fmt == "gemini-cli-jsonl":
        return [r["type"] for r in parsed if "id" in r and "type" in r]
    if fmt == "opencode":
        return [m["info"]["role"] for m in parsed["messages"]]
    if fmt == "gemini":
        return [c["role"] for c in parsed["contents"]]
    if fmt == "cline":
        return [m["role"] for m in parsed]
    if fmt == "copilot-cli":
        return [r["type"].split(".")[0].replace("tool", "tool") for r in parsed if r["type"].endswith(
            (".message", "execution_complete"))]
    if fmt in ("qwen-code", "claude-code-stream"):
        return [r["message"]["role"] for r in parsed if isinstance(r.get("message"), dict)]
    if fmt == "codex-exec":
        return [r["item"]["type"] for r in parsed if r["type"] == "item.completed"]
    if fmt == "pi":
        return [r["message"]["role"] for r in parsed if r.get("type") == "message"]
    messages = parsed["messages"] if isinstance(parsed, dict) else parsed
    return [m["role"] for m in messages]


@pytest.mark.parametrize("fmt", CHECKED)
def test_joined_units_share_the_message_before(fmt: str) -> None:
    t = _joined_transcript()
    text = written([t], fmt)
    assert problems(fmt, text) == []
    assert _roles(fmt, text) == {
        "openai": ["system", "user", "assistant", "tool", "user", "assistant"],
        "anthropic": ["user", "assistant", "user", "assistant"],
        "claude-code": ["user", "assistant", "user", "assistant"],
        "codex": ["developer", "user", "compacted", "function_call", "function_call_output", "user", "assistant"],
        "sharegpt": ["human", "function_call", "observation", "human", "gpt"],
        "atif": ["system", "user", "user", "agent", "user", "agent", "agent"],  # a step per unit, joins kept
        "aider": ["user", "assistant", "user", "assistant"],  # system and tool output are `> ` notices
        "specstory": ["user", "assistant", "tool", "user", "assistant"],  # no system prompt; a call's block holds its output
        "openhands": ["system", "user", "condense", "call_tool_mcp", "mcp", "condense", "assistant"],
        "swe-agent": ["system", "user", "assistant", "tool", "user", "assistant"],
        "gemini-cli": ["user", "gemini", "user", "gemini"],  # no system prompt; a call holds its result
        "gemini-cli-jsonl": ["user", "gemini", "user", "gemini"],  # the same, one record a message
        "opencode": ["user", "assistant", "user", "assistant"],  # the tool part holds its result
        "copilot-cli": ["system", "user", "assistant", "tool", "user", "assistant"],
        "gemini": ["user", "model", "user", "model"],  # results and the note join their turn
        "cline": ["user", "assistant", "user", "assistant"],  # results are user text blocks
        "qwen-code": ["user", "model", "user", "model"],  # the note joins the turn of the results
        "claude-code-stream": ["user", "assistant", "user", "assistant"],
        "codex-exec": ["user_message", "mcp_tool_call", "user_message", "agent_message"],  # a call holds its result
        "pi": ["user", "assistant", "toolResult", "user", "assistant"],  # a joining unit is a block of its role's message
    }[fmt]
    for piece in ("Earlier: the tests failed.", "[2 turns archived]", "[note]"):
        assert piece in text
    if fmt == "anthropic":
        msgs = _messages(text)
        assert [b["type"] for b in msgs[2]["content"]] == ["tool_result", "text"]  # the placeholder joins the results
        assert msgs[0]["content"][1]["text"] == "Earlier: the tests failed."
    if fmt == "openai":
        msgs = _messages(text)
        assert msgs[1]["content"] == [{"type": "text", "text": "Fix the bug."},
                                      {"type": "text", "text": "Earlier: the tests failed."}]
        assert msgs[-1]["content"] == "Done.\n\n[note]"


# ---------------------------------------------------------------- Claude Code conventions


def _claude_log(realdata: Path) -> Path:
    return next(p for p in (realdata / "claude-code").glob("*.jsonl") if "b9712494" in p.name)


def test_claude_code_summary_record_and_chain(realdata: Path) -> None:
    (t,) = read_path(str(_claude_log(realdata)))
    first = t.units[0]
    summary = Unit(id="ctxkit-summary", role="user", type="summary", content="Summary of the earlier work.")
    start = max(i for i, u in enumerate(t.units) if u.role == "user" and u.type != "summary")
    kept = t.units[start:]
    compacted = t.replace(units=[first, summary, *kept])
    text = written([compacted])
    records = [json.loads(x) for x in text.splitlines()]
    assert problems("claude-code", text) == []
    made = next(r for r in records if r.get("message", {}).get("content") == "Summary of the earlier work.")
    assert made["isCompactSummary"] is True and made["type"] == "user"
    assert made["sessionId"] == records[0]["sessionId"] and made["cwd"] == records[0]["cwd"]
    assert made["parentUuid"] == records[records.index(made) - 1]["uuid"]
    # deterministic: the same input writes the same uuids
    assert written([compacted]) == text
    # our own reader reads it back whole: the summary is linked, so it cuts nothing
    (back,) = read_text(text, path="x.jsonl")
    assert [u.content for u in back.units] == [u.content for u in compacted.units]
    assert back.units[1].type == "summary"


def test_claude_code_changed_units_keep_their_records(realdata: Path) -> None:
    (t,) = read_path(str(_claude_log(realdata)))
    i = next(k for k, u in enumerate(t.units) if u.role == "tool" and len(u.content) > 200)
    original = t.units[i]
    units = list(t.units)
    units[i] = original.replace(content="[tool output, archived]")
    text = written([t.replace(units=units)])
    records = [json.loads(x) for x in text.splitlines()]
    rec = next(r for r in records if r["uuid"] == original.source["uuid"])
    block = next(b for b in rec["message"]["content"] if b.get("tool_use_id") == original.tool_call_id)
    assert block["content"] == "[tool output, archived]" and "toolUseResult" not in rec
    (back,) = read_text(text, path="x.jsonl")
    assert back.units[i].content == "[tool output, archived]"
    assert [u.content for u in back.units[:i]] == [u.content for u in t.units[:i]]


def test_claude_code_merged_response_writes_all_its_records() -> None:
    from test_formats import CLAUDE_LOG

    text = "".join(json.dumps(r) + "\n" for r in CLAUDE_LOG)
    (t,) = read_text(text, path="s.jsonl")
    (full,) = [x for x in read_text(text, path="s.jsonl")]
    assert t.units[0].type == "summary"
    from ctxkit.formats import ReadOptions

    (whole,) = read_text(text, ReadOptions(include_compacted=True), path="s.jsonl")
    merged = whole.units[1]
    assert [r["uuid"] for r in merged.source] == ["a1", "a2", "a3"]
    # every record back in its place, notices, snapshot, sidechain and summary included, and
    # every link as it was
    assert [json.loads(x) for x in written([whole]).splitlines()] == CLAUDE_LOG
    assert [json.loads(x) for x in written([t]).splitlines()] == CLAUDE_LOG
    assert full.units == t.units


# ---------------------------------------------------------------- Codex conventions


def test_codex_summary_is_a_compacted_record_and_the_rest_stays(realdata: Path) -> None:
    (path,) = sorted((realdata / "codex").glob("*rollout-*.jsonl"))
    (t,) = read_path(str(path))
    assert written([t]) == path.read_text()  # untouched: the rollout as it was
    k = next(i for i, u in enumerate(t.units) if u.role == "tool" and len(u.content) > 200)
    units = list(t.units)
    units[k] = units[k].replace(content="[output archived]")
    summary = Unit(id="ctxkit-summary", role="user", type="summary", content="What happened so far.")
    text = written([t.replace(units=[units[0], units[1], summary, *units[2:]])])
    records = [json.loads(x) for x in text.splitlines()]
    assert problems("codex", text) == []
    assert records[0]["type"] == "session_meta"
    assert {"type": "compacted", "payload": {"message": "What happened so far."}}.items() <= {
        "type": "compacted", **next(r for r in records if r["type"] == "compacted")}.items()
    outputs = [r["payload"]["output"] for r in records if r.get("payload", {}).get("type") == "function_call_output"]
    assert "[output archived]" in outputs
    assert sum(r["type"] == "turn_context" for r in records) == sum(
        json.loads(x)["type"] == "turn_context" for x in path.read_text().splitlines())
    (back,) = read_text(text, path="r.jsonl")
    assert [u.type for u in back.units].count("summary") == 1


# ---------------------------------------------------------------- datasets


def test_sharegpt_json_array_stays_a_sharegpt_array(realdata: Path) -> None:
    (path,) = sorted((realdata / "sharegpt").glob("*.json"))
    ts = list(read_path(str(path)))
    text = written(ts)
    assert orjson.loads(text) == orjson.loads(path.read_bytes())
    assert text == path.read_text().rstrip("\n") + "\n"  # byte for byte, indentation too
    as_openai = orjson.loads(written(ts, "openai"))
    assert isinstance(as_openai, list) and len(as_openai) == len(ts) and "messages" in as_openai[0]
    assert problems("sharegpt", text) == []


def test_jsonl_dataset_stays_jsonl() -> None:
    lines = [{"conversations": [{"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": f"a{i}"}]}
             for i in range(3)]
    text = "".join(orjson.dumps(x).decode() + "\n" for x in lines)
    ts = read_text(text)
    assert [t.source_format for t in ts] == ["sharegpt"] * 3
    assert written(ts) == text
    assert [orjson.loads(x)["messages"][0]["content"] for x in written(ts, "openai").splitlines()] == ["q0", "q1", "q2"]


def test_compact_cli_writes_sharegpt_dataset_as_json_array(realdata: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from ctxkit.cli import cli

    monkeypatch.chdir(tmp_path)
    (path,) = sorted((realdata / "sharegpt").glob("*.json"))
    items = orjson.loads(path.read_bytes())[:4]
    src = tmp_path / "in.json"
    src.write_bytes(orjson.dumps(items, option=orjson.OPT_INDENT_2))
    result = CliRunner().invoke(cli, ["compact", str(src), "--limit", "400", "-o", "x.json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = orjson.loads((tmp_path / "x.json").read_bytes())
    assert isinstance(out, list) and len(out) == 4 and all("conversations" in c for c in out)
    assert problems("sharegpt", (tmp_path / "x.json").read_text()) == []


@pytest.mark.parametrize("folder", ["claude-code", "codex"])
def test_app_log_compact_then_expand(realdata: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     folder: str) -> None:
    """compact writes the app's own log (valid), expand writes back the original's records."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    monkeypatch.chdir(tmp_path)
    path = max(sorted((realdata / folder).glob("*.jsonl")), key=lambda p: p.stat().st_size)
    src = tmp_path / "in.jsonl"
    src.write_bytes(path.read_bytes())
    run = CliRunner().invoke
    limit = str(count_transcript(next(read_path(str(src)))).total // 3)  # what its system prompt leaves room for
    assert run(cli, ["compact", "in.jsonl", "--limit", limit, "--no-usage", "-o", "small.jsonl"], catch_exceptions=False).exit_code == 0
    small = (tmp_path / "small.jsonl").read_text()
    assert problems(folder, small) == []
    assert all(json.loads(x).get("type") for x in small.splitlines())  # the app's records, not units
    assert run(cli, ["expand", "small.jsonl", "-o", "back.jsonl"], catch_exceptions=False).exit_code == 0
    original = list(read_path(str(src)))
    assert (tmp_path / "back.jsonl").read_text() == written(original)
    assert written(original) == path.read_text()  # the log comes back byte for byte, every record


def test_codex_parallel_calls_are_one_chat_message() -> None:
    def item(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "2025-01-01T00:00:00Z", "type": "response_item", "payload": payload}) + "\n"

    text = "".join([
        json.dumps({"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "r"}}) + "\n",
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look"}]}),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
        item({"type": "function_call_output", "call_id": "c1", "output": "a"}),
        item({"type": "function_call_output", "call_id": "c2", "output": "b"}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
    ])
    ts = read_text(text, path="r.jsonl")
    assert [json.loads(x) for x in written(ts).splitlines()] == [json.loads(x) for x in text.splitlines()]
    assert problems("codex", text) == []
    for fmt in CHECKED:
        assert problems(fmt, written(ts, fmt)) == [], fmt
    assert _roles("openai", written(ts, "openai")) == ["user", "assistant", "tool", "tool", "assistant"]


def test_claude_code_record_split_by_a_placeholder_gets_a_second_uuid() -> None:
    from test_formats import CLAUDE_LOG

    from ctxkit.formats import ReadOptions

    text = "".join(json.dumps(r) + "\n" for r in CLAUDE_LOG)
    (t,) = read_text(text, ReadOptions(include_compacted=True), path="s.jsonl")
    units = list(t.units)
    # the two results of record r1, the second changed, with a placeholder between them
    units[3] = units[3].replace(content="[archived]")
    units.insert(3, Unit(id="p", role="user", type="placeholder", content="[1 turn archived]"))
    out = written([t.replace(units=units)])
    uuids = [u for x in out.splitlines() if (u := json.loads(x).get("uuid")) is not None]
    assert len(uuids) == len(set(uuids))
    assert not [p for p in problems("claude-code", out) if "uuid" in p.lower()]  # one chain
