"""Rewards, outcomes and datasets (`ctxkit.rl`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from proptest import sweep

from ctxkit.budget import compaction_goal
from ctxkit.errors import CtxkitError, InputError
from ctxkit.model import TYPES, ToolCall, Transcript, Unit
from ctxkit.rl import (
    Action,
    DatasetWriter,
    Outcome,
    Summary,
    best_and_worst,
    builtin_actions,
    coherence,
    dpo_record,
    export_rows,
    load_actions,
    plain_refs,
    read_dataset,
    render,
    reward,
    reward_terms,
    run_action,
    score,
    sft_record,
    state_features,
    time_penalty,
)
from ctxkit.simulate import SCENARIOS, generate
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES
from ctxkit.tokens import CountOptions, count_transcript, get_tokenizer

TOK = get_tokenizer()
BASE = dict(
    success=True,
    coherence_delta=0.0,
    reduction_ratio=0.0,
    priority_preserved=0.0,
    used_recovery=False,
)


def _r(**changes: object) -> float:
    return reward(**{**BASE, **changes})  # type: ignore[arg-type]


# ------------------------------------------------------------------ reward, term by term


def test_success_is_plus_one_failure_minus_one() -> None:
    assert _r() == pytest.approx(1.0)
    assert _r(success=False) == pytest.approx(-1.0)


def test_coherence_term_is_half_the_delta() -> None:
    assert _r(coherence_delta=0.8) - _r() == pytest.approx(0.4)
    assert _r(coherence_delta=1.0) - _r() == pytest.approx(0.5)


def test_reduction_term_is_three_tenths_of_the_ratio() -> None:
    assert _r(reduction_ratio=0.5) - _r() == pytest.approx(0.15)


def test_priority_term_is_two_tenths_of_the_share_kept() -> None:
    assert _r(priority_preserved=0.5) - _r() == pytest.approx(0.1)
    assert _r(priority_preserved=1.0) - _r() == pytest.approx(0.2)


def test_recovery_costs_seven_tenths() -> None:
    assert _r(used_recovery=True) - _r() == pytest.approx(-0.7)


def test_time_costs_a_tenth_per_second_above_500_ms_beside_the_reward() -> None:
    assert time_penalty(500) == pytest.approx(0.0)
    assert time_penalty(1500) == pytest.approx(-0.1)
    assert time_penalty(3000) == pytest.approx(-0.25)
    assert time_penalty(100) == 0.0
    assert "time" not in reward_terms(**BASE)  # machine load never changes a reward


def test_clamped_to_minus_two_and_two() -> None:
    assert _r(success=False, used_recovery=True, coherence_delta=-1.0) == pytest.approx(-2.0)
    assert sum(
        reward_terms(**{**BASE, "success": False, "used_recovery": True, "coherence_delta": -1.0}).values()
    ) == pytest.approx(-2.2)
    best = _r(coherence_delta=1.0, reduction_ratio=1.0, priority_preserved=1.0)
    assert best == pytest.approx(2.0)
    assert _r(coherence_delta=3.0, reduction_ratio=1.0, priority_preserved=1.0) == 2.0


def test_all_terms_together() -> None:
    got = _r(
        coherence_delta=0.9,
        reduction_ratio=0.6,
        priority_preserved=0.75,
        used_recovery=True,
    )
    assert got == pytest.approx(1 + 0.45 + 0.18 + 0.15 - 0.7)


def test_outcome_reward_uses_tokens_reduced_over_original() -> None:
    o = Outcome(
        transcript_id="t",
        action="a",
        mode="oneshot",
        success=True,
        fits=True,
        invariants_ok=True,
        used_recovery=False,
        coherence_delta=0.5,
        tokens_reduced=2500,
        original_tokens=10_000,
        final_tokens=7500,
        limit=8000,
        time_ms=700,
        priority_preserved=1.0,
        compactions=1,
    )
    assert o.reduction_ratio == 0.25
    assert o.reward == pytest.approx(1 + 0.25 + 0.075 + 0.2)
    assert o.time_penalty == pytest.approx(-0.02)
    assert "time_ms" not in o.to_dict()
    assert o.to_dict()["retention"] is None


# ------------------------------------------------------------------ actions


def test_builtin_actions_cover_every_strategy_alone_and_the_default_chain() -> None:
    actions = builtin_actions()
    names = [a.name for a in actions]
    assert len(names) == len(set(names))
    for s in STRATEGIES:
        assert Action(s, (s,)) in actions
    default = next(a for a in actions if a.name == "default")
    assert default.chain == DEFAULT_CHAIN
    assert any(a.params for a in actions) and any(a.recovery_mode == "truncate" for a in actions)
    for a in actions:
        a.options()  # every built-in action is valid
        d = {"name": a.name, "chain": list(a.chain), "params": a.params}
        assert Action.from_dict({**d, "recovery_mode": a.recovery_mode}) == a


def test_load_actions_yaml_and_json(tmp_path: Path) -> None:
    y = tmp_path / "a.yaml"
    y.write_text(
        "- name: quick\n  chain: [offload, summarize_old]\n  params:\n"
        "    summarize_old: {summary_length: 100}\n  recovery_mode: truncate\n"
        "- chain: mask_observations\n"
    )
    a, b = load_actions(str(y))
    assert a == Action(
        "quick",
        ("offload", "summarize_old"),
        {"summarize_old": {"summary_length": 100}},
        "truncate",
    )
    assert b.name == "mask_observations" and b.recovery_mode == "fresh_start"
    j = tmp_path / "a.json"
    j.write_text(orjson.dumps({"actions": [{"name": "h", "chain": ["hybrid"]}]}).decode())
    (h,) = load_actions(str(j))
    assert h.options().chain == DEFAULT_CHAIN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {chain: [nope]}", "action 1: unknown strategy 'nope' in chain"),
        ("- {chain: [offload], colour: red}", "action 1: unknown key 'colour'"),
        ("- {chain: [offload]}\n- {chain: []}", "action 2: `chain` must be a non-empty list"),
        ("- {chain: [offload], recovery_mode: panic}", "unknown recovery_mode 'panic'"),
        ("- {chain: [offload], params: {nope: {}}}", "params for unknown strategy 'nope'"),
        ("- {name: x, chain: [offload]}\n- {name: x, chain: [offload]}", "'x' is used twice"),
        (
            "- {name: small, chain: [offload], params: {offload: {threshold_bytes: -5}}}",
            "action 1 (small): params.offload.threshold_bytes: -5 is out of range",
        ),
        (
            "- {chain: [offload]}\n"
            "- {chain: [summarize_old], params: {summarize_old: {old_threshold: 7}}}",
            "action 2 (summarize_old): params.summarize_old.old_threshold: 7 is out of range",
        ),
        (
            "- {name: b, chain: [offload], params: {offload: {bogus: 1}}}",
            "action 1 (b): params.offload.bogus: unknown key; allowed: threshold_bytes",
        ),
        (
            "- {name: t, chain: [offload], params: {offload: {threshold_bytes: big}}}",
            "action 1 (t): params.offload.threshold_bytes: 'big'",
        ),
        ("{}", "expected a non-empty list of actions"),
        ("- [unclosed", "not valid YAML or JSON"),
    ],
)
def test_bad_actions_files_name_the_file_and_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_actions(str(p))
    assert str(p) in str(exc.value) and message in str(exc.value)


def test_missing_actions_file() -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_actions("/nonexistent/actions.yaml")


# ------------------------------------------------------------------ outcomes


def test_state_features() -> None:
    t = generate("agent_session", seed=1, tokens=3000)
    s = state_features(t, 1500, TOK, CountOptions())
    assert s["tokens"] == count_transcript(t, TOK).total
    assert s["limit"] == 1500 and s["used_fraction"] == round(s["tokens"] / 1500, 6)
    assert s["units"] == len(t.units) and s["p1"] == sum(u.is_p1 for u in t.units)
    assert list(s["types"]) == list(TYPES) and sum(s["types"].values()) == len(t.units)


def test_coherence_is_one_for_the_same_text_and_lower_for_less() -> None:
    t = generate("long_chat", seed=1, tokens=3000)
    assert coherence(t, t) == 1.0
    half = t.replace(units=t.units[: len(t.units) // 4])
    assert 0.0 <= coherence(t, half) < 1.0


def test_run_action_oneshot_measures_the_outcome() -> None:
    t = generate("long_chat", seed=1)
    trial = run_action(t, Action("summarize_old", ("summarize_old",)), limit=5000)
    o = trial.outcome
    assert o.success and o.fits and o.invariants_ok and not o.used_recovery
    assert o.original_tokens == count_transcript(t, TOK).total == trial.state_before["tokens"]
    assert o.final_tokens == trial.state_after["tokens"] <= compaction_goal(5000)
    assert o.tokens_reduced == o.original_tokens - o.final_tokens
    assert o.priority_preserved == 1.0
    assert o.needles_total == len(t.metadata["ground_truth"]["needles"])
    assert o.reward == pytest.approx(
        reward(
            success=True,
            coherence_delta=o.coherence_delta,
            reduction_ratio=o.tokens_reduced / o.original_tokens,
            priority_preserved=1.0,
            used_recovery=False,
            fidelity=o.fidelity,
            cost=o.cost_share,
            false_claims=o.false_claims,
        )
    )
    row = trial.row()
    assert set(row) == {
        "transcript",
        "mode",
        "state_before",
        "action",
        "reward",
        "state_after",
        "outcome",
    }
    assert row["action"]["name"] == "summarize_old" and row["reward"] == round(o.reward, 6)


def test_run_action_failure_scores_minus_one_and_no_credit() -> None:
    t = generate("long_chat", seed=1, tokens=3000)
    trial = run_action(t, Action("x", ("offload",), recovery_mode="error"), limit=1500)
    o = trial.outcome
    assert not o.success and o.error and o.error.startswith("BREAKER_FAILED")
    assert o.coherence_delta == 0.0 and o.tokens_reduced == 0 and o.priority_preserved == 0.0
    assert o.reward == pytest.approx(-1.0)


def test_recovery_is_charged() -> None:
    t = generate("long_chat", seed=1, tokens=3000)
    o = run_action(t, Action("offload", ("offload",)), limit=1500).outcome
    assert o.success and o.used_recovery
    assert o.terms["recovery"] == -0.7


def test_replay_mode_counts_compactions_and_cost() -> None:
    t = generate("growing_session", seed=2, tokens=12_000)
    o = run_action(t, Action("default", DEFAULT_CHAIN), limit=4000, mode="replay").outcome
    assert o.mode == "replay" and o.compactions >= 2 and o.success
    assert o.tokens_sent is not None and o.tokens_sent > o.original_tokens
    assert o.needles_total == len(t.metadata["ground_truth"]["needles"])


@pytest.mark.parametrize("scenario", sweep(sorted(SCENARIOS), ("agent_session", "all_p1", "fragmented", "giant_tool_output", "multilingual_emoji")))
def test_every_scenario_every_strategy_fits_with_invariants_and_retention(scenario: str) -> None:
    t = generate(scenario, seed=0, tokens=min(SCENARIOS[scenario].default_tokens, 4000))
    limit = t.metadata["ground_truth"]["limit"]
    actions = [Action(s, (s,)) for s in STRATEGIES] + [Action("default", DEFAULT_CHAIN)]
    (trials,) = score([t], actions, limit_for=lambda _: limit)
    for tr in trials:
        o = tr.outcome
        assert o.success and o.fits and o.invariants_ok, (o.action, o.error)
        assert o.final_tokens <= limit
        assert o.needles_total == len(t.metadata["ground_truth"]["needles"])
        assert o.retention is not None and 0.0 <= o.retention <= o.retention_with_recall <= 1.0
        assert -2.0 <= o.reward <= 2.0


# one seed in the fast run, all four in the full one
@pytest.mark.parametrize("seed", sweep([0, 1, 2, 3], (0,)))
def test_overflow_sim_long_chat_ends_under_limit_with_coherence_above_085(seed: int) -> None:
    """The spec's overflow sim: a 10k-token chat against a 5k limit. With the lexical (BM25)
    similarity the best built-in action stays above 0.85; summarize_old alone dips to ~0.82 on
    some seeds (see the minilm test below)."""
    t = generate("long_chat", seed=seed)
    assert t.metadata["ground_truth"]["tokens"] == 10_000
    (trials,) = score([t], builtin_actions(), limit_for=lambda _: 5000)
    for tr in trials:
        assert tr.outcome.success and tr.outcome.final_tokens <= 5000
    assert max(tr.outcome.coherence_delta for tr in trials) > 0.85


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_overflow_sim_long_chat_summarize_old_above_085_with_minilm(seed: int) -> None:
    """summarize_old alone reaches 0.85 on every seed when coherence uses the minilm model."""
    from ctxkit.embedders import get_embedder
    from ctxkit.errors import CtxkitError

    try:
        mini = get_embedder("minilm")
    except CtxkitError as exc:
        pytest.skip(f"minilm not available: {exc}")
    t = generate("long_chat", seed=seed)
    trial = run_action(t, Action("summarize_old", ("summarize_old",)), limit=5000)
    assert trial.outcome.success and trial.outcome.final_tokens <= 5000
    assert coherence(t, trial.result, mini) > 0.85


# ------------------------------------------------------------------ datasets


def _trials() -> list[list]:  # type: ignore[type-arg]
    ts = [generate("long_chat", seed=1, tokens=3000), generate("all_p1", seed=2, tokens=2000)]
    actions = [a for a in builtin_actions() if a.name in ("default", "offload", "summarize_old")]
    return list(score(ts, actions, limit_for=lambda t: t.metadata["ground_truth"]["limit"]))


def test_parquet_loads_back_with_polars_and_matches_the_jsonl(tmp_path: Path) -> None:
    import polars as pl

    trials = _trials()
    for fmt in ("jsonl", "parquet"):
        with DatasetWriter(str(tmp_path / f"rl.{fmt}"), fmt) as w:
            for tr in trials:
                w.write(export_rows(tr, "rl"))
    jsonl = read_dataset(tmp_path / "rl.jsonl")
    frame = pl.read_parquet(tmp_path / "rl.parquet")
    assert frame.height == len(jsonl) == 6
    assert frame.to_dicts() == jsonl
    assert frame["reward"].to_list() == [r["reward"] for r in jsonl]
    assert not list(tmp_path.glob(".ctxkit-*"))


def test_dpo_and_sft_parquet_match_their_jsonl(tmp_path: Path) -> None:
    import polars as pl

    trials = _trials()
    for kind in ("dpo", "sft"):
        for fmt in ("jsonl", "parquet"):
            with DatasetWriter(str(tmp_path / f"{kind}.{fmt}"), fmt, kind) as w:
                for tr in trials:
                    w.write(export_rows(tr, kind))
        rows = read_dataset(tmp_path / f"{kind}.jsonl")
        assert rows and pl.read_parquet(tmp_path / f"{kind}.parquet").to_dicts() == rows


def test_writer_leaves_nothing_on_error(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with DatasetWriter(str(target)) as w:
            w.write([{"a": 1}])
            raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_writer_output_has_the_permissions_of_a_plain_file(tmp_path: Path, fmt: str) -> None:
    import os

    mask = os.umask(0o022)
    try:
        target = tmp_path / f"out.{fmt}"
        with DatasetWriter(str(target), fmt) as w:
            w.write(export_rows(_trials()[0], "rl"))
    finally:
        os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o644
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("where", ["dir", "missing"])
def test_writer_to_a_path_it_cannot_write_is_one_clear_error(
    tmp_path: Path, fmt: str, where: str
) -> None:
    target = tmp_path if where == "dir" else tmp_path / "nodir" / f"x.{fmt}"
    with pytest.raises(CtxkitError, match="cannot write") as exc:
        with DatasetWriter(str(target), fmt) as w:
            w.write([{"a": 1}])
    assert str(target) in str(exc.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_writer_writes_into_a_fifo_instead_of_replacing_it(tmp_path: Path, fmt: str) -> None:
    """`-o /dev/null` or a named pipe is written in place, never renamed over (as root a rename
    would turn /dev/null into a regular file); a FIFO stands in for the device here."""
    import os
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        with DatasetWriter(str(fifo), fmt) as w:
            w.write([{"a": 1}])
    finally:
        # the reader ends once the writer closes the pipe; it is still waiting after that only
        # when the writer never opened it, and then a writer that does not wait unblocks it (a
        # blocking open here, racing a reader that was just about to end, waited for ever)
        reader.join(timeout=30)
        if reader.is_alive():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and (got[0] == b'{"a":1}\n' if fmt == "jsonl" else got[0][:4] == b"PAR1")
    assert list(tmp_path.iterdir()) == [fifo]


def test_dpo_pairs_best_against_worst() -> None:
    (trials, _) = _trials()
    best, worst = best_and_worst(trials)
    assert best.outcome.reward == max(tr.outcome.reward for tr in trials)
    assert worst.outcome.reward == min(tr.outcome.reward for tr in trials)
    rec = dpo_record(trials, "trl")
    assert rec is not None
    assert [m["role"] for m in rec["prompt"]] == ["system", "user"]
    assert rec["chosen"] == [{"role": "assistant", "content": plain_refs(render(best.result), {})}]
    assert rec["rejected"] == [
        {"role": "assistant", "content": plain_refs(render(worst.result), {})}
    ]
    assert rec["chosen_action"] == best.action.name != rec["rejected_action"]
    assert rec["chosen_reward"] > rec["rejected_reward"]
    openai = dpo_record(trials)
    assert openai == {
        "input": {"messages": rec["prompt"]},
        "preferred_output": rec["chosen"],
        "non_preferred_output": rec["rejected"],
    }


def test_sft_line_is_openai_fine_tuning_shape() -> None:
    (trials, _) = _trials()
    rec = sft_record(trials)
    assert rec is not None and list(rec) == ["messages"]
    roles = [m["role"] for m in rec["messages"]]
    assert roles == ["system", "user", "assistant"]
    best, _ = best_and_worst(trials)
    assert rec["messages"][2]["content"] == plain_refs(render(best.result), {})
    assert render(best.original) in rec["messages"][1]["content"]


def test_no_pair_when_nothing_needed_compacting() -> None:
    t = generate("long_chat", seed=1, tokens=3000)
    actions = builtin_actions()[:3]
    (trials,) = score([t], actions, limit_for=lambda _: 100_000)
    assert dpo_record(trials) is None and sft_record(trials) is None
    assert export_rows(trials, "dpo") == []


def test_render_is_the_provider_request_one_message_per_line() -> None:
    t = Transcript(
        [
            Unit("s", "system", content="sys"),
            Unit(
                "a", "assistant", content="", tool_calls=[ToolCall("c1", "grep", "{}")], priority=1
            ),
            Unit("r", "tool", content="hit", tool_call_id="c1"),
        ]
    )
    text = render(t)
    assert orjson.loads(text) == {
        "messages": [
            {"role": "system", "content": "sys"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "hit"},
        ]
    }
    lines = text.splitlines()
    assert len(lines) == 5 and orjson.loads(lines[2].rstrip(","))["content"] is None


def test_summary_per_action() -> None:
    trials = _trials()
    s = Summary()
    for group in trials:
        for tr in group:
            s.add(tr)
    rows = {r["action"]: r for r in s.rows()}
    assert set(rows) == {"default", "offload", "summarize_old"}
    for name, r in rows.items():
        mine = [tr.outcome for g in trials for tr in g if tr.action.name == name]
        assert r["n"] == 2
        assert r["mean_reward"] == pytest.approx(sum(o.reward for o in mine) / 2)
        assert r["fit_rate"] == sum(o.fits for o in mine) / 2
        needles = sum(o.needles_total or 0 for o in mine)
        assert r["retention"] == pytest.approx(sum(o.needles_present or 0 for o in mine) / needles)
    table = s.table().splitlines()
    assert table[0].split()[:4] == ["action", "n", "reward", "fit"]
    assert len(table) == 4


def test_the_reward_prefers_the_cheaper_of_two_equally_faithful_compactions() -> None:
    """The cost term (issue 33): tokens sent and cache writes, as a share of writing every
    uncompacted token; of two compactions that keep the same, the cheaper scores higher."""
    from ctxkit.rl.reward import COST_WEIGHT, cost_share, reward, reward_terms

    same = dict(success=True, coherence_delta=0.8, reduction_ratio=0.5, priority_preserved=1.0,
                used_recovery=False, fidelity=0.9)
    assert "cost" not in reward_terms(**same)  # not measured
    cheap, dear = cost_share(40_000, 5_000, 100_000), cost_share(40_000, 30_000, 100_000)
    assert 0 < cheap < dear <= 1
    assert reward_terms(**same, cost=dear)["cost"] == pytest.approx(-COST_WEIGHT * dear)
    assert reward(**same, cost=cheap) > reward(**same, cost=dear)
    assert reward_terms(**{**same, "success": False}, cost=dear)["cost"] == 0.0
    # measured on a replay and on one shot: every call's cache writes, or the next call's
    t = generate("growing_session", seed=1, tokens=8000)
    for mode in ("replay", "oneshot"):
        o = run_action(t, Action("summarize_old", ("summarize_old",)), limit=4000, mode=mode).outcome
        assert o.cache_write_tokens is not None and 0 < o.cache_write_tokens
        assert o.cost_share is not None and 0 < o.cost_share <= 1 and "cost" in o.terms


def test_the_reward_weighs_what_the_model_can_still_answer() -> None:
    """The fidelity term: probe recall of the compacted context, weighted like coherence, so
    of two compactions that both fit, the one that keeps what the task needs is preferred."""
    from ctxkit.fidelity import probes
    from ctxkit.rl.reward import FIDELITY_WEIGHT, reward, reward_terms

    same = dict(success=True, coherence_delta=0.8, reduction_ratio=0.5, priority_preserved=1.0,
                used_recovery=False)
    assert "fidelity" not in reward_terms(**same)  # not measured: the seed's terms alone
    assert reward_terms(**same, fidelity=0.6)["fidelity"] == -FIDELITY_WEIGHT * (1 - 0.6)
    assert reward_terms(**same, fidelity=1.0)["fidelity"] == 0.0  # nothing lost, nothing taken
    assert reward(**same, fidelity=0.9) > reward(**same, fidelity=0.3)
    # the seed's terms at their best reach the clamp: what was lost still tells two apart
    best = dict(same, coherence_delta=1.0, reduction_ratio=1.0)
    assert reward(**best) == 2.0
    assert reward(**best, fidelity=1.0) > reward(**best, fidelity=0.9) > reward(**best, fidelity=0.3)
    t = generate("agent_session", seed=2, tokens=6000)
    trial = run_action(t, Action("default", DEFAULT_CHAIN), limit=2500)
    o = trial.outcome
    assert o.success and o.fidelity == probes.score(probes.extract(t), trial.result).recall
    assert o.terms["fidelity"] == -FIDELITY_WEIGHT * (1 - o.fidelity) and o.to_dict()["fidelity"] == round(o.fidelity, 6)


def test_a_false_claim_counts_against_the_compaction() -> None:
    """The claims term (issue 38): each claim of the compaction's own text that the original
    log does not back costs CLAIM_PENALTY, at most CLAIMS_MAX; of two compactions that keep
    the same, the one that says fewer false things scores higher."""
    from ctxkit.fidelity import claims
    from ctxkit.rl.reward import CLAIM_PENALTY, CLAIMS_MAX, reward, reward_terms

    same = dict(success=True, coherence_delta=0.8, reduction_ratio=0.5, priority_preserved=1.0,
                used_recovery=False, fidelity=0.9)
    assert "claims" not in reward_terms(**same)  # not measured
    assert reward_terms(**same, false_claims=0)["claims"] == 0.0
    assert reward_terms(**same, false_claims=2)["claims"] == pytest.approx(-2 * CLAIM_PENALTY)
    assert reward_terms(**same, false_claims=40)["claims"] == -CLAIMS_MAX
    assert reward_terms(**{**same, "success": False}, false_claims=3)["claims"] == 0.0
    assert reward(**same, false_claims=0) > reward(**same, false_claims=1) > reward(**same, false_claims=3)
    # a failed compaction still scores below one that fits and misstates everything
    failed = dict(same, success=False, coherence_delta=0.0, reduction_ratio=0.0, priority_preserved=0.0)
    assert reward(**failed) < reward(**same, false_claims=1000)
    # measured on a real log: the outcome's count is the checker's, and the term follows it
    from ctxkit.formats import read_path

    (t,) = read_path(str(Path(__file__).resolve().parents[1] / "sample_transcripts" / "mini-swe-agent-django-11039.traj.json"))
    trial = run_action(t, Action("default", DEFAULT_CHAIN), limit=4000)
    o = trial.outcome
    assert o.success and o.false_claims == claims.check(t, trial.result).false
    assert o.terms["claims"] == pytest.approx(-min(CLAIMS_MAX, CLAIM_PENALTY * o.false_claims))
    assert o.to_dict()["false_claims"] == o.false_claims
