"""Formats: detection, reading every real format, round trips, layouts, and bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proptest import examples

from ctxkit.errors import InputError, UsageError
from ctxkit.formats import (
    FORMATS,
    WRITABLE,
    ReadOptions,
    ReadStats,
    codex,
    detect_format,
    expand_paths,
    output_format_for,
    read_path,
    read_text,
    write_path,
    write_transcripts,
)
from ctxkit.formats.common import args_object
from ctxkit.model import Transcript, Unit

# ---------------------------------------------------------------- helpers


def written(ts: list[Transcript] | Transcript, fmt: str | None = None) -> str:
    buf = io.StringIO()
    write_transcripts([ts] if isinstance(ts, Transcript) else ts, buf, fmt)
    return buf.getvalue()


def parsed_records(text: str) -> Any:
    """The records of a written file: one JSON document, or a list of JSONL lines."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return [orjson.loads(line) for line in text.split("\n") if line.strip()]


def carried(t: Transcript, fmt: str, same: bool = False) -> Any:
    """What a transcript written in `fmt` keeps of `t` (`same`: `t` was read from `fmt`).

    Formats other than units carry no reasoning of their own making (thinking needs its
    signature) and no message that is only reasoning; Claude Code logs hold no system prompt;
    the Anthropic and ShareGPT system prompt is one top-level text; the Anthropic, app-log and
    ShareGPT writers leave out empty assistant messages; ShareGPT numbers its calls and writes
    them one at a time, so it is compared as text, calls and results. ATIF keeps every unit;
    aider keeps user and assistant text (tool results and system prompts are `> ` notices, not
    units; calls are lines of the reply; replies no notice separates read back as one).
    SpecStory holds no system prompt and no message of blank text, names calls by their place
    and writes each output in its call's block, read back right after the call."""
    if fmt in ("units", "atif"):
        return fields(t)
    if fmt == "aider":
        return aider_carried(t, same)
    if fmt == "specstory":
        return specstory_carried(t)
    units = [u for u in t.units if not (u.role == "assistant" and not u.content and not u.tool_calls
                                        and (u.reasoning or fmt != "openai"))]
    if fmt in ("claude-code", "gemini-cli", "gemini-cli-jsonl", "opencode", "cline", "qwen-code", "claude-code-stream",
               "codex-exec", "pi"):  # no system prompt in the file
        units = [u for u in units if u.role != "system"]
    if fmt == "codex-exec":
        return codex_exec_carried(units)
    if fmt in ("gemini-cli", "gemini-cli-jsonl", "opencode", "copilot-cli", "gemini", "cline",
               "qwen-code", "pi"):  # calls' arguments are objects
        if fmt == "gemini" and not same:
            system = [u for u in units if u.role == "system"]
            if system:
                units = [Unit(id="system", role="system", content="\n\n".join(u.content for u in system)),
                         *[u for u in units if u.role != "system"]]
        return [(u.role, u.content, [(c.id, c.name, args_object(c.arguments)) for c in u.tool_calls], u.tool_call_id,
                 "") for u in units]
    if fmt in ("anthropic", "sharegpt") and not same:
        system = [u for u in units if u.role == "system"]
        if system:
            joined = Unit(id="system", role="system", content="\n\n".join(u.content for u in system))
            units = [joined, *[u for u in units if u.role != "system"]]
    if fmt == "sharegpt":
        texts = [(u.role, u.content) for u in units if (u.content or not u.tool_calls) and not (
            u.role == "system" and not u.content)]
        calls = sorted((c.name, json.dumps(orjson.loads(c.arguments or "{}"), sort_keys=True))
                       for u in units for c in u.tool_calls)
        return texts, calls
    if fmt == "codex":  # one response item per call, the text its own message
        units = [part for u in units for part in (
            [u] if not (u.content and u.tool_calls) else
            [u.replace(tool_calls=[]), *(u.replace(content="", tool_calls=[c]) for c in u.tool_calls)])]
        units = [part for u in units for part in (
            [u] if len(u.tool_calls) < 2 else [u.replace(tool_calls=[c]) for c in u.tool_calls])]
    if fmt == "openhands":  # one action per call, the response's text with the first
        units = [part for u in units for part in (
            [u] if len(u.tool_calls) < 2 else
            [u.replace(tool_calls=[c], content=u.content if k == 0 else "") for k, c in enumerate(u.tool_calls)])]
    return [(u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id, "") for u in units]


def codex_exec_carried(units: list[Unit]) -> list[tuple[Any, ...]]:
    """`codex exec --json` prints a response's text as its own item and each call with its
    result as one item: a call, then its result (an empty one for a call never answered)."""
    results = {u.tool_call_id: u for u in units if u.role == "tool"}
    out: list[tuple[Any, ...]] = []
    done: set[Any] = set()
    for u in units:
        if u.role == "tool":
            if u.tool_call_id not in done:
                out.append(("tool", u.content, [], u.tool_call_id))
            continue
        if u.content or not u.tool_calls:
            out.append((u.role, u.content, [], None))
        for c in u.tool_calls:
            out.append(("assistant", "", [(c.id, c.name, args_object(c.arguments))], None))
            found = results.get(c.id)
            out.append(("tool", found.content if found is not None else "", [], c.id))
            done.add(c.id)
    return out


def aider_carried(t: Transcript, same: bool = False) -> list[tuple[str, str]]:
    """(`same`: as read back, where only a notice separates two replies: nothing to join.)"""
    out: list[tuple[str, str]] = []
    prev = ""
    for u in t.units:
        if u.role == "assistant" and not u.content and not u.tool_calls:
            continue
        if u.role not in ("user", "assistant"):
            prev = "notice"
            continue
        if u.role == "user":
            text = u.content.rstrip() or "<blank>"
        else:
            calls = [f"[tool call {c.id}: {c.name} {c.arguments}]".rstrip() for c in u.tool_calls]
            text = "\n\n".join(p for p in (u.content.strip(), *calls) if p).strip()
            if not text:
                continue  # aider writes a reply stripped: nothing of it is left
        if u.role == "assistant" and prev == "assistant" and not same:
            out[-1] = ("assistant", out[-1][1] + "\n\n\n" + text)
        else:
            out.append((u.role, text))
        prev = u.role
    return out


def specstory_carried(t: Transcript) -> list[tuple[Any, ...]]:
    outputs = {u.tool_call_id: u.content for u in t.units if u.role == "tool"}
    out: list[tuple[Any, ...]] = []
    for u in t.units:
        text = u.content if u.content.strip() else ""
        if u.role in ("system", "tool") or not (text or u.tool_calls):
            continue
        out.append((u.role, text, [(c.name, c.arguments, outputs.get(c.id, "")) for c in u.tool_calls]))
    return out


def fields(t: Transcript) -> list[tuple[Any, ...]]:
    return [
        (u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id, u.reasoning)
        for u in t.units
    ]


def assert_paired(t: Transcript) -> None:
    """Every tool result answers a call made before it."""
    seen: set[str] = set()
    for u in t.units:
        for c in u.tool_calls:
            seen.add(c.id)
        if u.role == "tool":
            assert u.tool_call_id in seen, f"{t.id}: result {u.tool_call_id} without its call"


def one(path: Path | str, opts: ReadOptions | str | None = None, **kw: Any) -> Transcript:
    ts = list(read_path(str(path), opts, **kw))
    assert len(ts) == 1
    return ts[0]


def files(realdata: Path, folder: str) -> list[Path]:
    found = sorted((realdata / folder).glob("*.json*"))
    assert found, folder
    return found


# ---------------------------------------------------------------- registry


def test_registry_names_and_writers() -> None:
    """Every module of ctxkit/formats that defines a format is in the registry (its one line)."""
    from ctxkit.formats import registry

    folder = Path(registry.__file__).parent
    defining = {p.stem for p in folder.glob("*.py") if "\nFORMAT = Format." in p.read_text(encoding="utf-8")}
    assert set(registry._MODULES) == defining
    assert len(FORMATS) == len(defining)  # one format each, under its own name
    assert sorted(WRITABLE) == sorted(FORMATS)  # every format writes what it reads


