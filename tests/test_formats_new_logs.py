"""Logs of today's agents the project had not seen (issue 34): read as their format, counted
within 2% of an independent reading, or refused with what was found and the flag to try; never
misread (a chat export as a system prompt, one agent's log as another's)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.formats import ReadOptions, ReadStats, read_path, read_text, write_transcripts
from ctxkit.formats.sdk import problems
from ctxkit.tokens import count_transcript, get_tokenizer

DATA = Path(__file__).parent / "data" / "new_logs"


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _count(path: Path) -> int:
    (t,) = read_path(str(path))
    return count_transcript(t, get_tokenizer("cl100k_base")).total


# ---------------------------------------------------------------- Gemini CLI sessions

# A read_many_files call as Gemini CLI before 0.1x recorded it (its convertToFunctionResponse:
# a tool's many parts after a functionResponse of "Tool execution succeeded."), the shape public
# `/chat share` exports of such sessions show. Each file's text is a part of its own.
_FILES = ["--- a.py ---\n" + "def f(x):\n    return x * 2\n" * 40, "--- b.md ---\n" + "Some notes on the design.\n" * 60]
_SESSION = {
    "sessionId": "s1", "projectHash": "p", "startTime": "2025-11-02T10:00:00.000Z",
    "lastUpdated": "2025-11-02T10:01:00.000Z",
    "messages": [
        {"id": "m1", "timestamp": "2025-11-02T10:00:00.000Z", "type": "user", "content": "read a.py and b.md"},
        {"id": "m2", "timestamp": "2025-11-02T10:00:05.000Z", "type": "gemini", "content": "",
         "toolCalls": [{"id": "read_many_files-1", "name": "read_many_files", "args": {"paths": ["a.py", "b.md"]},
                        "result": [{"functionResponse": {"id": "read_many_files-1", "name": "read_many_files",
                                                         "response": {"output": "Tool execution succeeded."}}},
                                   *({"text": f} for f in _FILES)],
                        "status": "success", "timestamp": "2025-11-02T10:00:05.000Z"}],
         "model": "gemini-2.5-pro"},
        {"id": "m3", "timestamp": "2025-11-02T10:00:09.000Z", "type": "gemini", "content": "Both files are read."},
    ],
}


def test_a_gemini_cli_call_result_counts_every_part_it_sent(tmp_path: Path) -> None:
    path = tmp_path / "session-1.json"
    text = json.dumps(_SESSION, indent=2)
    path.write_text(text)
    (t,) = read_path(str(path))
    (result,) = [u for u in t.units if u.role == "tool"]
    assert result.content.startswith("Tool execution succeeded.\n--- a.py ---") and result.content.endswith(_FILES[1])
    tok = get_tokenizer("cl100k_base")
    independent = sum(tok.count(s) for s in ["read a.py and b.md", json.dumps({"paths": ["a.py", "b.md"]}),
                                             "Tool execution succeeded.", *_FILES, "Both files are read."])
    ours = count_transcript(t, tok).total
    assert abs(ours - independent) <= 0.02 * independent + 30, (ours, independent)  # + the per-message overhead
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert json.loads(buf.getvalue()) == _SESSION  # written back, every part


# ---------------------------------------------------------------- never misread


def _gemini_share(turns: int) -> str:
    """A chat as Gemini CLI's `/chat share x.md` writes it (serializeHistoryToMarkdown, 0.61):
    an icon and the role over each Content's parts, run together, between `---` lines."""
    items = []
    for k in range(turns):
        items.append(f"\U0001f9d1\u200d\U0001f4bb ## USER\n\nstep {k}: read the config")
        call = json.dumps({"name": "read_file", "args": {"absolute_path": "/w/app.toml"}}, indent=2)
        items.append(f"\u2728 ## MODEL\n\n**Tool Command**:\n```json\n{call}\n```")
    return "\n\n---\n\n".join(items)


