"""Budget: the models table, window arithmetic, resolution order, policy limits, statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxkit.budget import (
    STATUSES,
    Thresholds,
    compaction_goal,
    effective_limit,
    status_for,
    status_rank,
)
from ctxkit.budget.limits import AgentPolicy, ModelOverride, PerLLM
from ctxkit.budget.models import find_model, load_models
from ctxkit.budget.targets import (
    BudgetRequest,
    resolve_model_budget,
    resolve_policy,
    resolve_target,
)
from ctxkit.config.file import Config
from ctxkit.errors import UsageError


def test_spec_worked_example() -> None:
    assert effective_limit(128000, 8192, 16384) == 103424
    t = resolve_target(context_window=128000, buffer_tokens=8192, max_output_tokens=16384)
    assert (t.limit, t.bound_by) == (103424, "model")
    assert resolve_target("gpt-4o").limit == 103424


def test_defaults() -> None:
    t = resolve_target()
    assert (t.context_window, t.buffer_tokens, t.max_output_tokens) == (131072, 8192, 32768)
    assert t.limit == 131072 - 8192 - 32768
    assert t.name == "default" and t.tokenizer == "cl100k_base"
    assert resolve_target(context_window=100000).max_output_tokens == 25000


# (name, window, max output or None, tokenizer, proxy) from the issue
MODELS = [
    ("gpt-4o", 128000, 16384, "o200k_base", False),
    ("gpt-4o-mini", 128000, 16384, "o200k_base", False),
    ("gpt-4.1", 1047576, 32768, "o200k_base", False),
    ("gpt-5", 400000, 128000, "o200k_base", False),
    ("o3", 200000, 100000, "o200k_base", False),
    ("gpt-4-turbo", 128000, 4096, "cl100k_base", False),
    ("gpt-4", 8192, 8192, "cl100k_base", False),
    ("gpt-3.5-turbo", 16385, 4096, "cl100k_base", False),
    ("claude-sonnet-4", 200000, 64000, "claude", True),
    ("claude-opus-4", 200000, 32000, "claude", True),
    ("claude-3-7-sonnet", 200000, 64000, "claude", True),
    ("claude-3-5-sonnet", 200000, 8192, "claude", True),
    ("claude-3-5-haiku", 200000, 8192, "claude", True),
    ("gemini-2.5-pro", 1048576, 65536, "cl100k_base", True),
    ("gemini-2.5-flash", 1048576, 65536, "cl100k_base", True),
    ("qwen3-14b", 32768, None, "cl100k_base", True),
    ("phi-4", 16384, None, "cl100k_base", True),
    ("llama-3.1-8b-instruct", 131072, None, "cl100k_base", True),
    ("grok-3", 131072, None, "cl100k_base", True),
]


@pytest.mark.parametrize(("name", "window", "output", "tokenizer", "proxy"), MODELS)
def test_models_table(
    name: str, window: int, output: int | None, tokenizer: str, proxy: bool
) -> None:
    info = load_models()[name]
    assert (info.context_window, info.max_output_tokens, info.tokenizer) == (
        window,
        output,
        tokenizer,
    )
    assert info.tokenizer_proxy is proxy
    assert bool(info.tokenizer_note) is proxy
    target = resolve_target(name)
    assert ("proxy" in target.tokenizer_note or "estimate" in target.tokenizer_note) is proxy


def test_one_m_names_the_extended_window() -> None:
    """Claude Code's `[1m]`: the model run with its 1M-token window; a model whose own window is
    1M already is itself."""
    assert resolve_target("claude-sonnet-4-5[1m]").context_window == 1_000_000
    assert resolve_target("claude-sonnet-4-5").context_window == 200_000
    assert resolve_target("claude-opus-4-6[1m]").context_window == 1_000_000
    assert resolve_target("claude-opus-4-6").context_window == 200_000  # as Claude Code runs it
    assert find_model("claude-sonnet-4-6[1m]")[0] == load_models()["claude-sonnet-4-6"]


def test_qwen_yarn_window() -> None:
    assert load_models()["qwen3-14b"].extended_context_window == 131072
    assert load_models()["qwen3-14b-yarn"].context_window == 131072


@pytest.mark.parametrize(
    ("given", "matched"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("gpt-4o-latest", "gpt-4o"),
        ("claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("anthropic/claude-opus-4", "claude-opus-4"),
        ("GPT-4", "gpt-4"),
        ("gpt-4-turbo-preview", "gpt-4-turbo"),
        # as the real logs in ../shared/realdata record them
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-sonnet-4.6", "claude-sonnet-4-6"),
        ("gpt-5.1-codex", "gpt-5.1"),
        ("gpt-5.3-codex-spark", "gpt-5.3-codex-spark"),
        ("deepseek/deepseek-chat", "deepseek-chat"),
        ("openai/openrouter-llama-4-maverick", "llama-4-maverick"),
        ("meta-llama/llama-4-maverick", "llama-4-maverick"),
        # as providers and platforms write them
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-opus-4-6@20260205", "claude-opus-4-6"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("gpt-5-1-codex", "gpt-5.1"),
        ("claude-sonnet-4-5[1m]", "claude-sonnet-4-5[1m]"),
    ],
)
def test_find_model_by_name_alias_or_snapshot(given: str, matched: str) -> None:
    info, name = find_model(given)
    assert info is not None and name == matched


@pytest.mark.parametrize(
    "typo", ["gpt-4o-mnii", "gpt-4o-mini-foo", "claude-sonnet-4-7", "gpt-4.1-pico", "gpt-5.5", "sonnet"]
)
def test_names_are_strict(typo: str) -> None:
    """A name that is not a model, an alias or a dated snapshot is never taken for another."""
    assert find_model(typo) == (None, "")
    with pytest.raises(UsageError):
        resolve_target(typo)


def test_unknown_model_suggests_the_closest() -> None:
    with pytest.raises(UsageError) as exc:
        resolve_target("gpt-4o-mnii")
    assert str(exc.value) == (
        "unknown model 'gpt-4o-mnii'; did you mean gpt-4o-mini or gpt-4.1-mini or gpt-5-mini? "
        "`ctxkit models` lists the known ones. Give --window (and --max-output), or add it "
        "under context_config.models"
    )
    with pytest.raises(UsageError) as exc:
        resolve_target("gpt-9")
    assert str(exc.value).startswith("unknown model 'gpt-9'; did you mean ")
    # a window makes any name usable
    assert resolve_target("gpt-9", context_window=10000).context_window == 10000


def test_small_window_reserves_at_most_half_for_output() -> None:
    t = resolve_target("gpt-4")
    assert (t.context_window, t.max_output_tokens, t.buffer_tokens, t.limit) == (
        8192,
        4096,
        1024,
        3072,
    )
    assert "max output 8192 reserved as 4096 (half the 8192-token window)" in t.notes
    # a flag is taken exactly
    assert resolve_target("gpt-4", max_output_tokens=1000).max_output_tokens == 1000


def test_no_room_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as exc:
        resolve_target(context_window=8192, buffer_tokens=8192, max_output_tokens=8192)
    assert str(exc.value) == (
        "custom: effective limit 8192 - 8192 (buffer) - 8192 (max output) = -8192, no room for "
        "input; lower --buffer or --max-output, or raise --window"
    )


def test_resolution_order() -> None:
    cfg = Config(
        models={"gpt-4o": ModelOverride(context_window=64000, buffer_tokens=1000)},
        providers={
            "openai": ModelOverride(context_window=32000, max_output_tokens=2000, buffer_tokens=500)
        },
    )
    mb = resolve_model_budget(BudgetRequest("gpt-4o", config=cfg))
    assert (mb.context_window, mb.max_output_tokens, mb.buffer_tokens) == (64000, 2000, 1000)
    assert mb.sources == {
        "context_window": "config models.gpt-4o",
        "max_output_tokens": "config providers.openai",
        "buffer_tokens": "config models.gpt-4o",
        "tokenizer": "models.toml",
    }
    flags = resolve_model_budget(
        BudgetRequest("gpt-4o", config=cfg, context_window=50000, max_output_tokens=100)
    )
    assert (flags.context_window, flags.max_output_tokens) == (50000, 100)
    assert flags.sources["context_window"] == "flag"
    # a model only in the config
    own = resolve_model_budget(
        BudgetRequest("my-model", config=Config(models={"my-model": ModelOverride(context_window=20000)}))
    )
    assert (own.context_window, own.max_output_tokens, own.buffer_tokens) == (20000, 5000, 2500)


# --- statuses ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "status"),
    [
        (0, "ok"),
        (799, "ok"),
        (800, "warn"),
        (949, "warn"),
        (950, "compact"),
        (979, "compact"),
        (980, "block"),
        (1000, "block"),
        (1001, "overflow"),
    ],
)
def test_status_boundaries(used: int, status: str) -> None:
    assert status_for(used, 1000) == status


def test_status_with_other_thresholds() -> None:
    th = Thresholds(warn=0.5, compact=0.6, block=0.9)
    assert [status_for(n, 100, th) for n in (49, 50, 60, 90, 101)] == [
        "ok",
        "warn",
        "compact",
        "block",
        "overflow",
    ]
    assert status_for(0, 0) == "overflow"


def test_compaction_goal() -> None:
    # one-shot: the largest context the guard passes (one token under its compact threshold)
    assert compaction_goal(5000) == 4749
    assert status_for(compaction_goal(5000), 5000) == "warn"
    assert status_for(compaction_goal(5000) + 1, 5000) == "compact"
    assert compaction_goal(103424, thresholds=Thresholds(compact=0.9)) == 93081
    # an agent loop: the warn threshold, room to work before the next compaction
    assert compaction_goal(5000, in_loop=True) == 4000
    assert compaction_goal(103424, thresholds=Thresholds(warn=0.7), in_loop=True) == 72396
    assert compaction_goal(5000, target=4500) == 4500
    assert compaction_goal(5000, target=6000) == 5000  # never above the limit


@given(
    a=st.integers(0, 10**6),
    extra=st.integers(0, 10**6),
    limit=st.integers(1, 10**6),
    fractions=st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3),
)
def test_more_tokens_never_improve_the_status(
    a: int, extra: int, limit: int, fractions: list[float]
) -> None:
    warn, compact, block = sorted(fractions)
    th = Thresholds(warn, compact, block)
    assert status_rank(status_for(a + extra, limit, th)) >= status_rank(status_for(a, limit, th))


def test_statuses_order() -> None:
    assert [status_rank(s) for s in STATUSES] == [0, 1, 2, 3, 4]


# --- policy -----------------------------------------------------------------------------------


def test_no_policy_without_config_or_flags() -> None:
    assert resolve_policy(Config()) is None
    t = resolve_target("gpt-4o")
    assert t.policy_limit is None and t.bound_by == "model"


def test_default_limit_set_brings_a_policy_a_file_alone_does_not() -> None:
    # issue 36: a file that leaves default_limit unset (what `config --init` writes) changes
    # nothing; one that sets it holds every target to it
    assert resolve_policy(Config(source="ctxkit.yaml")) is None
    assert resolve_target("gpt-4o", config=Config(source="ctxkit.yaml")).bound_by == "model"
    cfg = Config(default_limit=5000, source="ctxkit.yaml")
    p = resolve_policy(cfg)
    assert p is not None and (p.limit, p.rule) == (5000, "default_limit")
    t = resolve_target("gpt-4o", config=cfg)
    assert (t.limit, t.bound_by, t.rule) == (5000, "policy", "policy: default_limit")


def test_follow_default_with_default_limit_unset_is_no_policy() -> None:
    cfg = Config(per_llm=(PerLLM(type="claude", follow_default=True),))
    assert resolve_policy(cfg, llm="claude") is None
    assert resolve_policy(cfg, llm="claude", agent="coding").limit == 5000  # type: ignore[union-attr]


def test_limit_flag_is_exact_even_below_floor() -> None:
    p = resolve_policy(Config(), limit=1000)
    assert p is not None and (p.limit, p.rule, p.floored) == (1000, "--limit", False)


def test_agents() -> None:
    cfg = Config()
    assert resolve_target("gpt-4o", agent="verification").limit == 4000
    assert resolve_target("gpt-4o", agent="coding").limit == 5000
    p1 = Config(agents={"lead": AgentPolicy(limit=5000, priority=1)})
    p = resolve_policy(p1, agent="lead")
    assert p is not None and (p.limit, p.rule) == (6000, "agent lead (P1 +20%)")
    with pytest.raises(UsageError) as exc:
        resolve_policy(cfg, agent="x")
    assert (
        str(exc.value)
        == "unknown agent 'x'; known: coding, verification (add it under context_config.agents)"
    )


def test_floor_raises_configured_limits() -> None:
    cfg = Config(min_limit=3500, agents={"tiny": AgentPolicy(limit=2000)})
    p = resolve_policy(cfg, agent="tiny")
    assert p is not None and (p.limit, p.rule, p.floored) == (
        3500,
        "agent tiny 2000, raised to min_limit",
        True,
    )
    raised = Config(min_limit=4500)
    p = resolve_policy(raised, agent="verification")
    assert p is not None and p.limit == 4500
    low_default = Config(min_limit=3500, default_limit=1000, source="x.yaml")
    p = resolve_policy(low_default)
    assert p is not None and p.limit == 3500


def test_per_llm() -> None:
    cfg = Config(
        default_limit=7000,
        per_llm=(PerLLM(type="gpt-4", limit=6000), PerLLM(type="claude", follow_default=True)),
    )
    assert resolve_policy(cfg, llm="gpt-4").limit == 6000  # type: ignore[union-attr]
    claude = resolve_policy(cfg, llm="Claude")
    assert claude is not None and (claude.limit, claude.rule) == (
        7000,
        "per_llm claude (follows default_limit)",
    )
    with pytest.raises(UsageError) as err:  # like an unknown --agent (issue 16)
        resolve_policy(cfg, llm="mistral")
    assert str(err.value) == (
        "unknown LLM type 'mistral'; known: claude, gpt-4 (add it under context_config.per_llm)"
    )
    with pytest.raises(UsageError, match="known: \\(none configured\\)"):
        resolve_policy(Config(), llm="gpt-4")
    both = resolve_policy(cfg, llm="gpt-4", agent="verification")
    assert both is not None and (both.limit, both.rule) == (4000, "agent verification")


def test_model_binds_when_smaller_than_policy() -> None:
    t = resolve_target("gpt-4", limit=5000)
    assert (t.limit, t.bound_by, t.policy_limit) == (3072, "model", 5000)
    assert t.rule == "model: window - buffer - max output"


def test_every_priced_model_lists_input_and_output() -> None:
    for m in load_models().values():
        if m.cached_input_per_mtok is not None or m.cache_write_per_mtok is not None:
            assert m.input_per_mtok is not None and m.output_per_mtok is not None, m.name
        if m.provider in ("openai", "anthropic", "google"):
            # a vendor's model without a price says why (a preview served only in its app)
            assert m.input_per_mtok is not None or "without an API price" in m.notes, m.name
    assert load_models()["claude-sonnet-4"].cache_write_per_mtok == 3.75


def test_models_command_lists_and_checks_names() -> None:
    from click.testing import CliRunner

    from ctxkit.cli import cli

    runner = CliRunner()
    r = runner.invoke(cli, ["models", "--format", "jsonl"], catch_exceptions=False)
    assert r.exit_code == 0
    names = [json.loads(line)["name"] for line in r.stdout.splitlines()]
    assert names == list(load_models())
    r = runner.invoke(cli, ["models", "gpt-4o-2024-08-06", "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["name"] == "gpt-4o"
    r = runner.invoke(cli, ["models", "gpt-4o-mnii"])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: unknown model 'gpt-4o-mnii'; did you mean gpt-4o-mini or gpt-4.1-mini or "
        "gpt-5-mini?"
    )


def test_a_limit_without_a_model_is_taken_as_given() -> None:
    """Issue 23: `--limit 500000` without `--model` was cut to the default window's 90,112
    without a word. With no model named it is the limit; with one, the model's binds, said so."""
    t = resolve_target(limit=500_000)
    assert (t.limit, t.bound_by) == (500_000, "policy")
    assert t.notes[-1].startswith("--limit 500,000 taken as given: no model was named")
    t = resolve_target("gpt-4o", limit=500_000)
    assert (t.limit, t.bound_by) == (103_424, "model")
    assert t.notes[-1] == (
        "--limit 500,000 is above gpt-4o's own limit 103,424 (window 128,000 - buffer 8,192 - "
        "max output 16,384): the model's limit binds"
    )
    assert resolve_target(limit=5_000).notes == ()


