"""Claude Code attachments in `Transcript.metadata["attachments"]`: what each attachment record
of the context puts into it, as Claude Code 2.1.328 sends it when it resumes the log.

Fixtures (tests/data/claude_attachments/, see its README): `kinds.jsonl` is a 2.1.328 session
with 2.1.219-style records (no `rendered` text) of every attachment type the real logs hold put
into its chain; `compacted.jsonl` is the same session compacted by Claude Code after the Edit's
result. The real oh-my-posh log (2.1.219, 89 attachment records) is read from ../shared/realdata.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ctxkit.agents.catalog import CLAUDE_CODE
from ctxkit.agents.drivers import installed_version
from ctxkit.agents.regions import is_reminder
from ctxkit.agents.session import ProbeOptions, resume
from ctxkit.formats import ReadOptions, read_path, read_text, write_transcripts
from ctxkit.formats.claude_attachments import NOT_SENT, entry, render
from ctxkit.model import Transcript
from ctxkit.tokens import get_tokenizer

DATA = Path(__file__).parent / "data" / "claude_attachments"
KINDS = DATA / "kinds.jsonl"
COMPACTED = DATA / "compacted.jsonl"
OH_MY_POSH = "claude-code/JanDeDobbeleer__oh-my-posh__checkpoints-v1__76-7bedbd9b21-0@e1d8732f.jsonl"
CWD = "/tmp/ctxkit-agent-z98j8c05/work"  # the fixtures' session ran here


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _read(records: list[dict[str, Any]], **options: Any) -> Transcript:
    text = "".join(json.dumps(r) + "\n" for r in records)
    (t,) = read_text(text, ReadOptions(format="claude-code", **options))
    return t


def _attachments(t: Transcript) -> list[tuple[int, str]]:
    return [(a["after_unit"], a["kind"]) for a in t.metadata.get("attachments", [])]


def test_each_kind_is_what_claude_code_sends() -> None:
    (t,) = read_path(str(KINDS))
    got = {(a["after_unit"], a["kind"], a["text"].split("\n")[0][:40]): a for a in t.metadata["attachments"]}
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for a in t.metadata["attachments"]:
        by_kind.setdefault(a["kind"], []).append(a)
    assert len(got) == len(t.metadata["attachments"]) == 19

    def text(kind: str, n: int = 0) -> str:
        return str(by_kind[kind][n]["text"])

    assert text("nested_memory") == f"Contents of {CWD}/.claude/rules/notes.md:\n\nKeep notes.txt to one word a line.\n"
    assert text("hook_success") == "SessionStart:startup hook success: Project notes mode: answer in one line."
    assert [a["text"] for a in by_kind["hook_additional_context"]] == [
        "UserPromptSubmit hook additional context: NOTES MODE ACTIVE. One word a line.",
        "PostToolUse:Write hook additional context: No preview server is running.",
    ]
    assert text("file") == (
        'Called the Read tool with the following input: {"file_path":"' + CWD + '/notes.txt"}\n'
        "Result of calling the Read tool:\n1\talpha\n2\tbeta\n3\t"
    )
    assert text("compact_file_reference") == (
        f"Note: {CWD}/big.log was read before the last conversation was summarized, but the "
        "contents are too large to include. Use Read tool if you need to access it."
    )
    assert text("edited_text_file").startswith(f"Note: {CWD}/notes.txt changed on disk since you last read it.")
    assert text("edited_text_file").endswith("(shown with line numbers):\n1\talpha\n2\tgamma\n3\tdelta")
    assert text("queued_command").startswith("The user sent a new message while you were working:\nalso list the folder\n\n")
    deferred = text("deferred_tools_delta", 1)
    assert "2 deferred tools are available again (MCP server reconnected" in deferred
    assert "mcp__wiki__* (2). Load via ToolSearch as before." in deferred
    assert "1 deferred tool is available again in this session (announced earlier in this conversation): Monitor." in deferred
    assert "no longer available (their MCP server disconnected)" in deferred and deferred.endswith("their request.")
    assert text("mcp_instructions_delta", 0).startswith("# MCP Server Instructions\n\n")
    assert "The following MCP servers have disconnected." in text("mcp_instructions_delta", 0)
    assert text("agent_listing_delta", 1).startswith("New agent types are now available for the Agent tool:\n")
    assert "- statusline-setup" in text("agent_listing_delta", 1)
    assert text("skill_listing", 1) == (
        "The following skills are available for use with the Skill tool:\n\n- notes: Keep notes files short."
    )
    # 2.1.328's own records carry their text; a system message sends it without the wrapper
    assert text("date") == "Today's date is 2026-11-29."
    assert text("model").startswith("You are powered by the model named Opus 5.5.")
    assert text("remote_session_change").startswith("<system-reminder>\nAttribution for git commits")
    assert {a["kind"] for a in t.metadata["attachments"] if a["rendered"]} == {
        "environment", "model", "deferred_tools_delta", "agent_listing_delta", "skill_listing", "date",
        "remote_session_change",
    }
    assert {(a["kind"], a["role"]) for a in t.metadata["attachments"] if a["role"] != "system"} == {
        ("remote_session_change", "user")
    }


def test_what_claude_code_does_not_send_is_left_out() -> None:
    (t,) = read_path(str(KINDS))
    texts = "\n".join(a["text"] for a in t.metadata["attachments"])
    kinds = {a["kind"] for a in t.metadata["attachments"]}
    # permission grants, an empty session context, a prompt snapshot: never; a hook's success
    # only for session start and prompt submit; an empty hook context: nothing to send
    assert not kinds & {"command_permissions", "session_context", "prompt_snapshot"}
    assert "formatted notes.txt" not in texts and "hook-empty" not in texts
    assert len([a for a in t.metadata["attachments"] if a["kind"] == "hook_additional_context"]) == 2
    # task reminders: this log's model (claude-opus-5-5) has no task tools in Claude Code 2.1.328
    assert "task_reminder" not in kinds
    assert {"command_permissions", "prompt_snapshot", "hook_system_message"} <= NOT_SENT


def test_an_older_model_gets_task_reminders_as_user_reminders() -> None:
    records = _records(KINDS)
    for r in records:
        if r.get("type") == "assistant":
            r["message"]["model"] = "claude-opus-4-6"
    t = _read(records)
    (task,) = [a for a in t.metadata["attachments"] if a["kind"] == "task_reminder"]
    assert task["after_unit"] == 2 and task["role"] == "user" and task["rendered"] is False
    assert task["text"].startswith("<system-reminder>\nThe task tools haven't been used recently.")
    assert task["text"].endswith("Here are the existing tasks:\n\n#1. [in_progress] Write notes.txt\n</system-reminder>")
    assert all(a["role"] == "user" and a["text"].startswith("<system-reminder>\n") for a in t.metadata["attachments"])


def test_after_unit_is_the_unit_before_each_attachment() -> None:
    (t,) = read_path(str(KINDS))
    where = _attachments(t)
    units = t.units
    after = {n: [k for (at, k) in where if at == n] for n in {at for at, _ in where}}
    assert sorted(after) == [0, 2, 4, 6, 8]
    assert units[0].role == "user" and units[0].content.startswith("Write notes.txt")
    assert len(after[0]) == 10  # the prompt's: environment, model, listings, date, attribution, hooks
    for n, tool in ((2, "Write"), (4, "Read"), (6, "Edit"), (8, "Bash")):
        assert units[n].role == "tool" and units[n - 1].tool_calls[0].name == tool
    assert after[2] == ["hook_additional_context"]
    assert after[4] == ["file", "compact_file_reference"]
    assert after[6] == ["edited_text_file", "queued_command"]
    assert after[8] == ["deferred_tools_delta", "mcp_instructions_delta", "agent_listing_delta", "skill_listing"]
    # an attachment before the first message: no unit before it
    lead = [r for r in _records(KINDS) if r.get("type") == "attachment" and r["attachment"]["type"] == "date"]
    t2 = _read([*lead, *(r for r in _records(KINDS) if r.get("type") != "attachment")])
    assert _attachments(t2) == [(-1, "date")]


def test_claude_codes_compaction_leaves_earlier_attachments_out() -> None:
    (t,) = read_path(str(COMPACTED))
    assert t.units[0].type == "summary"
    assert _attachments(t) == [
        (0, "file"), (0, "hook_success"), (0, "edited_text_file"), (0, "queued_command"),
        (2, "deferred_tools_delta"), (2, "mcp_instructions_delta"), (2, "agent_listing_delta"), (2, "skill_listing"),
    ]
    texts = "\n".join(a["text"] for a in t.metadata["attachments"])
    assert "Notes mode again after the compaction." in texts and "alpha\n2\tgamma" in texts
    assert "NOTES MODE" not in texts and "Keep notes.txt" not in texts  # before the compaction
    assert "sub-agent" not in texts  # a sidechain's
    # with the history before the compaction read too, its attachments come with its units
    (whole,) = read_path(str(COMPACTED), ReadOptions(include_compacted=True))
    assert len(whole.metadata["attachments"]) == 21
    summary_at = next(i for i, u in enumerate(whole.units) if u.type == "summary")
    assert [a for a in whole.metadata["attachments"] if a["after_unit"] >= summary_at] == [
        {**a, "after_unit": a["after_unit"] + summary_at} for a in t.metadata["attachments"]
    ]


def test_a_new_chain_leaves_earlier_attachments_out() -> None:
    records = []
    for r in _records(COMPACTED):
        if r.get("subtype") == "compact_boundary":
            continue
        if r.get("isCompactSummary"):
            r = {k: v for k, v in r.items() if k not in ("isCompactSummary", "isVisibleInTranscriptOnly")}
            r["parentUuid"] = None
            r["message"] = {"role": "user", "content": "Start again: notes.txt should hold alpha and gamma."}
        records.append(r)
    t = _read(records)
    assert t.units[0].content.startswith("Start again")
    assert [k for _, k in _attachments(t)][:2] == ["file", "hook_success"] and len(_attachments(t)) == 8


def test_units_and_the_written_log_are_unchanged() -> None:
    (t,) = read_path(str(KINDS))
    assert len(t.units) == 10  # attachments are no units
    buf = io.StringIO()
    write_transcripts([t], buf, "claude-code")
    assert [json.loads(line) for line in buf.getvalue().splitlines()] == _records(KINDS)


def test_a_type_ctxkit_has_not_measured_is_estimated_from_its_text() -> None:
    att = {"type": "brand_new_note", "content": "Remember the lighthouse.", "level": 3}
    assert render(att) == ["Remember the lighthouse."]
    rec = {"type": "attachment", "attachment": att}
    assert entry(rec, 4, None) == {
        "after_unit": 4, "kind": "brand_new_note", "text": "Remember the lighthouse.", "rendered": False, "role": "system"
    }
    # a `rendered` text wins, and a system message sends it without its wrapper
    logged = {**rec, "rendered": [{"content": "<system-reminder>\nSaid so.\n</system-reminder>"}], "renderedRole": "system"}
    assert entry(logged, 4, None)["text"] == "Said so."  # type: ignore[index]


def test_the_real_oh_my_posh_log(realdata: Path) -> None:
    path = realdata / OH_MY_POSH
    if not path.is_file():
        pytest.skip(f"{path} not found")
    (t,) = read_path(str(path))
    atts = t.metadata["attachments"]
    assert Counter(a["kind"] for a in atts) == {
        "hook_additional_context": 13, "edited_text_file": 10, "file": 4, "deferred_tools_delta": 3,
        "mcp_instructions_delta": 3, "nested_memory": 3, "queued_command": 2, "agent_listing_delta": 1,
        "skill_listing": 1, "hook_success": 1, "compact_file_reference": 1,
    }  # of 89 records: 45 task reminders (claude-opus-5 has no task tools) and 2 permission grants are not sent
    assert all(a["rendered"] is False and a["role"] == "system" for a in atts)
    assert [a["after_unit"] for a in atts[:9]] == [0] * 9  # what Claude Code re-attached after its summary
    assert t.units[0].type == "summary"
    assert atts[-1]["kind"] == "hook_additional_context"
    assert t.units[atts[-1]["after_unit"]].content == "folded in"  # the prompt its hook answered
    assert atts[5]["text"].startswith("The following deferred tools are now available via ToolSearch.")
    # Claude Code 2.1.328 resuming it sent 27,109 tokens (cl100k) of system text for them
    tokens = sum(get_tokenizer("cl100k_base").count(a["text"]) for a in atts)
    assert abs(tokens - 27_109) <= 27_109 * 0.01


# --- the real Claude Code --------------------------------------------------------------------


def _request_texts(body: dict[str, Any]) -> str:
    """The system messages' and reminder blocks' texts of a request, one per line group."""
    out = []
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for b in blocks:
            if b.get("type") == "text" and (m.get("role") == "system" or is_reminder(b.get("text") or "")):
                out.append(b["text"])
    return "\n\x00\n".join(out)


@pytest.mark.agents
@pytest.mark.parametrize("fixture", [KINDS, COMPACTED], ids=["kinds", "compacted"])
def test_claude_code_sends_what_the_metadata_says(
    fixture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.environ.get("CTXKIT_AGENTS_DIR"):
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        monkeypatch.setenv("CTXKIT_AGENTS_DIR", str(home / ".cache" / "ctxkit" / "agents"))
    if installed_version(CLAUDE_CODE) != CLAUDE_CODE.version:
        pytest.skip(f"Claude Code {CLAUDE_CODE.version} is not installed: `ctxkit agent install claude-code`")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = resume(CLAUDE_CODE, fixture, ProbeOptions(prompt="Continue.", timeout_s=180.0, keep=str(tmp_path / "kept")))
    body = json.loads((tmp_path / "kept" / "request-000.json").read_text())["body"]
    sent = _request_texts(body)
    (t,) = read_path(str(fixture))
    for a in t.metadata["attachments"]:
        assert a["text"] in sent, f"{a['kind']} after unit {a['after_unit']} is not in the request"
    for absent in ("formatted notes.txt", "Bash(cat:*)", "task tools haven't", "sub-agent's own context"):
        assert absent not in json.dumps(body)
    if fixture == COMPACTED:
        assert "NOTES MODE" not in json.dumps(body) and "Keep notes.txt" not in json.dumps(body)
    assert report.extra["carried"]["found"] == report.extra["carried"]["log_units"]