def test_a_chat_saved_as_markdown_is_no_prompt(tmp_path: Path) -> None:
    shared = tmp_path / "chat.md"
    shared.write_text(_gemini_share(4))
    r = _run(["count", str(shared)])
    assert r.exit_code != 0 and "Traceback" not in r.output
    (line,) = [x for x in r.stderr.splitlines() if "Error" in x]
    assert "Gemini CLI's markdown share" in line and "--from gemini" in line

    # a chat in a layout no format knows: refused, saying what was found
    plain = tmp_path / "notes.md"
    plain.write_text("\n\n".join(f"## User\n\nquestion {k}\n\n## Assistant\n\nanswer {k}" for k in range(5)))
    r = _run(["count", str(plain)])
    assert r.exit_code != 0
    assert "5 user and 5 assistant headings" in r.stderr and "name it *.prompt" in r.stderr

    # a prompt stays a prompt: headings, a two-turn few-shot example
    prompt = tmp_path / "system.md"
    prompt.write_text("# Role\n\nYou review code.\n\n## Example\n\nUser:\nfix it\n\nAssistant:\ndone\n\n"
                      "User:\nagain\n\nAssistant:\nok\n\n## Tools\n\nUse them.\n")
    r = _run(["count", str(prompt)])
    assert r.exit_code == 0 and '"format":"prompt"' in r.stdout
    # and a file named a prompt is one, whatever it holds
    named = tmp_path / "chat.prompt"
    named.write_text(plain.read_text())
    r = _run(["count", str(named)])
    assert r.exit_code == 0 and '"format":"prompt"' in r.stdout


def test_json_in_a_text_file_is_read_as_its_format(tmp_path: Path) -> None:
    log = tmp_path / "session.txt"
    log.write_text(json.dumps([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]))
    r = _run(["count", str(log)])
    assert r.exit_code == 0 and '"format":"openai"' in r.stdout


def test_files_of_an_agent_that_no_format_reads_are_refused_with_the_file_to_read(tmp_path: Path) -> None:
    # Cline's ui_messages.json (ClineMessage: ts, type say|ask, say|ask, text)
    ui = tmp_path / "ui_messages.json"
    ui.write_text(json.dumps([{"ts": 1760000000000, "type": "say", "say": "task", "text": "fix the bug"},
                              {"ts": 1760000001000, "type": "say", "say": "api_req_started", "text": "{}"}]))
    r = _run(["count", str(ui)])
    assert r.exit_code != 0 and "api_conversation_history.json" in r.stderr and "--from cline" in r.stderr
    # Gemini CLI 0.61's `-p --output-format stream-json`, made by the real agent: refused, since
    # its tool results are what the terminal shows (the file read shows "", the model read the
    # file); the chat the same run wrote holds what the model read, and is read
    events = DATA / "gemini-cli-stream.jsonl"
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    read = next(e for e in lines if e.get("tool_id", "").startswith("read_file") and e["type"] == "tool_result")
    assert read["output"] == ""
    r = _run(["count", str(events)])
    assert r.exit_code != 0 and "stream-json" in r.stderr and "--from gemini-cli-jsonl" in r.stderr
    (chat,) = read_path(str(Path(__file__).parent / "data" / "gemini_cli_jsonl" / "stream-run.jsonl"))
    assert chat.source_format == "gemini-cli-jsonl"
    (file_read,) = [u for u in chat.units if u.role == "tool" and u.name == "read_file"]
    assert file_read.content.strip() == "alpha\nbeta"


def test_a_claude_code_log_that_opens_with_its_newer_records_is_read_as_one(tmp_path: Path) -> None:
    # Claude Code 2.1.2xx-3xx sessions open with state records (permission-mode, ai-title,
    # bridge-session, pr-link...) before the first message: detected, kept in place, said so
    sid = "5c7d5c23-0000-4000-8000-000000000001"
    state = [{"type": kind, "sessionId": sid, **extra} for kind, extra in [
        ("permission-mode", {"permissionMode": "default"}), ("ai-title", {"aiTitle": "Fix the parser"}),
        ("bridge-session", {"bridgeSessionId": "b1"}), ("pr-link", {"prNumber": 9, "prUrl": "https://x/pull/9"}),
        ("file-history-delta", {"messageId": "m1"}), ("agent-name", {"agentName": "fixer"}),
        ("worktree-state", {"worktreeSession": None}), ("cost-state", {"totalCostUSD": 0.5}),
        ("custom-title", {"customTitle": "parser"}), ("mode", {"mode": "default"}),
        ("tools-used", {"tools": []})]]
    msgs = [{"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": sid, "isSidechain": False,
             "timestamp": "2026-11-29T10:00:00.000Z", "message": {"role": "user", "content": "fix it"}},
            {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": sid, "isSidechain": False,
             "timestamp": "2026-11-29T10:00:01.000Z",
             "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-5-5",
                         "content": [{"type": "text", "text": "Fixed."}]}}]
    path = tmp_path / f"{sid}.jsonl"
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in state + msgs)
    path.write_text(text)
    r = _run(["count", str(path)])
    assert r.exit_code == 0 and '"format":"claude-code"' in r.stdout and '"units":2' in r.stdout
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert stats.skipped_non_message == {r["type"]: 1 for r in state}  # kept, and said so
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert buf.getvalue() == text  # every record given back


