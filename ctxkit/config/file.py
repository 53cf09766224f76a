"""The YAML configuration (the spec's `context_config`) loaded into frozen dataclasses.

Layout (YAML keys = attribute names; every default is the spec's):

    Config                                  context_config:
      min_limit: int = 3500                   global floor for policy limits (raise, never undercut)
      default_limit: int | None = None        a policy limit for every log; unset, each log is
                                              checked against its own target (its model, its
                                              agent's budget), else the model's effective limit
      warning_threshold: float = 0.80         thresholds are fractions of the limit in force
      compact_threshold: float | None = None  unset: 0.95, or one call's growth before a coding
                                              agent compacts, against that agent's own budget
      block_threshold: float = 0.98
      per_llm: tuple[PerLLM, ...] = ()        PerLLM(type, limit | None, follow_default: as
                                              default_limit, set or unset)
      agents: dict[str, AgentPolicy]          AgentPolicy(limit, priority); verification 4000,
                                              coding 5000; a P1 agent gets +20%
      models: dict[str, ModelOverride]        per-model budget overrides (context_window,
      providers: dict[str, ModelOverride]     max_output_tokens, buffer_tokens, tokenizer)
      breaking_strategy: BreakingStrategy   one section per registered strategy: its `Params`
                                              (ctxkit/strategies/<name>.py), defaults below
        chain_order: tuple[str, ...]          default: offload, summarize_old,
                                              mask_observations, content_type_chunking,
                                              prioritize_recent, discard_low_rel
                                              ("hybrid" stands for this default chain)
        summarize_old:                        old_threshold 1.0, summary_length 300, min_coherence 0.7,
                                              retry_threshold 0.6
        prioritize_recent:                    recent_bias 0.2, rel_threshold 0.5, priority_boost 1.5
        content_type_chunking:
          compress_ratios:                    code 0.7, text 0.5, log 0.4, plan_ref 1.0, other 0.6
        discard_low_rel:                      discard_percent 0.3, placeholder_detail brief|linked,
                                              min_coherence 0.6
        offload:                              threshold_bytes 4096, preview_chars 200
        mask_observations:                    keep_last_turns 3
        hybrid: Hybrid                        max_iterations 3
      recovery_mode: str = "fresh_start"      fresh_start | truncate | error
      handover_tokens: int = 500              size of the fresh_start handover
      retry_policies: RetryPolicies           default RetryPolicy(max_attempts 3, backoff_base_s 1,
                                              max_delay_s 30, timeout_s 30) + per tool name
      summarizer: Summarizer                  name extractive | llm, model, url
      embedder: Embedder                      name static | lexical | minilm | auto, model, cache
      priority_areas: tuple[str, ...] = ()    extra text for the relevance query

Unset is what ctxkit does with no file, so the file `ctxkit config --init` writes (every key at
its default, these two null) changes nothing.

The default chain offloads huge tool outputs first (every byte one `recall` away), then
summarizes old turns (the most meaning kept per token), then masks old observations and
compresses by type, and only then drops units by relevance. `ctxkit score-rl` over every
scenario and the real transcripts measured this order's coherence above masking first.

Scalar keys merge over the defaults; a map (agents, models, providers) or a list given in the
file replaces the default one as a whole. Errors name the key path, the value and what is
allowed, e.g. `ctxkit.yaml: context_config.breaking_strategy.summarize_old.old_threshold: 1.5 is
out of range; allowed: a number from 0 to 1`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ctxkit.budget.limits import BudgetConfig
from ctxkit.embedders import DEFAULT_EMBEDDER
from ctxkit.errors import ConfigError, InputError
from ctxkit.fields import (
    boolean,
    choice,
    fail,
    integer,
    mapping,
    number,
    plain,
    section,
    setting,
    str_list,
    text,
)
from ctxkit.strategies import DEFAULT_CHAIN, PARAMS, STRATEGIES

DEFAULT_PATH = "ctxkit.yaml"
ROOT = "context_config"



def _embedder_names() -> Sequence[str]:
    from ctxkit.embedders import EMBEDDERS

    return sorted(EMBEDDERS)


def _summarizer_names() -> Sequence[str]:
    from ctxkit.summarizers import SUMMARIZER_NAMES

    return SUMMARIZER_NAMES


def _default_recovery() -> str:
    from ctxkit.compaction.recovery import DEFAULT_RECOVERY

    return DEFAULT_RECOVERY


def _recovery_modes() -> Sequence[str]:
    from ctxkit.compaction.recovery import RECOVERY_MODES

    return RECOVERY_MODES


def _strategy_list(value: Any, path: str) -> tuple[str, ...]:
    names = (*STRATEGIES, "hybrid")
    allowed = "a list of " + ", ".join(names)
    if not isinstance(value, (list, tuple)):
        raise fail(path, value, "is not a list", allowed)
    for i, name in enumerate(value):
        if name not in names:
            raise fail(f"{path}[{i}]", name, "is not a strategy", ", ".join(names))
    if len(set(value)) != len(value):
        raise fail(path, list(value), "names a strategy twice", allowed + ", each at most once")
    return tuple(value)



# --- the sections ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Hybrid:
    """The chain itself, repeated at most `max_iterations` times."""

    max_iterations: int = setting(3, integer(1, 100))


@dataclass(frozen=True)
class BreakingStrategy:
    """The compaction chain and every strategy's parameters: one `Params` record per strategy in
    the registry (`ctxkit.strategies.PARAMS`), read as `breaking_strategy.<name>` in YAML and as
    an attribute here (`bs.offload.threshold_bytes`)."""

    chain_order: tuple[str, ...] = setting(
        DEFAULT_CHAIN,
        _strategy_list,
        "strategies run in this order until the transcript fits; most recoverable first",
    )
    strategies: Mapping[str, Any] = field(
        default_factory=lambda: {name: params() for name, params in PARAMS.items()},
        metadata={"internal": True},
    )
    hybrid: Hybrid = setting(Hybrid(), section(Hybrid))

    def __getattr__(self, name: str) -> Any:
        if name != "strategies" and name in self.strategies:
            return self.strategies[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def params(self, name: str) -> dict[str, Any]:
        """One strategy's parameters as a plain dict (what a strategy function receives)."""
        return plain(self.strategies[name])  # type: ignore[no-any-return]

    def to_plain(self) -> dict[str, Any]:
        """The YAML form: chain_order, one mapping per strategy, hybrid."""
        return {
            "chain_order": list(self.chain_order),
            **{name: plain(p) for name, p in self.strategies.items()},
            "hybrid": plain(self.hybrid),
        }