def test_unknown_format_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="known: aider, anthropic, atif, claude-code"):
        read_text("[]", "vertex")
    with pytest.raises(UsageError, match="output format"):
        output_format_for(Transcript(units=[]), "vertex")


def test_output_format_defaults() -> None:
    assert output_format_for(Transcript(units=[], source_format="anthropic"), None) == "anthropic"
    for fmt in ("claude-code", "codex", "sharegpt"):
        assert output_format_for(Transcript(units=[], source_format=fmt), None) == fmt
    assert output_format_for(Transcript(units=[], source_format="claude-code"), "openai") == "openai"


# ---------------------------------------------------------------- real data, per folder


def test_openai_chat_realdata(realdata: Path) -> None:
    for path in files(realdata, "openai-chat"):
        t = one(path)
        assert (t.source_format, t.layout) == ("openai", "array")
        records = json.loads(path.read_text())
        assert len(t.units) == len(records)
        assert t.units[0].role == "system" and t.units[0].content.startswith("# Airline Agent Policy")
        assert t.id == path.name[: -len(".json")]
        assert_paired(t)
        calls = [u for u in t.units if u.tool_calls]
        results = [u for u in t.units if u.role == "tool"]
        assert calls and len(results) == sum(len(u.tool_calls) for u in calls)
        assert all(r.name for r in results)
        assert all(u.raw is records_i or u.raw == records_i for u, records_i in zip(t.units, records, strict=True))


def test_anthropic_realdata(realdata: Path) -> None:
    for path in files(realdata, "anthropic-messages"):
        t = one(path)
        assert (t.source_format, t.layout) == ("anthropic", "object")
        assert t.envelope["model"].startswith("claude-")
        doc = json.loads(path.read_text())
        n_results = sum(
            1 for m in doc["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"
        )
        assert sum(1 for u in t.units if u.role == "tool") == n_results
        assert_paired(t)
        # Results that shared one user message share its group and raw record.
        multi = [u for u in t.units if u.meta.get("group_size", 1) > 1]
        for u in multi:
            assert u.raw is doc["messages"][u.group] or u.raw == doc["messages"][u.group]


def test_mini_swe_agent_realdata(realdata: Path) -> None:
    for path in files(realdata, "mini-swe-agent"):
        t = one(path)
        doc = json.loads(path.read_text())
        assert (t.source_format, t.layout) == ("openai", "object")
        assert t.id == doc["instance_id"]
        assert set(t.envelope) == {"info", "trajectory_format", "instance_id"}
        last, call = t.units[-1], t.units[-2]
        # the submission is the output of the last command, which mini-swe-agent logs as `exit`
        assert last.meta["source_role"] == "exit" and last.role == "tool"
        assert last.tool_call_id == call.tool_calls[-1].id and last.name == "bash"
        assert_paired(t)
        assert {u.type for u in t.units if u.role == "tool"} >= {"code", "log"}
        usage = t.metadata["provider_usage"]
        assert usage["source"] == "mini-swe-agent"
        assert len(usage["calls"]) == doc["info"]["model_stats"]["api_calls"]
        for call in usage["calls"]:
            assert t.units[call["after_unit"] + 1].role == "assistant"


def test_claude_code_realdata(realdata: Path) -> None:
    summaries = 0
    for path in files(realdata, "claude-code"):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        stats = ReadStats()
        t = one(path, ReadOptions(include_compacted=True), stats=stats)
        assert (t.source_format, t.layout) == ("claude-code", "lines")
        assert t.id == records[0].get("sessionId") or t.id == next(r["sessionId"] for r in records if "sessionId" in r)
        kinds: dict[str, int] = {}

        def agent(r: dict[str, Any]) -> bool:  # a sub-agent's turn inside a 2.x progress record
            return r["type"] == "progress" and r["data"].get("type") == "agent_progress"

        for r in records:
            if r["type"] not in ("user", "assistant") and not agent(r):
                kinds[r["type"]] = kinds.get(r["type"], 0) + 1
        assert stats.skipped_non_message == kinds
        side = sum(1 for r in records if r["type"] in ("user", "assistant") and r.get("isSidechain") or agent(r))
        assert stats.skipped_sidechain == side
        assert not any(u.meta.get("sidechain") for u in t.units)
        main_assistant = [r for r in records if r["type"] == "assistant" and not r.get("isSidechain")]
        ids = {r["message"]["id"] for r in main_assistant}
        assert sum(1 for u in t.units if u.role == "assistant") == len(ids)  # split records merged
        assert_paired(t)
        usage = t.metadata["provider_usage"]
        assert usage["source"] == "claude-code"
        assert len(usage["calls"]) <= len(ids)
        for call in usage["calls"]:
            assert t.units[call["after_unit"] + 1].role == "assistant"
            assert call["input_tokens"] > 0
        compact = [r for r in records if r.get("isCompactSummary")]
        typed = [u for u in t.units if u.type == "summary"]
        assert len(typed) == len(compact)
        summaries += len(typed)
        assert all(isinstance(u.timestamp, float) for u in t.units)
    assert summaries >= 1  # one real log has a compaction summary


def test_claude_code_sidechains_included(realdata: Path) -> None:
    path = next(p for p in files(realdata, "claude-code") if "666ba1ad" in p.name)
    main = one(path)
    stats = ReadStats()
    full = one(path, ReadOptions(include_sidechains=True), stats=stats)
    assert stats.skipped_sidechain == 0
    side = [u for u in full.units if u.meta.get("sidechain")]
    assert side and len(full.units) == len(main.units) + len(side)
    assert_paired(full)


def test_claude_code_usage_collected_once_per_message(realdata: Path) -> None:
    path = next(p for p in files(realdata, "claude-code") if "1af7fc5e" in p.name)
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    t = one(path)
    by_id: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["type"] == "assistant":
            by_id[r["message"]["id"]] = r["message"]["usage"]
    calls = t.metadata["provider_usage"]["calls"]
    assert len(calls) == len(by_id)
    first = next(iter(by_id.values()))
    assert calls[0]["input_tokens"] == (
        first["input_tokens"] + first["cache_read_input_tokens"] + first["cache_creation_input_tokens"]
    )
    assert calls[0]["after_unit"] == 1  # the two user messages before the first response


def test_codex_realdata(realdata: Path) -> None:
    path = files(realdata, "codex")[0]
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    stats = ReadStats()
    t = one(path, stats=stats)
    assert (t.source_format, t.layout) == ("codex", "lines")
    assert t.id == records[0]["payload"]["id"]
    items = [r["payload"] for r in records if r["type"] == "response_item"]
    calls = [p for p in items if p["type"] == "function_call"]
    outputs = [p for p in items if p["type"] == "function_call_output"]
    assert sum(len(u.tool_calls) for u in t.units) == len(calls)
    assert sum(1 for u in t.units if u.role == "tool") == len(outputs)
    assert_paired(t)
    assert {u.name for u in t.units if u.role == "tool"} == {"shell", "update_plan"}
    reasoning = [u for u in t.units if u.type == "reasoning"]
    assert reasoning and all(u.reasoning and not u.content for u in reasoning)
    assert stats.skipped_non_message["turn_context"] == sum(1 for r in records if r["type"] == "turn_context")
    assert stats.skipped_non_message["session_meta"] == 1
    assert stats.skipped_non_message["response_item:ghost_snapshot"] == 1
    n_events = sum(1 for r in records if r["type"] == "event_msg")
    assert sum(v for k, v in stats.skipped_non_message.items() if k.startswith("event_msg")) == n_events
    usage = t.metadata["provider_usage"]["calls"]
    totals = {
        json.dumps(r["payload"]["info"]["total_token_usage"])
        for r in records
        if r["type"] == "event_msg" and r["payload"]["type"] == "token_count" and r["payload"]["info"]
    }
    assert len(usage) == len(totals)  # repeated counts collapsed
    assert usage[0]["input_tokens"] == 10128
    for call in usage:
        assert t.units[call["after_unit"] + 1].role == "assistant"


def test_sharegpt_realdata(realdata: Path) -> None:
    path = files(realdata, "sharegpt")[0]
    doc = json.loads(path.read_text())
    ts = list(read_path(str(path)))
    assert len(ts) == len(doc) == 300
    for i, (t, conv) in enumerate(zip(ts, doc, strict=True)):
        assert (t.source_format, t.layout, t.line) == ("sharegpt", "dataset", i + 1)
        assert t.id == f"{path.name[:-5]}#{i + 1}"
        assert len(t.units) == len(conv["conversations"])
        assert t.tools == json.loads(conv["tools"]) if conv["tools"] else t.tools == []
        assert_paired(t)
    first = ts[0]
    call = next(u for u in first.units if u.tool_calls).tool_calls[0]
    assert (call.id, call.name) == ("call_0", "search_recipes")
    assert json.loads(call.arguments) == {"ingredients": ["chicken", "bell peppers", "rice"]}
    result = next(u for u in first.units if u.role == "tool")
    assert (result.tool_call_id, result.name) == ("call_0", "search_recipes")


@pytest.mark.parametrize("folder", ["openai-chat", "anthropic-messages", "mini-swe-agent"])
def test_realdata_round_trip(realdata: Path, folder: str) -> None:
    for path in files(realdata, folder):
        ts = list(read_path(str(path)))
        out = written(ts)
        original = orjson.loads(path.read_bytes())
        # record for record, mini-swe-agent's final `exit` role included: only a changed
        # (compacted) transcript is rewritten in roles the API takes
        assert orjson.loads(out) == original
        again = read_text(out, path=str(path))
        assert [fields(t) for t in again] == [fields(t) for t in ts]
        assert written(again) == out


@pytest.mark.parametrize("folder", ["claude-code", "codex", "sharegpt"])
def test_app_formats_convert(realdata: Path, folder: str) -> None:
    path = files(realdata, folder)[0]
    ts = list(read_path(str(path)))
    for fmt in WRITABLE:
        back = read_text(written(ts, fmt), fmt)  # plain text chats are ambiguous: force it
        if FORMATS[fmt].shape == "log":
            assert len(back) == 1 or fmt != folder  # an app log is one session
            continue
        assert [b.source_format for b in back] == [fmt] * len(ts)
        if fmt in ("gemini-cli", "gemini-cli-jsonl", "opencode", "gemini", "cline"):
            # an agent's own shape (no system prompt, a call holding its result): every
            # message's text comes back
            for b, t in zip(back, ts, strict=True):
                texts = "\n".join(u.content for u in b.units)
                assert all(u.content in texts for u in t.units if u.role != "system"), fmt
            continue
        assert [carried(b, fmt, same=True) for b in back] == [carried(t, fmt) for t in ts]


def test_sample_transcripts_read(repo_root: Path) -> None:
    folder = repo_root / "sample_transcripts"
    assert (folder / "tau-bench-airline.json").is_file()
    expected = {
        "tau-bench-airline.json": "openai",
        "claude-code-session.jsonl": "claude-code",
        "codex-rollout.jsonl": "codex",
        "mini-swe-agent-django-11039.traj.json": "openai",
        "anthropic-messages.json": "anthropic",
        "sharegpt-glaive-toolcall.json": "sharegpt",
    }
    for name, fmt in expected.items():
        ts = list(read_path(str(folder / name)))
        assert ts and all(t.source_format == fmt and t.units for t in ts), name
    assert "MIT" in (folder / "SOURCES.md").read_text()


# ---------------------------------------------------------------- content blocks of other types

_PDF = "JVBERi0xLjQK" * 400  # a base64 payload: never text


def test_unknown_and_document_blocks_count_what_the_model_reads() -> None:
    msgs = [
        {"role": "user", "content": [
            {"type": "text", "text": "Summarize these."},
            {"type": "document", "title": "Notes", "source": {"type": "text", "media_type": "text/plain",
                                                              "data": "plain document body"}},
            {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "chunk one"}]}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": _PDF}},
            {"type": "search_result", "source": "https://x", "title": "t",
             "content": [{"type": "text", "text": "found it"}]},
        ]},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [
                {"type": "web_search_result", "url": "https://example.org", "title": "Ex",
                 "encrypted_content": "EqYBCioIB" * 50}]},
            {"type": "text", "text": "Done."},
        ]},
        {"role": "user", "content": [{"type": "widget", "spec": {"a": 1}},
                                     {"type": "widget", "spec": {"a": 2}}]},
    ]
    stats = ReadStats()
    (t,) = read_text(json.dumps({"messages": msgs, "system": "s"}), path="doc.json", stats=stats)
    assert t.source_format == "anthropic"
    user, assistant, widget = t.units[1], t.units[2], t.units[3]
    assert user.content == "Summarize these.\nNotes\nplain document body\nchunk one\nfound it"
    assert user.images == 1 and "JVBER" not in user.content
    assert "https://example.org" in assistant.content and "EqYB" not in assistant.content
    assert assistant.content.endswith("Done.")
    assert widget.content == '{"type":"widget","spec":{"a":1}}\n{"type":"widget","spec":{"a":2}}'
    assert stats.warnings == [
        "doc.json: unknown content block type 'search_result' counted as its text fields",
        "doc.json: unknown content block type 'web_search_result' counted as its JSON text",
        "doc.json: unknown content block type 'web_search_tool_result' counted as its text fields",
        "doc.json: unknown content block type 'widget' counted as its JSON text",
    ]
    assert written(t) == written(read_text(written(t))[0])  # untouched units still write their raw records


