"""The real agents, installed from npm, run offline against the recording provider: what one
prompt sends, the log a scripted session writes, what resuming a real log sends, the user's own
setup (`--here`), the terminal UI in tmux, and that nothing but 127.0.0.1 is contacted.

Every test is marked `agents` (`make test-agents` installs the pinned versions, then runs
`pytest -m agents`; `make test` leaves them out). A test skips, saying why, when node or npm is
missing or the pinned version is not installed in `agents_dir()`. The agents' temporary homes go
under pytest's tmp_path and are removed; every provider is stopped by the test that started it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxkit.agents.catalog import AGENTS
from ctxkit.agents.drivers import DUMMY_KEY, Agent, agents_dir, installed_version
from ctxkit.agents.regions import is_reminder
from ctxkit.agents.session import AgentReport, ProbeOptions, drive, probe, resume
from ctxkit.cli import cli
from ctxkit.formats import read_path
from ctxkit.structure import check

pytestmark = pytest.mark.agents

REPO = Path(__file__).resolve().parents[1]
REALDATA = REPO.parent / "shared" / "realdata"
PROMPT = "Say hi to the lighthouse keeper."
TIMEOUT_S = 180.0
# the user's cache: conftest points $HOME and $XDG_CACHE_HOME into the session's tmp dir, where
# no agent is installed
USER_AGENTS_DIR = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "ctxkit" / "agents"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Temporary homes (tempfile), the agents' own temporary files (TMPDIR) and tmux's socket
    under tmp_path; the agents found in the user's cache unless CTXKIT_AGENTS_DIR says where.
    After the test, no agent home is left."""
    if not os.environ.get("CTXKIT_AGENTS_DIR"):
        monkeypatch.setenv("CTXKIT_AGENTS_DIR", str(USER_AGENTS_DIR))
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setenv("TMUX_TMPDIR", str(temp))
    yield temp
    assert not list(temp.glob("ctxkit-agent-*")), "an agent's temporary home was left behind"