def _breaking_strategy(value: Any, path: str) -> BreakingStrategy:
    data = mapping(value, path)
    known = ["chain_order", *PARAMS, "hybrid"]
    for key in data:
        if key not in known:
            raise ConfigError(f"{path}.{key}: unknown key; allowed: {', '.join(known)}")
    strategies = {
        name: section(params)(data.get(name), f"{path}.{name}") for name, params in PARAMS.items()
    }
    rest = {k: data[k] for k in ("chain_order", "hybrid") if k in data}
    base: BreakingStrategy = section(BreakingStrategy)(rest, path)
    return dataclasses.replace(base, strategies=strategies)


@dataclass(frozen=True)
class RetryPolicy:
    """How a call (an LLM summarizer, a tool) is retried."""

    max_attempts: int = setting(3, integer(1, 100))
    backoff_base_s: float = setting(1.0, number(0.0, None))
    max_delay_s: float = setting(30.0, number(0.0, None))
    timeout_s: float = setting(30.0, number(0.0, None, low_open=True))


def _retry_policies(value: Any, path: str) -> RetryPolicies:
    data = mapping(value, path)
    default = section(RetryPolicy)(data.get("default"), f"{path}.default")
    base = plain(default)
    tools = {}
    for name, item in data.items():
        if name == "default":
            continue
        merged = {**base, **mapping(item, f"{path}.{name}")}
        tools[str(name)] = section(RetryPolicy)(merged, f"{path}.{name}")
    return RetryPolicies(default=default, tools=tools)


@dataclass(frozen=True)
class RetryPolicies:
    """`default` plus per-tool-name policies (each merged over `default`)."""

    default: RetryPolicy = field(default_factory=RetryPolicy)
    tools: dict[str, RetryPolicy] = field(default_factory=dict)

    def for_tool(self, name: str | None) -> RetryPolicy:
        """The policy for a tool name, else the default."""
        return self.tools.get(name or "", self.default)

    def to_plain(self) -> dict[str, Any]:
        """The YAML form: `default` beside the tool names."""
        return {"default": plain(self.default), **{k: plain(v) for k, v in self.tools.items()}}


@dataclass(frozen=True)
class Summarizer:
    """Which summarizer compaction uses: `extractive` (offline) or `llm` (OpenAI-compatible)."""

    name: str = setting("extractive", choice(_summarizer_names))
    model: str | None = setting(None, text())
    url: str | None = setting(None, text())