def test_openai_refusal_and_file_parts_are_counted() -> None:
    msgs = [
        {"role": "user", "content": [
            {"type": "text", "text": "Read this"},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64," + _PDF}},
            {"type": "input_audio", "input_audio": {"data": _PDF, "format": "wav"}},
        ]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
    ]
    stats = ReadStats()
    (t,) = read_text(json.dumps(msgs), path="chat.json", stats=stats)
    assert t.source_format == "openai"
    user, assistant = t.units
    assert user.content.startswith("Read this\n") and "report.pdf" in user.content
    assert "JVBER" not in user.content and user.images == 1
    assert '"format":"wav"' in user.content
    assert assistant.content == "I can't help with that."
    assert stats.warnings == ["chat.json: unknown content block type 'input_audio' counted as its JSON text"]
    assert parsed_records(written(t)) == msgs


def test_unknown_block_reported_once_per_file() -> None:
    line = json.dumps({"messages": [{"role": "user", "content": [{"type": "widget", "n": 1}]}]})
    stats = ReadStats()
    ts = read_text(line + "\n" + line + "\n", path="set.jsonl", stats=stats)
    assert [t.units[0].content for t in ts] == ['{"type":"widget","n":1}'] * 2
    assert stats.warnings == ["set.jsonl: unknown content block type 'widget' counted as its JSON text"]


def test_anthropic_blocks_read_as_openai_keep_their_text(repo_root: Path) -> None:
    path = repo_root / "sample_transcripts" / "anthropic-messages.json"
    doc = orjson.loads(path.read_bytes())
    stats = ReadStats()
    (t,) = read_path(str(path), "openai", stats=stats)
    text = "\n".join(u.content for u in t.units)
    for m in doc["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else []:
            if block["type"] == "tool_use":
                assert json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False)[:40] in text
            elif block["type"] == "tool_result":
                inner = block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
                assert inner[:40] in text
    assert any("'tool_use'" in w for w in stats.warnings)
    assert orjson.loads(written(t)) == doc  # round trip stays exact: units keep their raw records


# ---------------------------------------------------------------- synthetic app logs (no realdata needed)


def _cc(kind: str, uuid: str, message: Any = None, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"parentUuid": None, "isSidechain": False, "sessionId": "sess-1", "type": kind,
                           "uuid": uuid, "timestamp": "2025-01-01T00:00:00.500Z"}
    if message is not None:
        rec["message"] = message
    rec.update(extra)
    return rec


def _usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 10,
            "output_tokens": out}


