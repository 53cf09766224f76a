"""`ctxkit mcp` served over stdio to the mcp SDK's own client; the recall tool it shares with
`compact --recall-tool`; `serve_recall` and `serve_search` as a harness calls them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit.archive.recall_tool import (
    RECALL_PARAMETERS,
    RECALL_TOOL,
    SEARCH_TOOL,
    parse_lines,
    recall_tool_for,
    serve_recall,
    serve_search,
)
from ctxkit.archive.store import Archive
from ctxkit.cli import cli
from ctxkit.errors import ArchiveError, UsageError
from ctxkit.model import ToolCall, Transcript, Unit

REPO = Path(__file__).resolve().parents[1]
LOG = "\n".join(
    f"line {i} FAILED test_{i}" if i % 25 == 0 else f"line {i} passed" for i in range(1, 121)
)


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def session(n_turns: int = 6) -> Transcript:
    """An OpenAI chat with tools whose big bash outputs a compaction archives."""
    units = [Unit("s", "system", content="You are a coding agent.")]
    for i in range(n_turns):
        units.append(Unit(f"q{i}", "user", content=f"Run the tests, round {i}."))
        units.append(
            Unit(f"a{i}", "assistant", tool_calls=[ToolCall(f"c{i}", "bash", '{"cmd": "pytest"}')])
        )
        units.append(Unit(f"r{i}", "tool", "log", LOG, tool_call_id=f"c{i}", name="bash"))
        units.append(Unit(f"d{i}", "assistant", content=f"Round {i}: 4 tests failed."))
    units.append(Unit("last", "user", content="Which tests failed in the first round?"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "Run a shell command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            },
        }
    ]
    return Transcript(units=units, id="chat", source_format="openai", layout="object", tools=tools)


def write_session(path: Path, fmt: str = "openai") -> None:
    from ctxkit.formats import write_path

    write_path([session()], str(path), fmt)


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, Path]:
    """(the compacted transcript, its archive), written by `ctxkit compact`."""
    src = tmp_path / "chat.json"
    write_session(src)
    out = tmp_path / "small.json"
    r = run("compact", str(src), "--limit", "1500", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    return out, Path(f"{out}.ctx.db")


def log_refs(db: Path) -> list[str]:
    """Refs of the archived test logs, in the order they were stored."""
    with Archive(str(db), readonly=True, create=False) as a:
        return [it.ref for it in a.list() if it.content == LOG]


# -- the MCP server over stdio, with the SDK's client ------------------------------------------


def call_server(db: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    """Start `python -m ctxkit mcp --archive DB`, list its tools, make the calls: (tools, results)."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {"PYTHONPATH": str(REPO), **{k: v for k, v in os.environ.items() if k == "HOME"}}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ctxkit", "mcp", "--archive", str(db)], env=env
    )

    async def main() -> tuple[list[Any], list[Any]]:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as client:
                    init = await client.initialize()
                    assert "recall(ref)" in (init.instructions or "")
                    tools = (await client.list_tools()).tools
                    results = [await client.call_tool(name, args) for name, args in calls]
        return list(tools), results

    return anyio.run(main)


def text_of(result: Any) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return str(result.content[0].text)


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


def schema_of(tool: Any) -> dict[str, Any]:
    return dict(getattr(tool, "input_schema", None) or tool.inputSchema)


