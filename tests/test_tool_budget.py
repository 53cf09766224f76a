"""The tool budget (`ctxkit tools`, `budget.tools`): tokens per tool schema by source, and the
deferral that keeps schemas under a share of the window; on a hand-checkable case, on the tool
schemas the real logs record, and on a saved MCP `tools/list`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.budget.targets import resolve_target
from ctxkit.budget.tools import (
    Tool,
    load_tool_file,
    logged_tools,
    plan_budget,
    schemas_over,
    split_mcp_name,
    tool_budget,
)
from ctxkit.cli import cli
from ctxkit.formats import read_path
from ctxkit.tokens import get_tokenizer

DATA = Path(__file__).parent / "data" / "tools"
GIT = DATA / "mcp-server-git.tools-list.json"
SAMPLES = Path(__file__).parents[1] / "sample_transcripts"


def run(args: list[str], cwd: Path) -> object:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def schema(name: str, tokens: int) -> dict[str, str]:
    """A schema of exactly `tokens` approx tokens: its JSON `{"description":"…","name":"NAME"}` is
    28 characters plus the name and the description, and approx counts ceil(chars / 4)."""
    return {"name": name, "description": "x" * (4 * tokens - 28 - len(name))}


# Hand-checkable: window 8,000 with no model -> buffer 1,000 (window / 8), output 2,000 (window
# / 4), effective 5,000; 10% = 500 tokens. Schemas: Read 100 + Bash 150 (built-in), docs/srch
# 200 (called 5 times) + docs/page 120 + web/wiki 80 (MCP), pdfs 90 (skill) = 740.
# Deferring adds tool_search (a 300-character schema, 75 tokens) and the note (65 characters =
# 17 tokens, role "system" 2, message framing 3 = 22): 97.
# MCP first, least used first, then the largest: page, wiki, srch. After page 620 + 97 > 500,
# after wiki 540 + 97 > 500, after srch 340 + 97 = 437 <= 500: stop. pdfs (skill) stays.
HAND = [
    Tool("Read", "builtin", None, schema("Read", 100)),
    Tool("Bash", "builtin", None, schema("Bash", 150)),
    Tool("srch", "mcp", "docs", schema("srch", 200)),
    Tool("page", "mcp", "docs", schema("page", 120)),
    Tool("wiki", "mcp", "web", schema("wiki", 80)),
    Tool("pdfs", "skill", None, schema("pdfs", 90)),
]


def test_the_deferral_checked_by_hand() -> None:
    plan = plan_budget(HAND, {"srch": 5}, get_tokenizer("approx"), resolve_target(context_window=8000))
    assert (plan.effective_limit, plan.threshold_tokens, plan.schema_tokens) == (5000, 500, 740)
    assert [t.tokens for t in plan.tools] == [150, 100, 200, 120, 80, 90]
    assert plan.deferred == ("page", "wiki", "srch")
    assert plan.overhead_tokens == 97
    assert (plan.after_tokens, plan.gain, plan.fits_after) == (437, 303, True)
    assert plan.note == "[3 tools deferred to save context. Use tool_search to find them.]"
    by_source = {r["source"]: (r["tools"], r["tokens"], r["deferred"]) for r in plan.source_rows()}
    assert by_source == {"builtin": (2, 250, 0), "mcp:docs": (2, 320, 2), "mcp:web": (1, 80, 1),
                         "skill": (1, 90, 0), "total": (6, 740, 3)}


def test_use_decides_within_a_source_and_built_ins_are_never_deferred() -> None:
    tok, target = get_tokenizer("approx"), resolve_target(context_window=8000)
    # page now used most: unused wiki goes first (660 + 97 > 500), then srch, used once
    # (460 + 97 > 500), then page (340 + 97 <= 500)
    assert plan_budget(HAND, {"srch": 1, "page": 9}, tok, target).deferred == ("wiki", "srch", "page")
    # 1% = 50 tokens, no calls known: every MCP tool goes, largest first, then the skill; the
    # built-ins (250) alone stay over
    tight = plan_budget(HAND, {}, tok, target, threshold=0.01)
    assert tight.deferred == ("srch", "page", "wiki", "pdfs")
    assert not tight.fits_after and tight.after_tokens == 250 + 97
    assert any(line.startswith("still over by 297 tokens: built-in tools are never deferred") for line in tight.summary())
    # under the threshold nothing moves
    assert plan_budget(HAND, {}, tok, target, threshold=0.2).deferred == ()


def test_the_cli_reads_tool_files_and_a_log_of_calls(tmp_path: Path) -> None:
    (tmp_path / "builtin.json").write_text(json.dumps([HAND[0].schema, HAND[1].schema]))
    (tmp_path / "docs.json").write_text(json.dumps({"tools": [
        {"name": "srch", "description": HAND[2].schema["description"], "inputSchema": {}}]}))
    (tmp_path / "web.tools-list.json").write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
        {"name": "wiki", "description": "x" * 48, "inputSchema": {}, "annotations": {"readOnlyHint": True}}]}}))
    (tmp_path / "skills.json").write_text(json.dumps([HAND[5].schema]))
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "srch", "arguments": "{}"}} for i in range(3)]
    log = [{"role": "user", "content": "look it up"}, {"role": "assistant", "content": None, "tool_calls": calls}]
    log += [{"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(3)]
    (tmp_path / "log.json").write_text(json.dumps(log))
    args = ["tools", "log.json", "--tools", "builtin.json", "--mcp", "docs=docs.json", "--mcp",
            "web.tools-list.json", "--skills", "skills.json", "--window", "8000", "--tokenizer", "approx"]
    result = run([*args, "--format", "json"], tmp_path)
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    tools = {t["tool"]: (t["source"], t["server"], t["calls"], t["action"]) for t in plan["tools"]}
    assert tools["srch"] == ("mcp", "docs", 3, "defer" if plan["deferred"] else "keep")
    assert tools["wiki"][:2] == ("mcp", "web")  # the server named after its file
    assert tools["pdfs"][0] == "skill" and tools["Read"][0] == "builtin"
    table = run([*args, "--threshold", "0.05", "--format", "table"], tmp_path)
    assert table.exit_code == 0
    assert re.search(r"^tool schemas \d[\d,]* tokens \([\d.]+%\): defer \d tools \(mcp 2", table.stdout, re.M)
    assert "note: [" in table.stdout


def test_a_saved_mcp_tools_list() -> None:
    tools = load_tool_file(str(GIT), "mcp")
    assert [t.name for t in tools][:3] == ["git_status", "git_diff_unstaged", "git_diff_staged"]
    assert len(tools) == 12 and {t.server for t in tools} == {"mcp-server-git"}
    # annotations and titles are the client's; the model gets name, description, input schema
    assert all(set(t.schema or {}) == {"name", "description", "input_schema"} for t in tools)
    assert tools[0].call_names() == ("git_status", "mcp__mcp-server-git__git_status")
    plan = plan_budget(tools, {}, get_tokenizer("cl100k_base"), resolve_target(context_window=16000))
    assert plan.threshold_tokens == 1000 and plan.schema_tokens > 1000
    assert plan.deferred and plan.fits_after
    largest = max(plan.tools, key=lambda t: t.tokens or 0)
    assert largest.name == plan.deferred[0]  # nothing was called: the largest goes first


def test_tool_schemas_recorded_in_real_logs(realdata: Path) -> None:
    (openhands,) = read_path(str(realdata / "openhands" / "All-Hands-AI__OpenHands__multi_swe_bench-example-output__line0_ponylang__ponyc-4595.json"))
    plan = tool_budget([openhands], [], get_tokenizer("cl100k_base"), resolve_target("gpt-4o"))
    assert {(t.name, t.source) for t in plan.tools} == {
        ("execute_bash", "builtin"), ("think", "builtin"), ("finish", "builtin"), ("str_replace_editor", "builtin")}
    assert all(t.tokens and t.tokens > 100 for t in plan.tools)
    assert {t.name: t.calls for t in plan.tools}["execute_bash"] > 0
    assert plan.deferred == ()  # built-in only: never deferred

    codex_log = next((realdata / "codex").glob("savekirk__session-bridge*.jsonl"))
    (codex,) = read_path(str(codex_log))
    tools = {t.name: t for t in logged_tools(codex)}
    assert tools["automation_update"].source == "app" and tools["automation_update"].schema is not None
    assert tools["read_thread_terminal"].source == "app"
    assert tools["shell_command"].schema is None  # Codex records its built-ins' calls, not their schemas

    cc_log = next((realdata / "claude-code").glob("JanDeDobbeleer__oh-my-posh*.jsonl"))
    (claude,) = read_path(str(cc_log))
    assert len(claude.metadata["deferred_tools"]) == 41  # deferred_tools_delta attachments, applied
    assert split_mcp_name("mcp__Claude_Browser__navigate") == ("Claude_Browser", "navigate")
    plan = tool_budget([claude], load_tool_file(str(GIT), "mcp", "git"), get_tokenizer("cl100k_base"),
                       resolve_target("claude-sonnet-4"))
    lines = {t.name: t for t in plan.tools}
    assert lines["mcp__Claude_Browser__javascript_tool"].calls == 82
    assert lines["mcp__Claude_Browser__javascript_tool"].source == "mcp"
    assert lines["WebFetch"].logged == "deferred" and lines["Bash"].logged == "loaded"
    assert lines["git_log"].tokens and lines["Bash"].tokens is None
    assert len(plan.unknown) == len(plan.tools) - 12


def test_guard_says_when_tool_schemas_alone_pass_the_threshold(tmp_path: Path) -> None:
    args = ["guard", str(SAMPLES / "claude-code-session.jsonl"), "--tools", str(GIT), "--window", "12000", "--no-usage"]
    table = run(args, tmp_path)
    assert table.exit_code == 0
    note = [x for x in table.stdout.splitlines() if "tool schemas alone" in x]
    assert len(note) == 1 and "(threshold 10%): `ctxkit tools` says which to defer" in note[0]
    github = run([*args, "--format", "github"], tmp_path)
    (warning,) = [x for x in github.stdout.splitlines() if x.startswith("::")]
    assert warning.startswith("::warning file=") and "tool schemas alone are" in warning
    quiet = run([*args, "--tool-threshold", "0.5"], tmp_path)
    assert "tool schemas alone" not in quiet.stdout
    assert schemas_over(751, 7500, 0.1) is not None and schemas_over(750, 7500, 0.1) is None


@pytest.mark.parametrize("bad", ["--threshold=0", "--threshold=1.5", "--threshold=nan"])
def test_bad_thresholds_are_usage_errors(tmp_path: Path, bad: str) -> None:
    assert run(["tools", "--tools", str(GIT), bad], tmp_path).exit_code == 2
