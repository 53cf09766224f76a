"""Compacted logs resume in their agent: a real Claude Code, Codex and Gemini CLI log compacted
to a half, a third and a sixth of its room for messages, then resumed in the pinned agent
against the recording provider (127.0.0.1 only). The agent accepts it, the request carries the
compacted messages in order with every tool call beside its result (leaving out only what it
leaves out of the original too), and the request, the agent's own overhead included, fits the
limit the log was compacted to. Marked `agents` (`make test-agents`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

pytestmark = pytest.mark.agents

LOGS = {
    "claude-code": "claude-code/pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.jsonl",
    "codex": "codex/savekirk__session-bridge__checkpoints-v1__27-787ded68f8-0@5ba663ad.jsonl",
    "gemini-cli": "gemini-cli/savekirk__session-bridge__checkpoints-v1__e9-4f17cdc65d-0@ea93acc9.session.json",
}


def _agent(name: str):
    from ctxkit.agents.catalog import get_agent
    from ctxkit.agents.drivers import installed_version

    agent = get_agent(name)
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the agents run on Node.js (make test-agents)")
    if installed_version(agent) != agent.version:
        pytest.skip(f"{agent.spec} is not installed: make test-agents installs it")
    return agent


@pytest.fixture(scope="module")
def originals(realdata: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What each agent leaves out when it resumes the original log (its own filter)."""
    return {}


def _resume(agent, log: Path):
    from ctxkit.agents.session import ProbeOptions, resume

    return resume(agent, log, ProbeOptions(prompt="Continue.", timeout_s=120))


@pytest.mark.parametrize("name", sorted(LOGS))
@pytest.mark.parametrize("share", [2, 3, 6])
def test_a_compacted_log_resumes_in_its_agent(
    realdata: Path, tmp_path: Path, originals: dict, name: str, share: int
) -> None:
    from ctxkit.counting import measure
    from ctxkit.formats import read_path
    from ctxkit.tokens import get_tokenizer

    agent = _agent(name)
    log = realdata / LOGS[name]
    (t,) = read_path(str(log))
    m = measure(t, get_tokenizer())
    limit = m.unlogged + (m.total - m.unlogged) // share
    small = tmp_path / ("small" + "".join(log.suffixes))
    r = CliRunner().invoke(cli, ["compact", str(log), "--limit", str(limit), "-o", str(small)])
    assert r.exit_code == 0, r.output
    assert "Context reduced" in r.stderr

    if name not in originals:
        originals[name] = set(_resume(agent, log).extra["carried"]["missing"])
    report = _resume(agent, small)
    assert report.run.returncode == 0, report.run.stderr[-500:]
    carried = report.extra["carried"]
    assert carried["in_order"] and carried["pairs_intact"], carried
    # what the agent leaves out of the compacted log, it leaves out of the original too
    # (Claude Code drops its own command and interruption markers when it resumes)
    assert set(carried["missing"]) <= originals[name] | {""}, carried["missing"]
    assert carried["found"] >= carried["log_units"] - len(originals[name])
    assert report.first.total <= limit, (report.first.regions, limit)