def test_a_claude_code_result_replaced_by_its_preview_counts_the_preview(tmp_path: Path) -> None:
    # Claude Code 2.1.328's per-message budget: an oversized tool result is saved to a file and
    # the model sent a preview, recorded as {type: content-replacement, replacements: [{kind:
    # tool-result, toolUseId, replacement}]} after the result (the shape its insertContentReplacement
    # writes; no public log with one was found)
    sid = "5c7d5c23-0000-4000-8000-000000000002"
    big = "line of build output\n" * 4000
    preview = "Output too large (84.0KB). Full output saved to: /tmp/r/toolu_1.txt\n\nPreview (first 2KB):\nline of build output\n"
    recs = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": sid, "isSidechain": False,
         "message": {"role": "user", "content": "build it"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": sid, "isSidechain": False,
         "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-5-5",
                     "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": sid, "isSidechain": False,
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": big}]}},
        {"type": "content-replacement", "sessionId": sid,
         "replacements": [{"kind": "tool-result", "toolUseId": "toolu_1", "replacement": preview}]},
        {"type": "assistant", "uuid": "a2", "parentUuid": "u2", "sessionId": sid, "isSidechain": False,
         "message": {"id": "msg_2", "role": "assistant", "model": "claude-opus-5-5",
                     "content": [{"type": "text", "text": "Built."}]}},
    ]
    path = tmp_path / f"{sid}.jsonl"
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)
    path.write_text(text)
    (t,) = read_path(str(path))
    (result,) = [u for u in t.units if u.role == "tool"]
    assert result.content == preview and result.meta["replaced_chars"] == len(big)
    assert count_transcript(t, get_tokenizer("cl100k_base")).total < 200
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert buf.getvalue() == text  # the whole output stays in the log


# ---------------------------------------------------------------- SpecStory exports


# SpecStory's own markup, never sent to the model: a tool block's tags and summary line, a think
# block's, fence lines, comments
_MARKUP = re.compile(
    r"^\s*(?:<tool-use [^>]*>)?(?:<details>)?\s*(?:<summary>.*</summary>)?\s*(?:</details>)?(?:</tool-use>)?\s*$"
    r"|^\s*(?:<think><details><summary>[^<]*</summary>|</details></think>)\s*$|^\s*(?:`{3,}|~{3,})[^`]*$|^<!-- .* -->\s*$")


def _specstory_independent(text: str) -> int:
    """The text of every section, sections cut at `_**User|Agent ...**_` lines by a regex of this
    test's own (no ctxkit reader), SpecStory's markup lines and the `---` between roles left out;
    a sub-agent's sections (`_**Agent - sidechain ...**_`) are its own context, not counted."""
    tok = get_tokenizer("cl100k_base")
    heads = list(re.finditer(r"(?m)^_\*\*(?:User|Agent)[^\n]*\*\*_\n", text))
    total = 0
    for k, m in enumerate(heads):
        if m.group().startswith("_**Agent - sidechain"):
            continue
        body = re.sub(r"\n---\n\s*$", "\n", text[m.end():heads[k + 1].start() if k + 1 < len(heads) else len(text)])
        # a tool block's summary line names the tool and holds the call's arguments after the name
        body = re.sub(r"<summary>Tool use: \*\*[^*\n]+\*\*(?: •)?(.*?)</summary>", lambda m: "\n" + m.group(1) + "\n", body)
        total += tok.count("\n".join(line for line in body.split("\n") if not _MARKUP.match(line)).strip())
    return total


def _text_tokens(t) -> int:  # type: ignore[no-untyped-def]
    """Our count of the text the model reads (content, calls, reasoning), message overhead aside."""
    return sum(c.content + c.tool_calls + c.reasoning for c in count_transcript(t, get_tokenizer("cl100k_base")).units)


