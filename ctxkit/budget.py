"""The token budget: model windows, output reserve, policy limits, thresholds and statuses.

    effective_limit = context_window - buffer_tokens - max_output_tokens
    limit in force  = min(policy limit, effective_limit)      (the output says which bound)

Each budget value resolves in this order: flag, per-model config (`models:`), per-provider config
(`providers:`), `models.toml`, default. Defaults: window 131072, buffer 8192 (never more than an
eighth of the window), output reserve floor(window / 4). A table's maximum output is reserved
as given but never more than half the window (gpt-4: 8192 window, 8192 max output -> 4096), so a
small model keeps room for its input; a flag or config value is taken exactly.

Policy limits (the spec's `min_limit`, `default_limit`, `agents`, `per_llm`) apply when a
config file is loaded or `--limit`, `--agent` or `--llm` is given; otherwise the model's own
effective limit binds, which is what `ctxkit guard file --model gpt-4o` means. `--limit N` is
taken exactly; a limit from the config (default_limit, an agent's, a per_llm entry's, with the
P1 agent uplift of 20%) is raised to `min_limit` when below it.

Statuses, as fractions of the limit in force: ok < warn (0.80) <= compact (0.95) <= block
(0.98); above 1.0 is overflow.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from ctxkit.config import Config, ModelOverride
from ctxkit.errors import UsageError
from ctxkit.tokens.loaders import DEFAULT_TOKENIZER

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_CONTEXT_WINDOW = 131072
DEFAULT_BUFFER_TOKENS = 8192
P1_AGENT_UPLIFT = 1.2
STATUSES = ("ok", "warn", "compact", "block", "overflow")
_RANK = {s: i for i, s in enumerate(STATUSES)}


# --- the models table -----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """One row of models.toml."""

    name: str
    provider: str
    context_window: int
    max_output_tokens: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER
    tokenizer_proxy: bool = False
    tokenizer_note: str = ""
    extended_context_window: int | None = None
    notes: str = ""
    aliases: tuple[str, ...] = ()
    input_per_mtok: float | None = None  # USD per million input tokens
    cached_input_per_mtok: float | None = None  # a prompt-cache read
    cache_write_per_mtok: float | None = None  # a prompt-cache write (Anthropic)
    output_per_mtok: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The row as `ctxkit models --format json` prints it."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__} | {
            "aliases": list(self.aliases)
        }


@lru_cache(maxsize=1)
def load_models() -> dict[str, ModelInfo]:
    """The bundled models table, by name."""
    text = resources.files("ctxkit").joinpath("models.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)["models"]
    return {
        name: ModelInfo(name=name, **{**row, "aliases": tuple(row.get("aliases", ()))})
        for name, row in table.items()
    }


@lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    return {alias: m.name for m in load_models().values() for alias in m.aliases}


# A vendor's dated snapshot of a model (`gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`) or its
# moving `-latest` pointer: the same window and prices as the model itself.
_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def find_model(name: str) -> tuple[ModelInfo | None, str]:
    """The table row for a model name and the name it matched as ("" when none).

    Names are strict: a row's name or one of its aliases, without a `provider/` prefix,
    optionally followed by a dated snapshot suffix or `-latest`. Nothing else matches: a typo
    is an error (`model_suggestions` says what was meant), never another model.
    """
    models = load_models()
    key = name.strip().lower()
    if "/" in key:
        key = key.rsplit("/", 1)[1]
    snapshot = _SNAPSHOT.match(key)
    for cand in (key, snapshot.group("base") if snapshot else None):
        if cand is None:
            continue
        canonical = cand if cand in models else _aliases().get(cand)
        if canonical is not None:
            return models[canonical], canonical
    return None, ""


def priced_model(name: str, flag: str = "--cost") -> ModelInfo:
    """The model a price flag names, with prices; an unknown or unpriced one is a usage error."""
    info, _ = find_model(name)
    if info is None:
        close = model_suggestions(name)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"{flag}: unknown model {name!r}{hint}")
    if info.input_per_mtok is None or info.output_per_mtok is None:
        raise UsageError(f"{flag}: models.toml lists no prices for {info.name}")
    return info


def model_suggestions(name: str, n: int = 3) -> list[str]:
    """The known model names (and aliases) closest to `name`, best first."""
    import difflib

    key = name.strip().lower().rsplit("/", 1)[-1]
    return difflib.get_close_matches(key, [*load_models(), *_aliases()], n=n, cutoff=0.6)


# --- thresholds and statuses ----------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """Fractions of the limit at which the status becomes warn, compact and block."""

    warn: float = 0.80
    compact: float = 0.95
    block: float = 0.98

    def bounds(self, limit: int) -> dict[str, int]:
        """The fewest tokens at which each status begins: warn, compact, block (integers, so
        `used >= bound` has no float drift at the boundary)."""
        return {
            "warn": math.ceil(limit * self.warn - 1e-9),
            "compact": math.ceil(limit * self.compact - 1e-9),
            "block": math.ceil(limit * self.block - 1e-9),
        }

    @classmethod
    def from_config(cls, config: Config) -> Thresholds:
        """The thresholds a configuration sets."""
        return cls(config.warning_threshold, config.compact_threshold, config.block_threshold)


def status_for(used_tokens: int, limit: int, thresholds: Thresholds = Thresholds()) -> str:
    """ok, warn, compact, block or overflow for `used_tokens` against `limit`."""
    if limit <= 0:
        return "overflow"
    if used_tokens > limit:
        return "overflow"
    bounds = thresholds.bounds(limit)
    for status in ("block", "compact", "warn"):
        if used_tokens >= bounds[status]:
            return status
    return "ok"


def status_rank(status: str) -> int:
    """Order of severity: ok 0 ... overflow 4."""
    return _RANK[status]


def compaction_goal(
    limit: int, target: int | None = None, thresholds: Thresholds = Thresholds()
) -> int:
    """The one compaction goal: `target` when given (never above the limit), else
    floor(limit * warn), so the guard does not fire again at once.

    `compact`, `replay`, `score-rl` and `bench` all aim here, from the library and the CLI alike.

    >>> compaction_goal(5000)
    4000
    >>> compaction_goal(5000, target=4500), compaction_goal(5000, target=9000)
    (4500, 5000)
    """
    if target is not None:
        return min(target, limit)
    return math.floor(limit * thresholds.warn)


def used_fraction(used_tokens: int, limit: int) -> float:
    """Share of the limit in use (inf when the limit is 0 or less)."""
    return used_tokens / limit if limit > 0 else math.inf


# --- the model's effective limit ------------------------------------------------------------


def effective_limit(context_window: int, buffer_tokens: int, max_output_tokens: int) -> int:
    """context_window - buffer_tokens - max_output_tokens."""
    return context_window - buffer_tokens - max_output_tokens


def default_max_output(context_window: int) -> int:
    """floor(window / 4): the reserve when nothing names a maximum output."""
    return context_window // 4


def default_buffer(context_window: int) -> int:
    """8192, but never more than an eighth of the window."""
    return min(DEFAULT_BUFFER_TOKENS, context_window // 8)


@dataclass(frozen=True)
class ModelBudget:
    """A model's window arithmetic, with where each value came from."""

    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    buffer_tokens: int
    effective_limit: int
    tokenizer: str
    tokenizer_note: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def resolve_model_budget(
    model: str | None = None,
    *,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    buffer_tokens: int | None = None,
    tokenizer: str | None = None,
    config: Config | None = None,
) -> ModelBudget:
    """Resolve window, output reserve, buffer and tokenizer: flags, per-model config,
    per-provider config, models.toml, default.

    >>> resolve_model_budget("gpt-4o").effective_limit
    103424
    """
    config = config or Config()
    info, matched = find_model(model) if model else (None, "")
    given = (context_window, max_output_tokens, buffer_tokens)
    name = model or ("custom" if any(v is not None for v in given) else "default")
    model_cfg = _lookup(config.models, model, matched)
    if model and info is None and model_cfg is None and context_window is None:
        close = model_suggestions(model)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise UsageError(
            f"unknown model {model!r}; {hint}`ctxkit models` lists the known ones. Give "
            "--window (and --max-output), or add it under context_config.models"
        )
    provider = info.provider if info else (model.split("/", 1)[0] if model and "/" in model else "")
    provider_cfg = config.providers.get(provider) if provider else None
    notes: list[str] = []
    if info is not None and matched != (model or "").lower():
        notes.append(f"{model} matched as {matched}")
    sources: dict[str, str] = {}

    def pick(key: str, flag: Any, table: Any) -> Any:
        for value, src in (
            (flag, "flag"),
            (getattr(model_cfg, key, None), f"config models.{model}"),
            (getattr(provider_cfg, key, None), f"config providers.{provider}"),
            (table, "models.toml"),
        ):
            if value is not None:
                sources[key] = src
                return value
        sources[key] = "default"
        return None

    window = pick("context_window", context_window, info.context_window if info else None)
    window = DEFAULT_CONTEXT_WINDOW if window is None else int(window)
    output = pick("max_output_tokens", max_output_tokens, info.max_output_tokens if info else None)
    if output is None:
        output = default_max_output(window)
    elif sources["max_output_tokens"] == "models.toml" and output > window // 2:
        notes.append(
            f"max output {output} reserved as {window // 2} (half the {window}-token window)"
        )
        output = window // 2
    buffer = pick("buffer_tokens", buffer_tokens, None)
    buffer = default_buffer(window) if buffer is None else int(buffer)
    tok = pick("tokenizer", tokenizer, info.tokenizer if info else None) or DEFAULT_TOKENIZER
    note = ""
    if info is not None and info.tokenizer_proxy and sources["tokenizer"] == "models.toml":
        note = info.tokenizer_note or f"no public tokenizer; {tok} is a proxy"
    if info is not None and info.notes:
        notes.append(info.notes)
    limit = effective_limit(window, buffer, int(output))
    if limit <= 0:
        raise UsageError(
            f"{name}: effective limit {window} - {buffer} (buffer) - {output} (max output) = "
            f"{limit}, no room for input; lower --buffer or --max-output, or raise --window"
        )
    return ModelBudget(
        name=name,
        provider=provider,
        context_window=window,
        max_output_tokens=int(output),
        buffer_tokens=buffer,
        effective_limit=limit,
        tokenizer=tok,
        tokenizer_note=note,
        sources=sources,
        notes=tuple(notes),
    )