def test_mcp_server_lists_tools_and_serves_recall_and_search(compacted: tuple[Path, Path]):
    out, db = compacted
    ref = log_refs(db)[0]  # the first round's test log
    assert ref in out.read_text()  # the compacted transcript names it
    tools, results = call_server(
        db,
        [
            ("recall", {"ref": ref}),
            ("recall", {"ref": ref, "lines": "24-26"}),
            ("recall", {"ref": ref, "lines": [25, 25]}),
            ("recall", {"ref": ref, "search": "FAILED", "max_tokens": 400}),
            ("search", {"query": "failed test_75"}),
            ("search", {"query": "no such text anywhere"}),
            ("recall", {"ref": "ref-000000000000000000"}),
            ("recall", {"ref": ref, "lines": "30-20"}),
            ("recall", {"lines": "1-2"}),
            ("recall", {"ref": ref, "colour": "red"}),
            ("delete", {"ref": ref}),
            ("recall", {"ref": ref, "lines": "1"}),  # the server is still up
        ],
    )
    assert [t.name for t in tools] == ["recall", "search"]
    assert schema_of(tools[0]) == RECALL_TOOL["parameters"]
    assert schema_of(tools[1]) == SEARCH_TOOL["parameters"]
    assert tools[0].description == RECALL_TOOL["description"]

    whole, lines, one, search, found, nothing, unknown, backwards, no_ref, extra, tool, after = (
        results
    )
    assert not is_error(whole) and text_of(whole) == LOG
    assert text_of(lines) == "line 24 passed\nline 25 FAILED test_25\nline 26 passed"
    assert text_of(one) == "line 25 FAILED test_25"
    assert text_of(search).splitlines()[:5] == [
        "23-line 23 passed",
        "24-line 24 passed",
        "25:line 25 FAILED test_25",
        "26-line 26 passed",
        "27-line 27 passed",
    ]
    hits = text_of(found).splitlines()
    assert hits and all("line 75: line 75 FAILED test_75" in h for h in hits)
    assert hits[0].startswith(f"{ref} [bash log, ")
    assert not is_error(nothing) and "no archived item matches" in text_of(nothing)
    for bad in (unknown, backwards, no_ref, extra, tool):
        assert is_error(bad)
    assert text_of(unknown).startswith("unknown ref ref-000000000000000000")
    assert "must not exceed" in text_of(backwards)
    # mcp 1 checks arguments against the schema itself, in its own words; mcp 2 leaves it to us
    assert "'ref'" in text_of(no_ref) and "required" in text_of(no_ref)
    assert "colour" in text_of(extra)
    assert text_of(tool).startswith("unknown tool 'delete'")
    assert not is_error(after) and text_of(after) == "line 1 passed"


def test_mcp_server_opens_the_archive_read_only(compacted: tuple[Path, Path]):
    _, db = compacted
    os.chmod(db, 0o400)  # a writable archive would count the access; this one cannot be written
    try:
        _, (result,) = call_server(db, [("recall", {"ref": log_refs(db)[-1]})])
    finally:
        os.chmod(db, 0o600)
    assert not is_error(result) and text_of(result) == LOG
    with Archive(str(db), readonly=True, create=False) as a:
        assert all(it.access_count == 0 for it in a.list())


def test_mcp_without_the_sdk_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now raises ImportError
    r = CliRunner().invoke(cli, ["mcp", "--archive", str(tmp_path / "a.db")])
    assert r.exit_code == 2
    assert r.stderr == "ctxkit: `ctxkit mcp` needs the MCP SDK: pip install 'ctxkit[mcp]'\n"


def test_mcp_with_no_archive_fails_in_one_line(tmp_path: Path):
    pytest.importorskip("mcp")
    r = CliRunner().invoke(cli, ["mcp", "--archive", str(tmp_path / "none.db")])
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "no archive at" in r.stderr


def test_compact_count_guard_never_import_mcp(tmp_path: Path):
    src = tmp_path / "chat.json"
    write_session(src)
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        "for args in (['count', sys.argv[1]], ['guard', sys.argv[1], '--limit', '100000'],\n"
        "             ['compact', sys.argv[1], '--limit', '1500', '--recall-tool', '-o', sys.argv[2]]):\n"
        "    try:\n"
        "        cli(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('MCP', [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')], file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(src), str(tmp_path / "small.json")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "MCP []" in proc.stderr


