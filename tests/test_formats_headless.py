"""Three logs of today's agents, on logs the real agents wrote (tests/data/agent_logs, driven by
`ctxkit agent session` against the recording provider; see its README): Qwen Code chat
recordings, Claude Code's `-p --output-format stream-json --verbose` output and Codex's `exec
--json` output. Each is detected as its format and nothing else is taken for it, read as the
agent's own code reads it (Qwen Code's history as Qwen Code rebuilds it), counted within 2% of
an independent reading, written back byte for byte, and goes through count, guard, compact and
expand with every record back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.formats import FORMATS, ReadOptions, ReadStats, read_path, read_text, write_transcripts
from ctxkit.formats.common import dumps
from ctxkit.formats.sdk import problems
from ctxkit.model import Transcript
from ctxkit.tokens import count_transcript, get_tokenizer

DATA = Path(__file__).parent / "data" / "agent_logs"
LOGS = {
    "qwen-code-0.24.4.jsonl": "qwen-code",
    "qwen-code-0.24.4-branches.jsonl": "qwen-code",
    "qwen-code-0.24.4-compressed.jsonl": "qwen-code",
    "claude-code-2.1.328.stream.jsonl": "claude-code-stream",
    "codex-0.169.0.exec.jsonl": "codex-exec",
}
NEW = frozenset(LOGS.values())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _written(ts: list[Transcript], fmt: str | None = None) -> str:
    out = io.StringIO()
    write_transcripts(ts, out, fmt)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(LOGS))
def test_detected_read_and_written_back_byte_for_byte(name: str) -> None:
    path = DATA / name
    (t,) = read_path(str(path))
    assert t.source_format == LOGS[name]
    assert _written([t]) == path.read_text(encoding="utf-8")
    assert problems(LOGS[name], path.read_text(encoding="utf-8")) == []
    # forced with --from, it reads the same
    (forced,) = read_path(str(path), ReadOptions(format=LOGS[name]))
    assert [u.content for u in forced.units] == [u.content for u in t.units]


@pytest.mark.parametrize("name", sorted(LOGS))
def test_no_format_before_it_claims_it(name: str) -> None:
    """Detection asks in registry order: no format ahead of its own claims the records (Claude
    Code would claim Qwen Code's envelope: Qwen Code comes first and tells them apart)."""
    records = _lines(DATA / name)
    order = list(FORMATS)
    own = order.index(LOGS[name])
    assert FORMATS[LOGS[name]].detect(records)
    assert [f for f in order[:own] if FORMATS[f].shape in ("messages", "log") and FORMATS[f].detect(records)] == []


def test_no_real_log_of_another_format_is_taken_for_one_of_these(realdata: Path) -> None:
    found = {}
    for path in sorted(realdata.glob("*/*")):
        if path.suffix not in (".json", ".jsonl"):
            continue
        ts = list(read_path(str(path), ReadOptions(skip_invalid=True)))
        found[f"{path.parent.name}/{path.name}"] = {t.source_format for t in ts}
    assert found and not [k for k, v in found.items() if v & NEW]


# ---------------------------------------------------------------- Qwen Code


def _flat(contents: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Gemini Contents as messages: a model Content one (text, thoughts, calls), a user Content
    its function responses and then its text."""
    out: list[tuple[Any, ...]] = []
    for c in contents:
        parts = c.get("parts") or []
        if c["role"] == "model":
            out.append(("assistant", "\n".join(p["text"] for p in parts if "text" in p and not p.get("thought")),
                        "\n".join(p["text"] for p in parts if "text" in p and p.get("thought")),
                        [(p["functionCall"]["id"], p["functionCall"]["name"]) for p in parts if "functionCall" in p]))
            continue
        for p in parts:
            if "functionResponse" in p:
                fr = p["functionResponse"]
                out.append(("tool", fr["response"].get("output", fr["response"].get("error")), "", fr["id"]))
        texts = [p["text"] for p in parts if "text" in p]
        if texts:
            out.append(("user", "\n".join(texts), "", None))
    return out


def _units(t: Transcript) -> list[tuple[Any, ...]]:
    return [("assistant", u.content, u.reasoning, [(c.id, c.name) for c in u.tool_calls]) if u.role == "assistant"
            else (u.role, u.content, "", u.tool_call_id) for u in t.units]


@pytest.mark.parametrize("name", ["qwen-code-0.24.4", "qwen-code-0.24.4-branches", "qwen-code-0.24.4-compressed"])
def test_qwen_code_history_is_the_one_qwen_code_resumes(name: str) -> None:
    """`<name>.history.json` is what Qwen Code 0.24.4's own `prepareTranscriptRecords` and
    `buildSessionHistoryFromConversation` made of the log (tests/test_agents_real.py runs them
    again): the rewound branch and the slash command left out, the fragments of one response
    and the mid-turn message joined, the compression's history in place of what it replaced."""
    (t,) = read_path(str(DATA / f"{name}.jsonl"))
    history = json.loads((DATA / f"{name}.history.json").read_text(encoding="utf-8"))
    assert _units(t) == _flat(history)


def test_qwen_code_usage_model_and_what_is_kept() -> None:
    path = DATA / "qwen-code-0.24.4-branches.jsonl"
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    records = _lines(path)
    calls = t.metadata["provider_usage"]["calls"]
    with_usage = [r for r in records if r["type"] == "assistant" and "usageMetadata" in r]
    assert len(calls) == len({r["uuid"] for r in with_usage}) - 1  # the rewound branch's answer is off the chain
    assert calls[0]["input_tokens"] == with_usage[0]["usageMetadata"]["promptTokenCount"]
    assert t.metadata["model"] == "qwen3.7-max" and t.metadata["context_window"] == 1000000
    assert stats.skipped_non_message["qwen-code:ui_telemetry"] == sum(r.get("subtype") == "ui_telemetry" for r in records)
    assert stats.skipped_non_message["qwen-code:slash command"] == 1
    joined = next(u for u in t.units if u.meta.get("subtype") == "mid_turn_user_message")
    assert joined.meta["join"] is True


def test_qwen_code_compression_and_include_compacted() -> None:
    path = DATA / "qwen-code-0.24.4-compressed.jsonl"
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    (whole,) = read_path(str(path), ReadOptions(include_compacted=True))
    assert t.units[0].type == "summary" and "<state_snapshot>" in t.units[0].content
    assert stats.skipped_non_message["before Qwen Code's last compression"] > 0
    assert len(whole.units) > len(t.units) and whole.units[0].content.startswith("Write notes.txt")
    assert _written([whole]) == _written([t]) == path.read_text(encoding="utf-8")


def test_a_claude_code_log_is_not_a_qwen_code_one() -> None:
    """Same envelope, Anthropic `content` instead of Gemini `parts`."""
    rec = {"uuid": "a", "parentUuid": None, "sessionId": "s", "type": "user", "cwd": "/w",
           "message": {"role": "user", "content": "hi"}}
    (t,) = read_text(json.dumps(rec) + "\n")
    assert t.source_format == "claude-code"
    (t,) = read_text(json.dumps({**rec, "message": {"role": "user", "parts": [{"text": "hi"}]}}) + "\n")
    assert t.source_format == "qwen-code"


# ---------------------------------------------------------------- Claude Code stream-json


def test_claude_stream_usage_window_and_pairs() -> None:
    path = DATA / "claude-code-2.1.328.stream.jsonl"
    (t,) = read_path(str(path))
    records = _lines(path)
    assistants = [r for r in records if r["type"] == "assistant"]
    calls = t.metadata["provider_usage"]["calls"]
    assert len(calls) == len({r["message"]["id"] for r in assistants})
    assert calls[0]["input_tokens"] == assistants[0]["message"]["usage"]["input_tokens"]
    assert t.metadata["model"] == records[0]["model"] and t.metadata["context_window"] == 1000000
    ids = [c.id for u in t.units for c in u.tool_calls]
    assert ids and ids == [u.tool_call_id for u in t.units if u.role == "tool"]
    # the first response (text, then a call) was printed as two messages of one id: one unit
    assert t.units[0].content == "I'll write the file first." and t.units[0].tool_calls[0].name == "Write"


def _stream_with_compaction_and_a_sub_agent() -> list[dict[str, Any]]:
    """The real stream with what Claude Code prints around its own compaction (a
    `compact_boundary`, then the summary as a synthetic user message: the shape of Claude Code
    2.1.207's, as recorded in marcioapm/lux internal/adapter/testdata/claude-2.1.207-compact.jsonl)
    and a sub-agent's message (`parent_tool_use_id` set)."""
    records = _lines(DATA / "claude-code-2.1.328.stream.jsonl")
    session = records[0]["session_id"]
    sub = {"type": "assistant", "message": {"id": "msg_sub", "type": "message", "role": "assistant", "model": "m",
                                            "content": [{"type": "text", "text": "sub-agent work"}]},
           "parent_tool_use_id": "toolu_000001", "session_id": session, "uuid": "sub-1"}
    boundary = {"type": "system", "subtype": "compact_boundary", "session_id": session, "uuid": "b-1",
                "compact_metadata": {"trigger": "manual", "pre_tokens": 11000, "post_tokens": 300}}
    summary = {"type": "user", "message": {"role": "user", "content": "This session is being continued from a "
                                           "previous conversation. Summary: notes.txt holds alpha and gamma."},
               "session_id": session, "parent_tool_use_id": None, "uuid": "s-1", "isReplay": False, "isSynthetic": True}
    after = {"type": "assistant", "message": {"id": "msg_after", "type": "message", "role": "assistant", "model": "m",
                                              "content": [{"type": "text", "text": "Done."}],
                                              "usage": {"input_tokens": 400, "output_tokens": 2}},
             "parent_tool_use_id": None, "session_id": session, "uuid": "a-1"}
    return [*records[:3], sub, *records[3:-1], boundary, summary, after, records[-1]]


def test_claude_stream_compaction_and_sub_agents() -> None:
    text = "".join(dumps(r) + "\n" for r in _stream_with_compaction_and_a_sub_agent())
    stats = ReadStats()
    (t,) = read_text(text, stats=stats)
    assert t.source_format == "claude-code-stream"
    assert [(u.role, u.type) for u in t.units] == [("user", "summary"), ("assistant", "message")]
    assert t.metadata["provider_usage"]["calls"] == [
        {"after_unit": 0, "input_tokens": 400, "cache_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 2,
         "model": "m"}]
    assert stats.skipped_sidechain == 1 and stats.skipped_non_message["before Claude Code's last compaction"] == 9
    (whole,) = read_text(text, ReadOptions(include_compacted=True, include_sidechains=True))
    assert len(whole.units) == 12 and any(u.meta.get("sidechain") for u in whole.units)
    assert _written([t]) == _written([whole]) == text
    assert problems("claude-code-stream", text) == []


# ---------------------------------------------------------------- Codex exec --json


ITEMS = [
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Planning** the change"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "todo_list", "items": [
        {"text": "edit", "completed": False}]}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "changes": [
        {"path": "/w/a.py", "kind": "update"}], "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "docs", "tool": "search",
                                        "arguments": {"q": "x"}, "result": {"content": [
                                            {"type": "text", "text": "found x"}], "structured_content": None},
                                        "error": None, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "mcp_tool_call", "server": "docs", "tool": "fetch",
                                        "arguments": {}, "result": None, "error": {"message": "timed out"},
                                        "status": "failed"}},
    {"type": "item.completed", "item": {"id": "item_5", "type": "web_search", "query": "x docs",
                                        "action": {"type": "search", "query": "x docs"}}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "todo_list", "items": [
        {"text": "edit", "completed": True}]}},
    {"type": "item.completed", "item": {"id": "item_6", "type": "agent_message", "text": "Edited a.py."}},
    {"type": "turn.completed", "usage": {"input_tokens": 9000, "cached_input_tokens": 4000, "output_tokens": 80}},
    {"type": "turn.started"},
    {"type": "turn.failed", "error": {"message": "stream disconnected"}},
]