# Linked as Claude Code links its records (each main-thread record to the one before it); the
# sidechain starts its own chain and Claude Code's compaction summary c1 a new one (no parent).
CLAUDE_LOG = [
    {"type": "summary", "summary": "Earlier work", "leafUuid": "x"},
    _cc("user", "u1", {"role": "user", "content": "List the files"}),
    _cc("assistant", "a1", {"id": "msg_1", "role": "assistant", "usage": _usage(5, 1),
                            "content": [{"type": "thinking", "thinking": "use ls"}]}, parentUuid="u1"),
    _cc("assistant", "a2", {"id": "msg_1", "role": "assistant", "usage": _usage(5, 9),
                            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}, parentUuid="a1"),
    _cc("assistant", "a3", {"id": "msg_1", "role": "assistant", "usage": _usage(5, 12),
                            "content": [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "a.py"}}]}, parentUuid="a2"),
    _cc("user", "r1", {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.py\nb.py"},
        {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
         "content": [{"type": "text", "text": "no such file"}, {"type": "image", "source": {}}]}]},
        toolUseResult={"stdout": "a.py"}, parentUuid="a3"),
    _cc("system", "s1", None, content="hook ran", level="info", parentUuid="r1"),
    {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
    _cc("assistant", "side1", {"id": "msg_side", "role": "assistant", "usage": _usage(50, 5),
                               "content": [{"type": "text", "text": "subagent says hi"}]}, isSidechain=True),
    _cc("user", "c1", {"role": "user", "content": "This session is being continued..."}, isCompactSummary=True),
    _cc("assistant", "a4", {"id": "msg_2", "role": "assistant", "usage": _usage(7, 3),
                            "content": [{"type": "text", "text": "Two files."}]}, parentUuid="c1"),
]


def test_claude_code_synthetic_log() -> None:
    text = "".join(json.dumps(r) + "\n" for r in CLAUDE_LOG)
    stats = ReadStats()
    (t,) = read_text(text, ReadOptions(include_compacted=True), path="session.jsonl", stats=stats)
    assert (t.source_format, t.id) == ("claude-code", "sess-1")
    assert [(u.role, u.type) for u in t.units] == [
        ("user", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("tool", "code"),
        ("user", "summary"), ("assistant", "message"),
    ]
    merged = t.units[1]
    assert [c.name for c in merged.tool_calls] == ["Bash", "Read"] and merged.reasoning == "use ls"
    assert merged.id == "a1" and merged.meta["records"] == 3
    bash, read = t.units[2], t.units[3]
    assert (bash.tool_call_id, bash.name, bash.content) == ("t1", "Bash", "a.py\nb.py")
    assert (read.name, read.content, read.images, read.meta["is_error"]) == ("Read", "no such file", 1, True)
    assert bash.group == read.group == 5 and bash.id == "r1" and read.id == "r1#1"
    assert t.units[0].timestamp == 1735689600.5
    assert stats.skipped_non_message == {"summary": 1, "system": 1, "file-history-snapshot": 1}
    assert stats.skipped_sidechain == 1
    # usage once per response, from its last record; the model had seen unit 0 before msg_1
    assert t.metadata["provider_usage"] == {"source": "claude-code", "calls": [
        {"after_unit": 0, "input_tokens": 115, "cache_read_tokens": 100, "cache_write_tokens": 10, "output_tokens": 12},
        {"after_unit": 4, "input_tokens": 117, "cache_read_tokens": 100, "cache_write_tokens": 10, "output_tokens": 3},
    ]}
    (side,) = read_text(text, ReadOptions(include_sidechains=True, include_compacted=True))
    assert [u.content for u in side.units if u.meta.get("sidechain")] == ["subagent says hi"]
    # written as anthropic: one assistant message, both results in one user message with the
    # user text after them (the API reads consecutive user messages as one turn anyway)
    doc = orjson.loads(written(t, "anthropic"))
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in doc["messages"][2]["content"]] == ["tool_result", "tool_result", "text"]
    # thinking without its signature is left out: the API refuses it
    assert [b["type"] for b in doc["messages"][1]["content"]] == ["tool_use", "tool_use"]


def test_claude_code_keeps_only_the_context_after_its_last_compaction() -> None:
    second = _cc("user", "c2", {"role": "user", "content": "This session is being continued... again"},
                 isCompactSummary=True)
    after = _cc("assistant", "a5", {"id": "msg_3", "role": "assistant", "usage": _usage(9, 2),
                                    "content": [{"type": "text", "text": "Still two files."}]}, parentUuid="c2")
    text = "".join(json.dumps(r) + "\n" for r in [*CLAUDE_LOG, second, after])
    stats = ReadStats()
    (t,) = read_text(text, path="session.jsonl", stats=stats)
    assert [(u.id, u.type) for u in t.units] == [("c2", "summary"), ("a5", "message")]
    # message records before the last summary: u1, a1-a3 (one response), r1, c1, a4; not the sidechain
    assert stats.skipped_non_message == {
        "summary": 1, "system": 1, "file-history-snapshot": 1, "before Claude Code's last compaction": 7}
    assert stats.skipped_sidechain == 1
    assert "session.jsonl: 7 records before Claude Code's last compaction summary left out" in stats.warnings[0]
    assert t.metadata["provider_usage"]["calls"] == [
        {"after_unit": 0, "input_tokens": 119, "cache_read_tokens": 100, "cache_write_tokens": 10, "output_tokens": 2}]
    assert t.units[0].raw == second  # still the source record: writes back unchanged
    # one summary: the units from it on, calls moved to the kept units
    (one_summary,) = read_text("".join(json.dumps(r) + "\n" for r in CLAUDE_LOG))
    assert [u.id for u in one_summary.units] == ["c1", "a4"]
    assert one_summary.metadata["provider_usage"]["calls"] == [
        {"after_unit": 0, "input_tokens": 117, "cache_read_tokens": 100, "cache_write_tokens": 10, "output_tokens": 3}]
    (full,) = read_text(text, ReadOptions(include_compacted=True))
    assert len(full.units) == 8 and [c["after_unit"] for c in full.metadata["provider_usage"]["calls"]] == [0, 4, 6]


def test_claude_code_compaction_realdata(realdata: Path) -> None:
    path = next(p for p in files(realdata, "claude-code") if "b9712494" in p.name)
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    k = max(i for i, r in enumerate(records) if r.get("isCompactSummary"))
    before = sum(1 for r in records[:k] if r["type"] in ("user", "assistant") and not r.get("isSidechain"))
    stats = ReadStats()
    t = one(path, stats=stats)
    full = one(path, ReadOptions(include_compacted=True))
    assert t.units[0].type == "summary" and t.units[0].raw is not None and t.units[0].raw["uuid"] == records[k]["uuid"]
    assert stats.skipped_non_message["before Claude Code's last compaction"] == before > 0
    assert [u.id for u in t.units] == [u.id for u in full.units[len(full.units) - len(t.units):]]
    assert_paired(t)  # Claude Code compacts between turns: no result loses its call
    calls = t.metadata["provider_usage"]["calls"]
    assert calls and all(t.units[c["after_unit"] + 1].role == "assistant" for c in calls)
    assert len(calls) < len(full.metadata["provider_usage"]["calls"])
    # the first call after the summary saw the summary and little else (plus the unlogged system prompt)
    assert calls[0]["after_unit"] == 0