def _installed(agent: Agent) -> Agent:
    """The agent, or a skip that says what is missing."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not found: the agents are npm packages (Node.js 20+)")
    found = installed_version(agent)
    if found != agent.version:
        pytest.skip(
            f"{agent.label} {agent.version} is not installed in {agents_dir()}"
            + (f" (found {found})" if found else "")
            + f": run `make test-agents` or `ctxkit agent install {agent.name}`"
        )
    return agent


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _sent(report: AgentReport, text: str) -> bool:
    """Whether the first main request holds `text` in one of its strings."""
    body = next(r for r in report.requests if r.main).body
    return any(text in s for s in _strings(body))


PRINTED = sorted(AGENTS)


# --- probe -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRINTED)
def test_probe_sends_one_main_request(name: str) -> None:
    agent = _installed(AGENTS[name])
    report = probe(agent, ProbeOptions(prompt=PROMPT, timeout_s=TIMEOUT_S))
    assert report.run.ok(), report.run.stderr[-500:]
    assert len(report.counts) == 1
    first = report.first
    assert first.api == agent.api
    assert first.regions["system"] > 0 and first.regions["tools"] > 0
    assert first.regions["mcp"] == 0 and first.mcp_servers == {}  # a fresh home has no MCP server
    assert first.total == sum(first.regions.values())
    assert first.transcript is not None
    (asked,) = [u.content for u in first.transcript.units if u.role == "user"]
    assert asked.endswith(PROMPT)  # Copilot CLI puts the date before it, in the same text
    # the dummy key went to the provider only in headers, which are recorded redacted
    assert DUMMY_KEY not in json.dumps([r.to_dict() for r in report.requests])


# --- a scripted session, and the log it writes -------------------------------------------------

@pytest.mark.parametrize("name", PRINTED)
def test_drive_writes_a_log_ctxkit_reads(name: str, tmp_path: Path) -> None:
    agent = _installed(AGENTS[name])
    (tmp_path / "logs").mkdir()
    report = drive(agent, tmp_path / "logs", ProbeOptions(timeout_s=TIMEOUT_S))
    script = agent.script(Path("/unused"))
    assert report.run.ok(), report.run.stderr[-500:]
    assert report.extra["steps_used"] == len(script)  # one main request per step
    log = Path(report.extra["log"])
    assert log.parent == tmp_path / "logs"

    (transcript,) = list(read_path(str(log)))
    calls = [c for u in transcript.units for c in u.tool_calls]
    assert [c.name for c in calls] == [c.name for step in script for c in step.tool_calls]
    answered = {u.tool_call_id for u in transcript.units if u.role == "tool"}
    assert {c.id for c in calls} == answered
    assert [p.kind for p in check(transcript)] == ["bad_ending"]  # it ends on the agent's reply
    assert transcript.units[-1].content == script[-1].text


STREAMED = sorted(n for n, a in AGENTS.items() if a.stream_args is not None)


@pytest.mark.parametrize("name", STREAMED)
def test_drive_in_stream_mode_prints_events_ctxkit_reads(name: str, tmp_path: Path) -> None:
    """The headless JSON output (`claude -p --output-format stream-json --verbose`, `codex exec
    --json`) is read as its format: every scripted call and its result, the last answer; and
    count, guard and compact go through it."""
    agent = _installed(AGENTS[name])
    report = drive(agent, str(tmp_path / "logs") + "/", ProbeOptions(mode="stream", timeout_s=TIMEOUT_S))
    script = agent.script(Path("/unused"))
    assert report.run.ok(), report.run.stderr[-500:]
    log = Path(report.extra["log"])
    assert log == tmp_path / "logs" / f"{name}-stream.jsonl"
    (transcript,) = list(read_path(str(log)))
    assert transcript.source_format == agent.stream_format
    calls = [c for u in transcript.units for c in u.tool_calls]
    assert len(calls) == sum(len(step.tool_calls) for step in script)
    assert {c.id for c in calls} == {u.tool_call_id for u in transcript.units if u.role == "tool"}
    assert transcript.units[-1].content == script[-1].text
    run = CliRunner().invoke
    for args in (["count", str(log)], ["guard", str(log)],
                 ["compact", str(log), "--limit", "400", "--target", "200", "--no-usage",
                  "-o", str(tmp_path / "small.jsonl")]):
        done = run(cli, args, catch_exceptions=False)
        assert done.exit_code == 0, (args, done.output)


QWEN_HISTORY = """
import fs from "node:fs";
const [chunks, log] = process.argv.slice(2);
const { prepareTranscriptRecords } = await import(chunks + "/chunk-JBUMBQAO.js");
const { buildSessionHistoryFromConversation } = await import(chunks + "/chunk-DPEB6S2R.js");
const records = fs.readFileSync(log, "utf8").split("\\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const { apiHistory } = buildSessionHistoryFromConversation({ messages: prepareTranscriptRecords(records).records });
process.stdout.write(JSON.stringify(apiHistory));
"""


def _qwen_history(log: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """The history Qwen Code's own code rebuilds from a chat recording when it resumes it."""
    chunks = agents_dir() / "node_modules" / "@qwen-code" / "qwen-code" / "chunks"
    if not (chunks / "chunk-JBUMBQAO.js").is_file():
        pytest.skip(f"Qwen Code's transcript code not found in {chunks} (the chunk names are 0.24.4's)")
    script = tmp_path / "history.mjs"
    script.write_text(QWEN_HISTORY, encoding="utf-8")
    done = subprocess.run(["node", str(script), str(chunks), str(log)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    return json.loads(done.stdout)


def test_qwen_code_reads_back_as_qwen_code_resumes_it(tmp_path: Path) -> None:
    """ctxkit's units of a fresh Qwen Code log, of the fixtures made for the cases a short session
    never shows, and of what `compact` writes from them are the history Qwen Code's own
    `prepareTranscriptRecords` and `buildSessionHistoryFromConversation` rebuild (the
    `*.history.json` beside the fixtures are these functions' output)."""
    from test_formats_headless import DATA, _flat, _units

    agent = _installed(AGENTS["qwen-code"])
    (tmp_path / "logs").mkdir()
    report = drive(agent, tmp_path / "logs", ProbeOptions(timeout_s=TIMEOUT_S))
    logs = [Path(report.extra["log"]), *sorted(DATA.glob("qwen-code-*.jsonl"))]
    for log in logs:
        (t,) = read_path(str(log))
        assert _units(t) == _flat(_qwen_history(log, tmp_path)), log.name
        small = tmp_path / f"small-{log.name}"
        done = CliRunner().invoke(cli, ["compact", str(log), "--limit", "400", "--target", "150", "--no-usage",
                                        "-o", str(small)], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        (c,) = read_path(str(small))
        assert _units(c) == _flat(_qwen_history(small, tmp_path)), small.name
    for log in logs[1:]:
        recorded = json.loads(log.with_name(log.name.replace(".jsonl", ".history.json")).read_text(encoding="utf-8"))
        assert _qwen_history(log, tmp_path) == recorded, log.name


# --- resuming a real log -----------------------------------------------------------------------

REAL_LOGS = {
    "claude-code": "claude-code/conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl",
    "codex": "codex/savekirk__session-bridge__checkpoints-v1__27-787ded68f8-0@5ba663ad.jsonl",
    "gemini-cli": "gemini-cli/savekirk__session-bridge__checkpoints-v1__c6-6a5f5ed92d-0@96368d29.session.json",
}


@pytest.mark.parametrize("name", sorted(REAL_LOGS))
def test_resume_carries_the_log(name: str) -> None:
    agent = _installed(AGENTS[name])
    log = REALDATA / REAL_LOGS[name]
    if not log.is_file():
        pytest.skip(f"{log} not found (the real transcripts are in ../shared/realdata)")
    report = resume(agent, log, ProbeOptions(prompt="Continue.", timeout_s=TIMEOUT_S))
    carried = report.extra["carried"]
    (transcript,) = list(read_path(str(log)))
    # what the agent adds around a conversation (Codex's AGENTS.md or environment message) is
    # counted as reminders, not messages: it is sent, as the agent's own text, not the log's
    reminders = [u for u in transcript.units if u.role != "system" and is_reminder(u.content or "")]
    assert carried["log_units"] > 10
    assert carried["found"] == carried["log_units"] - len(reminders)
    assert (carried["in_order"], carried["pairs_intact"], carried["out_of_order"]) == (True, True, 0)
    assert all(_sent(report, u.content.strip()[:60]) for u in reminders)
    assert report.first.transcript is not None
    assert report.first.transcript.units[-1].content == "Continue."


# --- the user's own setup ----------------------------------------------------------------------

SENTENCE = "Always answer in the voice of a lighthouse keeper named Ezekiel Marrow."


def _ctxkit_command() -> list[str]:
    script = Path(sys.executable).with_name("ctxkit")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "ctxkit"]


@pytest.mark.parametrize("tool_search", ["default", "off"])
def test_here_measures_the_users_instructions_and_mcp_servers(
    tool_search: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _installed(AGENTS["claude-code"])
    if importlib.util.find_spec("mcp") is None:
        pytest.skip("the MCP SDK is not installed (pip install 'ctxkit[mcp]'): `ctxkit mcp` needs it")
    small = tmp_path / "small.json"
    done = CliRunner().invoke(
        cli, ["compact", str(REPO / "sample_transcripts" / "tau-bench-airline.json"), "--limit", "4000",
              "-o", str(small)], catch_exceptions=False,
    )
    assert done.exit_code == 0, done.output
    archive = tmp_path / "small.json.ctx.db"
    assert archive.is_file()

    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text(SENTENCE + "\n")
    if tool_search == "off":
        # Claude Code defers every MCP tool behind ToolSearch unless the user turns it off
        (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"ENABLE_TOOL_SEARCH": "false"}}))
    command, *prefix = _ctxkit_command()
    server = {"type": "stdio", "command": command, "args": [*prefix, "mcp", "--archive", str(archive)], "env": {}}
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"ctxkit": server}}))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    before = sorted(p.relative_to(home) for p in home.rglob("*"))

    report = probe(agent, ProbeOptions(prompt=PROMPT, here=True, timeout_s=TIMEOUT_S))
    first = report.first
    assert _sent(report, SENTENCE)
    names = {"mcp__ctxkit__recall", "mcp__ctxkit__search"}
    if tool_search == "off":
        assert {t["name"] for t in first.tools if t["kind"] == "mcp:ctxkit"} == names
        assert set(first.mcp_servers) == {"ctxkit"}
        assert first.regions["mcp"] == first.mcp_servers["ctxkit"] > 0
    else:
        # deferred: the names are listed for ToolSearch, the schemas are not sent
        assert first.regions["mcp"] == 0 and first.mcp_servers == {}
        assert all(_sent(report, n) for n in names)
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before  # the user's home untouched
    assert list(project.iterdir()) == []