def test_codex_exec_items_as_what_the_model_saw() -> None:
    text = "".join(dumps(r) + "\n" for r in ITEMS)
    stats = ReadStats()
    (t,) = read_text(text, stats=stats)
    assert t.source_format == "codex-exec" and t.id == "t-1"
    got = [(u.role, u.content, u.reasoning, [c.name for c in u.tool_calls], u.tool_call_id, u.meta.get("is_error"))
           for u in t.units]
    assert got == [
        ("assistant", "", "**Planning** the change", [], None, None),
        ("assistant", "", "", ["file_change"], None, None), ("tool", "completed", "", [], "item_2", None),
        ("assistant", "", "", ["search"], None, None), ("tool", "found x", "", [], "item_3", None),
        ("assistant", "", "", ["fetch"], None, None), ("tool", "timed out", "", [], "item_4", True),
        ("assistant", "", "", ["web_search"], None, None), ("tool", "", "", [], "item_5", None),
        ("assistant", "", "", ["todo_list"], None, None), ("tool", "", "", [], "item_1", None),
        ("assistant", "Edited a.py.", "", [], None, None),
    ]
    assert json.loads(t.units[3].tool_calls[0].arguments) == {"q": "x"}
    assert stats.skipped_non_message == {"thread.started": 1, "turn.started": 2, "item.started:todo_list": 1,
                                         "turn.completed": 1, "turn.failed": 1}
    assert _written([t]) == text and problems("codex-exec", text) == []