CODEX_LOG = [
    {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "rollout-1", "cwd": "/x"}},
    {"timestamp": "2025-01-01T00:00:01Z", "type": "response_item",
     "payload": {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]}},
    {"timestamp": "2025-01-01T00:00:01Z", "type": "response_item",
     "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}},
    {"timestamp": "2025-01-01T00:00:01Z", "type": "event_msg", "payload": {"type": "user_message", "message": "fix it"}},
    {"timestamp": "2025-01-01T00:00:02Z", "type": "turn_context", "payload": {"model": "gpt-5-codex"}},
    {"timestamp": "2025-01-01T00:00:02Z", "type": "event_msg", "payload": {"type": "token_count", "info": None}},
    {"timestamp": "2025-01-01T00:00:02Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": 900, "output_tokens": 20},
        "last_token_usage": {"input_tokens": 900, "cached_input_tokens": 800, "output_tokens": 20}}}},
    {"timestamp": "2025-01-01T00:00:03Z", "type": "response_item", "payload": {
        "type": "reasoning", "summary": [{"type": "summary_text", "text": "**Looking**"}], "encrypted_content": "gAAA"}},
    {"timestamp": "2025-01-01T00:00:03Z", "type": "response_item", "payload": {
        "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}},
    {"timestamp": "2025-01-01T00:00:03Z", "type": "response_item", "payload": {
        "type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"}},
    {"timestamp": "2025-01-01T00:00:04Z", "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a.py\\n\"}"}},
    {"timestamp": "2025-01-01T00:00:04Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": 900, "output_tokens": 20},
        "last_token_usage": {"input_tokens": 900, "cached_input_tokens": 800, "output_tokens": 20}}}},
    {"timestamp": "2025-01-01T00:00:05Z", "type": "response_item", "payload": {
        "type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "call_2"}},
    {"timestamp": "2025-01-01T00:00:05Z", "type": "response_item", "payload": {
        "type": "custom_tool_call_output", "call_id": "call_2", "output": "Done"}},
    {"timestamp": "2025-01-01T00:00:06Z", "type": "compacted", "payload": {"message": "Summary of the work"}},
    {"timestamp": "2025-01-01T00:00:06Z", "type": "response_item", "payload": {"type": "ghost_snapshot"}},
]


def test_codex_synthetic_rollout() -> None:
    text = "".join(json.dumps(r) + "\n" for r in CODEX_LOG)
    stats = ReadStats()
    (t,) = read_text(text, ReadOptions(include_compacted=True), path="rollout.jsonl", stats=stats)
    assert (t.source_format, t.id, t.metadata["model"]) == ("codex", "rollout-1", "gpt-5-codex")
    assert [(u.role, u.type) for u in t.units] == [
        ("system", "message"), ("user", "message"), ("assistant", "reasoning"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("assistant", "tool_call"), ("tool", "tool_result"), ("user", "summary"),
    ]
    assert t.units[0].meta["source_role"] == "developer"
    assert t.units[2].reasoning == "**Looking**" and t.units[2].content == ""
    assert (t.units[4].name, t.units[6].name) == ("shell", "apply_patch")
    assert t.units[5].tool_calls[0].arguments == "*** Begin Patch"
    assert t.metadata["provider_usage"] == {"source": "codex", "calls": [
        {"after_unit": 1, "input_tokens": 900, "cache_read_tokens": 800, "output_tokens": 20}]}
    assert stats.skipped_non_message == {
        "session_meta": 1, "event_msg:user_message": 1, "turn_context": 1, "event_msg:token_count": 3,
        "response_item:reasoning": 1, "response_item:ghost_snapshot": 1,
    }


def _codex(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _item(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"timestamp": "2025-01-01T00:00:09Z", "type": "response_item",
            "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}}


def test_codex_compacted_rollout_reads_as_codex_resumes_it() -> None:
    """By default a rollout is read as Codex rebuilds it at its last compaction: the initial
    context, the user's messages and the summary, then what follows; the rest is counted."""
    stats = ReadStats()
    (t,) = read_text(_codex(*CODEX_LOG, _item("user", "and now?")), path="rollout.jsonl", stats=stats)
    assert [(u.role, u.type, u.content) for u in t.units] == [
        ("system", "message", "rules"), ("user", "message", "fix it"), ("user", "summary", "Summary of the work"),
        ("user", "message", "and now?"),
    ]
    assert stats.skipped_non_message[codex.COMPACTED] == 5  # reasoning, 2 calls, 2 outputs
    assert "provider_usage" not in t.metadata  # the calls before saw another history
    out = io.StringIO()
    write_transcripts([t], out)
    (again,) = read_text(out.getvalue(), path="again.jsonl")
    assert [u.content for u in again.units] == [u.content for u in t.units]
    assert sum(json.loads(x)["type"] == "compacted" for x in out.getvalue().splitlines()) == 1


def test_codex_second_compaction_keeps_user_messages_not_the_old_summary() -> None:
    log = [CODEX_LOG[0], _item("developer", "rules"), _item("user", "<environment_context>cwd</environment_context>"),
           _item("user", "first"), _item("assistant", "ok"),
           {"timestamp": "2025-01-01T00:00:10Z", "type": "compacted", "payload": {"message": "S1"}},
           _item("user", "second"), _item("assistant", "done"),
           {"timestamp": "2025-01-01T00:00:11Z", "type": "compacted", "payload": {"message": "S2"}}]
    (t,) = read_text(_codex(*log), path="r.jsonl")
    assert [u.content for u in t.units] == ["rules", "<environment_context>cwd</environment_context>", "first",
                                            "second", "S2"]
    assert len({u.id for u in t.units}) == len(t.units)


def test_codex_compaction_keeps_the_newest_user_messages_within_its_allowance() -> None:
    big = "word " * 40_000  # 50,000 approximate tokens: more than the allowance on its own
    log = [CODEX_LOG[0], _item("user", big), _item("user", "recent"),
           {"timestamp": "2025-01-01T00:00:10Z", "type": "compacted", "payload": {"message": "S"}}]
    (t,) = read_text(_codex(*log), path="r.jsonl")
    first, recent, summary = t.units
    assert (recent.content, summary.content) == ("recent", "S")
    assert "tokens truncated" in first.content and len(first.content) < 81_000
    assert first.content.startswith("word word") and first.content.rstrip().endswith("word")


def test_codex_replacement_history_is_the_history() -> None:
    replacement = [_item("user", "kept request")["payload"],
                   {"type": "compaction", "encrypted_content": "gAAA"}]
    log = [CODEX_LOG[0], _item("user", "old"), _item("assistant", "old answer"),
           {"timestamp": "2025-01-01T00:00:10Z", "type": "compacted",
            "payload": {"message": "", "replacement_history": replacement}},
           _item("user", "next")]
    (t,) = read_text(_codex(*log), path="r.jsonl")
    assert [u.content for u in t.units] == ["kept request", "next"]
    out = io.StringIO()
    write_transcripts([t], out)
    # every record back: the items before the compaction too (the model no longer reads them)
    assert [json.loads(x) for x in out.getvalue().splitlines()] == log
    (again,) = read_text(out.getvalue(), path="again.jsonl")
    assert [u.content for u in again.units] == ["kept request", "next"]


def test_codex_summary_after_assistant_items_is_a_message_not_a_compacted_record() -> None:
    """Codex drops everything but user messages before a compacted record on resume, so a
    summary placed after the assistant's items is written as a plain message."""
    (t,) = read_text(_codex(CODEX_LOG[0], _item("user", "fix it"), _item("assistant", "looking")), path="r.jsonl")
    summary = Unit(id="s", role="user", type="summary", content="So far: looked.")
    out = io.StringIO()
    write_transcripts([t.replace(units=[*t.units, summary])], out)
    records = [json.loads(x) for x in out.getvalue().splitlines()]
    assert not any(r["type"] == "compacted" for r in records)
    assert records[-1]["payload"]["content"][0]["text"] == "So far: looked."
    out = io.StringIO()
    write_transcripts([t.replace(units=[t.units[0], summary, t.units[1]])], out)
    assert [json.loads(x)["type"] for x in out.getvalue().splitlines()].count("compacted") == 1


def test_sharegpt_synthetic_with_system_and_tools() -> None:
    conv = {
        "system": "You can call tools.",
        "tools": json.dumps([{"name": "wx", "description": "weather", "parameters": {"type": "object"}}]),
        "conversations": [
            {"from": "human", "value": "weather?"},
            {"from": "function_call", "value": json.dumps({"name": "wx", "arguments": {"city": "Oslo"}})},
            {"from": "observation", "value": "{\"t\": 3}"},
            {"from": "gpt", "value": "3 degrees."},
        ],
    }
    (t,) = read_text(json.dumps(conv))
    assert (t.source_format, t.layout) == ("sharegpt", "object")
    assert [(u.role, u.type) for u in t.units] == [
        ("system", "message"), ("user", "message"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "message")]
    assert t.units[0].meta["top_level_system"]
    assert (t.units[3].tool_call_id, t.units[3].name) == ("call_0", "wx")
    assert t.tools[0]["name"] == "wx"
    # written back as it was, by default
    assert orjson.loads(written(t)) == conv
    lines = [orjson.loads(x) for x in written(t, "units").splitlines()]
    assert [x["role"] for x in lines] == ["system", "user", "assistant", "tool", "assistant"]
    assert lines[3]["tool_call_id"] == "call_0" and lines[2]["type"] == "tool_call"
    doc = orjson.loads(written(t, "openai"))
    assert doc["tools"] == [{"type": "function", "function": {
        "name": "wx", "description": "weather", "parameters": {"type": "object"}}}]
    assert doc["messages"][2]["tool_calls"][0]["function"] == {"name": "wx", "arguments": "{\"city\":\"Oslo\"}"}


# ---------------------------------------------------------------- detection and forcing


@pytest.mark.parametrize(
    ("obj", "fmt"),
    [
        ([{"role": "user", "content": "hi"}], "openai"),
        ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "x", "input": {}}]}], "anthropic"),
        ({"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
        ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]}, "openai"),
        ([{"id": "u0", "type": "message", "content": "x", "priorityTag": "P1"}], "units"),
        ([{"type": "user", "sessionId": "s", "message": {"role": "user", "content": "x"}}], "claude-code"),
        ([{"type": "response_item", "payload": {"type": "message"}}], "codex"),
        ({"conversations": [{"from": "human", "value": "x"}]}, "sharegpt"),
        ([{"foo": 1}], None),
        (42, None),
    ],
)
def test_detect_format(obj: Any, fmt: str | None) -> None:
    assert detect_format(obj) == fmt