@dataclass(frozen=True)
class Embedder:
    """Which embedder scores relevance and coherence: a name in `embedders.EMBEDDERS`."""

    name: str = setting(DEFAULT_EMBEDDER, choice(_embedder_names))
    model: str | None = setting(None, text())
    cache: bool = setting(True, boolean)


@dataclass(frozen=True)
class Config(BudgetConfig):
    """The effective configuration; `source` is the file it came from (None = defaults only).
    Its first keys, the budget's, are `BudgetConfig`'s (`ctxkit.budget.limits`)."""

    # built per Config, so a strategy registered after import has its section
    breaking_strategy: BreakingStrategy = field(
        default_factory=BreakingStrategy, metadata={"parse": _breaking_strategy, "help": ""}
    )
    recovery_mode: str = field(
        default_factory=_default_recovery, metadata={"parse": choice(_recovery_modes), "help": ""}
    )
    handover_tokens: int = setting(500, integer(1))
    retry_policies: RetryPolicies = setting(RetryPolicies(), _retry_policies)
    summarizer: Summarizer = setting(Summarizer(), section(Summarizer))
    embedder: Embedder = setting(Embedder(), section(Embedder))
    priority_areas: tuple[str, ...] = setting((), str_list)
    source: str | None = field(default=None, compare=False, metadata={"internal": True})

    def to_dict(self) -> dict[str, Any]:
        """The `context_config` mapping (plain types; what `config --show` prints)."""
        return plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Config:
        """Check and load a `{context_config: {...}}` mapping; errors name the key path."""
        prefix = f"{source}: " if source else ""
        try:
            top = mapping(data, "<top level>")
            for key in top:
                if key != ROOT:
                    raise ConfigError(f"{key}: unknown key; allowed: {ROOT}")
            config: Config = section(Config)(top.get(ROOT), ROOT)
            _check_thresholds(config)
        except ConfigError as exc:
            raise ConfigError(prefix + str(exc)) from None
        return dataclasses.replace(config, source=source)

    def with_overrides(self, **flags: Any) -> Config:
        """A copy with flag values applied (None = not given), checked like the file.

        Keys are top-level names (`min_limit=4000`), dotted paths
        (`**{"breaking_strategy.offload.threshold_bytes": 8192}`) or `chain_order`.
        """
        data = self.to_dict()
        changed = False
        for key, value in flags.items():
            if value is None:
                continue
            path = "breaking_strategy.chain_order" if key == "chain_order" else key
            _set_path(data, path.split("."), plain(value))
            changed = True
        if not changed:
            return self
        config = Config.from_dict({ROOT: data}, source=None)
        return dataclasses.replace(config, source=self.source)


def _check_thresholds(config: Config) -> None:
    w, c, b = config.thresholds.warn, config.thresholds.compact, config.thresholds.block
    if w > c:
        raise ConfigError(
            f"{ROOT}.warning_threshold: {w!r} is above compact_threshold {c!r}; "
            "allowed: warning_threshold <= compact_threshold <= block_threshold <= 1"
        )
    if b < c:
        raise ConfigError(
            f"{ROOT}.block_threshold: {b!r} is below compact_threshold {c!r}; "
            "allowed: warning_threshold <= compact_threshold <= block_threshold <= 1"
        )


def _set_path(data: dict[str, Any], keys: list[str], value: Any) -> None:
    node = data
    for i, key in enumerate(keys[:-1]):
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            where = ".".join([ROOT, *keys[: i + 1]])
            raise ConfigError(f"{where}: unknown key; allowed: {', '.join(map(str, node))}")
        node = nxt
    node[keys[-1]] = value


# --- loading ---------------------------------------------------------------------------------


def load_config(path: str | None = None) -> Config:
    """Load `path`, or ./ctxkit.yaml when present, else the defaults.

    >>> load_config(None).min_limit
    3500
    """
    if path is None:
        if not os.path.exists(DEFAULT_PATH):
            return Config()
        path = DEFAULT_PATH
    import yaml

    from ctxkit.fileio import read_file_limited

    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such config file")
    try:
        text = read_file_limited(path).decode("utf-8")
    except InputError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.problem}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    if data is None:
        return dataclasses.replace(Config(), source=path)
    return Config.from_dict(data, source=path)


DUMP_FORMATS = ("yaml", "json")


def dump_config(config: Config, fmt: str = "yaml") -> str:
    """The effective configuration as YAML or JSON text."""
    data = {ROOT: config.to_dict()}
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