# -- compact --recall-tool ------------------------------------------------------------------------


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [(t.get("function") or t)["name"] for t in tools]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_recall_tool_in_the_output_formats_shape(tmp_path: Path, fmt: str):
    src = tmp_path / f"chat-{fmt}.json"
    write_session(src, fmt)
    out = tmp_path / "small.json"
    r = run("compact", str(src), "--limit", "1500", "--recall-tool", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    doc = json.loads(out.read_text())
    assert tool_names(doc["tools"]) == ["bash", "recall"]  # the source's tools first
    assert doc["tools"][-1] == recall_tool_for(fmt)
    if fmt == "anthropic":
        assert doc["tools"][-1]["input_schema"] == RECALL_PARAMETERS
    else:
        assert doc["tools"][-1]["function"]["parameters"] == RECALL_PARAMETERS
    # the budget counts the tool: the output fits as written
    guard = run("guard", str(out), "--limit", "1500")
    assert guard.exit_code == 0, guard.stdout + guard.stderr
    # every ref the placeholders name is served by the tool
    with Archive(f"{out}.ctx.db", readonly=True, create=False) as archive:
        refs = set(re.findall(r"ref-\d{18}", json.dumps(doc["messages"])))
        assert refs
        for ref in refs:
            assert serve_recall(archive, {"ref": ref}) == archive.recall(ref)
    # and expand gives back the original, without the tool
    back = tmp_path / "back.json"
    assert run("expand", str(out), "-o", str(back)).exit_code == 0
    assert json.loads(back.read_text()) == json.loads(src.read_text())


def test_recall_tool_is_added_once_when_compacted_again(tmp_path: Path):
    src = tmp_path / "chat.json"
    write_session(src)
    once, twice = tmp_path / "once.json", tmp_path / "twice.json"
    assert (
        run("compact", str(src), "--limit", "2500", "--recall-tool", "-o", str(once)).exit_code == 0
    )
    r = run("compact", str(once), "--limit", "1500", "--recall-tool", "-o", str(twice))
    assert r.exit_code == 0, r.stderr
    assert tool_names(json.loads(twice.read_text())["tools"]) == ["bash", "recall"]


def test_recall_tool_leaves_a_transcript_that_fits_as_it_is(tmp_path: Path):
    src = tmp_path / "chat.json"
    write_session(src)
    out = tmp_path / "same.json"
    r = run("compact", str(src), "--limit", "100000", "--recall-tool", "-o", str(out))
    assert r.exit_code == 0 and out.read_bytes() == src.read_bytes()  # nothing to recall


def test_recall_tool_takes_the_shape_of_the_tools_there():
    from ctxkit.archive.recall_tool import add_tools

    tool = recall_tool_for("sharegpt")
    assert tool == {"type": "function", "function": RECALL_TOOL}
    bare = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    assert add_tools([bare], [tool]) == [bare, RECALL_TOOL]  # ShareGPT's bare function schemas
    anthropic = {"name": "bash", "input_schema": {"type": "object"}}
    assert add_tools([anthropic], [tool])[1] == recall_tool_for("anthropic")
    assert add_tools([], [tool]) == [tool]
    assert add_tools([tool], [tool]) == [tool]  # one recall tool, however often added


def test_recall_tool_needs_the_budget_it_takes():
    from ctxkit.compaction import CompactSettings, compact
    from ctxkit.tokens import count_transcript

    t = session()
    plain = compact(t, CompactSettings(limit=1500))
    tool = recall_tool_for("openai")
    assert tool is not None
    settings = CompactSettings(limit=1500).with_added_tools(tool)
    assert settings.with_added_tools(tool) == settings  # one recall tool, however often added
    with_tool = compact(t, settings)
    assert tool_names(with_tool.transcript.tools) == ["bash", "recall"]
    assert tool_names(plain.transcript.tools) == ["bash"]
    assert count_transcript(with_tool.transcript).total == with_tool.tokens_after
    assert with_tool.tokens_after <= with_tool.target
    assert with_tool.regions_after["tools"] > plain.regions_after["tools"]


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_formats_without_tool_schemas_say_how_to_serve_recall(fmt: str):
    from ctxkit.archive.recall_tool import serving_hint

    assert recall_tool_for(fmt) is None
    hint = serving_hint("small.jsonl.ctx.db")
    where = os.path.abspath("small.jsonl.ctx.db")  # the app starts the server from elsewhere
    assert hint == (
        f"serve recall over MCP instead: ctxkit mcp --archive {where} "
        f"(Claude Code: claude mcp add ctxkit -- ctxkit mcp --archive {where}; "
        f'Codex: [mcp_servers.ctxkit] command = "ctxkit", args = ["mcp", "--archive", "{where}"] '
        "in ~/.codex/config.toml)"
    )


def test_compact_prints_the_hint_for_an_app_log(tmp_path: Path):
    from ctxkit.archive.recall_tool import serving_hint
    from ctxkit.formats import WRITABLE

    if "codex" not in WRITABLE:
        pytest.skip("codex logs are written as units until the codex writer lands")
    src = REPO / "sample_transcripts" / "codex-rollout.jsonl"
    out = tmp_path / "small.jsonl"
    r = run("compact", str(src), "--limit", "6000", "--recall-tool", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if "tool schemas" in x)
    assert line == f"ctxkit: codex files carry no tool schemas; {serving_hint(f'{out}.ctx.db')}"
    assert RECALL_TOOL["description"][:40] not in out.read_text()  # no schema in the log


def test_recall_tool_with_replay_is_refused(tmp_path: Path):
    src = tmp_path / "chat.json"
    write_session(src)
    r = CliRunner().invoke(
        cli, ["compact", str(src), "--limit", "1500", "--replay", "--recall-tool"]
    )
    assert r.exit_code == 2 and "--recall-tool" in r.stderr


# -- serve_recall and serve_search, as a harness calls them ----------------------------------


@pytest.fixture
def archive() -> Any:
    with Archive(":memory:") as a:
        a.put(
            "s1", Unit("r7", "tool", "log", LOG, tool_call_id="c7", name="bash"), summary="pytest"
        )
        a.put("s2", Unit("x", "tool", content="other text", tool_call_id="c1", name="Read"))
        yield a


def test_serve_recall_matches_archive_recall(archive: Archive):
    ref = archive.list()[0].ref
    assert serve_recall(archive, {"ref": ref}) == LOG
    assert serve_recall(archive, {"ref": ref, "lines": "2-3"}) == "line 2 passed\nline 3 passed"
    assert serve_recall(archive, {"ref": ref, "lines": [2, 3]}) == "line 2 passed\nline 3 passed"
    assert serve_recall(archive, {"ref": f"{ref}:L4"}) == "line 4 passed"
    assert serve_recall(archive, {"ref": ref, "search": "test_50"}) == archive.recall(
        ref, search="test_50"
    )
    assert serve_recall(archive, {"ref": "ctx://s1/r7", "lines": None}) == LOG
    assert serve_recall(archive, {"ref": ref, "search": "nowhere"}) == (
        f"no line of {ref} matches 'nowhere'"
    )
    cut = serve_recall(archive, {"ref": ref, "max_tokens": 30})
    assert cut.startswith("line 1 passed") and "[cut:" in cut


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("ref-1", "recall: arguments must be an object, got str"),
        ({}, "recall: argument 'ref' is required"),
        ({"ref": " "}, "recall: argument 'ref' is empty; give the ref a placeholder names"),
        ({"ref": 7}, "recall: argument 'ref' must be a string, got 7"),
        ({"ref": "R", "max_tokens": 0}, "recall: argument 'max_tokens' must be at least 1, got 0"),
        (
            {"ref": "R", "max_tokens": True},
            "recall: argument 'max_tokens' must be a integer, got True",
        ),
        (
            {"ref": "R", "lines": "a-b"},
            "lines 'a-b': expected A-B or A (line numbers from 1), e.g. lines 50-100",
        ),
        ({"ref": "R", "lines": [3, 1]}, "lines 3-1: lines count from 1 and A must not exceed B"),
        (
            {"ref": "R", "nope": 1},
            "recall: unknown argument(s) nope; known: ref, lines, search, max_tokens",
        ),
    ],
)
def test_serve_recall_refuses_bad_arguments(archive: Archive, arguments: Any, message: str):
    arguments = (
        {k: archive.list()[0].ref if v == "R" else v for k, v in arguments.items()}
        if isinstance(arguments, dict)
        else arguments
    )
    with pytest.raises(UsageError) as e:
        serve_recall(archive, arguments)
    assert str(e.value) == message


