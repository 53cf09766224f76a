"""Gemini CLI 0.61's JSONL chats (`gemini-cli-jsonl`): read as Gemini CLI loads them (the list
its records leave, as the model reads it), written back record for record, compacted into a
chat it resumes, expanded to every record. The logs are real, written by Gemini CLI 0.61.0
offline (tests/data/gemini_cli_jsonl/README.md)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REALDATA

from ctxkit.cli import cli
from ctxkit.formats import FORMATS, ReadStats, read_path, read_text, write_transcripts
from ctxkit.formats.gemini_cli_jsonl import NAME, detect
from ctxkit.formats.sdk import problems
from ctxkit.model import Transcript, Unit
from ctxkit.structure import check
from ctxkit.tokens import count_transcript, get_tokenizer

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "gemini_cli_jsonl"
LOGS = sorted(p.name for p in DATA.glob("*.jsonl"))
MODEL = "gemini-3.1-pro-preview"


def read(name: str, stats: ReadStats | None = None) -> Transcript:
    (t,) = read_path(str(DATA / name), stats=stats)
    return t


def written(t: Transcript) -> str:
    buf = io.StringIO()
    write_transcripts([t], buf)
    return buf.getvalue()


def records(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def shape(t: Transcript) -> list[tuple[str, str, list[str], str | None]]:
    return [(u.role, u.content, [c.id for c in u.tool_calls], u.tool_call_id) for u in t.units]


def final(text: str) -> list[str]:
    """The ids of the messages a chat's records leave, as Gemini CLI replays them."""
    from ctxkit.formats.gemini_cli_jsonl import _Chat

    return list(_Chat(records(text)).messages)


def pairs_ok(t: Transcript) -> bool:
    return not [p for p in check(t.units) if p.kind in ("orphan_result", "missing_result", "duplicate_result")]


# ---------------------------------------------------------------- reading


