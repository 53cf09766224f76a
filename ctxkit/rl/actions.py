"""Actions: a named chain, its parameters and recovery mode, built in or loaded from a file."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxkit.budget import Thresholds
from ctxkit.compaction import RECOVERY_MODES, ChainOptions, expand_chain
from ctxkit.compaction.recovery import DEFAULT_RECOVERY
from ctxkit.errors import SettingsFileError
from ctxkit.strategies import DEFAULT_CHAIN, STRATEGIES

MODES = ("oneshot", "replay")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Action:
    """One way to compact: a chain of strategies, their parameters and a recovery mode."""

    name: str
    chain: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    recovery_mode: str = DEFAULT_RECOVERY

    def options(self, seed: int = 0) -> ChainOptions:
        """The chain options this action runs with."""
        return ChainOptions(
            chain=expand_chain(self.chain),
            params={k: dict(v) for k, v in self.params.items()},
            recovery_mode=self.recovery_mode,
            seed=seed,
        )

    def to_dict(self) -> dict[str, Any]:
        """{name, chain, params, recovery_mode}; params as a JSON string (one schema for all)."""
        return {
            "name": self.name,
            "chain": list(self.chain),
            "params": orjson.dumps(
                {k: dict(v) for k, v in self.params.items()}, option=orjson.OPT_SORT_KEYS
            ).decode(),
            "recovery_mode": self.recovery_mode,
        }

    @classmethod
    def from_dict(cls, d: Any, *, path: str | None = None, index: int | None = None) -> Action:
        """Validate one entry of an actions file: names, chain, params and recovery mode."""
        where = f"action {index + 1}" if index is not None else "action"

        def bad(problem: str) -> SettingsFileError:
            return SettingsFileError(path, None, f"{where}: {problem}")

        if not isinstance(d, Mapping):
            raise bad(f"expected a mapping with name and chain, got {type(d).__name__}")
        unknown = sorted(set(d) - {"name", "chain", "params", "recovery_mode"})
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; allowed: chain, name, params, recovery_mode")
        chain_value = d.get("chain")
        if isinstance(chain_value, str):
            chain_value = [c.strip() for c in chain_value.split(",") if c.strip()]
        if not chain_value or not isinstance(chain_value, list):
            raise bad("`chain` must be a non-empty list of strategy names")
        known = sorted([*STRATEGIES, "hybrid"])
        for name in chain_value:
            if name not in known:
                raise bad(f"unknown strategy {name!r} in chain; known: {', '.join(known)}")
        params = d.get("params") or {}
        if not isinstance(params, Mapping):
            raise bad("`params` must map strategy names to their parameters")
        for key, value in params.items():
            if key not in STRATEGIES:
                raise bad(f"params for unknown strategy {key!r}; known: {', '.join(STRATEGIES)}")
            if not isinstance(value, Mapping):
                raise bad(f"params of {key} must be a mapping")
        recovery = d.get("recovery_mode") or DEFAULT_RECOVERY
        if recovery not in RECOVERY_MODES:
            raise bad(f"unknown recovery_mode {recovery!r}; known: {', '.join(RECOVERY_MODES)}")
        name = str(d.get("name") or "+".join(chain_value))
        _check_params(
            params, lambda problem: SettingsFileError(path, None, f"{where} ({name}): {problem}")
        )
        return cls(
            name=name,
            chain=tuple(str(c) for c in chain_value),
            params={str(k): dict(v) for k, v in params.items()},
            recovery_mode=str(recovery),
        )


_CONFIG_PREFIX = "context_config.breaking_strategy."


def _check_params(
    params: Mapping[str, Mapping[str, Any]], bad: Callable[[str], SettingsFileError]
) -> None:
    """Check an action's params with the configuration's own rules (ranges, types, keys), so
    an actions file accepts exactly what ctxkit.yaml accepts."""
    from ctxkit.config.file import Config
    from ctxkit.errors import ConfigError

    for strategy, values in params.items():
        data = {"context_config": {"breaking_strategy": {strategy: dict(values)}}}
        try:
            Config.from_dict(data)
        except ConfigError as exc:
            problem = str(exc)
            if problem.startswith(_CONFIG_PREFIX):
                problem = "params." + problem[len(_CONFIG_PREFIX) :]
            raise bad(problem) from None


def builtin_actions() -> list[Action]:
    """Each strategy alone, the default chain, and a few parameter and recovery variants."""
    actions = [Action(name, (name,)) for name in STRATEGIES]
    actions += [
        Action("default", DEFAULT_CHAIN),
        Action("default:truncate", DEFAULT_CHAIN, recovery_mode="truncate"),
        Action(
            "summarize_old:short",
            ("summarize_old",),
            {"summarize_old": {"old_threshold": 0.8, "summary_length": 150}},
        ),
        # the summary capped at 60% of the history (the default takes what the goal needs):
        # the newest 40% stays verbatim
        Action(
            "summarize_old:recent",
            ("summarize_old",),
            {"summarize_old": {"old_threshold": 0.6}},
        ),
        Action(
            "mask_observations:keep1",
            ("mask_observations",),
            {"mask_observations": {"keep_last_turns": 1}},
        ),
        Action("offload:2k", ("offload",), {"offload": {"threshold_bytes": 2048}}),
        Action(
            "discard_low_rel:50",
            ("discard_low_rel",),
            {"discard_low_rel": {"discard_percent": 0.5}},
        ),
    ]
    return actions


def select_actions(path: str | None = None, names: Sequence[str] = ()) -> list[Action]:
    """The actions of `path` (default: the built-in set), only `names` when given, in the
    order given; an unknown name is a usage error that lists the known ones."""
    from ctxkit.errors import UsageError

    actions = load_actions(path) if path else builtin_actions()
    if not names:
        return actions
    by_name = {a.name: a for a in actions}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise UsageError(f"unknown action {missing[0]!r}; known: {', '.join(sorted(by_name))}")
    return [by_name[n] for n in dict.fromkeys(names)]


def load_actions(path: str) -> list[Action]:
    """Read a YAML or JSON list of actions ({name, chain, params, recovery_mode})."""
    import yaml

    from ctxkit.errors import InputError
    from ctxkit.fileio import read_file_limited

    try:
        data = yaml.safe_load(read_file_limited(path).decode("utf-8"))
    except InputError as exc:
        raise SettingsFileError(path, None, f"cannot read: {exc.problem}") from None
    except UnicodeDecodeError as exc:
        raise SettingsFileError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise SettingsFileError(
            path, line, f"not valid YAML or JSON: {getattr(exc, 'problem', exc)}"
        ) from None
    if isinstance(data, Mapping) and "actions" in data:
        data = data["actions"]
    if not isinstance(data, list) or not data:
        raise SettingsFileError(path, None, "expected a non-empty list of actions (or {actions: [...]})")
    actions = [Action.from_dict(d, path=path, index=i) for i, d in enumerate(data)]
    names = [a.name for a in actions]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SettingsFileError(path, None, f"action name {dupes[0]!r} is used twice; names must differ")
    return actions