def test_forced_format_overrides_detection() -> None:
    text = '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]'
    assert read_text(text)[0].source_format == "openai"
    assert read_text(text, "anthropic")[0].source_format == "anthropic"


def test_forced_format_that_does_not_fit_names_the_record() -> None:
    text = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'
    with pytest.raises(InputError) as err:
        read_text(text, "codex", path="chat.jsonl")
    assert err.value.line == 1 and "Codex rollout record" in err.value.problem


@pytest.mark.parametrize(
    ("fmt", "text", "found"),
    [
        ("claude-code", "".join(json.dumps(r) + "\n" for r in CODEX_LOG), "codex"),
        ("codex", "".join(json.dumps(r) + "\n" for r in CLAUDE_LOG), "claude-code"),
        ("claude-code", '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]', "openai"),
        ("claude-code", '{"messages": [{"role": "user", "content": "hi"}]}', "openai"),
        ("codex", '{"a": 1}\n{"b": 2}\n', None),
        ("codex", '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": []}\n', "openai"),
    ],
)
def test_forced_app_format_on_another_format_is_an_error(fmt: str, text: str, found: str | None) -> None:
    with pytest.raises(InputError) as err:
        read_text(text, fmt, path="log.jsonl")
    assert err.value.path == "log.jsonl" and f"not a {fmt} file" in err.value.problem
    assert (f"it looks like {found}" if found else "its first record is an object with keys a") in err.value.problem


def test_forced_app_format_on_its_own_format_still_reads(realdata: Path) -> None:
    for folder, fmt in (("claude-code", "claude-code"), ("codex", "codex")):
        for path in files(realdata, folder):
            assert one(path, fmt).source_format == fmt


def test_guard_with_wrong_from_exits_1(repo_root: Path) -> None:
    from click.testing import CliRunner

    from ctxkit.cli import cli

    path = str(repo_root / "sample_transcripts" / "codex-rollout.jsonl")
    result = CliRunner().invoke(cli, ["guard", path, "--from", "claude-code", "--limit", "4000"])
    assert result.exit_code == 1
    assert "not a claude-code file" in result.stderr and "codex" in result.stderr


# ---------------------------------------------------------------- layouts


def test_jsonl_messages_round_trip_byte_for_byte() -> None:
    records = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Überprüfe bitte 🙂", "name": "ana"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
        {"role": "assistant", "content": "Two files.", "extra": {"cost": 0.5}},
    ]
    text = "".join(orjson.dumps(r).decode() + "\n" for r in records)
    (t,) = read_text(text, path="chat.jsonl")
    assert (t.layout, t.id) == ("lines", "chat")
    assert t.units[3].name == "ls"
    assert written(t) == text


def test_dataset_layout_one_conversation_per_line() -> None:
    lines = [
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "split": "train"},
        {"messages": [{"role": "user", "content": "c"}], "tools": [{"type": "function", "function": {"name": "f"}}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "d"}]},
                      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "e"}]}]},
    ]
    text = "".join(orjson.dumps(r).decode() + "\n" for r in lines)
    ts = read_text(text, path="/data/train.jsonl")
    assert [t.id for t in ts] == ["train#1", "train#2", "train#3"]
    assert [t.line for t in ts] == [1, 2, 3]
    assert [t.layout for t in ts] == ["dataset"] * 3
    assert [t.source_format for t in ts] == ["openai", "openai", "anthropic"]  # per line
    assert ts[0].envelope == {"split": "train"}
    assert ts[1].tools == lines[1]["tools"]
    assert ts[2].units[1].reasoning == "hm"
    assert written(ts) == text


def test_single_dataset_line_stays_a_line() -> None:
    text = orjson.dumps({"messages": [{"role": "user", "content": "a"}]}).decode() + "\n"
    ts = read_text(text + text)
    assert written(ts[:1]) == text


def test_anthropic_top_level_system_lifted_back() -> None:
    doc = {
        "model": "claude-x",
        "system": [{"type": "text", "text": "Be terse."}],
        "tools": [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"},
                                              {"type": "tool_use", "id": "t1", "name": "ls", "input": {"p": 1}},
                                              {"type": "tool_use", "id": "t2", "name": "ls", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "y"}], "is_error": True},
                {"type": "text", "text": "and now?"}]},
        ],
    }
    (t,) = read_text(json.dumps(doc))
    system = t.units[0]
    assert (system.role, system.content, system.meta["top_level_system"]) == ("system", "Be terse.", True)
    assert t.tools == doc["tools"] and "tools" not in t.envelope and "system" not in t.envelope
    roles = [(u.role, u.group) for u in t.units[1:]]
    assert roles == [("user", 0), ("assistant", 1), ("tool", 2), ("tool", 2), ("user", 2)]
    assert t.units[4].meta["is_error"] and t.units[3].name == "ls"
    assert orjson.loads(written(t)) == doc
    # As openai: the system prompt becomes the first message, results one message each.
    oa = orjson.loads(written(t, "openai"))
    assert oa["messages"][0] == {"role": "system", "content": "Be terse."}
    assert [m["role"] for m in oa["messages"]] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert oa["tools"] == [{"type": "function", "function": {"name": "ls", "description": "list",
                                                               "parameters": {"type": "object"}}}]
    # And back to anthropic from those built records: results regroup into one user message.
    (back,) = read_text(written(t, "openai"))
    rebuilt = orjson.loads(written(back, "anthropic"))
    assert rebuilt["system"] == "Be terse."
    assert [m["role"] for m in rebuilt["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in rebuilt["messages"][2]["content"]] == ["tool_result", "tool_result", "text"]


def test_touched_group_is_rebuilt_not_replayed() -> None:
    doc = [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                                     {"type": "text", "text": "keep going"}]},
    ]
    (t,) = read_text(json.dumps(doc))
    # Drop the user text that shared a record with the tool result: raw must not bring it back.
    t.units = t.units[:2]
    out = orjson.loads(written(t))
    assert out[1] == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
    # Change one unit of the group: the changed text is written, the other unit rebuilt.
    (t,) = read_text(json.dumps(doc))
    t.units[2] = t.units[2].replace(content="stop")
    out = orjson.loads(written(t))
    assert out[1]["content"][-1] == {"type": "text", "text": "stop"}


def test_model_stats_token_totals() -> None:
    doc = {"info": {"model_stats": {"instance_cost": 0.1, "api_calls": 2, "tokens_sent": 900, "tokens_received": 40}},
           "trajectory_format": "mini-swe-agent-1", "messages": [{"role": "user", "content": "x"}]}
    (t,) = read_text(json.dumps(doc))
    assert t.metadata["provider_usage"] == {
        "source": "mini-swe-agent", "calls": [], "total_input_tokens": 900, "total_output_tokens": 40}
    doc["info"]["model_stats"] = {"instance_cost": 0.1, "api_calls": 2}
    (t,) = read_text(json.dumps(doc))
    assert "provider_usage" not in t.metadata