@pytest.mark.parametrize("name", LOGS)
def test_every_log_reads_as_a_gemini_cli_chat(name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8")
    t = read(name)
    head = records(text)[0]
    assert (t.source_format, t.id, t.metadata["session_id"]) == (NAME, head["sessionId"], head["sessionId"])
    assert t.metadata["model"] == MODEL
    # the units are the messages Gemini CLI's replay leaves, in its order
    assert list(dict.fromkeys(u.id.split("#")[0] for u in t.units)) == [
        mid for mid in final(text) if any(u.id.split("#")[0] == mid for u in t.units)]
    assert all(u.tool_call_id in {c.id for v in t.units for c in v.tool_calls} for u in t.units if u.role == "tool")


def test_a_session_reads_as_its_turns_each_result_once() -> None:
    stats = ReadStats()
    t = read("session.jsonl", stats)
    assert [(u.role, u.content[:17], [c.name for c in u.tool_calls]) for u in t.units] == [
        ("system", "<session_context>", []),
        ("user", "Write notes.txt w", []),
        ("assistant", "Writing the file.", ["write_file"]),
        ("tool", "Successfully crea", []),
        ("assistant", "", ["read_file"]),
        ("tool", "alpha\nbeta\n", []),
        ("assistant", "", ["run_shell_command"]),
        ("tool", "<untrusted_contex", []),
        ("assistant", "notes.txt holds a", []),
    ]
    # each call answered right after it, by its own id; the user messages that record the
    # results again are echoes, kept and not read
    for k, u in enumerate(t.units):
        if u.tool_calls:
            assert [r.tool_call_id for r in t.units[k + 1: k + 1 + len(u.tool_calls)]] == [c.id for c in u.tool_calls]
    assert stats.skipped_non_message == {f"{NAME}:echoed results": 3}
    assert pairs_ok(t)
    # each gemini message's tokens, the provider's count of its call, after the units it saw
    usage = t.metadata["provider_usage"]
    assert usage["source"] == NAME
    assert [(c["input_tokens"], c["output_tokens"], c["after_unit"]) for c in usage["calls"]] == [
        (9439, 42, 1), (9527, 27, 3), (9572, 27, 5), (9630, 11, 7)]


def test_a_resumed_chat_reads_as_the_list_its_resume_wrote() -> None:
    stats = ReadStats()
    t = read("resumed.jsonl", stats)
    calls = next(u for u in t.units if len(u.tool_calls) == 2)
    assert calls.reasoning == "**Plan** Read both files at once."  # thought parts of the rewritten list
    # every call of the turn holds the whole turn's responses: each result is its own call's
    results = [u for u in t.units if u.tool_call_id in {c.id for c in calls.tool_calls}]
    assert [u.content for u in results] == ["apples\n", "bananas\n"]
    failed = next(u for u in t.units if u.role == "tool" and u.content.startswith("File not found"))
    assert failed.meta["is_error"] and failed.meta["status"] == "error"
    assert [u.content for u in t.units if u.role == "user"] == [
        "What do a.txt, b.txt and c.txt hold?", "Put both fruits in fruit.txt."]
    assert len(t.metadata["provider_usage"]["calls"]) == 6  # the rewrite dropped none of them
    assert stats.skipped_non_message == {f"{NAME}:echoed results": 6}
    assert pairs_ok(t)


def test_a_rollback_and_a_rewind_read_as_gemini_cli_replays_them() -> None:
    t = read("cancelled.jsonl")
    # the cancelled call and its turn were rolled back; the list after it merged the session
    # context with the first prompt: the harness's part and the user's words
    assert [(u.role, u.content[:20]) for u in t.units[:3]] == [
        ("system", "<session_context>\nTh"), ("user", "what is in notes.txt"), ("assistant", "Reading notes.txt.")]
    assert "clean the build folder" not in "".join(u.content for u in t.units)
    kept = [r[2] for r in t.metadata["kept"]["records"]]
    assert {"id": kept[16]["id"], "type": "info", "content": "Request cancelled."}.items() <= kept[16].items()
    assert any(c.get("status") == "cancelled" for r in kept if isinstance(r, dict) for c in r.get("toolCalls") or [])
    assert pairs_ok(t)

    t = read("rewound.jsonl")
    assert [(u.role, u.content) for u in t.units] == [
        ("assistant", "Reading notes.txt."), ("user", "after the rewind, say something"),
        ("assistant", "Second answer after rewind.")]
    assert any("$rewindTo" in r[2] for r in t.metadata["kept"]["records"])
    # Gemini CLI's list after the rewind ends a turn on a call the rewind took the result of
    assert [p.kind for p in check(t.units)] == ["missing_result", "bad_ending"]


def test_a_converted_recording_reads_as_the_recording_did() -> None:
    legacy = read("legacy.json")
    assert legacy.source_format == "gemini-cli"  # the single-JSON layout is still that format's
    t = read("converted.jsonl")
    assert t.units[0].role == "system"
    assert shape(t)[1: 1 + len(legacy.units)] == shape(legacy)
    assert [u.content for u in t.units[1 + len(legacy.units):] if u.role == "user"] == ["What does notes.txt hold now?"]


# ---------------------------------------------------------------- detection


def _jsonl(path: Path) -> list[Any] | None:
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError):
        return None
    return lines or None


@pytest.mark.parametrize("name", LOGS)
def test_no_other_format_claims_a_chat(name: str) -> None:
    recs = records((DATA / name).read_text(encoding="utf-8"))
    assert detect(recs)
    assert [f.name for f in FORMATS.values() if f.shape in ("messages", "log") and f.name != NAME
            and f.detect(recs)] == []
    assert read_text((DATA / name).read_text(encoding="utf-8"), NAME)[0].units  # forced, the same


def test_no_other_jsonl_file_is_taken_for_a_chat() -> None:
    found = [p for p in (*REPO.glob("sample_transcripts/*.jsonl"), *REPO.glob("tests/data/**/*.jsonl"),
                         *(REALDATA.glob("*/*.jsonl") if REALDATA.is_dir() else ()))
             if p.parent != DATA]
    assert len(found) > 20
    claimed = [str(p) for p in found if (recs := _jsonl(p)) is not None and detect(recs)]
    assert claimed == []


def test_the_header_alone_is_not_enough() -> None:
    head = {"sessionId": "s", "projectHash": "p", "startTime": "t", "lastUpdated": "t", "kind": "main"}
    assert detect([head, {"$set": {"lastUpdated": "t"}}, {"id": "m", "type": "user", "content": "hi"}])
    assert not detect([{"id": "m", "type": "user", "content": "hi"}, head])  # a header comes first
    assert not detect([head, {"type": "user", "message": {"role": "user", "content": "hi"}}])
    assert not detect([{**head, "messages": []}])  # a recording on one line: the legacy format's


