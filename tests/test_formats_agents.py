"""The agents' own files ctxkit reads since the format contract: Gemini CLI recordings, OpenCode
exports, Copilot CLI event logs, Gemini API contents; and Claude Code 2.x and Codex rollouts
with their own compaction, read as the model sees them and written back whole."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ctxkit.formats import WRITABLE, ReadOptions, ReadStats, read_path, read_text, write_transcripts
from ctxkit.formats.sdk import problems
from ctxkit.model import Transcript, Unit
from ctxkit.structure import check
from ctxkit.tokens import count_transcript

SAMPLES = Path(__file__).resolve().parents[1] / "sample_transcripts"


def written(ts: list[Transcript], fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts(ts, buf, fmt)
    return buf.getvalue()


def orphan_results(units: list[Unit]) -> list[str]:
    """Tool results without their call (`structure.check`)."""
    return [str(p) for p in check(units) if p.kind == "orphan_result"]


def _calls(t: Transcript) -> set[str]:
    return {c.id for u in t.units for c in u.tool_calls}


# ---------------------------------------------------------------- Gemini CLI


def test_gemini_cli_recording_read_paired_and_written_back() -> None:
    path = SAMPLES / "gemini-cli-session.json"
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert (t.source_format, t.id) == ("gemini-cli", raw["sessionId"])
    calls = [c for m in raw["messages"] for c in m.get("toolCalls") or []]
    results = [u for u in t.units if u.role == "tool"]
    assert len(results) == len(calls) == 7 and {u.tool_call_id for u in results} == _calls(t)
    assert not orphan_results(t.units)
    assert stats.skipped_non_message == {"gemini-cli:info": 1}  # the app's notice: kept, not read
    user = next(m for m in raw["messages"] if m.get("displayContent"))
    assert next(u for u in t.units if u.id == user["id"]).content.endswith(user["content"][-1]["text"])
    usage = t.metadata["provider_usage"]["calls"]
    gemini = [m for m in raw["messages"] if m["type"] == "gemini"]
    assert [c["input_tokens"] for c in usage] == [m["tokens"]["input"] for m in gemini]
    assert written([t]).encode("utf-8") == path.read_bytes()  # byte for byte, no final newline either
    # what Gemini CLI holds for a call: its output, not the display
    assert results[0].content == calls[0]["result"][0]["functionResponse"]["response"]["output"]


def test_gemini_cli_in_every_format_and_changed_units_in_place() -> None:
    (t,) = read_path(str(SAMPLES / "gemini-cli-session.json"))
    for fmt in WRITABLE:
        assert problems(fmt, written([t], fmt)) == [], fmt
    units = list(t.units)
    k = next(i for i, u in enumerate(units) if u.role == "tool")
    units[k] = units[k].replace(content="[output archived]")
    units.insert(1, Unit(id="note", role="user", type="placeholder", content="[2 turns archived]"))
    text = written([t.replace(units=units)])
    assert problems("gemini-cli", text) == []
    obj = json.loads(text)
    assert any(m["type"] == "info" for m in obj["messages"])  # the notice stays
    (back,) = read_text(text, "gemini-cli")
    assert [u.content for u in back.units][1] == "[2 turns archived]"
    assert "[output archived]" in [u.content for u in back.units]


def test_a_gemini_cli_recording_is_not_units() -> None:
    data = (SAMPLES / "gemini-cli-session.json").read_text(encoding="utf-8")
    messages = json.dumps(json.loads(data)["messages"])
    with pytest.raises(Exception, match="not a units file: none of its 14 records is a ctxkit units record "
                       r"\(its first record is an object with keys content, id, timestamp, type"):
        read_text(messages, "units")
    (t,) = read_text(data)
    assert t.source_format == "gemini-cli" and count_transcript(t).total > 10_000


# ---------------------------------------------------------------- Gemini API contents


def test_gemini_contents_from_a_real_recording_round_trip() -> None:
    (t,) = read_path(str(SAMPLES / "gemini-cli-session.json"))
    text = written([t], "gemini")
    assert problems("gemini", text) == []
    (g,) = read_text(text)
    assert g.source_format == "gemini"
    assert [(u.role, u.content, u.tool_call_id) for u in g.units] == [(u.role, u.content, u.tool_call_id) for u in t.units]
    assert written([g]) == text
    contents = json.loads(text)["contents"]
    assert read_text(json.dumps(contents))[0].units == read_text(json.dumps(contents))[0].units  # a bare array too
    for fmt in WRITABLE:
        assert problems(fmt, written([g], fmt)) == [], fmt


# ---------------------------------------------------------------- OpenCode


def test_opencode_export_read_paired_and_written_back() -> None:
    path = SAMPLES / "opencode-export.json"
    (t,) = read_path(str(path))
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert (t.source_format, t.id) == ("opencode", raw["info"]["id"])
    tools = [p for m in raw["messages"] for p in m["parts"] if p["type"] == "tool"]
    assert len([u for u in t.units if u.role == "tool"]) == len(tools) and not orphan_results(t.units)
    finishes = [p for m in raw["messages"] for p in m["parts"] if p["type"] == "step-finish"]
    calls = t.metadata["provider_usage"]["calls"]
    assert len(calls) == len(finishes)
    assert calls[0]["input_tokens"] == finishes[0]["tokens"]["input"] + finishes[0]["tokens"]["cache"]["read"] + \
        finishes[0]["tokens"]["cache"]["write"]
    assert written([t]).encode("utf-8") == path.read_bytes()
    for fmt in WRITABLE:
        assert problems(fmt, written([t], fmt)) == [], fmt


def test_opencode_compaction_is_read_as_the_model_sees_it(realdata: Path) -> None:
    path = realdata / "opencode" / "savekirk__session-bridge__checkpoints-v1__13-dddd416599-0@624c4272.export.json"
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    (whole,) = read_path(str(path), ReadOptions(include_compacted=True))
    assert t.units[0].content == "What did we do so far?" and t.units[1].type == "summary"
    assert stats.skipped_non_message["before OpenCode's last compaction"] == len(whole.units) - len(t.units) > 0
    assert written([t]).encode("utf-8") == path.read_bytes() == written([whole]).encode("utf-8")


# ---------------------------------------------------------------- Copilot CLI


def test_copilot_events_read_paired_and_written_back() -> None:
    path = SAMPLES / "copilot-cli-events.jsonl"
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    events = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert t.source_format == "copilot-cli" and t.units[0].role == "system"  # Copilot logs its prompt
    requests = [r for e in events if e["type"] == "assistant.message" for r in e["data"]["toolRequests"]]
    done = [e for e in events if e["type"] == "tool.execution_complete"]
    assert len(requests) == len(done) == len([u for u in t.units if u.role == "tool"]) > 0
    assert not orphan_results(t.units)
    assert stats.skipped_non_message["hook.start"] == sum(e["type"] == "hook.start" for e in events)
    assert written([t]) == path.read_text(encoding="utf-8")
    user = next(e for e in events if e["type"] == "user.message")
    assert next(u for u in t.units if u.role == "user").content == user["data"]["transformedContent"]
    for fmt in WRITABLE:
        assert problems(fmt, written([t], fmt)) == [], fmt


def test_copilot_compaction_and_a_removed_parent() -> None:
    """Copilot's `session.compaction_complete` summary takes the place of what came before its
    start (the system prompt stays); the events stay in the file. Built on the real log with the
    two events Copilot writes (github/copilot-sdk session-events schema)."""
    events = [json.loads(x) for x in (SAMPLES / "copilot-cli-events.jsonl").read_text(encoding="utf-8").splitlines()]
    last = events[-1]["id"]
    events += [
        {"type": "session.compaction_start", "data": {"trigger": "threshold"}, "id": "c-start",
         "timestamp": "2026-06-25T02:00:00.000Z", "parentId": last},
        {"type": "session.compaction_complete", "data": {"success": True, "summaryContent": "Found the hook."},
         "id": "c-done", "timestamp": "2026-06-25T02:00:05.000Z", "parentId": "c-start"},
    ]
    text = "".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in events)
    (t,) = read_text(text, path="events.jsonl")
    assert [(u.role, u.type) for u in t.units] == [("system", "message"), ("user", "summary")]
    assert written([t]) == text
    (whole,) = read_text(text, ReadOptions(include_compacted=True), path="events.jsonl")
    assert len(whole.units) > 2 and written([whole]) == text


def test_copilot_reasoning_only_in_opaque_form_is_no_empty_assistant_message() -> None:
    """Copilot 1.0.7x logs an `assistant.message` per reasoning step of an OpenAI model with no
    content, no tool requests and its reasoning only encrypted: it was read as an empty
    assistant unit, which every chat API refuses ("empty assistant message" in openai). It is a
    kept event now: no unit, back in its place when written."""
    def event(n: int, kind: str, data: dict[str, object]) -> dict[str, object]:
        return {"type": kind, "data": data, "id": f"e{n}", "timestamp": f"2026-07-19T23:12:{n:02d}.000Z",
                "parentId": f"e{n - 1}" if n else None}

    opaque = {"messageId": "m1", "model": "gpt-5.6-sol", "content": "", "toolRequests": [],
              "reasoningOpaque": "REDACTED/x", "encryptedContent": "REDACTED/y"}
    events = [
        event(0, "session.start", {"sessionId": "s1", "version": 1}),
        event(1, "user.message", {"content": "Fix the flaky test."}),
        event(2, "assistant.turn_start", {"turnId": "0"}),
        event(3, "assistant.message", opaque),
        event(4, "assistant.message", {**opaque, "messageId": "m2", "content": "Done."}),
        event(5, "session.usage_checkpoint", {"totalNanoAiu": 310218050000, "totalPremiumRequests": 0}),
        event(6, "session.context_changed", {"cwd": "/w", "branch": "fix/flaky"}),
    ]
    text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    stats = ReadStats()
    (t,) = read_text(text, path="events.jsonl", stats=stats)
    assert [(u.role, u.content) for u in t.units] == [("user", "Fix the flaky test."), ("assistant", "Done.")]
    assert t.metadata["model"] == "gpt-5.6-sol"
    assert stats.skipped_non_message["assistant.message:reasoningOpaque"] == 1
    assert "provider_usage" not in t.metadata  # a billing checkpoint counts no call's tokens
    assert written([t]) == text  # every event back, in its place
    assert problems("openai", written([t], "openai")) == []


def test_copilot_1072_log_reads_without_empty_messages(realdata: Path) -> None:
    path = realdata / "copilot-cli" / (
        "JeffreyCA__azure-dev__entire-checkpoints-7E-01KXYAY6X6AX6YHS3EQP27BY7E__0-full@091d53d9.events.jsonl")
    events = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    silent = [e for e in events if e["type"] == "assistant.message" and not e["data"]["content"]
              and not e["data"]["toolRequests"] and not e["data"].get("reasoningText")]
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert len(silent) == stats.skipped_non_message["assistant.message:reasoningOpaque"] == 6
    assert not [u for u in t.units if u.role == "assistant" and not (u.content or u.tool_calls or u.reasoning)]
    for kind in ("session.warning", "session.plan_changed", "session.usage_checkpoint", "session.context_changed"):
        assert stats.skipped_non_message[kind] == sum(e["type"] == kind for e in events) > 0
    assert written([t]) == path.read_text(encoding="utf-8")
    assert not [p for p in problems("openai", written([t], "openai")) if "empty" in p]


# ---------------------------------------------------------------- Claude Code 2.x and Codex


def test_claude_code_2x_sub_agents_and_compaction(realdata: Path) -> None:
    path = realdata / "claude-code" / "FSM1__cipher-box__checkpoints-v1__af-1dd25ebb3e-8@9db16e5e.jsonl"
    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    agent = sum(r["type"] == "progress" and r["data"].get("type") == "agent_progress" for r in records)
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert stats.skipped_sidechain == agent > 0 and t.units[0].type == "summary"
    (side,) = read_path(str(path), ReadOptions(include_sidechains=True, include_compacted=True))
    assert sum(bool(u.meta.get("sidechain")) for u in side.units) > 0 and not orphan_results(side.units)
    for opts in (ReadOptions(), ReadOptions(include_sidechains=True, include_compacted=True)):
        assert written(list(read_path(str(path), opts))) == path.read_text(encoding="utf-8")


def test_a_claude_code_log_claude_code_compacted_keeps_its_cut_under_ctxkit_summary(realdata: Path) -> None:
    """Where Claude Code had compacted a log, the context ctxkit writes in its place (Claude
    Code's summary among what ctxkit summarized; on one log a request kept before ctxkit's
    summary) starts where Claude Code's did: the log reads back as compacted, not with the
    history before Claude Code's compaction."""
    from ctxkit.compaction import CompactSettings
    from ctxkit.compaction.run import compact_one
    from ctxkit.formats.claude_code import ROOT
    from ctxkit.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    cut = 0
    for path in sorted((realdata / "claude-code").glob("*.jsonl")):
        (t,) = read_path(str(path))
        if ROOT not in t.metadata:
            continue
        cut += 1
        n = count_transcript(t, tok).total
        settings = CompactSettings(limit=n // 2, target=n // 3, tokenizer=tok, use_usage=False)
        result = compact_one(t, settings)
        assert t.units[0].type == "summary"  # Claude Code's own, the context's first unit
        assert t.units[0].id not in {u.id for u in result.transcript.units}  # in ctxkit's summary
        text = written([result.transcript])
        stats = ReadStats()
        (back,) = read_text(text, stats=stats)
        assert [u.content for u in back.units] == [u.content for u in result.transcript.units], path.name
        assert stats.skipped_non_message["before Claude Code's last compaction"] > 0
        assert count_transcript(back, tok).total < n
    assert cut >= 3


def test_codex_replacement_history_units_are_their_compacted_record(realdata: Path) -> None:
    path = realdata / "codex" / "EntityProcess__agentv__checkpoints-v1__00-34f597b72d-1@d5f0c1dc.jsonl"
    (t,) = read_path(str(path))
    base = t.metadata["codex_base"]["record"]
    assert base["type"] == "compacted" and base["payload"]["window_number"] == 2
    opening = [u for u in t.units if u.meta.get("item") is not None]
    assert opening and all(u.group == t.metadata["codex_base"]["index"] for u in opening)
    assert written([t]) == path.read_text(encoding="utf-8")
    # a placeholder made among them goes into the record's history, so Codex resumes with it
    units = list(t.units)
    units.insert(2, Unit(id="p", role="user", type="placeholder", content="[3 messages archived]"))
    records = [json.loads(x) for x in written([t.replace(units=units)]).splitlines()]
    compacted = [r for r in records if r["type"] == "compacted"][-1]
    texts = [b.get("text") for item in compacted["payload"]["replacement_history"] for b in item.get("content") or []]
    assert "[3 messages archived]" in texts
    assert compacted["payload"]["replacement_history"][-1]["type"] == "compaction"  # the summary stays last
    assert problems("codex", "\n".join(json.dumps(r) for r in records)) == []


# ---------------------------------------------------------------- Cline


def test_cline_results_in_user_text_are_paired_with_their_calls() -> None:
    """Cline's tool results come back as user text (`[read_file for 'a.py'] Result:`): each is
    paired with the open call of its tool. A real conversation written as a Cline task and read
    back keeps its calls and results, and writes back as it was read."""
    (t,) = read_path(str(SAMPLES / "gemini-cli-session.json"))
    text = written([t], "cline")
    assert problems("cline", text) == []
    messages = json.loads(text)
    results = [b["text"] for m in messages if m["role"] == "user" for b in m["content"] if "] Result:" in b["text"]]
    assert len(results) == len([u for u in t.units if u.role == "tool"]) > 0
    (c,) = read_text(text)
    assert c.source_format == "cline" and not orphan_results(c.units)
    assert [(u.role, u.content, u.tool_call_id) for u in c.units] == [(u.role, u.content, u.tool_call_id) for u in t.units]
    assert written([c]) == text
    # as Anthropic messages, every call gets its tool_result
    assert problems("anthropic", written([c], "anthropic")) == []


def test_an_older_cline_task_with_xml_calls() -> None:
    """Older Cline tasks call tools with XML tags in the assistant's text."""
    task = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nfix the test\n</task>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking.\n<read_file>\n<path>a.py</path>\n</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'a.py'] Result:\nprint(1)"},
                                     {"type": "text", "text": "<environment_details>\nnone\n</environment_details>"}]},
    ]
    (t,) = read_text(json.dumps(task))
    assert t.source_format == "cline"
    call = t.units[1].tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "a.py"})
    result = t.units[2]
    assert (result.role, result.tool_call_id, result.content) == ("tool", call.id, "print(1)")
    assert t.units[3].content.startswith("<environment_details>")
    units = list(t.units)
    units[2] = units[2].replace(content="[archived]")
    back = json.loads(written([t.replace(units=units)]))
    assert back[2]["content"][0]["text"] == "[read_file for 'a.py'] Result:\n[archived]"
    assert back[2]["content"][1] == task[2]["content"][1] and back[:2] == task[:2]


def test_a_legacy_codex_rollout_reads_and_writes_back_in_its_layout() -> None:
    """Codex CLI rollouts from before mid 2025 have no envelope: a header line, state markers,
    bare response items (the layout openai/codex's RolloutRecorder wrote then; no licensed real
    one was found to ship, so this is that layout, item for item)."""
    lines = [
        {"id": "0198b0b4-3d2e-7c41-9a55-1f0e2d3c4b5a", "timestamp": "2025-08-14T10:02:11.520Z",
         "instructions": None, "git": {"commit_hash": "3f2a", "branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a.py\\n\"}"},
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file: a.py."}]},
    ]
    text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)
    (t,) = read_text(text, path="rollout.jsonl")
    assert t.source_format == "codex" and t.id == lines[0]["id"]
    assert [(u.role, u.tool_call_id) for u in t.units] == [("user", None), ("assistant", None), ("tool", "call_1"),
                                                           ("assistant", None)]
    assert written([t]) == text
    units = list(t.units)
    units[2] = units[2].replace(content="[archived]")
    back = [json.loads(x) for x in written([t.replace(units=units)]).splitlines()]
    assert back[5] == {**lines[5], "output": "[archived]"} and back[:5] == lines[:5]
    assert problems("codex", written([t])) == []
