"""The YAML configuration (the spec's `context_config`) loaded into frozen dataclasses.

Layout (YAML keys = attribute names; every default is the spec's):

    Config                                  context_config:
      min_limit: int = 3500                   global floor for policy limits (raise, never undercut)
      default_limit: int = 5000               policy limit when no agent / per_llm rule applies
      warning_threshold: float = 0.80         thresholds are fractions of the limit in force
      compact_threshold: float = 0.95
      block_threshold: float = 0.98
      per_llm: tuple[PerLLM, ...] = ()        PerLLM(type, limit | None, follow_default)
      agents: dict[str, AgentPolicy]          AgentPolicy(limit, priority); verification 4000,
                                              coding 5000; a P1 agent gets +20%
      models: dict[str, ModelOverride]        per-model budget overrides (context_window,
      providers: dict[str, ModelOverride]     max_output_tokens, buffer_tokens, tokenizer)
      breaking_strategy: BreakingStrategy
        chain_order: tuple[str, ...]          default: offload, summarize_old,
                                              mask_observations, content_type_chunking,
                                              prioritize_recent, discard_low_rel
                                              ("hybrid" stands for this default chain)
        summarize_old: SummarizeOld           old_threshold 0.6, summary_length 300, min_coherence 0.7
        prioritize_recent: PrioritizeRecent   recent_bias 0.2, rel_threshold 0.5, priority_boost 1.5
        content_type_chunking: ContentTypeChunking
          compress_ratios: CompressRatios     code 0.7, text 0.5, log 0.4, plan_ref 1.0, other 0.6
        discard_low_rel: DiscardLowRel        discard_percent 0.3, placeholder_detail brief|linked,
                                              min_coherence 0.6
        offload: Offload                      threshold_bytes 4096, preview_chars 200
        mask_observations: MaskObservations   keep_last_turns 3
        hybrid: Hybrid                        max_iterations 3
      recovery_mode: str = "fresh_start"      fresh_start | truncate | error
      handover_tokens: int = 500              size of the fresh_start handover
      retry_policies: RetryPolicies           default RetryPolicy(max_attempts 3, backoff_base_s 1,
                                              max_delay_s 30, timeout_s 30) + per tool name
      summarizer: Summarizer                  name extractive | llm, model, url
      embedder: Embedder                      name auto | minilm | lexical, model, cache
      priority_areas: tuple[str, ...] = ()    extra text for the relevance query

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
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ctxkit.compaction.recovery import RECOVERY_MODES
from ctxkit.errors import ConfigError
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES

DEFAULT_PATH = "ctxkit.yaml"
ROOT = "context_config"
STRATEGY_NAMES = tuple(STRATEGIES)
DEFAULT_CHAIN_ORDER = DEFAULT_CHAIN
SUMMARIZERS = ("extractive", "llm")
EMBEDDERS = ("auto", "minilm", "lexical")
PLACEHOLDER_DETAILS = ("brief", "linked")

Parser = Callable[[Any, str], Any]


# --- value parsers: each takes (value, key path) and returns the checked value -------------


def _fail(path: str, value: Any, problem: str, allowed: str) -> ConfigError:
    return ConfigError(f"{path}: {_show(value)} {problem}; allowed: {allowed}")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _int(low: int = 0, high: int | None = None) -> Parser:
    allowed = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(path, value, "is not an integer", allowed)
        if value < low or (high is not None and value > high):
            raise _fail(path, value, "is out of range", allowed)
        return value

    return parse


def _number(low: float, high: float | None, *, low_open: bool = False) -> Parser:
    if high is None:
        allowed = f"a number {'>' if low_open else '>='} {low:g}"
    elif low_open:
        allowed = f"a number above {low:g} and up to {high:g}"
    else:
        allowed = f"a number from {low:g} to {high:g}"

    def parse(value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, value, "is not a number", allowed)
        if not math.isfinite(value):
            raise _fail(path, value, "is not a finite number", allowed)
        bad_low = value <= low if low_open else value < low
        if bad_low or (high is not None and value > high):
            raise _fail(path, value, "is out of range", allowed)
        return float(value)

    return parse


def _choice(options: tuple[str, ...]) -> Parser:
    allowed = ", ".join(options)

    def parse(value: Any, path: str) -> str:
        if value not in options:
            raise _fail(path, value, "is not a known choice", allowed)
        return str(value)

    return parse


def _text(optional: bool = True) -> Parser:
    def parse(value: Any, path: str) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise _fail(
                path, value, "is not a string", "a string" + (" or null" if optional else "")
            )
        return value

    return parse


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, value, "is not a boolean", "true or false")
    return value


def _optional(inner: Parser) -> Parser:
    def parse(value: Any, path: str) -> Any:
        return None if value is None else inner(value, path)

    return parse


def _priority(value: Any, path: str) -> int | None:
    if value is None:
        return None
    text = str(value).strip().upper()
    if isinstance(value, bool) or text.lstrip("P") not in ("1", "2", "3"):
        raise _fail(path, value, "is not a priority", "1, 2, 3, P1, P2, P3 or null")
    return int(text.lstrip("P"))


def _strategy_list(value: Any, path: str) -> tuple[str, ...]:
    names = (*STRATEGY_NAMES, "hybrid")
    allowed = "a list of " + ", ".join(names)
    if not isinstance(value, (list, tuple)):
        raise _fail(path, value, "is not a list", allowed)
    for i, name in enumerate(value):
        if name not in names:
            raise _fail(f"{path}[{i}]", name, "is not a strategy", ", ".join(names))
    if len(set(value)) != len(value):
        raise _fail(path, list(value), "names a strategy twice", allowed + ", each at most once")
    return tuple(value)


def _str_list(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _fail(path, value, "is not a list of strings", "a list of strings")
    return tuple(value)


def _mapping(data: Any, path: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _fail(path, data, "is not a mapping", "a mapping of keys to values")
    return data


def _section(cls: type) -> Parser:
    """Parse a mapping into `cls`, merging over its defaults and rejecting unknown keys."""

    def parse(value: Any, path: str) -> Any:
        data = _mapping(value, path)
        known = {f.name: f for f in fields(cls) if not f.metadata.get("internal")}
        kwargs: dict[str, Any] = {}
        for key, item in data.items():
            spec = known.get(str(key))
            if spec is None:
                raise ConfigError(f"{path}.{key}: unknown key; allowed: {', '.join(known)}")
            kwargs[str(key)] = spec.metadata["parse"](item, f"{path}.{key}")
        return cls(**kwargs)

    return parse


def _named_map(parse_item: Parser) -> Parser:
    def parse(value: Any, path: str) -> dict[str, Any]:
        data = _mapping(value, path)
        return {str(k): parse_item(v, f"{path}.{k}") for k, v in data.items()}

    return parse


def _f(default: Any, parse: Parser) -> Any:
    """A dataclass field with its default and its parser."""
    if isinstance(default, (dict, list)) or dataclasses.is_dataclass(default):
        return field(default_factory=lambda: _copy(default), metadata={"parse": parse})
    return field(default=default, metadata={"parse": parse})


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


# --- the sections ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SummarizeOld:
    """The oldest `old_threshold` of the history becomes one summary of `summary_length` tokens."""

    old_threshold: float = _f(0.6, _number(0.0, 1.0))
    summary_length: int = _f(300, _int(1))
    min_coherence: float = _f(0.7, _number(0.0, 1.0))


@dataclass(frozen=True)
class PrioritizeRecent:
    """Keep the last `recent_bias` of units plus units at least `rel_threshold` relevant."""

    recent_bias: float = _f(0.2, _number(0.0, 1.0))
    rel_threshold: float = _f(0.5, _number(0.0, 1.0))
    priority_boost: float = _f(1.5, _number(0.0, None))


@dataclass(frozen=True)
class CompressRatios:
    """Target size of each content type after chunking, as a fraction (1.0 = verbatim)."""

    code: float = _f(0.7, _number(0.0, 1.0))
    text: float = _f(0.5, _number(0.0, 1.0))
    log: float = _f(0.4, _number(0.0, 1.0))
    plan_ref: float = _f(1.0, _number(0.0, 1.0))
    other: float = _f(0.6, _number(0.0, 1.0))

    def ratio_for(self, kind: str) -> float:
        """The ratio for a content type; types without their own ratio use `other`."""
        return float(getattr(self, kind, self.other))


@dataclass(frozen=True)
class ContentTypeChunking:
    """Compress each unit by its content type."""

    compress_ratios: CompressRatios = _f(CompressRatios(), _section(CompressRatios))


@dataclass(frozen=True)
class DiscardLowRel:
    """Drop the least relevant `discard_percent` of units behind placeholders."""

    discard_percent: float = _f(0.3, _number(0.0, 1.0))
    placeholder_detail: str = _f("brief", _choice(PLACEHOLDER_DETAILS))
    min_coherence: float = _f(0.6, _number(0.0, 1.0))


@dataclass(frozen=True)
class Offload:
    """Tool results above `threshold_bytes` go to the archive behind a preview stub."""

    threshold_bytes: int = _f(4096, _int(1))
    preview_chars: int = _f(200, _int(0))


@dataclass(frozen=True)
class MaskObservations:
    """Tool outputs older than the last `keep_last_turns` turns become placeholders."""

    keep_last_turns: int = _f(3, _int(0))


@dataclass(frozen=True)
class Hybrid:
    """The chain itself, repeated at most `max_iterations` times."""

    max_iterations: int = _f(3, _int(1, 100))


@dataclass(frozen=True)
class BreakingStrategy:
    """The compaction chain and every strategy's parameters."""

    chain_order: tuple[str, ...] = _f(DEFAULT_CHAIN_ORDER, _strategy_list)
    summarize_old: SummarizeOld = _f(SummarizeOld(), _section(SummarizeOld))
    prioritize_recent: PrioritizeRecent = _f(PrioritizeRecent(), _section(PrioritizeRecent))
    content_type_chunking: ContentTypeChunking = _f(
        ContentTypeChunking(), _section(ContentTypeChunking)
    )
    discard_low_rel: DiscardLowRel = _f(DiscardLowRel(), _section(DiscardLowRel))
    offload: Offload = _f(Offload(), _section(Offload))
    mask_observations: MaskObservations = _f(MaskObservations(), _section(MaskObservations))
    hybrid: Hybrid = _f(Hybrid(), _section(Hybrid))

    def params(self, name: str) -> dict[str, Any]:
        """One strategy's parameters as a plain dict (what a strategy function receives)."""
        return _plain(getattr(self, name))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class RetryPolicy:
    """How a call (an LLM summarizer, a tool) is retried."""

    max_attempts: int = _f(3, _int(1, 100))
    backoff_base_s: float = _f(1.0, _number(0.0, None))
    max_delay_s: float = _f(30.0, _number(0.0, None))
    timeout_s: float = _f(30.0, _number(0.0, None, low_open=True))