# ---------------------------------------------------------------- the round trip


@pytest.mark.parametrize("name", LOGS)
def test_read_and_written_back_is_the_file(name: str) -> None:
    assert written(read(name)) == (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", LOGS)
def test_compact_then_expand_gives_every_record_back(name: str, tmp_path: Path) -> None:
    src = tmp_path / name
    src.write_bytes((DATA / name).read_bytes())
    total = count_transcript(read(name), get_tokenizer("cl100k_base")).total
    small, back = tmp_path / "small.jsonl", tmp_path / "back.jsonl"
    run = CliRunner().invoke
    result = run(cli, ["compact", str(src), "--limit", str(total * 3 // 4), "--no-usage", "-o", str(small)],
                 catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert small.read_bytes() != src.read_bytes()
    (t,) = read_path(str(small))
    assert t.source_format == NAME and count_transcript(t, get_tokenizer("cl100k_base")).total < total
    if name != "rewound.jsonl":  # Gemini CLI's own rewind left a call unanswered
        assert problems(NAME, small.read_text(encoding="utf-8")) == [] and pairs_ok(t)
    result = run(cli, ["expand", str(small), "-o", str(back)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert back.read_bytes() == src.read_bytes()


# ---------------------------------------------------------------- what a compacted chat holds


def _without(t: Transcript, drop: set[str]) -> Transcript:
    return t.replace(units=[u for u in t.units if u.id.split("#")[0] not in drop])


def test_a_removed_message_goes_with_every_version_and_the_echoes_with_it() -> None:
    t = read("session.jsonl")
    gone = next(u.id for u in t.units if [c.name for c in u.tool_calls] == ["read_file"])
    text = written(_without(t, {gone}))
    recs = records(text)
    assert [r for r in recs if r.get("id") == gone] == []
    # no result recorded twice is left, so a resumed Gemini CLI sends each once
    assert [r for r in recs if r.get("type") == "user" and "functionResponse" in json.dumps(r)] == []
    assert len([r for r in recs if "$set" in r]) == len([r for r in records(written(t)) if "$set" in r])
    back = read_text(text, NAME)[0]
    assert shape(back) == shape(_without(t, {gone}))
    assert final(text) == [mid for mid in final(written(t)) if mid in {u.id.split("#")[0] for u in back.units}]


def test_a_changed_result_is_written_in_its_calls_last_version() -> None:
    t = read("session.jsonl")
    k = next(i for i, u in enumerate(t.units) if u.role == "tool")
    t.units[k] = t.units[k].replace(content="[the output, archived]")
    recs = records(written(t))
    versions = [r for r in recs if r.get("id") == t.units[k - 1].id]
    assert len(versions) == 2 and "toolCalls" not in versions[0]  # the first version as it was
    (call,) = versions[1]["toolCalls"]
    assert call["result"] == [{"functionResponse": {"id": call["id"], "name": "write_file",
                                                    "response": {"output": "[the output, archived]"}}}]
    assert "resultDisplay" not in call and call["status"] == "success"
    back = read_text(written(t), NAME)[0]
    assert back.units[k].content == "[the output, archived]" and shape(back) == shape(t)


def test_a_message_compaction_made_goes_before_the_next_message_where_that_one_is() -> None:
    t = read("resumed.jsonl")
    first = next(i for i, u in enumerate(t.units) if u.role == "assistant")
    answer = next(i for i, u in enumerate(t.units) if u.content.startswith("a.txt has apples"))
    asked = next(i for i, u in enumerate(t.units) if u.content == "Put both fruits in fruit.txt.")
    summary = Unit(id="ctxkit-summary", role="user", type="summary", content="Summary: a.txt apples, b.txt bananas.")
    # the first turn's messages are entries of the resume's `$set` of the list: a summary
    # before one of them is an entry too; the second turn's are lines of their own
    for upto, listed in ((answer, True), (asked, False)):
        compacted = t.replace(units=[*t.units[:first], summary, *t.units[upto:]])
        text = written(compacted)
        (lists,) = [r for r in records(text) if isinstance(r.get("$set"), dict) and len(r["$set"].get("messages", ())) > 1]
        assert ("Summary: a.txt apples" in json.dumps(lists)) is listed
        back = read_text(text, NAME)[0]
        assert [u.content for u in back.units] == [u.content for u in compacted.units]
        assert problems(NAME, text) == []


def test_a_merged_session_context_gives_way_to_the_users_words() -> None:
    t = read("cancelled.jsonl")
    hi = next(u.id for u in t.units if u.content == "never mind, just say hi")
    after = next(u.id for u in t.units if u.content == "OK, leaving build alone.")
    text = written(_without(t, {hi, after}))
    back = read_text(text, NAME)[0]
    # Gemini CLI leaves a user turn that begins with its session context out on resume: the
    # first request is written alone (it writes a fresh session context)
    assert [(u.role, u.content) for u in back.units[:2]] == [
        ("user", "what is in notes.txt"), ("assistant", "Reading notes.txt.")]
    assert len(back.units) == len(t.units) - 3


def test_a_rewind_still_finds_its_message() -> None:
    t = read("rewound.jsonl")
    last = t.units[-1]
    t.units[-1] = last.replace(content="A shorter answer.")
    text = written(t)
    recs = records(text)
    (rewind,) = [r for r in recs if "$rewindTo" in r]
    assert any(r.get("id") == rewind["$rewindTo"] for r in recs)
    assert [u.content for u in read_text(text, NAME)[0].units] == [u.content for u in t.units]


def test_another_formats_transcript_is_written_as_a_chat_gemini_cli_loads() -> None:
    (t,) = read_path(str(DATA / "legacy.json"))
    buf = io.StringIO()
    write_transcripts([t], buf, NAME)
    text = buf.getvalue()
    head = records(text)[0]
    assert head["sessionId"] == t.id and head["projectHash"] and head["kind"] == "main"
    assert problems(NAME, text) == []
    back = read_text(text, NAME)[0]
    assert shape(back) == shape(t)


# ---------------------------------------------------------------- the real agent


@pytest.mark.agents
def test_gemini_cli_resumes_a_compacted_chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed Gemini CLI 0.61 resumes a chat ctxkit compacted: its request carries the
    compacted chat's messages, in order, each call with its result once."""
    import pwd
    import shutil
    import tempfile

    from ctxkit.agents.catalog import GEMINI_CLI
    from ctxkit.agents.drivers import installed_version
    from ctxkit.agents.session import ProbeOptions, resume

    if not os.environ.get("CTXKIT_AGENTS_DIR"):  # conftest moved $HOME: the user's own cache
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        monkeypatch.setenv("CTXKIT_AGENTS_DIR", str(home / ".cache" / "ctxkit" / "agents"))
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # the agent's temporary home
    monkeypatch.setenv("TMPDIR", str(temp))
    if shutil.which("node") is None:
        pytest.skip("node not found: Gemini CLI is an npm package (Node.js 20+)")
    if installed_version(GEMINI_CLI) != GEMINI_CLI.version:
        pytest.skip(f"Gemini CLI {GEMINI_CLI.version} is not installed: run `ctxkit agent install gemini-cli`")
    src = tmp_path / "resumed.jsonl"
    src.write_bytes((DATA / "resumed.jsonl").read_bytes())
    total = count_transcript(read("resumed.jsonl"), get_tokenizer("cl100k_base")).total
    small = tmp_path / "small.jsonl"
    result = CliRunner().invoke(cli, ["compact", str(src), "--limit", str(total * 4 // 5), "--no-usage",
                                      "-o", str(small)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    (t,) = read_path(str(small))
    assert len(t.units) < len(read("resumed.jsonl").units)
    report = resume(GEMINI_CLI, small, ProbeOptions(prompt="Continue.", timeout_s=180.0))
    carried = report.extra["carried"]
    assert carried["log_units"] == len([u for u in t.units if u.role != "system"])
    assert carried["found"] == carried["log_units"]
    assert (carried["in_order"], carried["pairs_intact"]) == (True, True)
    assert report.first.transcript is not None and report.first.transcript.units[-1].content == "Continue."