def test_serve_recall_unknown_and_malformed_refs(archive: Archive):
    with pytest.raises(
        ArchiveError, match=r"^unknown ref ref-000000000000000000: nothing archived"
    ):
        serve_recall(archive, {"ref": "ref-000000000000000000"})
    with pytest.raises(ArchiveError, match="is not a ref"):
        serve_recall(archive, {"ref": "hello"})
    with pytest.raises(ArchiveError, match="line 500 is past the end"):
        serve_recall(archive, {"ref": archive.list()[0].ref, "lines": "500-600"})


def test_serve_search(archive: Archive):
    ref, other = (it.ref for it in archive.list())
    assert serve_search(archive, {"query": "TEST_100"}) == (
        f"{ref} [bash log, {len(LOG):,} chars, 120 lines] transcript s1: line 100: line 100 FAILED test_100"
    )
    assert serve_search(archive, {"query": "read"}).startswith(
        f"{other} [Read message"
    )  # tool name
    assert serve_search(archive, {"query": "pytest"}) == (  # the summary matched
        f"{ref} [bash log, {len(LOG):,} chars, 120 lines] transcript s1: pytest"
    )
    listed = serve_search(archive, {"query": ""}).splitlines()
    assert [x.split()[0] for x in listed] == [ref, other]
    assert serve_search(archive, {"query": "", "limit": 1}).splitlines() == [
        listed[0],
        "(more match: raise limit above 1 or narrow the query)",
    ]
    assert serve_search(archive, {"query": "other", "transcript": "s1"}) == (
        "no archived item of transcript 's1' matches 'other'"
    )
    assert serve_search(archive, {"query": "[unclosed"}).startswith("no archived item")  # literal


