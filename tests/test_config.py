"""Configuration: the spec's defaults, loading, exact error texts, overrides, `ctxkit config`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ctxkit.budget.limits import AgentPolicy
from ctxkit.cli import cli
from ctxkit.config.file import (
    Config,
    RetryPolicy,
    default_config_text,
    dump_config,
    load_config,
)
from ctxkit.embedders import DEFAULT_EMBEDDER
from ctxkit.errors import ConfigError
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES


def test_spec_defaults() -> None:
    c = Config()
    # unset: each log its own target, and a coding agent's own compact point (issue 36)
    assert (c.min_limit, c.default_limit, c.compact_threshold) == (3500, None, None)
    assert (c.thresholds.warn, c.thresholds.compact, c.thresholds.block) == (0.80, 0.95, 0.98)
    assert c.agents == {"verification": AgentPolicy(4000), "coding": AgentPolicy(5000)}
    bs = c.breaking_strategy
    assert bs.chain_order == DEFAULT_CHAIN
    assert sorted(bs.chain_order) == sorted(tuple(STRATEGIES))
    assert bs.params("summarize_old") == {
        "old_threshold": 1.0,
        "summary_length": 300,
        "min_coherence": 0.7,
        "summary_share": 0.1,
        "retry_threshold": 0.6,
    }
    assert bs.params("prioritize_recent") == {
        "recent_bias": 0.2,
        "rel_threshold": 0.5,
        "priority_boost": 1.5,
    }
    assert bs.params("content_type_chunking") == {
        "compress_ratios": {"code": 0.7, "text": 0.5, "log": 0.4, "plan_ref": 1.0, "other": 0.6}
    }
    assert bs.content_type_chunking.compress_ratios.ratio_for("tool_result") == 0.6
    assert bs.params("discard_low_rel") == {
        "discard_percent": 0.3,
        "placeholder_detail": "brief",
        "min_coherence": 0.6,
    }
    assert bs.params("offload") == {"threshold_bytes": 4096, "preview_chars": 200}
    assert bs.params("mask_observations") == {"keep_last_turns": 3}
    assert bs.hybrid.max_iterations == 3
    assert (c.recovery_mode, c.handover_tokens) == ("fresh_start", 500)
    assert c.retry_policies.default == RetryPolicy(3, 1.0, 30.0, 30.0)
    assert (c.summarizer.name, c.embedder.name) == ("extractive", DEFAULT_EMBEDDER)


def test_init_text_loads_to_the_defaults() -> None:
    assert Config.from_dict(yaml.safe_load(default_config_text())) == Config()


def test_show_round_trips() -> None:
    c = Config.from_dict(
        {"context_config": {"min_limit": 4000, "agents": {"a": {"limit": 4100, "priority": "P1"}}}}
    )
    assert Config.from_dict(yaml.safe_load(dump_config(c))) == c
    assert Config.from_dict(json.loads(dump_config(c, "json"))) == c


def test_partial_sections_merge_over_defaults() -> None:
    c = Config.from_dict(
        {
            "context_config": {
                "breaking_strategy": {
                    "summarize_old": {"summary_length": 200},
                    "content_type_chunking": {"compress_ratios": {"log": 0.2}},
                }
            }
        }
    )
    assert c.breaking_strategy.summarize_old.old_threshold == 1.0
    assert c.breaking_strategy.summarize_old.summary_length == 200
    ratios = c.breaking_strategy.content_type_chunking.compress_ratios
    assert (ratios.log, ratios.code) == (0.2, 0.7)


def test_agents_shorthand_and_priority() -> None:
    c = Config.from_dict(
        {
            "context_config": {
                "agents": {"research": 6000, "lead": {"limit": 4000, "priority": "P1"}}
            }
        }
    )
    assert c.agents == {"research": AgentPolicy(6000), "lead": AgentPolicy(4000, 1)}


def test_retry_policies_per_tool_merge_over_default() -> None:
    c = Config.from_dict(
        {
            "context_config": {
                "retry_policies": {"default": {"max_attempts": 4}, "web_search": {"timeout_s": 5}}
            }
        }
    )
    assert c.retry_policies.default.max_attempts == 4
    assert c.retry_policies.for_tool("web_search") == RetryPolicy(4, 1.0, 30.0, 5.0)
    assert c.retry_policies.for_tool("other") == c.retry_policies.default


BAD = [
    (
        {"context_config": {"min_limt": 1}},
        "f.yaml: context_config.min_limt: unknown key; allowed: min_limit, default_limit, warning_threshold, "
        "compact_threshold, block_threshold, per_llm, agents, models, providers, breaking_strategy, "
        "recovery_mode, handover_tokens, retry_policies, summarizer, embedder, priority_areas",
    ),
    ({"context": {}}, "f.yaml: context: unknown key; allowed: context_config"),
    (
        {"context_config": {"min_limit": "lots"}},
        "f.yaml: context_config.min_limit: 'lots' is not an integer; allowed: an integer >= 1",
    ),
    (
        {"context_config": {"min_limit": 0}},
        "f.yaml: context_config.min_limit: 0 is out of range; allowed: an integer >= 1",
    ),
    (
        {"context_config": {"breaking_strategy": {"summarize_old": {"old_threshold": 1.5}}}},
        "f.yaml: context_config.breaking_strategy.summarize_old.old_threshold: 1.5 is out of range; "
        "allowed: a number from 0 to 1",
    ),
    (
        {"context_config": {"breaking_strategy": {"summarise_old": {}}}},
        "f.yaml: context_config.breaking_strategy.summarise_old: unknown key; allowed: chain_order, "
        "offload, mask_observations, content_type_chunking, summarize_old, prioritize_recent, "
        "discard_low_rel, hybrid",
    ),
    (
        {"context_config": {"breaking_strategy": {"chain_order": ["offload", "magic"]}}},
        "f.yaml: context_config.breaking_strategy.chain_order[1]: 'magic' is not a strategy; allowed: "
        "offload, mask_observations, content_type_chunking, summarize_old, prioritize_recent, discard_low_rel, hybrid",
    ),
    (
        {"context_config": {"breaking_strategy": {"chain_order": "offload"}}},
        "f.yaml: context_config.breaking_strategy.chain_order: 'offload' is not a list; allowed: a list of "
        "offload, mask_observations, content_type_chunking, summarize_old, prioritize_recent, discard_low_rel, hybrid",
    ),
    (
        {
            "context_config": {
                "breaking_strategy": {"discard_low_rel": {"placeholder_detail": "full"}}
            }
        },
        "f.yaml: context_config.breaking_strategy.discard_low_rel.placeholder_detail: 'full' is not a known "
        "choice; allowed: brief, linked",
    ),
    (
        {"context_config": {"recovery_mode": "panic"}},
        "f.yaml: context_config.recovery_mode: 'panic' is not a known choice; allowed: fresh_start, truncate, error",
    ),
    (
        {"context_config": {"warning_threshold": 0}},
        "f.yaml: context_config.warning_threshold: 0 is out of range; allowed: a number above 0 and up to 1",
    ),
    (
        {"context_config": {"block_threshold": 0.9}},
        "f.yaml: context_config.block_threshold: 0.9 is below compact_threshold 0.95; allowed: "
        "warning_threshold <= compact_threshold <= block_threshold <= 1",
    ),
    (
        {"context_config": {"per_llm": [{"type": "gpt-4"}]}},
        "f.yaml: context_config.per_llm[0]: neither limit nor follow_default; allowed: limit: <integer> "
        "or follow_default: true",
    ),
    (
        {"context_config": {"per_llm": {"gpt-4": 5000}}},
        "f.yaml: context_config.per_llm: a mapping is not a list; allowed: a list of {type, limit} or "
        "{type, follow_default: true}",
    ),
    (
        {"context_config": {"agents": {"coding": {"priority": 1}}}},
        "f.yaml: context_config.agents.coding: missing key limit; allowed: an integer limit, or a mapping "
        "with limit and priority",
    ),
    (
        {"context_config": {"agents": {"coding": {"limit": 5000, "priority": "high"}}}},
        "f.yaml: context_config.agents.coding.priority: 'high' is not a priority; allowed: 1, 2, 3, P1, P2, P3 or null",
    ),
    (
        {"context_config": {"retry_policies": {"default": {"max_attempts": 0}}}},
        "f.yaml: context_config.retry_policies.default.max_attempts: 0 is out of range; allowed: an integer from 1 to 100",
    ),
    (
        {"context_config": {"embedder": {"cache": "yes"}}},
        "f.yaml: context_config.embedder.cache: 'yes' is not a boolean; allowed: true or false",
    ),
    (
        ["not", "a", "mapping"],
        "f.yaml: <top level>: a list is not a mapping; allowed: a mapping of keys to values",
    ),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_values_name_key_value_and_allowed(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Config.from_dict(data, source="f.yaml")
    assert str(exc.value) == message
    assert exc.value.exit_code == 2


def test_load_config_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(None) == Config() and load_config(None).source is None
    (tmp_path / "ctxkit.yaml").write_text("context_config:\n  default_limit: 6000\n")
    c = load_config(None)
    assert (c.default_limit, c.source) == (6000, "ctxkit.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert load_config("empty.yaml").source == "empty.yaml"
    with pytest.raises(ConfigError, match=r"^nope.yaml: no such config file$"):
        load_config("nope.yaml")
    (tmp_path / "broken.yaml").write_text("context_config:\n  min_limit: [1,\n")
    with pytest.raises(ConfigError) as exc:
        load_config("broken.yaml")
    assert str(exc.value).startswith("broken.yaml:3: not valid YAML: ")


def test_with_overrides() -> None:
    c = Config(source="team.yaml").with_overrides(
        min_limit=4000,
        chain_order=["offload", "summarize_old"],
        recovery_mode=None,
        **{"breaking_strategy.offload.threshold_bytes": 8192},
    )
    assert c.min_limit == 4000 and c.source == "team.yaml"
    assert c.breaking_strategy.chain_order == ("offload", "summarize_old")
    assert c.breaking_strategy.offload.threshold_bytes == 8192
    assert c.recovery_mode == "fresh_start"
    with pytest.raises(ConfigError) as exc:
        Config().with_overrides(recovery_mode="panic")
    assert str(exc.value) == (
        "context_config.recovery_mode: 'panic' is not a known choice; allowed: fresh_start, truncate, error"
    )
    with pytest.raises(ConfigError, match=r"^context_config.nothing: unknown key"):
        Config().with_overrides(nothing=1)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        Config().min_limit = 1  # type: ignore[misc]


# --- `ctxkit config` --------------------------------------------------------------------------


def invoke(args: list[str], cwd: Path) -> object:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def test_config_show_defaults(tmp_path: Path) -> None:
    r = invoke(["config", "--show"], tmp_path)
    assert r.exit_code == 0
    assert Config.from_dict(yaml.safe_load(r.stdout)) == Config()
    assert r.stderr == "# configuration from built-in defaults\n"
    r = invoke(["config", "--format", "json"], tmp_path)
    shown = json.loads(r.stdout)["context_config"]
    assert (shown["default_limit"], shown["compact_threshold"]) == (None, None)


def test_config_init_and_refuse_overwrite(tmp_path: Path) -> None:
    r = invoke(["config", "--init"], tmp_path)
    assert r.exit_code == 0 and r.stderr == "wrote ctxkit.yaml\n"
    text = (tmp_path / "ctxkit.yaml").read_text()
    assert text == default_config_text() and text.count("#") > 20
    again = invoke(["config", "--init"], tmp_path)
    assert again.exit_code == 2
    assert (
        again.stderr.strip().splitlines()[-1]
        == "Error: ctxkit.yaml exists; use --force to overwrite it"
    )
    (tmp_path / "ctxkit.yaml").write_text("context_config:\n  min_limit: 4000\n")
    shown = invoke(["config", "--show"], tmp_path)
    assert (
        "min_limit: 4000" in shown.stdout and shown.stderr == "# configuration from ctxkit.yaml\n"
    )
    forced = invoke(["config", "--init", "ctxkit.yaml", "--force"], tmp_path)
    assert forced.exit_code == 0 and (tmp_path / "ctxkit.yaml").read_text() == default_config_text()
    other = invoke(["config", "--init", "ci.yaml"], tmp_path)
    assert other.exit_code == 0 and (tmp_path / "ci.yaml").exists()


def test_config_show_bad_file_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("context_config:\n  agents:\n    coding: -5\n")
    r = invoke(["config", "--show", "--config", "bad.yaml"], tmp_path)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert (
        r.stderr
        == "Error: bad.yaml: context_config.agents.coding: -5 is out of range; allowed: an integer >= 1\n"
    )


def test_config_flags_conflict(tmp_path: Path) -> None:
    r = invoke(["config", "--show", "--init"], tmp_path)
    assert r.exit_code == 2 and "give --show or --init, not both" in r.stderr


def test_a_registered_strategy_is_configurable_without_touching_config(tmp_path: Path) -> None:
    """Adding a strategy is its module plus one registry line: the YAML section, its checks,
    `chain_order` and `config --init` follow from the registry."""
    import dataclasses as dc
    from types import SimpleNamespace

    from ctxkit import strategies
    from ctxkit.fields import integer, setting

    @dc.dataclass(frozen=True)
    class Params:
        """A toy strategy's parameters."""

        keep: int = setting(2, integer(1), "units kept")

    module = SimpleNamespace(NAME="toy", toy=lambda state, params: None, Params=Params)
    saved = (dict(strategies.STRATEGIES), dict(strategies.PARAMS))
    strategies.STRATEGIES["toy"] = module.toy  # what one more line in _MODULES produces
    strategies.PARAMS["toy"] = Params
    try:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            "context_config:\n  breaking_strategy:\n    chain_order: [toy, offload]\n"
            "    toy:\n      keep: 5\n"
        )
        c = load_config(str(cfg))
        assert c.breaking_strategy.chain_order == ("toy", "offload")
        assert c.breaking_strategy.params("toy") == {"keep": 5}
        assert "    toy:\n      keep: 2  # units kept\n" in default_config_text()
        cfg.write_text("context_config:\n  breaking_strategy:\n    toy:\n      keep: 0\n")
        with pytest.raises(ConfigError) as err:
            load_config(str(cfg))
        assert str(err.value) == (
            f"{cfg}: context_config.breaking_strategy.toy.keep: 0 is out of range; "
            "allowed: an integer >= 1"
        )
    finally:
        strategies.STRATEGIES.clear()
        strategies.STRATEGIES.update(saved[0])
        strategies.PARAMS.clear()
        strategies.PARAMS.update(saved[1])