def _retry_policies(value: Any, path: str) -> RetryPolicies:
    data = _mapping(value, path)
    default = _section(RetryPolicy)(data.get("default"), f"{path}.default")
    base = _plain(default)
    tools = {}
    for name, item in data.items():
        if name == "default":
            continue
        merged = {**base, **_mapping(item, f"{path}.{name}")}
        tools[str(name)] = _section(RetryPolicy)(merged, f"{path}.{name}")
    return RetryPolicies(default=default, tools=tools)


@dataclass(frozen=True)
class RetryPolicies:
    """`default` plus per-tool-name policies (each merged over `default`)."""

    default: RetryPolicy = field(default_factory=RetryPolicy)
    tools: dict[str, RetryPolicy] = field(default_factory=dict)

    def for_tool(self, name: str | None) -> RetryPolicy:
        """The policy for a tool name, else the default."""
        return self.tools.get(name or "", self.default)


@dataclass(frozen=True)
class Summarizer:
    """Which summarizer compaction uses: `extractive` (offline) or `llm` (OpenAI-compatible)."""

    name: str = _f("extractive", _choice(SUMMARIZERS))
    model: str | None = _f(None, _text())
    url: str | None = _f(None, _text())


@dataclass(frozen=True)
class Embedder:
    """Which embedder scores relevance: `auto` (minilm, else lexical), `minilm`, `lexical`."""

    name: str = _f("auto", _choice(EMBEDDERS))
    model: str | None = _f(None, _text())
    cache: bool = _f(True, _bool)