def test_archive_search_hits(archive: Archive):
    (hit,) = archive.search("FAILED test_1\\d\\d")
    assert (hit["line"], hit["matches"], hit["tool_name"]) == (100, 1, "bash")
    assert hit["snippet"] == "line 100 FAILED test_100"
    (by_summary,) = archive.search("pytest")
    assert by_summary["line"] is None and by_summary["matches"] == 0
    assert archive.search("passed", limit=1)[0]["matches"] == 116


def test_parse_lines():
    assert parse_lines(None) is None
    assert parse_lines("5-9") == parse_lines([5, 9]) == parse_lines(" 5 - 9 ") == (5, 9)
    assert parse_lines("7") == parse_lines(7) == (7, 7)
    with pytest.raises(UsageError):
        parse_lines([1, 2, 3])
    with pytest.raises(UsageError):
        parse_lines(0)


def test_the_compact_command_says_how_to_serve_an_app_log(tmp_path: Path) -> None:
    from ctxkit.archive.recall_tool import serving_hint

    src = REPO / "sample_transcripts" / "claude-code-session.jsonl"
    out = tmp_path / "small.jsonl"
    r = run("compact", str(src), "--limit", "100000", "--recall-tool", "-o", str(out))
    assert r.exit_code == 0, r.stderr
    line = f"ctxkit: claude-code files carry no tool schemas; {serving_hint(f'{out}.ctx.db')}"
    assert r.stderr.splitlines()[0] == line