@pytest.mark.parametrize("name", ["specstory-claude-code.md", "specstory-codex.md"])
def test_specstory_exports_of_claude_code_and_codex(name: str, tmp_path: Path) -> None:
    path = DATA / name
    text = path.read_text(encoding="utf-8")
    r = _run(["count", str(path)])
    assert r.exit_code == 0 and '"format":"specstory"' in r.stdout  # never a prompt
    (t,) = read_path(str(path))
    assert sum(len(u.tool_calls) for u in t.units) == text.count("\n<tool-use ")
    ours = _text_tokens(t)
    theirs = _specstory_independent(text)
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert buf.getvalue() == text
    small, back = tmp_path / "small.md", tmp_path / "back.md"
    assert _run(["compact", str(path), "--limit", str(ours // 2), "-o", str(small)]).exit_code == 0
    assert _run(["expand", str(small), "-o", str(back)]).exit_code == 0
    assert back.read_text(encoding="utf-8") == text


# ---------------------------------------------------------------- Codex multi-agent rollouts


def test_a_codex_multi_agent_rollout_reads_the_messages_of_other_agents(tmp_path: Path) -> None:
    # Codex 0.145+ (0.169's RolloutItem and ResponseItem types): a sub-agent's rollout holds the
    # parent's message as an `agent_message` response item, which its model reads, beside
    # `inter_agent_communication` mail, `world_state` and `token_usage_record` records, kept
    # (shapes as public rollout readers' fixtures show them; no public 0.145+ rollout was found)
    ask = "Review src/a.ts for the failing test and report back. " * 20
    recs = [
        {"timestamp": "2026-10-02T09:00:00.000Z", "type": "session_meta",
         "payload": {"id": "child", "cli_version": "0.169.0", "source": {"subagent": {"thread_spawn": {
             "parent_thread_id": "root", "depth": 1, "agent_path": "/root/tester"}}}}},
        {"timestamp": "2026-10-02T09:00:00.100Z", "type": "world_state", "payload": {"full": True, "state": {}}},
        {"timestamp": "2026-10-02T09:00:00.200Z", "type": "inter_agent_communication",
         "payload": {"id": "m1", "author": "/root", "recipient": "/root/tester", "other_recipients": [],
                     "content": ask, "trigger_turn": True}},
        {"timestamp": "2026-10-02T09:00:00.300Z", "type": "response_item",
         "payload": {"type": "agent_message", "author": "/root", "content": [{"type": "input_text", "text": ask}]}},
        {"timestamp": "2026-10-02T09:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One test fails."}]}},
        {"timestamp": "2026-10-02T09:00:01.100Z", "type": "token_usage_record", "payload": {"input_tokens": 900}},
    ]
    path = tmp_path / "rollout-2026-10-02T09-00-00-child.jsonl"
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)
    path.write_text(text)
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert t.source_format == "codex"
    assert [(u.role, u.content) for u in t.units] == [("user", ask), ("assistant", "One test fails.")]
    assert t.units[0].meta["author"] == "/root"
    assert {"inter_agent_communication", "world_state", "token_usage_record"} <= set(stats.skipped_non_message)
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert buf.getvalue() == text


# ---------------------------------------------------------------- Cline


def test_a_cline_results_line_is_counted_as_the_model_reads_it() -> None:
    # A real Cline task of 2026-04 (api_conversation_history.json, 666 units) counted 2.3% below
    # an independent reading: the `[tool for '...'] Result:` line over each result was left out,
    # and for ask_followup_question it quotes the whole question, many lines of it
    question = "## Phase 2: Auth Refactor - Complete\n\n" + "- `src/lib/auth.ts` - NextAuth.js configuration\n" * 30
    task = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nrefactor auth\n</task>"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ask_followup_question",
                                           "input": {"question": question}}]},
        {"role": "user", "content": [{"type": "text", "text": f"[ask_followup_question for '{question}'] Result:\n"
                                                               "<answer>\nApproved\n</answer>"}]},
    ]
    (t,) = read_text(json.dumps(task))
    tok = get_tokenizer("cl100k_base")
    independent = sum(tok.count(b["text"]) for m in task for b in m["content"] if b["type"] == "text") + \
        tok.count(json.dumps({"question": question}, separators=(",", ":"))) + tok.count("ask_followup_question")
    ours = _text_tokens(t) + sum(tok.count(u.meta.get("framing", "")) for u in t.units)
    assert abs(ours - independent) <= 0.02 * independent, (ours, independent)
    (result,) = [u for u in t.units if u.role == "tool"]
    assert result.content == "<answer>\nApproved\n</answer>"
    assert count_transcript(t, tok).units[2].overhead > tok.count(question)  # the line, in the count