def test_compact_at_a_limit_above_the_default_window(realdata: Path, tmp_path: Path) -> None:
    """A real log of 142,027 tokens (recorded usage included) fits a 500,000 limit: unchanged,
    not compacted to the default window's goal."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    log = realdata / "claude-code" / "conneroisu__templar__logs-chat-json@a46211b7__session-b9712494.jsonl"
    r = CliRunner().invoke(cli, ["compact", str(log), "--limit", "500000", "-o", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 0, r.output
    # (after the read line, which says the sidechain records it skipped)
    assert r.stderr.splitlines()[-1:] == ["Context fits: 142,027 / 500,000 tokens (unchanged)"]
    assert "Context reduced" not in r.stderr
    r = CliRunner().invoke(cli, ["compact", str(log), "--limit", "500000", "--model", "claude-sonnet-4", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "ctxkit: --limit 500,000 is above claude-sonnet-4's own limit 127,808" in r.stderr


def test_every_model_the_real_logs_record_resolves(realdata: Path) -> None:
    """Every model name the real logs record resolves to a models.toml row, by name or (a name
    models.toml does not know yet, such as gpt-5.5) by family: as the files hold
    them (Claude Code `message.model`, Codex `turn_context.model`, Gemini CLI `model`, opencode
    `modelID`, mini-swe-agent `model_name`, ...) and as the readers report them (aider's
    `Models:` line)."""
    import re

    from ctxkit.errors import CtxkitError
    from ctxkit.formats import read_path

    field = re.compile(rb'"(?:model|modelID|modelId|model_name)"\s*:\s*"([^"]{2,80})"')
    recorded: set[str] = set()
    for path in sorted(realdata.rglob("*")):
        if path.suffix not in (".json", ".jsonl", ".traj", ".md") or path.name == "README.md":
            continue
        recorded |= {m.decode() for m in field.findall(path.read_bytes())}
        try:
            recorded |= {t.metadata["model"] for t in read_path(str(path)) if t.metadata.get("model")}
        except CtxkitError:
            pass  # a format whose reader has not landed yet: its raw names are checked above
    recorded -= {"<synthetic>", "default"}  # Claude Code's own error messages; OpenHands' llm config name
    assert {"claude-opus-5", "claude-sonnet-4.6", "gpt-5.3-codex-spark", "gemini-3-flash-preview",
            "deepseek-chat", "meta-llama/llama-4-maverick", "claude-3-5-sonnet-20240620"} <= recorded
    from ctxkit.budget.models import find_family

    assert sorted(n for n in recorded if find_model(n)[0] is None and find_family(n)[0] is None) == []


def test_one_resolver_for_flags_and_logs() -> None:
    """`resolve_budget` gives the target a log names when nothing names another, else the
    flags' target; a flag, or `default_limit` in the configuration, names another."""
    from ctxkit.budget.resolve import BudgetRequest, log_target, resolve_budget
    from ctxkit.model import Transcript

    t = Transcript(units=[], source_format="claude-code", metadata={"model": "claude-opus-4-6"})
    assert resolve_budget(BudgetRequest(), t) == log_target(t)
    assert resolve_budget(BudgetRequest(), t).bound_by == "agent"
    assert resolve_budget(BudgetRequest(model="gpt-4o"), t) == resolve_target("gpt-4o")
    assert resolve_budget(BudgetRequest(context_window=50_000), t) == resolve_target(context_window=50_000)
    policy = Config(default_limit=6000)
    assert resolve_budget(BudgetRequest(config=policy), t).limit == 6000
    assert resolve_budget(BudgetRequest()) == resolve_target()  # no log: the default


@pytest.mark.parametrize("model", ["gpt-4", "claude-opus-4-6", "gpt-4o"])
def test_replay_compacts_to_the_limit_guard_checks(model: str) -> None:
    """`ctxkit replay --model X` gives ctxkit's chain the limit `guard --model X` checks (a log
    with no recorded usage adds nothing): gpt-4's 8,192 max output is reserved as half its
    window, as the guard reserves it (the replay left it a limit of 1 token)."""
    from ctxkit.model import Transcript, Unit
    from ctxkit.recipes.session import ReplayOptions, request_for

    t = Transcript(units=[Unit("u0", "user", content="hello")], source_format="openai")
    request = request_for(t, ReplayOptions(model=model, agents=("ctxkit",)))
    assert request.ctxkit_settings.limit == resolve_target(model).limit
    assert request.window == resolve_target(model).context_window