# --- issue 36: writing the configuration changes nothing ----------------------------------

SAMPLES = Path(__file__).resolve().parents[1] / "sample_transcripts"
REAL_LOGS = (  # one small log of each kind that records its model or its agent
    "claude-code/d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__"
    "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "codex/AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-"
    "019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
    "gemini-cli/savekirk__session-bridge__checkpoints-v1__c6-6a5f5ed92d-0@96368d29.session.json",
    "openai-chat/sierra-research__tau-bench__gpt-4o-airline__idx065_task15_trial1_reward0.json",
)


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix != ".db"}


@pytest.mark.parametrize("command", ["guard", "count", "compact"])
def test_config_init_changes_nothing(command: str, tmp_path: Path, realdata: Path) -> None:
    """`config --init` writes the configuration in force: guard, count and compact give the
    same output and exit code on the bundled samples and real logs before and after it (the
    file it wrote used to set default_limit 5000, and the Claude Code sample went from exit 0
    to exit 5)."""
    logs = [str(p) for p in sorted(SAMPLES.iterdir()) if p.name != "SOURCES.md"]
    logs += [str(realdata / name) for name in REAL_LOGS]

    def run() -> list[tuple[int, str, str, dict[str, bytes]]]:
        if command != "compact":
            args = {
                "guard": ["guard", *logs, "--format", "json", "--details"],
                "count": ["count", *logs, "--format", "json"],
            }[command]
            r = invoke(args, tmp_path)
            return [(r.exit_code, r.stdout, r.stderr, {})]  # type: ignore[attr-defined]
        results = []
        for i, log in enumerate(logs):  # one at a time: each to its own budget, written whole
            out = tmp_path / f"out{i}"
            out.mkdir()
            r = invoke(["compact", log, "-o", str(out / Path(log).name)], tmp_path)
            results.append((r.exit_code, r.stdout, r.stderr, _outputs(out)))  # type: ignore[attr-defined]
            shutil.rmtree(out)
        return results

    before = run()
    assert invoke(["config", "--init"], tmp_path).exit_code == 0  # type: ignore[attr-defined]
    after = run()
    assert after == before
    if command == "guard":
        one = invoke(["guard", str(SAMPLES / "claude-code-session.jsonl")], tmp_path)
        assert one.exit_code == 0  # type: ignore[attr-defined]