def _lookup(
    table: dict[str, ModelOverride], model: str | None, matched: str
) -> ModelOverride | None:
    if not model:
        return None
    for key in (model, model.lower(), matched):
        if key and key in table:
            return table[key]
    return None


# --- policy limits --------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyLimit:
    """The policy limit and the rule that set it (e.g. "agent verification")."""

    limit: int
    rule: str
    floored: bool = False


def policy_applies(
    config: Config, *, limit: int | None = None, agent: str | None = None, llm: str | None = None
) -> bool:
    """Policy limits are in play when a config file is loaded or a policy flag is given."""
    return config.source is not None or limit is not None or bool(agent) or bool(llm)


def resolve_policy(
    config: Config,
    *,
    limit: int | None = None,
    agent: str | None = None,
    llm: str | None = None,
) -> PolicyLimit | None:
    """The policy limit in play (None when no policy applies): `--limit` exactly, else the
    smaller of the agent's and the LLM type's limits, else default_limit; config limits are
    raised to min_limit."""
    if not policy_applies(config, limit=limit, agent=agent, llm=llm):
        return None
    if limit is not None:
        if limit <= 0:
            raise UsageError(f"--limit {limit}: the limit must be a positive number of tokens")
        return PolicyLimit(limit, "--limit")
    found: list[tuple[int, str]] = []
    if agent:
        policy = config.agents.get(agent)
        if policy is None:
            known = ", ".join(sorted(config.agents)) or "(none configured)"
            raise UsageError(
                f"unknown agent {agent!r}; known: {known} (add it under context_config.agents)"
            )
        if policy.priority == 1:
            found.append((math.floor(policy.limit * P1_AGENT_UPLIFT), f"agent {agent} (P1 +20%)"))
        else:
            found.append((policy.limit, f"agent {agent}"))
    if llm:
        entry = next((e for e in config.per_llm if e.type.lower() == llm.lower()), None)
        if entry is None:
            # like --agent: a typo must not pass silently for the default limit
            known = ", ".join(sorted(e.type for e in config.per_llm)) or "(none configured)"
            raise UsageError(
                f"unknown LLM type {llm!r}; known: {known} (add it under context_config.per_llm)"
            )
        if entry.follow_default or entry.limit is None:
            found.append((config.default_limit, f"per_llm {entry.type} (follows default_limit)"))
        else:
            found.append((entry.limit, f"per_llm {entry.type}"))
    if not found:
        found.append((config.default_limit, "default_limit"))
    value, rule = min(found, key=lambda item: item[0])
    if value < config.min_limit:
        return PolicyLimit(config.min_limit, f"{rule} {value}, raised to min_limit", floored=True)
    return PolicyLimit(value, rule)