# --- the terminal UI ---------------------------------------------------------------------------


def _processes_with_home_under(folder: Path) -> list[str]:
    """The processes whose $HOME is inside `folder` (an agent's home), as `pid command`."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:100]
        except OSError:
            continue
        if any(v.startswith(f"HOME={folder}/".encode()) for v in env):
            found.append(f"{entry.name} {command.decode(errors='replace')}")
    return found


# Gemini CLI's terminal UI outlived its tmux session (its node processes ignore the hangup)
@pytest.mark.parametrize("name", ["claude-code", "gemini-cli"])
def test_interactive_mode_in_tmux(name: str, _isolated: Path) -> None:
    agent = _installed(AGENTS[name])
    if shutil.which("tmux") is None:
        pytest.skip("tmux not found: the interactive mode drives the agent's terminal UI in tmux")
    report = probe(agent, ProbeOptions(prompt=PROMPT, mode="interactive", timeout_s=TIMEOUT_S))
    first = report.first
    assert report.mode == "interactive"
    assert first.regions["system"] > 0 and first.regions["tools"] > 0
    assert first.transcript is not None
    assert [u.content for u in first.transcript.units if u.role == "user"] == [PROMPT]
    sessions = subprocess.run(["tmux", "list-sessions"], capture_output=True, text=True)
    assert "ctxkit-" not in sessions.stdout  # the session was killed
    assert _processes_with_home_under(_isolated) == []  # and nothing it started runs on


# --- nothing but 127.0.0.1 ---------------------------------------------------------------------

_ADDRESS = re.compile(r'inet_(?:addr\("|pton\(AF_INET6?, ")(?P<addr>[^"]+)"')


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-o", os.devnull, "true"], capture_output=True).returncode == 0


@pytest.mark.parametrize("name", PRINTED)
def test_contacts_nothing_but_loopback(name: str, tmp_path: Path) -> None:
    """`ctxkit agent probe` traced whole (the agent, and for OpenCode the export that reads its
    database): every connection goes to 127.0.0.1, and no name is looked up."""
    _installed(AGENTS[name])
    if not _strace_works():
        pytest.skip("strace is missing or may not trace here: it records the agent's connections")
    trace = tmp_path / "strace.txt"
    done = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace),
         *_ctxkit_command(), "agent", "probe", name, "--prompt", PROMPT, "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=2 * TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert json.loads(done.stdout)["main_requests"] == 1
    lines = trace.read_text().splitlines()
    addresses = {m.group("addr") for line in lines for m in _ADDRESS.finditer(line)}
    assert addresses == {"127.0.0.1"}, [ln[:160] for ln in lines if "AF_INET" in ln and "127.0.0.1" not in ln]
    assert not [ln for ln in lines if "htons(53)" in ln]  # no name looked up either (DNS)