def test_exit_without_an_open_call_is_an_assistant_message() -> None:
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "done"},
            {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted"}}]
    (t,) = read_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": msgs}))
    assert (t.units[-1].role, t.units[-1].meta["source_role"]) == ("assistant", "exit")
    # unchanged, it is written back as read; once changed, in a role the API takes
    assert orjson.loads(written(t))["messages"][-1] == msgs[-1]
    t.units[0] = t.units[0].replace(content="go on")
    assert orjson.loads(written(t))["messages"][-1] == {**msgs[-1], "role": "assistant"}


def test_legacy_function_role_pairs_with_function_call() -> None:
    doc = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "wx", "arguments": "{}"}},
        {"role": "function", "name": "wx", "content": "sunny"},
    ]
    (t,) = read_text(json.dumps(doc))
    call = t.units[1].tool_calls[0]
    assert (t.units[2].role, t.units[2].tool_call_id, t.units[2].meta["source_role"]) == ("tool", call.id, "function")
    assert orjson.loads(written(t)) == doc


def test_units_format_keeps_stated_types_and_writes_back() -> None:
    recs = [
        Unit(id="a", role="user", content="hi", priority=1).to_dict(),
        Unit(id="b", role="tool", type="log", content="x", tool_call_id="c", tokens=3).to_dict(),
    ]
    text = "".join(orjson.dumps(r).decode() + "\n" for r in recs)
    (t,) = read_text(text)
    assert t.source_format == "units" and [u.type for u in t.units] == ["message", "log"]
    assert t.units[0].is_p1 and t.units[1].tokens == 3
    assert written(t) == text


def test_several_transcripts_in_units_format_keep_their_boundaries() -> None:
    ts = read_text('{"messages":[{"role":"user","content":"a"}]}\n{"messages":[{"role":"user","content":"b"}]}\n')
    out = written(ts, "units")
    back = read_text(out)
    assert [b.id for b in back] == [t.id for t in ts]
    assert [fields(b) for b in back] == [fields(t) for t in ts]


def test_units_dataset_file_keeps_its_path_and_ids(tmp_path: Path) -> None:
    ts = read_text('{"messages":[{"role":"user","content":"a"}]}\n{"messages":[{"role":"user","content":"b"}]}\n')
    for t, name in zip(ts, ("chat-a", "chat-b"), strict=True):
        t.id = name
    out = tmp_path / "u.jsonl"
    write_path(ts, str(out), "units")
    back = list(read_path(str(out)))
    assert [(b.path, b.id, b.line, b.layout) for b in back] == [
        (str(out), "chat-a", 1, "dataset"), (str(out), "chat-b", 2, "dataset")]
    # a line without an id is named after the file and its line
    rec = orjson.loads(out.read_text().splitlines()[0])
    del rec["id"]
    (t,) = read_text(orjson.dumps(rec).decode() + "\n" + orjson.dumps(rec).decode() + "\n", path="d.jsonl")[:1]
    assert (t.id, t.path) == ("d#1", "d.jsonl")


def test_units_dataset_file_rows_name_the_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctxkit.cli import cli

    out = tmp_path / "u.jsonl"
    runner = CliRunner()
    made = runner.invoke(cli, ["simulate", "-s", "long_chat", "-s", "fragmented", "-o", str(out)])
    assert made.exit_code == 0, made.stderr
    counted = runner.invoke(cli, ["count", str(out), "--format", "jsonl"])
    assert counted.exit_code == 0, counted.stderr
    labels = [orjson.loads(line)["transcript"] for line in counted.stdout.splitlines() if line.strip()]
    assert labels[:2] == [f"{out}:1", f"{out}:2"]
    guarded = runner.invoke(cli, ["guard", str(out), "--format", "json", "--limit", "100000"])
    rows = [orjson.loads(line) for line in guarded.stdout.splitlines() if line.strip()]
    assert [r["path"] for r in rows] == [str(out), str(out)]
    assert [r["transcript"] for r in rows] == ["long_chat-0", "fragmented-0"]


def test_read_path_label_names_ids_paths_and_errors(tmp_path: Path) -> None:
    spool = tmp_path / "tmpa8f3kq2z"
    spool.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n')
    first = [(t.id, t.path, [u.id for u in t.units]) for t in read_path(str(spool), label="<stdin>")]
    again = [(t.id, t.path, [u.id for u in t.units]) for t in read_path(str(spool), label="<stdin>")]
    assert first == again == [("stdin", "<stdin>", ["u0", "u1"])]
    (named,) = read_path(str(spool), label="chat.jsonl")
    assert (named.id, named.path) == ("chat", "chat.jsonl")
    dataset = tmp_path / "tmpdataset"
    dataset.write_text('{"messages":[{"role":"user","content":"a"}]}\n{"messages":[{"role":"user","content":"b"}]}\n')
    assert [t.id for t in read_path(str(dataset), label="<stdin>")] == ["stdin#1", "stdin#2"]
    spool.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo\n')
    with pytest.raises(InputError) as err:
        list(read_path(str(spool), label="<stdin>"))
    assert str(err.value).startswith("<stdin>:2: ") and "tmpa8f3kq2z" not in str(err.value)
    with pytest.raises(InputError) as err:
        list(read_path(str(tmp_path / "gone"), label="<stdin>"))
    assert str(err.value).startswith("<stdin>: ")


def test_read_path_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b'[{"role": "user", "content": "from stdin"}]'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    (t,) = read_path("-")
    assert t.units[0].content == "from stdin" and t.path == "<stdin>"


def test_empty_conversation_reads_as_no_units() -> None:
    (t,) = read_text('{"messages": [], "id": "x"}')
    assert (t.units, t.id, t.source_format) == ([], "x", "openai")
    assert orjson.loads(written(t)) == {"messages": [], "id": "x"}


def test_document_whose_first_line_is_not_a_whole_object() -> None:
    text = '{"model": "m",\n "messages": [{"role": "user", "content": "x"}]}\n'
    (t,) = read_text(text)
    assert (t.layout, t.envelope, t.units[0].content) == ("object", {"model": "m"}, "x")


def test_bom_is_ignored() -> None:
    (t,) = read_text("\ufeff" + '[{"role": "user", "content": "x"}]')
    assert t.units[0].content == "x"


# ---------------------------------------------------------------- paths and atomic writes


def test_expand_paths(tmp_path: Path) -> None:
    for name in ("b.jsonl", "a.json", "c.txt"):
        (tmp_path / name).write_text("[]")
    assert expand_paths([]) == ["-"]
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "a.json"), str(tmp_path / "b.jsonl")]
    assert expand_paths([str(tmp_path / "*.j*")]) == [str(tmp_path / "a.json"), str(tmp_path / "b.jsonl")]
    with pytest.raises(InputError, match="no such file"):
        expand_paths([str(tmp_path / "missing.json")])
    with pytest.raises(InputError, match="no file matches"):
        expand_paths([str(tmp_path / "*.yaml")])


def test_write_path_is_atomic(tmp_path: Path) -> None:
    (t,) = read_text('[{"role": "user", "content": "x"}]')
    target = tmp_path / "out.json"
    write_path([t], str(target))
    before = target.read_bytes()

    def broken() -> Any:
        yield t
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_path(broken(), str(target))
    assert target.read_bytes() == before
    assert os.listdir(tmp_path) == ["out.json"]


# ---------------------------------------------------------------- bad input