def test_a_default_limit_set_in_the_file_still_holds(tmp_path: Path) -> None:
    (tmp_path / "ctxkit.yaml").write_text("context_config:\n  default_limit: 5000\n")
    r = invoke(["guard", str(SAMPLES / "claude-code-session.jsonl")], tmp_path)
    assert r.exit_code == 5  # type: ignore[attr-defined]
    assert "policy 5,000 (default_limit)" in r.stderr + r.stdout  # type: ignore[attr-defined]


def test_a_compact_threshold_set_holds_against_the_logs_own_target(tmp_path: Path) -> None:
    # the agent's own point when unset; as set, in the file or by the flag (which went unheard)
    sample = str(SAMPLES / "claude-code-session.jsonl")
    agent = invoke(["guard", sample, "--format", "json"], tmp_path)
    flag = invoke(["guard", sample, "--format", "json", "--compact-threshold", "0.9"], tmp_path)
    (tmp_path / "ctxkit.yaml").write_text("context_config:\n  compact_threshold: 0.9\n")
    file = invoke(["guard", sample, "--format", "json"], tmp_path)

    def compact_at(result: object) -> tuple[int, float]:
        budget = json.loads(result.stdout)["targets"][0]["budget"]  # type: ignore[attr-defined]
        return budget["limit"], budget["thresholds"]["compact"]

    assert compact_at(agent) == (197000, 0.8375)
    assert compact_at(file) == compact_at(flag) == (197000, 0.9)