@dataclass(frozen=True)
class AgentPolicy:
    """An agent's policy limit; a P1 agent gets 20% more."""

    limit: int = _f(5000, _int(1))
    priority: int | None = _f(None, _priority)


def _agent(value: Any, path: str) -> AgentPolicy:
    if isinstance(value, int) and not isinstance(value, bool):
        return AgentPolicy(limit=_int(1)(value, path))
    data = _mapping(value, path)
    if "limit" not in data:
        raise ConfigError(
            f"{path}: missing key limit; allowed: an integer limit, or a mapping with limit and priority"
        )
    return _section(AgentPolicy)(data, path)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PerLLM:
    """A limit for one LLM type; `follow_default` means "use default_limit"."""

    type: str = _f("", _text(optional=False))
    limit: int | None = _f(None, _optional(_int(1)))
    follow_default: bool = _f(False, _bool)


def _per_llm(value: Any, path: str) -> tuple[PerLLM, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail(
            path, value, "is not a list", "a list of {type, limit} or {type, follow_default: true}"
        )
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        entry = _section(PerLLM)(item, where)
        if not entry.type:
            raise ConfigError(
                f"{where}: missing key type; allowed: a mapping with type and limit or follow_default"
            )
        if entry.limit is None and not entry.follow_default:
            raise ConfigError(
                f"{where}: neither limit nor follow_default; allowed: limit: <integer> or follow_default: true"
            )
        out.append(entry)
    return tuple(out)


@dataclass(frozen=True)
class ModelOverride:
    """Budget values for one model or provider; unset values fall through to the next source."""

    context_window: int | None = _f(None, _optional(_int(1)))
    max_output_tokens: int | None = _f(None, _optional(_int(0)))
    buffer_tokens: int | None = _f(None, _optional(_int(0)))
    tokenizer: str | None = _f(None, _text())


DEFAULT_AGENTS = {"verification": AgentPolicy(limit=4000), "coding": AgentPolicy(limit=5000)}


@dataclass(frozen=True)
class Config:
    """The effective configuration; `source` is the file it came from (None = defaults only)."""

    min_limit: int = _f(3500, _int(1))
    default_limit: int = _f(5000, _int(1))
    warning_threshold: float = _f(0.80, _number(0.0, 1.0, low_open=True))
    compact_threshold: float = _f(0.95, _number(0.0, 1.0, low_open=True))
    block_threshold: float = _f(0.98, _number(0.0, 1.0, low_open=True))
    per_llm: tuple[PerLLM, ...] = _f((), _per_llm)
    agents: dict[str, AgentPolicy] = _f(DEFAULT_AGENTS, _named_map(_agent))
    models: dict[str, ModelOverride] = _f({}, _named_map(_section(ModelOverride)))
    providers: dict[str, ModelOverride] = _f({}, _named_map(_section(ModelOverride)))
    breaking_strategy: BreakingStrategy = _f(BreakingStrategy(), _section(BreakingStrategy))
    recovery_mode: str = _f("fresh_start", _choice(RECOVERY_MODES))
    handover_tokens: int = _f(500, _int(1))
    retry_policies: RetryPolicies = _f(RetryPolicies(), _retry_policies)
    summarizer: Summarizer = _f(Summarizer(), _section(Summarizer))
    embedder: Embedder = _f(Embedder(), _section(Embedder))
    priority_areas: tuple[str, ...] = _f((), _str_list)
    source: str | None = field(default=None, compare=False, metadata={"internal": True})

    def to_dict(self) -> dict[str, Any]:
        """The `context_config` mapping (plain types; what `config --show` prints)."""
        return _plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Config:
        """Check and load a `{context_config: {...}}` mapping; errors name the key path."""
        prefix = f"{source}: " if source else ""
        try:
            top = _mapping(data, "<top level>")
            for key in top:
                if key != ROOT:
                    raise ConfigError(f"{key}: unknown key; allowed: {ROOT}")
            config: Config = _section(Config)(top.get(ROOT), ROOT)
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
            _set_path(data, path.split("."), _plain(value))
            changed = True
        if not changed:
            return self
        config = Config.from_dict({ROOT: data}, source=None)
        return dataclasses.replace(config, source=self.source)


def _check_thresholds(config: Config) -> None:
    w, c, b = config.warning_threshold, config.compact_threshold, config.block_threshold
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


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and maps as plain dicts and lists (for YAML, JSON and overrides)."""
    if isinstance(value, RetryPolicies):
        return {"default": _plain(value.default), **{k: _plain(v) for k, v in value.tools.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in fields(value)
            if not f.metadata.get("internal")
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# --- loading ---------------------------------------------------------------------------------


def load_config(path: str | None = None) -> Config:
    """Load `path`, or ./ctxkit.yaml when present, else the defaults.

    >>> load_config(None).default_limit
    5000
    """
    if path is None:
        if not os.path.exists(DEFAULT_PATH):
            return Config()
        path = DEFAULT_PATH
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
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
    ratios = bs.content_type_chunking.compress_ratios
    chain = ", ".join(bs.chain_order)
    return f"""\
# ctxkit configuration (the spec's context_config). Every value below is the default;
# delete what you do not change. Command-line flags override this file.
{ROOT}:
  # Policy limits, in tokens. The limit in force is the smaller of the policy limit and the
  # model's effective limit (window - buffer - max output). A policy limit never goes below
  # min_limit. Policy limits apply when this file is loaded or --agent/--llm/--limit is given.
  min_limit: {d.min_limit}
  default_limit: {d.default_limit}
  # Thresholds, as fractions of the limit in force: warn, compact, block; above 1.0 = overflow.
  warning_threshold: {d.warning_threshold}
  compact_threshold: {d.compact_threshold}
  block_threshold: {d.block_threshold}
  # Limits per LLM type (--llm TYPE); follow_default: true means "use default_limit".
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
  breaking_strategy:
    # Strategies run in this order until the transcript fits; most recoverable first.
    chain_order: [{chain}]
    summarize_old:
      old_threshold: {bs.summarize_old.old_threshold}      # oldest share of history summarized
      summary_length: {bs.summarize_old.summary_length}      # tokens
      min_coherence: {bs.summarize_old.min_coherence}      # undo the step below this coherence
    prioritize_recent:
      recent_bias: {bs.prioritize_recent.recent_bias}        # newest share always kept
      rel_threshold: {bs.prioritize_recent.rel_threshold}      # keep older units at least this relevant
      priority_boost: {bs.prioritize_recent.priority_boost}     # P1 relevance multiplier
    content_type_chunking:
      compress_ratios:            # target size per content type (1.0 = verbatim)
        code: {ratios.code}
        text: {ratios.text}
        log: {ratios.log}
        plan_ref: {ratios.plan_ref}
        other: {ratios.other}
    discard_low_rel:
      discard_percent: {bs.discard_low_rel.discard_percent}    # least relevant share dropped
      placeholder_detail: {bs.discard_low_rel.placeholder_detail}  # brief | linked (with archive refs)
      min_coherence: {bs.discard_low_rel.min_coherence}
    offload:
      threshold_bytes: {bs.offload.threshold_bytes}   # tool results above this go to the archive
      preview_chars: {bs.offload.preview_chars}
    mask_observations:
      keep_last_turns: {bs.mask_observations.keep_last_turns}
    hybrid:
      max_iterations: {bs.hybrid.max_iterations}
  # When no strategy reaches the target: fresh_start | truncate | error
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
    name: {d.summarizer.name}   # extractive (offline) | llm (OpenAI-compatible endpoint)
    model: null
    url: null
  embedder:
    name: {d.embedder.name}   # auto (minilm, else lexical) | minilm | lexical
    model: null
    cache: true
  # Extra text for the relevance query (topics that must stay in view).
  priority_areas: []
"""