BAD = [
    ("notjson.jsonl", b"hello world\n", 1, "not valid JSON"),
    ("unknown.json", b'{"foo": 1}\n', 1, "no known transcript shape"),
    ("numbers.json", b"[1, 2, 3]", 1, "no known transcript shape (found a number)"),
    ("trunc.jsonl", b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"yo', 2, "truncated record"),
    ("truncdoc.json", b'[{"role": "user", "content": "hi"},\n{"role": "assi', 2, "truncated JSON document"),
    ("empty.json", b"", None, "empty file"),
    ("blank.jsonl", b"\n \n", None, "empty file"),
    ("binary.dat", b"\x7fELF\x02\x01\x01\x00\x00\x00" * 20, 1, "binary data"),
    ("latin1.jsonl", b'{"role":"user","content":"caf\xe9"}\n', 1, "invalid UTF-8"),
    ("midbad.jsonl", b'{"role":"user","content":"a"}\n{"role":"assistant","content":"b"}\ngarbage\n', 3, "not valid JSON"),
]


@pytest.mark.parametrize(("name", "data", "line", "problem"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_clear_error(tmp_path: Path, name: str, data: bytes, line: int | None, problem: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as err:
        list(read_path(str(path)))
    assert err.value.path == str(path)
    assert err.value.line == line
    assert problem in err.value.problem
    assert str(err.value).startswith(f"{path}:{line}: " if line else f"{path}: ")


@pytest.mark.parametrize(("name", "data", "line", "problem"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_skipped_and_counted(tmp_path: Path, name: str, data: bytes, line: int | None, problem: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    stats = ReadStats()
    ts = list(read_path(str(path), ReadOptions(skip_invalid=True), stats=stats))
    assert stats.skipped_invalid == 1
    assert stats.warnings and problem in stats.warnings[0]
    if name in ("trunc.jsonl", "midbad.jsonl"):
        assert len(ts) == 1 and len(ts[0].units) == (1 if name == "trunc.jsonl" else 2)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        list(read_path(str(tmp_path / "nope.json")))
    with pytest.raises(InputError, match="is a directory"):
        list(read_path(str(tmp_path)))


def test_bad_record_inside_a_document() -> None:
    text = '[{"role": "user", "content": "a"}, "oops", {"role": "assistant", "content": "b"}]'
    with pytest.raises(InputError, match="record 2: expected a chat message"):
        read_text(text, "openai")
    stats = ReadStats()
    (t,) = read_text(text, ReadOptions(format="openai", skip_invalid=True), stats=stats)
    assert len(t.units) == 2 and stats.skipped_invalid == 1


@pytest.mark.slow  # reads a 100 MB-class line
def test_huge_line_reads_in_bounded_memory(tmp_path: Path) -> None:
    """A 50 MB line is parsed; peak memory stays a small multiple of the line (no copies per unit)."""
    big = "x = 1\n" * (50 * 1024 * 1024 // 6)
    path = tmp_path / "big.jsonl"
    with open(path, "wb") as f:
        f.write(orjson.dumps({"role": "user", "content": "go"}) + b"\n")
        f.write(orjson.dumps({"role": "tool", "tool_call_id": "c", "content": big}) + b"\n")
    line_mb = path.stat().st_size / 2**20
    del big
    script = (
        "import resource, sys\n"
        "from ctxkit.formats import read_path\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "(t,) = read_path(sys.argv[1])\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(len(t.units[1].content), (peak - base) / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    chars, grown_mb = out.stdout.split()
    assert int(chars) == 50 * 1024 * 1024 // 6 * 6
    assert float(grown_mb) < 4 * line_mb, (grown_mb, line_mb)


# ---------------------------------------------------------------- property tests

text_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
ids_st = st.text(alphabet="abcdef0123456789", min_size=1, max_size=8)


@st.composite
def openai_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text_st)})
    for _ in range(draw(st.integers(1, 6))):
        msgs.append({"role": "user", "content": draw(text_st)})
        if draw(st.booleans()):
            n = draw(st.integers(1, 3))
            cids = [f"c{len(msgs)}_{k}" for k in range(n)]
            msgs.append({"role": "assistant", "content": draw(st.none() | text_st), "tool_calls": [
                {"id": c, "type": "function", "function": {"name": draw(ids_st), "arguments": "{}"}} for c in cids]})
            for c in cids:
                msgs.append({"role": "tool", "tool_call_id": c, "content": draw(text_st)})
        msgs.append({"role": "assistant", "content": draw(text_st)})
    return msgs


@st.composite
def anthropic_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        msgs.append({"role": "user", "content": draw(text_st | st.just([{"type": "text", "text": "hi"}]))})
        n = draw(st.integers(0, 3))
        ids = [f"t{len(msgs)}_{k}" for k in range(n)]
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(text_st), "signature": "s"})
        blocks.append({"type": "text", "text": draw(text_st)})
        blocks += [{"type": "tool_use", "id": i, "name": draw(ids_st), "input": {"q": draw(text_st)}} for i in ids]
        msgs.append({"role": "assistant", "content": blocks})
        if ids:
            results: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": i, "content": draw(text_st)} for i in ids]
            if draw(st.booleans()):
                results.append({"type": "text", "text": draw(text_st)})
            msgs.append({"role": "user", "content": results})
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": draw(text_st)}]})
    return msgs


@st.composite
def unit_records(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 8))
    return [
        Unit(
            id=f"u{i}",
            role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
            type=draw(st.sampled_from(["message", "code", "log", "summary", "plan_ref"])),
            content=draw(text_st),
            timestamp=draw(st.none() | st.floats(0, 2e9, allow_nan=False)),
            priority=draw(st.none() | st.integers(1, 3)),
        ).to_dict()
        for i in range(n)
    ]


PROPS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(openai_messages(), st.sampled_from(["array", "lines", "object"]))
def test_openai_round_trip_property(msgs: list[dict[str, Any]], layout: str) -> None:
    text = _layout_text(msgs, layout)
    ts = read_text(text)
    assert ts[0].source_format == "openai"
    first = written(ts)
    assert parsed_records(first) == parsed_records(text)
    assert written(read_text(first)) == first
    _assert_rebuilt_equal(ts[0])


@PROPS
@given(anthropic_messages(), st.sampled_from(["array", "lines", "object", "system"]))
def test_anthropic_round_trip_property(msgs: list[dict[str, Any]], layout: str) -> None:
    if layout == "system":
        text = json.dumps({"system": "Be brief.", "model": "m", "messages": msgs})
    else:
        text = _layout_text(msgs, layout)
    ts = read_text(text, "anthropic")
    first = written(ts)
    assert parsed_records(first) == parsed_records(text)
    assert written(read_text(first, "anthropic")) == first
    _assert_rebuilt_equal(ts[0])
    assert_paired(ts[0])


@PROPS
@given(unit_records())
def test_units_round_trip_property(recs: list[dict[str, Any]]) -> None:
    text = "".join(orjson.dumps(r).decode() + "\n" for r in recs)
    (t,) = read_text(text, "units")
    assert written(t) == text
    rebuilt = t.replace(units=[u.replace() for u in t.units])
    assert written(rebuilt) == text


def _layout_text(msgs: list[dict[str, Any]], layout: str) -> str:
    if layout == "array":
        return json.dumps(msgs, indent=1, ensure_ascii=False)
    if layout == "lines":
        return "".join(orjson.dumps(m).decode() + "\n" for m in msgs)
    return json.dumps({"model": "m", "messages": msgs})


def _assert_rebuilt_equal(t: Transcript) -> None:
    """Units rebuilt from their fields (raw dropped) read back to the same fields, in every format."""
    rebuilt = t.replace(units=[u.replace() for u in t.units])
    for fmt in WRITABLE:
        text = written(rebuilt, fmt)
        (back,) = read_text(text, fmt)
        assert carried(back, fmt, same=True) == carried(t, fmt), fmt


def test_a_log_that_repeats_a_unit_id_is_reported() -> None:
    """An app log whose records repeat an id reads on, with a warning naming the id: the
    compaction checks name units by id, so steps that touch it will be refused."""
    session = {
        "sessionId": "s1",
        "projectHash": "p",
        "startTime": "2026-01-01T00:00:00Z",
        "lastUpdated": "2026-01-01T00:00:02Z",
        "messages": [
            {"id": "m1", "timestamp": "2026-01-01T00:00:00Z", "type": "user", "content": "fix the bug"},
            {"id": "m2", "timestamp": "2026-01-01T00:00:01Z", "type": "gemini", "content": "done"},
            {"id": "m1", "timestamp": "2026-01-01T00:00:02Z", "type": "user", "content": "thanks"},
        ],
    }
    stats = ReadStats()
    (t,) = read_text(json.dumps(session), ReadOptions(format="gemini-cli"), stats=stats)
    assert [u.id for u in t.units] == ["m1", "m2", "m1"]
    assert any("unit id 'm1' repeats in transcript s1" in w for w in stats.warnings)
    stats = ReadStats()
    session["messages"][2]["id"] = "m3"
    read_text(json.dumps(session), ReadOptions(format="gemini-cli"), stats=stats)
    assert not any("repeats" in w for w in stats.warnings)
