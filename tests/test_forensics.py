"""Forensics of the compactions in real logs (`recipes.forensics`), the cache economics by hand
(`recipes.economics`), and the `replay` / `forensics` commands with their pages."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.budget.models import find_model
from ctxkit.cli import cli
from ctxkit.recipes.economics import compaction_economics, points_economics
from ctxkit.recipes.forensics import ForensicsRequest, analyze_paths

FSM1 = "claude-code/FSM1__cipher-box__checkpoints-v1__af-1dd25ebb3e-8@9db16e5e.jsonl"
SONNET = "claude-sonnet-4"


def _run(args: list[str]) -> Any:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


# --- economics by hand ------------------------------------------------------------------------


def test_compaction_economics_by_hand() -> None:
    m, _ = find_model(SONNET)  # $3 input, $0.30 cache read, $3.75 cache write, $15 output per Mtok
    after = [
        {
            "input_tokens": 30_000,
            "cache_read_tokens": 10_000,
            "cache_write_tokens": 20_000,
            "output_tokens": 100,
        },
        {
            "input_tokens": 32_000,
            "cache_read_tokens": 30_000,
            "cache_write_tokens": 2_000,
            "output_tokens": 100,
        },
    ]
    e = compaction_economics(m, 100_000, 2_000, after, window=101_000)
    assert e.tokens_removed == 70_000
    # the summary call: 100k read from the cache, 2k out = 0.03 + 0.03
    assert e.summary_call_usd == pytest.approx(0.06)
    # first call: 10k read + 20k written + 100 out = 0.0795; carrying on it would have read the
    # 100k it had (0.03) and written nothing new: 0.0315
    assert e.rewrite_usd == pytest.approx(0.0795 - 0.0315)
    # second call: 0.018 as recorded, 0.039 carrying 70k more (read from the cache)
    assert e.saved_usd == pytest.approx((0.0315 - 0.0795) + (0.039 - 0.018) - 0.06)
    assert e.break_even_calls is None and not e.paid_back
    assert e.carry_overflow_call == 2  # 30k + 70k fits 101k, 32k + 70k does not
    assert e.usd_cost == pytest.approx(0.06 + 0.048)


def test_points_economics_favour_compacting_early_in_a_long_run() -> None:
    m, _ = find_model(SONNET)
    calls = [
        {
            "after_unit": k,
            "input_tokens": 20_000 + 2_000 * k,
            "cache_read_tokens": 20_000 + 2_000 * (k - 1) if k else 0,
            "cache_write_tokens": 2_000 if k else 20_000,
            "output_tokens": 50,
        }
        for k in range(60)
    ]
    rows = points_economics(m, calls, [], summary_tokens=1_000, after_tokens=25_000)
    assert rows and all(r["until"] == "end" for r in rows)
    assert rows[0]["input_tokens"] > 25_000
    # the later the compaction, the fewer calls left to earn it back
    assert rows[0]["calls_after"] > rows[-1]["calls_after"]
    assert any(r["net_usd"] > 0 for r in rows) and rows[-1]["break_even_calls"] in (None, 1)


# --- forensics on the real Claude Code logs -----------------------------------------------------


def _read_tool_paths(records: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in records:
        if r.get("type") != "assistant" or r.get("isSidechain"):
            continue
        for b in r["message"].get("content") or []:
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "Read":
                out.append(b["input"]["file_path"])
    return out


def test_rereads_match_a_hand_count(realdata: Path) -> None:
    path = realdata / FSM1
    records = [json.loads(line) for line in path.read_text().splitlines()]
    summaries = [i for i, r in enumerate(records) if r.get("isCompactSummary")]
    (session,) = analyze_paths([str(path)], ForensicsRequest(model=SONNET))
    assert len(session.compactions) == len(summaries) == 2
    for k, c in enumerate(session.compactions):
        end = summaries[k + 1] if k + 1 < len(summaries) else len(records)
        before = set(_read_tool_paths(records[: summaries[k]]))
        again = [p for p in _read_tool_paths(records[summaries[k] : end]) if p in before]
        assert c.rereads == sorted(set(again))
        assert c.reread_calls == len(again)
    assert [len(c.rereads) for c in session.compactions] == [10, 4]


def test_forensics_names_what_each_summary_lost_and_what_it_cost(realdata: Path) -> None:
    sessions = analyze_paths([str(realdata / "claude-code")], ForensicsRequest(model=SONNET))
    with_summaries = {
        p.name
        for p in (realdata / "claude-code").iterdir()
        if b"isCompactSummary" in p.read_bytes()
    }
    assert {Path(s.source).name for s in sessions} == with_summaries
    # the most lost first; a session none of whose compactions could be probed (the history
    # before each is not in its log) has no count (None, shown as "—"), not 0
    lost = [-1 if s.lost is None else s.lost for s in sessions]
    assert lost == sorted(lost, reverse=True)
    for s in sessions:
        assert (s.lost is None) == all(c.probes is None for c in s.compactions)
    for s in sessions:
        assert s.priced_as == SONNET
        for c in s.compactions:
            assert c.summary_tokens > 0 and c.recorded_before and c.recorded_after
            assert c.recorded_after < c.recorded_before
            if c.history_in_log:
                assert c.probes is not None and c.probes.lost  # what it lost, by name
                assert all(p.key for p in c.probes.lost)
            assert c.economics is not None and c.economics.summary_call_usd > 0
            assert c.economics.cache_write_after > 0
    fsm1 = next(s for s in sessions if s.source.endswith(FSM1.split("/")[1]))
    assert (
        fsm1.summary_growth == [c.summary_tokens for c in fsm1.compactions]
        and len(fsm1.summary_growth) == 2
    )
    # the first call after each compaction rewrites what Claude Code keeps (38,581 and 42,349 tokens)
    assert [c.economics.cache_write_after for c in fsm1.compactions] == [38_581, 42_349]  # type: ignore[union-attr]
    assert [c.recorded_before for c in fsm1.compactions] == [
        167_332,
        167_602,
    ]  # compactMetadata.preTokens


def test_codex_compactions_keep_their_replacement_history(realdata: Path) -> None:
    sessions = analyze_paths([str(realdata / "codex")], ForensicsRequest())
    counts = sorted(len(s.compactions) for s in sessions)
    assert counts == [1, 1, 2]  # entire-graph and session-bridge once, agentv twice
    for s in sessions:
        for c in s.compactions:
            assert not c.summary_readable  # remote compaction: the summary is encrypted
            assert c.kept_messages > 0 and c.tokens_after > 0


def test_unpriced_model_is_said_not_guessed(realdata: Path) -> None:
    (s,) = analyze_paths([str(realdata / FSM1)], ForensicsRequest())
    assert s.model == "claude-opus-4-6"
    if s.priced_as is None:  # models.toml does not price it: said, and nothing priced
        assert "--model" in s.note and all(c.economics is None for c in s.compactions)
    else:  # it does: priced from the log's own model
        assert s.priced_as in s.model and all(c.economics is not None for c in s.compactions)


# --- the commands ----------------------------------------------------------------------------


def test_forensics_command_table_json_and_errors(realdata: Path) -> None:
    r = _run(["forensics", str(realdata / FSM1), "--model", SONNET])
    assert r.exit_code == 0, r.stderr
    assert "re-read 10 files (16 reads)" in r.stdout and "paid back after" in r.stdout
    r = _run(["forensics", str(realdata / "claude-code"), "--model", SONNET, "--format", "json"])
    docs = [orjson.loads(line) for line in r.stdout.splitlines()]
    lost = [-1 if d["lost_probes"] is None else d["lost_probes"] for d in docs]
    assert lost == sorted(lost, reverse=True)
    r = _run(["forensics", str(realdata / "claude-code"), "--model", SONNET])
    rows = {line.split()[0]: line.split()[2] for line in r.stdout.splitlines()[2:] if line.strip()}
    for d in docs:  # the table says "—" where the JSON says None, never 0 for "not probed"
        name = d["source"].rsplit("/", 1)[-1]
        if name in rows:
            assert rows[name] == ("—" if d["lost_probes"] is None else str(d["lost_probes"]))
    r = _run(["forensics", str(realdata / FSM1), "--model", "claude-sonet-4"])
    assert (
        r.exit_code == 2
        and "unknown model 'claude-sonet-4'" in r.stderr
        and "claude-sonnet-4" in r.stderr
    )


def test_replay_command_table_and_json(realdata: Path, tmp_path: Path) -> None:
    src = (
        realdata
        / "claude-code/conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl"
    )
    r = _run(
        [
            "replay",
            str(src),
            "--window",
            "40000",
            "--max-output",
            "4000",
            "--as",
            "claude-code",
            "--as",
            "codex",
            "--as",
            "ctxkit",
        ]
    )
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "window 40,000, max output 4,000 (custom)" in lines[0]
    for label in ("no compaction", "Claude Code", "Codex CLI", "ctxkit"):
        assert any(line.startswith(label) for line in lines), label
    r = _run(["replay", str(src), "--window", "40000", "--as", "codex", "--format", "json"])
    doc = orjson.loads(r.stdout)
    (codex,) = doc["agents"]
    assert codex["trigger"] == 36_000 and codex["tokens_sent"] == sum(codex["call_tokens"])
    assert set(doc) >= {"transcript", "window", "max_output", "baseline", "agents", "summary_by"}
    r = _run(["replay", str(src), "--as", "cursor"])
    assert r.exit_code == 2 and "'cursor'" in r.stderr
    r = _run(["replay", str(tmp_path / "missing.jsonl")])
    assert r.exit_code in (1, 2) and "missing.jsonl" in r.stderr


# --- the pages in Chromium ----------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    exe = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not exe:
        pytest.skip("chromium not found (apt-get install chromium)")
    root = tmp_path_factory.mktemp("chromium")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(root))
        with sync_api.sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(root / "profile"), executable_path=exe, headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )  # fmt: skip
            try:
                yield context
            finally:
                context.close()


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "request",
        lambda q: None if q.url.startswith(("file:", "data:")) else problems.append(q.url),
    )
    page.goto(path.as_uri(), wait_until="load")
    return page, problems


def test_pages_render_in_chromium(browser: Any, realdata: Path, tmp_path: Path) -> None:
    src = realdata / FSM1
    replay_html, forensics_html = tmp_path / "replay.html", tmp_path / "forensics.html"
    r = _run(
        [
            "replay",
            str(src),
            "--model",
            SONNET,
            "--as",
            "all",
            "--format",
            "json",
            "--html",
            str(replay_html),
        ]
    )
    assert r.exit_code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    page, problems = _open(browser, replay_html)
    rows = page.evaluate(
        "() => Array.from(document.querySelectorAll('table.agents tbody tr')).map(r => [r.dataset.agent, +r.dataset.compactions, +r.dataset.sent])"
    )
    assert rows == [
        [a["agent"], a["compactions"], a["tokens_sent"]] for a in [doc["baseline"], *doc["agents"]]
    ]
    assert page.locator("svg.chart polyline").count() == len(rows) and problems == []
    page.close()
    r = _run(
        [
            "forensics",
            str(realdata / "claude-code"),
            "--model",
            SONNET,
            "--html",
            str(forensics_html),
            "--format",
            "json",
        ]
    )
    sessions = [orjson.loads(line) for line in r.stdout.splitlines()]
    page, problems = _open(browser, forensics_html)
    lost = page.evaluate(
        "() => Array.from(document.querySelectorAll('tr.compaction')).map(r => +r.dataset.lost)"
    )
    assert lost == [
        len(c["probes"]["lost"]) if c["probes"] else 0 for s in sessions for c in s["compactions"]
    ]
    assert problems == []
    page.close()