# ---------------------------------------------------------------- Pi


def test_a_pi_session_is_read_as_pi_builds_the_context(tmp_path: Path) -> None:
    path = DATA / "pi-session.jsonl"
    text = path.read_text()
    entries = [json.loads(x) for x in text.splitlines()]
    stats = ReadStats()
    (t,) = read_path(str(path), stats=stats)
    assert t.source_format == "pi" and t.metadata["model"] == "claude-sonnet-4-5"
    # after the compaction: the entries from its firstKeptEntryId on, the `!` command, the
    # summary, the request; the abandoned branch, the label, state and the `!!` command kept
    assert [u.content.split("\n")[0] for u in t.units] == [
        "add() is off by one.", "Ran `git diff`", entries[11]["summary"], "Fix it."]
    assert t.units[2].type == "summary"
    assert stats.skipped_non_message["off the path"] == 1 and stats.skipped_non_message["bashExecution out of the context"] == 1
    (whole,) = read_path(str(path), ReadOptions(include_compacted=True))
    (call,) = whole.units[1].tool_calls
    assert (call.name, json.loads(call.arguments)) == ("bash", {"command": "pytest test_app.py -q"})
    assert whole.units[2].tool_call_id == call.id and whole.units[1].reasoning == "Run the test first."
    assert [c["input_tokens"] for c in whole.metadata["provider_usage"]["calls"]] == [4100, 4220]
    # counted within 2% of a reading of the path's text fields of its own
    tok = get_tokenizer("cl100k_base")
    on_path = [e for e in entries[1:] if e["id"] not in ("a0000007",)]
    texts: list[str] = []
    for e in on_path:
        m = e.get("message") or {}
        if m.get("role") in ("user", "assistant", "toolResult"):
            c = m["content"]
            texts += [c] if isinstance(c, str) else [b.get("text") or b.get("thinking") or "" for b in c if b["type"] != "toolCall"]
            texts += [json.dumps(b["arguments"], separators=(",", ":")) + b["name"] for b in (c if isinstance(c, list) else [])
                      if b["type"] == "toolCall"]
        elif m.get("role") == "bashExecution" and not m.get("excludeFromContext"):
            texts.append(f"Ran `{m['command']}`\n```\n{m['output']}\n```")
        elif e["type"] == "compaction":
            texts.append(e["summary"])
    independent = sum(tok.count(x) for x in texts)
    assert abs(_text_tokens(whole) - independent) <= 0.02 * independent
    # every entry back, and a compaction of it Pi loads, expanded to the same bytes
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert buf.getvalue() == text
    small, back = tmp_path / "small.jsonl", tmp_path / "back.jsonl"
    r = _run(["compact", str(path), "--include-compacted", "--no-usage", "--limit", "100", "-o", str(small)])
    assert r.exit_code == 0, r.stderr
    assert problems("pi", small.read_text()) == []
    assert _run(["expand", str(small), "-o", str(back)]).exit_code == 0
    assert back.read_text() == text


# ---------------------------------------------------------------- OpenCode


def test_an_opencode_export_is_read_as_opencode_sends_it() -> None:
    # OpenCode 1.18.33's toModelMessages (read from its bundled source): an ignored text part is
    # never sent, a subtask part is a line of its own, an output OpenCode pruned is sent as
    # "[Old tool result content cleared]", a call that never finished as interrupted
    big = "log line\n" * 2000

    def tool(cid: str, status: str, **state: Any) -> dict[str, Any]:
        return {"id": f"p{cid}", "type": "tool", "callID": cid, "tool": "bash",
                "state": {"status": status, "input": {"command": "make"}, **state}}

    export = {"info": {"id": "ses_1", "version": "1.18.33"}, "messages": [
        {"info": {"id": "m1", "role": "user", "time": {"created": 1790000000000}},
         "parts": [{"id": "t0", "type": "text", "text": "note to self", "ignored": True},
                   {"id": "t1", "type": "text", "text": "build it"},
                   {"id": "t2", "type": "subtask", "prompt": "p", "description": "d", "agent": "general"}]},
        {"info": {"id": "m2", "role": "assistant", "time": {"created": 1790000001000}},
         "parts": [{"id": "s1", "type": "step-start"},
                   tool("c1", "completed", output=big, time={"start": 1, "end": 2, "compacted": 3}),
                   tool("c2", "running", time={"start": 4}),
                   {"id": "f1", "type": "step-finish", "tokens": {"input": 10, "output": 5, "cache": {"read": 0, "write": 0}}}]},
    ]}
    text = json.dumps(export)
    (t,) = read_text(text)
    assert t.source_format == "opencode"
    assert t.units[0].content == "build it\nThe following tool was executed by the user"
    results = [u for u in t.units if u.role == "tool"]
    assert [u.content for u in results] == ["[Old tool result content cleared]", "[Tool execution was interrupted]"]
    assert count_transcript(t, get_tokenizer("cl100k_base")).total < 200  # not the pruned 2,000 lines
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert json.loads(buf.getvalue()) == export