# --- a target: model budget + policy --------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One model to fit: its window arithmetic, the policy limit and the limit in force."""

    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    buffer_tokens: int
    effective_limit: int
    policy_limit: int | None
    policy_rule: str
    limit: int
    bound_by: str  # "model" or "policy"
    tokenizer: str
    tokenizer_note: str = ""
    thresholds: Thresholds = Thresholds()
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def rule(self) -> str:
        """The rule that bound the limit, for people."""
        if self.bound_by == "policy":
            return f"policy: {self.policy_rule}"
        return "model: window - buffer - max output"

    def to_dict(self) -> dict[str, Any]:
        """Plain fields for JSON output."""
        return {
            "name": self.name,
            "provider": self.provider,
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "buffer_tokens": self.buffer_tokens,
            "effective_limit": self.effective_limit,
            "policy_limit": self.policy_limit,
            "policy_rule": self.policy_rule or None,
            "limit": self.limit,
            "bound_by": self.bound_by,
            "rule": self.rule,
            "tokenizer": self.tokenizer,
            "tokenizer_note": self.tokenizer_note or None,
            "thresholds": {
                "warn": self.thresholds.warn,
                "compact": self.thresholds.compact,
                "block": self.thresholds.block,
            },
            "sources": dict(self.sources),
        }