def test_codex_exec_changed_items_keep_their_shape() -> None:
    """A changed output goes back in its item's own field; units of another format become
    completed items a reader of the stream knows."""
    (t,) = read_path(str(DATA / "codex-0.169.0.exec.jsonl"))
    shown = next(u for u in t.units if u.role == "tool" and u.content)
    units = [u.replace(content="[output archived]") if u is shown else u for u in t.units]
    out = _written([t.replace(units=units)])
    item = next(json.loads(x)["item"] for x in out.splitlines() if shown.tool_call_id in x and "completed" in x
                and '"item.completed"' in x)
    assert item["aggregated_output"] == "[output archived]" and item["type"] == "command_execution"
    assert problems("codex-exec", out) == []
    other = _written(read_path(str(DATA / "claude-code-2.1.328.stream.jsonl")), "codex-exec")
    assert problems("codex-exec", other) == []
    (back,) = read_text(other, "codex-exec")
    assert [c.name for u in back.units for c in u.tool_calls] == ["Write", "Read", "Edit", "Bash"]


# ---------------------------------------------------------------- counts, commands


def _independent(name: str) -> int:
    """The tokens of what the model read, each log taken apart here without a ctxkit reader:
    Qwen Code's history as Qwen Code rebuilt it, the stream's main-thread messages, the exec
    stream's completed items."""
    tok = get_tokenizer("cl100k_base")
    texts: list[str] = []
    if LOGS[name] == "qwen-code":
        history = json.loads((DATA / name.replace(".jsonl", ".history.json")).read_text(encoding="utf-8"))
        for part in (p for c in history for p in c.get("parts") or []):
            if "text" in part:
                texts.append(part["text"])
            elif "functionCall" in part:
                texts += [part["functionCall"]["name"], dumps(part["functionCall"]["args"])]
            elif "functionResponse" in part:
                texts.append(part["functionResponse"]["response"].get("output", ""))
    elif LOGS[name] == "claude-code-stream":
        for r in _lines(DATA / name):
            if r["type"] not in ("user", "assistant") or r.get("parent_tool_use_id"):
                continue
            content = r["message"]["content"]
            for b in [{"type": "text", "text": content}] if isinstance(content, str) else content:
                if b["type"] == "tool_use":
                    texts += [b["name"], dumps(b["input"])]
                else:
                    texts.append(b.get("text") or b.get("thinking") or b.get("content") or "")
    else:
        for r in _lines(DATA / name):
            item = r.get("item") or {}
            if r["type"] != "item.completed" or item.get("type") == "error":
                continue
            if item["type"] == "command_execution":
                texts += [item["type"], dumps({"command": item["command"]}), item["aggregated_output"]]
            else:
                texts.append(item.get("text", ""))
    return sum(tok.count(x) for x in texts if x)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_the_count_is_within_two_percent_of_an_independent_reading(name: str) -> None:
    (t,) = read_path(str(DATA / name))
    counts = count_transcript(t, get_tokenizer("cl100k_base"))
    ours = sum(u.content + u.tool_calls + u.reasoning for u in counts.units)
    theirs = _independent(name)
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_count_guard_compact_and_expand(name: str, tmp_path: Path) -> None:
    src = tmp_path / name
    src.write_bytes((DATA / name).read_bytes())
    run = CliRunner().invoke
    counted = run(cli, ["count", str(src)], catch_exceptions=False)
    assert counted.exit_code == 0, counted.output
    row = json.loads(counted.stdout.splitlines()[0])
    assert row["format"] == LOGS[name] and row["total"] > 0
    guarded = run(cli, ["guard", str(src)], catch_exceptions=False)
    assert guarded.exit_code == 0, guarded.output
    (t,) = read_path(str(src))
    history = sum(x.total for x in count_transcript(t, get_tokenizer("cl100k_base")).units)
    small, back = tmp_path / ("small-" + name), tmp_path / ("back-" + name)
    done = run(cli, ["compact", str(src), "--limit", str(history), "--target", str(history // 2),
                     "--no-usage", "-o", str(small)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert problems(LOGS[name], small.read_text(encoding="utf-8")) == []
    (compacted,) = read_path(str(small))
    assert compacted.source_format == LOGS[name]
    assert sum(x.total for x in count_transcript(compacted, get_tokenizer("cl100k_base")).units) < history
    done = run(cli, ["expand", str(small), "-o", str(back)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert back.read_bytes() == src.read_bytes()  # every record back, byte for byte


def test_codex_exec_runs_appended_to_one_file() -> None:
    """Item ids start again at item_0 in every run: a file of two runs (a CI job appending, or
    `exec resume` after `exec`) reads as one transcript whose units are all named apart, and is
    written back byte for byte."""
    text = (DATA / "codex-0.169.0.exec.jsonl").read_text(encoding="utf-8")
    stats = ReadStats()
    (t,) = read_text(text + text, stats=stats)
    ids = [u.id for u in t.units]
    assert len(ids) == 2 * len(read_text(text)[0].units) and len(set(ids)) == len(ids)
    assert {c.id for u in t.units for c in u.tool_calls} == {u.tool_call_id for u in t.units if u.role == "tool"}
    assert not any("repeats" in w for w in stats.warnings)
    assert _written([t]) == text + text and problems("codex-exec", text + text) == []