def test_a_gemini_cli_checkpoint_is_read_as_its_contents(tmp_path: Path) -> None:
    # Gemini CLI 0.61's `/resume save <tag>` (`/chat save` before) writes {history: Content[],
    # authType} (logger.saveCheckpoint); it was refused as JSON of no known shape
    path = DATA / "gemini-cli-checkpoint.json"
    raw = json.loads(path.read_text())
    (t,) = read_path(str(path))
    assert t.source_format == "gemini" and len(t.units) >= len(raw["history"])
    tok = get_tokenizer("cl100k_base")
    texts = [p.get("text") or "" for c in raw["history"] for p in c["parts"] if not p.get("thought")]
    texts += [json.dumps(p["functionCall"]["args"], separators=(",", ":")) + p["functionCall"]["name"]
              for c in raw["history"] for p in c["parts"] if "functionCall" in p]
    texts += [v if isinstance(v, str) else json.dumps(v) for c in raw["history"] for p in c["parts"]
              if "functionResponse" in p for v in p["functionResponse"]["response"].values()]
    independent = sum(tok.count(x) for x in texts)
    assert abs(_text_tokens(t) - independent) <= 0.02 * independent, (_text_tokens(t), independent)
    buf = io.StringIO()
    write_transcripts([t], buf)
    assert json.loads(buf.getvalue()) == raw and list(json.loads(buf.getvalue())) == ["history", "authType"]
    # a dataset of them through Parquet and back
    from ctxkit.formats.parquet import write_parquet
    write_parquet([t, t], str(tmp_path / "x.parquet"))
    assert [len(x.units) for x in read_path(str(tmp_path / "x.parquet"))] == [len(t.units)] * 2


# ---------------------------------------------------------------- one claim


def _logs() -> list[Path]:
    here = Path(__file__).parent / "data"
    found = [*here.glob("agent_logs/*.jsonl"), *here.glob("new_logs/*.jsonl"), *here.glob("gemini_cli_jsonl/*.jsonl"),
             *here.glob("claude_attachments/*.jsonl")]
    from conftest import REALDATA

    return sorted(found + (sorted(REALDATA.glob("*/*.jsonl")) if REALDATA.is_dir() else []))


@pytest.mark.parametrize("path", _logs(), ids=lambda p: p.name[:60])
def test_no_two_formats_claim_one_real_log(path: Path) -> None:
    # detection asks the formats in order and the first that claims a file reads it: a file two
    # formats claim is read by whichever comes first (Qwen Code's recordings were Claude Code's,
    # 3 units of 15 tokens, while claude-code came first); each claims only its own agent's
    from ctxkit.formats import FORMATS

    records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    claims = [f.name for f in FORMATS.values() if f.shape in ("log", "messages") and f.detect(records)]
    assert len(claims) <= 1, claims
    if path.name == "gemini-cli-stream.jsonl":
        assert claims == []  # refused, with the file to read instead


def test_a_cursor_agent_transcript_is_no_prompt(tmp_path: Path) -> None:
    # Cursor's agent transcripts (~/.cursor/projects/<path>/agent-transcripts/<id>.txt: `user:` /
    # `assistant:` lines, `<user_query>`, `[Tool call]`, as public readers of them describe the
    # layout; no real one was found, and no format reads it): refused, never a system prompt
    turns = "".join(f"user:\n<user_query>\nstep {k}\n</user_query>\n\nassistant:\n[Tool call] Read\n  path: a{k}.py\n\n"
                    f"[Tool result] Read\nprint({k})\n\nassistant:\nDone {k}.\n\n" for k in range(3))
    path = tmp_path / "0b1c.txt"
    path.write_text(turns)
    r = _run(["count", str(path)])
    assert r.exit_code == 1 and "a chat transcript (3 user and 6 assistant headings)" in r.stderr