def default_config_text() -> str:
    """The commented default file that `ctxkit config --init` writes."""
    d = Config()
    bs = d.breaking_strategy
    r = d.retry_policies.default
    return f"""\
# ctxkit configuration (the spec's context_config). Every value below is the default, what
# the commands use with no file, so writing this file changes nothing; delete what you do not
# change. null means unset. Command-line flags override this file.
{ROOT}:
  # The budget, in tokens. With default_limit unset (null), each log is checked against its
  # own target: the model it records under the budget of the agent that wrote it (Claude Code
  # sends up to window - 3k), else the model's effective limit (window - buffer - max output).
  # A number (e.g. 5000) holds every log to that policy limit; the smaller of it and the
  # model's effective limit binds. --limit, --agent and --llm give a policy limit too.
  default_limit: null
  # Policy limits from this file (default_limit, per_llm, agents) never go below min_limit.
  min_limit: {d.min_limit}
  # Thresholds, as fractions of the limit in force: warn, compact, block; above 1.0 = overflow.
  # compact_threshold unset (null): 0.95, but against a coding agent's own budget one call's
  # growth before the agent compacts itself (warn no later, block halfway from it to 1.0).
  warning_threshold: {d.warning_threshold}
  compact_threshold: null
  block_threshold: {d.block_threshold}
  # Limits per LLM type (--llm TYPE); follow_default: true means "as default_limit" (unset:
  # no policy limit).
  per_llm: []
  #  - type: gpt-4
  #    limit: 6000
  #  - type: claude
  #    follow_default: true
  # Limits per agent (--agent NAME); priority 1 (P1) agents get 20% more.
  agents:
    verification:
      limit: {d.agents["verification"].limit}
      priority: null
    coding:
      limit: {d.agents["coding"].limit}
      priority: null
  # Budget overrides per model and per provider (context_window, max_output_tokens,
  # buffer_tokens, tokenizer); they win over the built-in models table.
  models: {{}}
  #  my-finetune:
  #    context_window: 32768
  #    max_output_tokens: 4096
  providers: {{}}
  #  anthropic:
  #    buffer_tokens: 4096
{_render_breaking_strategy(bs)}  # When no strategy reaches the target: {' | '.join(_recovery_modes())}
  recovery_mode: {d.recovery_mode}
  handover_tokens: {d.handover_tokens}
  # Retries for LLM and tool calls: default, plus entries named by tool (merged over default).
  retry_policies:
    default:
      max_attempts: {r.max_attempts}
      backoff_base_s: {r.backoff_base_s}
      max_delay_s: {r.max_delay_s}
      timeout_s: {r.timeout_s}
  #  web_search:
  #    max_attempts: 5
  summarizer:
    name: {d.summarizer.name}   # {' | '.join(_summarizer_names())} (llm: an OpenAI-compatible endpoint)
    model: null
    url: null
  embedder:
    name: {d.embedder.name}   # static (distilled MiniLM) | lexical (BM25) | minilm | auto (minilm, else lexical)
    model: null
    cache: true
  # Extra text for the relevance query (topics that must stay in view).
  priority_areas: []
{_render_formats()}"""


def _render_formats() -> str:
    """Comment lines naming the transcript formats, from the format registry."""
    import textwrap

    from ctxkit.formats import FORMATS

    text = ("Transcripts are read in any of these formats, detected per file (--from forces one, --to "
            "writes another): " + ", ".join(sorted(FORMATS)) + ".")
    return "".join(f"# {line}\n" for line in textwrap.wrap(text, 94, break_on_hyphens=False))


def _render_breaking_strategy(bs: BreakingStrategy) -> str:
    """The `breaking_strategy` block of the default file, from the strategy registry: every
    strategy's parameters with their defaults and help."""
    chain = ", ".join(bs.chain_order)
    lines = [
        "  breaking_strategy:",
        "    # Strategies run in this order until the transcript fits; most recoverable first.",
        f"    chain_order: [{chain}]",
    ]
    for name, params in [*bs.strategies.items(), ("hybrid", bs.hybrid)]:
        lines.append(f"    {name}:")
        lines.extend(_render_fields(params, "      "))
    return "\n".join(lines) + "\n"


def _render_fields(record: Any, indent: str) -> list[str]:
    out = []
    for f in fields(record):
        value = getattr(record, f.name)
        note = f.metadata.get("help", "")
        comment = f"  # {note}" if note else ""
        if dataclasses.is_dataclass(value):
            out.append(f"{indent}{f.name}:{comment}")
            out.extend(_render_fields(value, indent + "  "))
        else:
            out.append(f"{indent}{f.name}: {value}{comment}")
    return out