def resolve_target(
    model: str | None = None,
    *,
    config: Config | None = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    buffer_tokens: int | None = None,
    limit: int | None = None,
    agent: str | None = None,
    llm: str | None = None,
    tokenizer: str | None = None,
) -> Target:
    """The budget of one target: the model's effective limit, the policy limit, the smaller binds.

    >>> resolve_target(context_window=128000, buffer_tokens=8192, max_output_tokens=16384).limit
    103424
    """
    config = config or Config()
    mb = resolve_model_budget(
        model,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
        buffer_tokens=buffer_tokens,
        tokenizer=tokenizer,
        config=config,
    )
    policy = resolve_policy(config, limit=limit, agent=agent, llm=llm)
    in_force, bound_by = mb.effective_limit, "model"
    if policy is not None and policy.limit < mb.effective_limit:
        in_force, bound_by = policy.limit, "policy"
    return Target(
        name=mb.name,
        provider=mb.provider,
        context_window=mb.context_window,
        max_output_tokens=mb.max_output_tokens,
        buffer_tokens=mb.buffer_tokens,
        effective_limit=mb.effective_limit,
        policy_limit=policy.limit if policy else None,
        policy_rule=policy.rule if policy else "",
        limit=in_force,
        bound_by=bound_by,
        tokenizer=mb.tokenizer,
        tokenizer_note=mb.tokenizer_note,
        thresholds=Thresholds.from_config(config),
        sources=mb.sources,
        notes=mb.notes,
    )
