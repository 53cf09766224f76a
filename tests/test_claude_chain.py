"""A compacted Claude Code log keeps every message it holds on the chain Claude Code resumes.

Claude Code resumes a log by following `parentUuid` back from its last record: a message record
off that chain is never sent. Every real Claude Code log, compacted to a half, a third and a sixth
of its room for messages: each main-thread message record written after the chain's start is on
the chain (a kept request between a summary and the record that followed the span it replaced was
left off once, and Claude Code dropped it on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
LOGS = sorted((REALDATA / "claude-code").glob("*.jsonl")) if REALDATA.is_dir() else []


def _off_the_chain(records: list[dict]) -> list[int]:
    """Main-thread message records after the chain's start that the chain does not reach."""
    main = [r for r in records if r.get("type") in ("user", "assistant") and not r.get("isSidechain")]
    if not main:
        return []
    by_uuid = {r.get("uuid"): r for r in records if r.get("uuid")}
    chain: list[str] = []
    node: dict | None = main[-1]
    while node is not None and len(chain) <= len(records):
        chain.append(node["uuid"])
        node = by_uuid.get(node.get("parentUuid"))
    on = set(chain)
    start = min(i for i, r in enumerate(records) if r.get("uuid") in on)
    return [
        i for i, r in enumerate(records)
        if i > start and r in main and r.get("uuid") not in on
    ]


@pytest.mark.slow
@pytest.mark.parametrize("share", [2, 3, 6])
@pytest.mark.parametrize("log", LOGS, ids=[p.name[:40] for p in LOGS])
def test_every_kept_message_is_on_the_chain_claude_code_resumes(log: Path, share: int, tmp_path: Path) -> None:
    from ctxkit.counting import measure
    from ctxkit.formats import read_path
    from ctxkit.tokens import get_tokenizer

    (t,) = read_path(str(log))
    m = measure(t, get_tokenizer())
    limit = m.unlogged + (m.total - m.unlogged) // share
    out = tmp_path / "small.jsonl"
    r = CliRunner().invoke(cli, ["compact", str(log), "--limit", str(limit), "-o", str(out)])
    if r.exit_code != 0:
        assert "below the least a compaction can leave" in r.stderr, r.stderr
        return
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    before = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # what the log held off its chain before (a rewind's branch, an interrupted turn) may stay off
    was_off = {before[i].get("uuid") for i in _off_the_chain(before)}
    off = [i for i in _off_the_chain(records) if records[i].get("uuid") not in was_off]
    assert off == [], [(i, records[i]["type"], str(records[i]["message"].get("content"))[:60]) for i in off]


def test_a_log_without_usage_still_names_its_model(realdata: Path, tmp_path: Path) -> None:
    """The model comes from the answers, not only from those that carry usage: a log whose
    records lost their usage (older versions, exports) is still checked against its model under
    Claude Code's budget, not the default window."""
    from ctxkit.formats import read_path

    src = realdata / "claude-code" / (
        "pattern-stack__task-patterns__logs-chat-json@df54b22d__session-263940d8.jsonl"
    )
    path = tmp_path / "nousage.jsonl"
    with path.open("w") as out:
        for line in src.read_text().splitlines():
            rec = json.loads(line)
            if isinstance(rec.get("message"), dict):
                rec["message"].pop("usage", None)
            out.write(json.dumps(rec) + "\n")
    (t,) = list(read_path(str(path)))
    assert "provider_usage" not in t.metadata
    assert t.metadata["model"].startswith("claude-sonnet-4")
    r = CliRunner().invoke(cli, ["guard", str(path), "--format", "json"])
    (target,) = json.loads(r.stdout)["targets"]
    assert (target["target"], target["limit"], target["bound_by"]) == ("claude-sonnet-4", 197_000, "agent")


def test_a_handover_joined_to_the_request_after_it_reads_back_in_its_place(
    realdata: Path, tmp_path: Path
) -> None:
    """A fresh start writes the last request and its handover in one user record (Claude Code
    wants a user turn to alternate): read back, the block naming ctxkit's archive is the summary
    and the request stays a request, in that order (it was read the other way round: the request
    as the summary, the handover as a request). The handover follows the request: it also stands
    for the work that answered it."""
    from ctxkit.archive.refs import carries_ref
    from ctxkit.formats import read_path

    log = realdata / "claude-code" / next(
        p.name for p in (realdata / "claude-code").glob("FSM1__cipher-box*.jsonl")
    )
    out = tmp_path / "out.jsonl"
    r = CliRunner().invoke(cli, ["compact", str(log), "--limit", "45000", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    joined = [rec for rec in records if rec.get("isCompactSummary")
              and isinstance(rec["message"]["content"], list) and len(rec["message"]["content"]) >= 2]
    assert joined, "the fresh start's handover and request share a record"
    (t,) = read_path(str(out))
    summaries = [u for u in t.units if u.type == "summary"]
    assert summaries and all(carries_ref(u) for u in summaries)
    # the handover stands after the request: it also stands for the work that answered it
    before = t.units[t.units.index(summaries[-1]) - 1]
    assert before.role == "user" and before.type != "summary" and not carries_ref(before)
    assert before.content.strip() == "yeah please ship them"
