"""Replay: an agent loop over a transcript, compacting when the guard says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from proptest import sweep

from ctxkit.archive.store import Archive
from ctxkit.budget import Thresholds
from ctxkit.cli import cli
from ctxkit.compaction import ChainOptions, CompactSettings
from ctxkit.errors import UsageError
from ctxkit.fidelity.truth import (
    TruthMatcher,
    attach_truth,
    read_truth_records,
    truth_priorities,
)
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.replay import (
    call_points,
    replay,
)
from ctxkit.simulate import SCENARIOS, generate, save
from ctxkit.tokens import count_transcript, get_tokenizer

TOK = get_tokenizer()


def _session(turns: int = 12, words: int = 120) -> Transcript:
    """A coding session: each turn a request, a tool call, a long tool result, an answer."""
    units = [Unit("s", "system", content="You are a careful coding agent.")]
    units.append(
        Unit("u0", "user", content="Fix the flaky billing test. The ticket is TICKET-4242.")
    )
    for k in range(turns):
        if k:
            units.append(Unit(f"q{k}", "user", content=f"Now look at module number {k} please."))
        units.append(
            Unit(
                f"a{k}",
                "assistant",
                type="tool_call",
                content="Reading the file.",
                tool_calls=[ToolCall(f"c{k}", "read_file", f'{{"path": "src/mod{k}.py"}}')],
            )
        )
        body = " ".join(f"line{k}_{i} value" for i in range(words))
        if k == 1:
            body += " SECRET-TOKEN-778 is the staging key"
        units.append(
            Unit(
                f"r{k}",
                "tool",
                type="tool_result",
                content=body,
                tool_call_id=f"c{k}",
                name="read_file",
            )
        )
        units.append(Unit(f"b{k}", "assistant", content=f"Module {k} looks fine."))
    units.append(Unit("last", "user", content="Which staging key did the second file mention?"))
    return Transcript(units=units, id="session")


def test_call_points_start_each_assistant_run_and_end_on_a_pending_request() -> None:
    units = [
        Unit("s", "system", content="sys"),
        Unit("u", "user", content="hi"),
        Unit("a1", "assistant", type="reasoning", content="think"),
        Unit("a2", "assistant", content="hello", tool_calls=[ToolCall("c", "f")]),
        Unit("r", "tool", content="out", tool_call_id="c"),
        Unit("a3", "assistant", content="done"),
        Unit("u2", "user", content="more"),
    ]
    assert call_points(units) == [2, 5, 7]
    assert call_points(units[:-1]) == [2, 5]


def test_without_pressure_nothing_compacts_and_cost_is_the_sum_of_prefixes() -> None:
    t = _session(turns=4)
    r = replay(t, limit=100_000)
    assert r.compactions == 0
    assert r.tokens_sent == r.tokens_sent_baseline
    # Each call sends exactly the prefix of the transcript before it.
    expected = [
        count_transcript(t.replace(units=t.units[:i]), TOK).total for i in call_points(t.units)
    ]
    assert r.call_tokens == expected
    assert r.final_tokens == r.original_tokens == count_transcript(t, TOK).total
    assert [u.id for u in r.transcript.units] == [u.id for u in t.units]
    assert r.model_calls == len(call_points(t.units))


def test_compacts_when_the_guard_says_compact_and_keeps_every_call_under_the_limit() -> None:
    t = _session()
    limit = 1500
    r = replay(t, CompactSettings(limit=limit, options=ChainOptions(chain=("mask_observations",))))
    assert r.compactions >= 2
    assert r.over_limit_calls == 0 and r.fits and r.invariants_ok
    assert r.peak_tokens <= limit
    trigger = math.ceil(limit * Thresholds().compact)
    for c in r.compaction_log:
        assert c.tokens_before >= trigger
        assert c.tokens_after <= r.target == math.floor(limit * 0.8)
        assert c.strategies and c.error is None
    # the compacted context is what later units are appended to
    assert r.tokens_sent < r.tokens_sent_baseline
    assert r.final_tokens == count_transcript(r.transcript, TOK).total
    assert r.final_tokens < r.original_tokens
    assert r.transcript.units[-1].id == "last"
    d = r.to_dict()
    assert d["compactions"] == r.compactions and d["tokens_sent"] == r.tokens_sent
    assert "final_transcript" not in d
    assert len(r.to_dict(include_transcript=True)["final_transcript"]) == len(r.transcript.units)


def test_needle_is_judged_when_needed_present_or_recallable() -> None:
    t = _session()
    truth = {
        "needles": [
            # asked at the end, long after mask_observations hid the tool output
            {
                "id": "late",
                "unit_id": "r1",
                "needed_by_unit_id": "last",
                "pattern": "SECRET-TOKEN-778",
            },
            # asked right after it arrived, before any compaction
            {
                "id": "early",
                "unit_id": "r1",
                "needed_by_unit_id": "q2",
                "pattern": "SECRET-TOKEN-778",
            },
            # a fact that never was in the transcript
            {"id": "absent", "unit_id": "r1", "needed_by_unit_id": "last", "pattern": "NOPE-000"},
        ]
    }
    r = replay(
        t,
        CompactSettings(limit=1500, options=ChainOptions(chain=("mask_observations",))),
        truth=truth,
    )
    by = {n.id: n for n in r.needles}
    assert [n.id for n in r.needles] == ["late", "early", "absent"]
    assert (by["late"].present, by["late"].recallable) == (False, True)
    assert (by["early"].present, by["early"].recallable) == (True, False)
    assert (by["absent"].present, by["absent"].recallable) == (False, False)
    assert by["late"].call == r.model_calls - 1
    assert r.retention == {
        "total": 3,
        "present": 1,
        "recallable": 1,
        "lost": 1,
        "retention": 1 / 3,
        "retention_with_recall": 2 / 3,
    }


def test_a_given_archive_keeps_what_the_replay_removed() -> None:
    t = _session()
    with Archive(":memory:") as archive:
        r = replay(
            t,
            CompactSettings(limit=1500, options=ChainOptions(chain=("mask_observations",))),
            archive=archive,
        )
        stored = archive.list("session")
        assert r.compactions and stored
        assert any("SECRET-TOKEN-778" in a.content for a in stored)


def test_failed_compaction_is_reported_and_the_loop_goes_on() -> None:
    t = _session()
    r = replay(
        t,
        CompactSettings(
            limit=1500, options=ChainOptions(chain=("offload",), recovery_mode="error")
        ),
    )
    assert r.errors and all(e.startswith("BREAKER_FAILED") for e in r.errors)
    assert not r.fits
    assert r.over_limit_calls > 0


def test_bad_chain_names_fail_before_the_loop() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'nope'"):
        replay(
            _session(turns=2), CompactSettings(limit=1000, options=ChainOptions(chain=("nope",)))
        )


def test_same_input_gives_the_same_replay() -> None:
    t = generate("long_chat", seed=4, tokens=4000)
    a = replay(t, limit=2000).to_dict(include_transcript=True)
    b = replay(generate("long_chat", seed=4, tokens=4000), limit=2000).to_dict(
        include_transcript=True
    )
    for d in (a, b):
        d.pop("time_ms")
        d.pop("compaction_time_ms")
        for c in d["compaction_log"]:
            c.pop("time_ms")
    assert a == b


@pytest.mark.parametrize("scenario", sweep(sorted(SCENARIOS), ("agent_session", "all_p1", "fragmented", "giant_tool_output", "multilingual_emoji")))
@pytest.mark.parametrize("chain", ["mask_observations", "summarize_old", "default"])
def test_replay_every_scenario_stays_under_the_limit(scenario: str, chain: str) -> None:
    t = generate(scenario, seed=0, tokens=min(SCENARIOS[scenario].default_tokens, 4000))
    truth = t.metadata["ground_truth"]
    limit = truth["limit"]
    options = ChainOptions() if chain == "default" else ChainOptions(chain=(chain,))
    r = replay(t, CompactSettings(limit=limit, options=options))
    assert r.over_limit_calls == 0 and not r.errors
    assert r.invariants_ok
    assert r.final_tokens <= limit
    assert r.retention["total"] == len(truth["needles"]) == len(r.needles)
    assert r.p1_kept == r.p1_total or r.used_recovery


def test_growing_session_compacts_repeatedly() -> None:
    t = generate("growing_session", seed=1, tokens=20_000)
    r = replay(t, limit=t.metadata["ground_truth"]["limit"])
    assert r.compactions >= 3
    assert r.fits and r.invariants_ok
    assert r.tokens_sent < r.tokens_sent_baseline / 2


def test_attach_truth_by_id_or_for_a_lone_transcript() -> None:
    a, b = Transcript([], id="a"), Transcript([], id="b")
    # three records for a file of two: b's position proves nothing, so b gets none
    missed = attach_truth([a, b], {"a": {"needles": [1]}, "z": {"needles": [2]}, "y": {}})
    assert a.metadata["ground_truth"] == {"needles": [1]} and "ground_truth" not in b.metadata
    assert missed == 1
    lone = Transcript([], id="renamed")
    attach_truth([lone], {"x": {"needles": [3]}})
    assert lone.metadata["ground_truth"] == {"needles": [3]}


def _rec(id_: str, file: str | None, line: int | None, mark: int) -> dict[str, object]:
    return {"id": id_, "file": file, "line": line, "ground_truth": {"mark": mark}}


def test_truth_matcher_by_id_then_file_and_line_then_position() -> None:
    records = [
        _rec("long_chat-0", None, 1, 1),
        _rec("fragmented-0", None, 2, 2),
        _rec("all_p1-3", "all_p1-3.json", None, 3),
        _rec("kept-id", "other.jsonl", None, 4),
    ]
    m = TruthMatcher(records, "x.truth.jsonl")
    # `simulate`'s anthropic/openai file of several transcripts: no ids, lines 1 and 2
    assert m.match(Transcript([], id="x#2", path="/d/x.jsonl", line=2)) == {"mark": 2}
    assert m.match(Transcript([], id="x#1", path="/d/x.jsonl", line=1)) == {"mark": 1}
    # directory output: one file per transcript, named in the record
    assert m.match(Transcript([], id="z", path="/d/all_p1-3.json")) == {"mark": 3}
    # the id wins over everything
    assert m.match(Transcript([], id="kept-id", path="/d/x.jsonl", line=1)) == {"mark": 4}
    assert m.match(Transcript([], id="nope", path="/d/unknown.json", line=9)) is None


def test_truth_matcher_by_position_within_the_file() -> None:
    records = [_rec("a-0", None, None, 1), _rec("b-0", None, None, 2)]
    m = TruthMatcher(records)
    first, second = (Transcript([], id=f"f{i}", path="/d/f.json") for i in (1, 2))
    assert m.match(first) == {"mark": 1} and m.match(second) == {"mark": 2}
    # with the file's transcript count known, a count that differs matches nothing
    assert TruthMatcher(records).match(first, count=3) is None


def test_truth_priorities_by_id_and_by_position() -> None:
    truth = {"p1_ids": ["u0", "u2"], "final_request_id": "u3"}
    # anthropic names the top-level system prompt `system`: u0 is found by position
    t = Transcript(
        [Unit("system", "system"), Unit("u1", "user"), Unit("u2", "assistant"), Unit("u3", "user")]
    )
    marked = truth_priorities(t, truth)
    assert [u.priority for u in marked.units] == [1, None, 1, None]
    assert [u.priority for u in t.units] == [None] * 4  # a copy; the input is unchanged
    # a transcript of another length: only ids count (positions mean nothing then)
    short = Transcript([Unit("system", "system"), Unit("u2", "assistant")])
    assert [u.priority for u in truth_priorities(short, truth).units] == [None, 1]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_p1_ground_truth_survives_formats_without_priorities(tmp_path: Path, fmt: str) -> None:
    from ctxkit.formats import read_path

    t = generate("all_p1", seed=3, tokens=2000)
    truth = t.metadata["ground_truth"]
    save([t], str(tmp_path) + "/", fmt)
    (back,) = read_path(str(next(tmp_path.glob("*.json"))))
    assert not any(u.is_p1 for u in back.units)  # the format cannot carry them
    attach_truth([back], read_truth_records(tmp_path / "truth.jsonl"))
    assert [u.content for u in back.units if u.is_p1] == [u.content for u in t.units if u.is_p1]
    limit = truth["limit"]
    assert (
        replay(back, limit=limit).p1_total
        == replay(t, limit=limit).p1_total
        == len(truth["p1_ids"])
    )


def test_compact_replay_matches_a_single_file_of_several_by_line(tmp_path: Path) -> None:
    ts = [generate("long_chat", seed=0, tokens=2000), generate("all_p1", seed=1, tokens=2000)]
    out = tmp_path / "x.jsonl"
    save(ts, str(out), "anthropic")
    report = tmp_path / "r.json"
    r = CliRunner().invoke(
        cli,
        ["compact", "--replay", str(out), "-o", str(report), "--limit", "1500"]
        + ["--embedder", "lexical"],
    )
    assert r.exit_code == 0, r.stderr
    docs = orjson.loads(report.read_bytes())["transcripts"]
    assert [d["transcript"] for d in docs] == ["x#1", "x#2"]
    for d, t in zip(docs, ts, strict=True):
        gt = t.metadata["ground_truth"]
        assert d["retention"]["total"] == len(gt["needles"])
        assert d["p1"]["total"] == len(gt["p1_ids"])


def test_replay_on_a_real_transcript(realdata: Path) -> None:
    from ctxkit.formats import read_path

    path = (
        realdata
        / "openai-chat"
        / "sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json"
    )
    (t,) = list(read_path(str(path)))
    r = replay(t, limit=4000)
    assert r.compactions >= 1
    assert r.fits and r.invariants_ok
    assert r.tokens_sent < r.tokens_sent_baseline
    assert r.transcript.units[0].role == "system"


# ------------------------------------------------------------------ ctxkit compact --replay


# the default embedder (MiniLM when it loads) only in the slow run; lexical keeps the fast run torch-free
@pytest.mark.parametrize("embedder", ["lexical", pytest.param("auto", marks=pytest.mark.slow)])
def test_compact_replay_prints_the_report(embedder: str, tmp_path: Path) -> None:
    t = generate("long_chat", seed=2, tokens=4000)
    save([t], str(tmp_path / "chat.jsonl"))
    src = tmp_path / "chat.jsonl"
    before = src.read_bytes()
    result = CliRunner().invoke(
        cli,
        ["compact", "--replay", str(src), "--limit", "2000", "--embedder", embedder],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["limit"] == 2000 and report["target"] == 1600
    assert report["compactions"] >= 1 and report["fits"] is True
    assert report["tokens_sent"] < report["tokens_sent_baseline"]
    assert report["retention"]["total"] == len(t.metadata["ground_truth"]["needles"])
    assert report["final_transcript"][-1]["id"] == t.units[-1].id
    assert "compactions" in result.stderr and "tokens sent" in result.stderr
    assert src.read_bytes() == before
    assert not list(tmp_path.glob("*.ctx.db"))


def test_compact_replay_to_a_file(tmp_path: Path) -> None:
    t = generate("fragmented", seed=1, tokens=3000)
    save([t], str(tmp_path / "f.jsonl"))
    out = tmp_path / "replay.json"
    result = CliRunner().invoke(
        cli,
        ["compact", "--replay", str(tmp_path / "f.jsonl"), "--limit", "1500", "-o", str(out)]
        + ["--embedder", "lexical"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert orjson.loads(out.read_bytes())["units"] == len(t.units)


def test_replay_cost_prices_cache_reads_and_the_rewritten_prefix() -> None:
    """Before any compaction each call reads the whole previous call from the cache; the call
    after a compaction reads only what precedes its first change, and pays for the rest."""
    from ctxkit.budget.models import load_models
    from ctxkit.replay import replay_cost

    t = generate("growing_session", seed=1)
    r = replay(t, CompactSettings(limit=16_000, options=ChainOptions(chain=("summarize_old",))))
    assert r.compactions >= 1
    first = r.compaction_log[0].call
    for i in range(1, first):
        assert r.call_cached[i] == r.call_tokens[i - 1]
    assert r.call_cached[first] < r.call_tokens[first - 1]
    for i in range(1, len(r.call_tokens)):
        assert r.baseline_cached[i] == r.baseline_call_tokens[i - 1]

    sonnet = load_models()["claude-sonnet-4"]  # $3 input, $0.30 cache read, $3.75 cache write
    cost = replay_cost(r, sonnet)
    expected = sum(
        (c * 0.30 + (n - c) * 3.75) / 1e6 for n, c in zip(r.call_tokens, r.call_cached, strict=True)
    )
    assert cost["usd"] == round(expected, 6)
    first_cost = cost["compactions"][0]
    n, c = r.call_tokens[first], r.call_cached[first]
    # rounded to the micro-dollar: the two sides may round the last digit apart
    assert first_cost["invalidation_usd"] == pytest.approx((n - c) * (3.75 - 0.30) / 1e6, abs=1.5e-6)
    assert first_cost["break_even_calls"] is None or first_cost["break_even_calls"] >= 0


@pytest.mark.parametrize("name", [
    "codex/EntityProcess__agentv__checkpoints-v1__00-34f597b72d-1@d5f0c1dc.jsonl",
    "claude-code/FSM1__cipher-box__checkpoints-v1__af-1dd25ebb3e-8@9db16e5e.jsonl",
])
def test_in_the_loop_ctxkit_keeps_at_every_compaction_what_the_best_agent_keeps(realdata: Path, name: str) -> None:
    """Issue 33: ctxkit's row in `replay` keeps, at every compaction, at least the probes of the
    best agent row's worst one. Each loop compaction summarized the last summary again in the
    same length and the older files went (agentv 0.98, FSM1 0.97, against 1.00): a summary that
    merges an earlier one now gets at least that one's length and half again."""
    path = realdata / name
    if not path.exists():
        pytest.skip(f"{name} not in {realdata}")
    out = CliRunner().invoke(cli, ["replay", str(path), "--include-compacted", "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["agents"]
    ours = next(r for r in rows if r["agent"] == "ctxkit")
    best = max(r["probes_kept_min"] for r in rows if r["agent"] != "ctxkit" and r["compactions"])
    assert ours["compactions"] >= 2 and ours["over_window_calls"] == 0
    assert ours["probes_kept_min"] >= best, (ours["probes_kept_min"], best)
