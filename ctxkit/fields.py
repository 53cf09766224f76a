"""Typed settings with their parsers: the building blocks of the YAML configuration.

A setting is a dataclass field that carries its default, a parser `(value, key path) -> value`
and a line of help. Sections (`section(cls)`) merge a mapping over a dataclass's defaults and
reject unknown keys. Strategies declare their parameters with these (`Params` in each strategy
module), so the configuration, its checks and `config --init` follow from the registry.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import field, fields
from typing import Any

from ctxkit.errors import ConfigError

Parser = Callable[[Any, str], Any]


# --- value parsers: each takes (value, key path) and returns the checked value -------------


def fail(path: str, value: Any, problem: str, allowed: str) -> ConfigError:
    return ConfigError(f"{path}: {show(value)} {problem}; allowed: {allowed}")


def show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def integer(low: int = 0, high: int | None = None) -> Parser:
    allowed = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(path, value, "is not an integer", allowed)
        if value < low or (high is not None and value > high):
            raise fail(path, value, "is out of range", allowed)
        return value

    return parse


def number(low: float, high: float | None, *, low_open: bool = False) -> Parser:
    if high is None:
        allowed = f"a number {'>' if low_open else '>='} {low:g}"
    elif low_open:
        allowed = f"a number above {low:g} and up to {high:g}"
    else:
        allowed = f"a number from {low:g} to {high:g}"

    def parse(value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(path, value, "is not a number", allowed)
        if not math.isfinite(value):
            raise fail(path, value, "is not a finite number", allowed)
        bad_low = value <= low if low_open else value < low
        if bad_low or (high is not None and value > high):
            raise fail(path, value, "is out of range", allowed)
        return float(value)

    return parse


def choice(options: Callable[[], Sequence[str]]) -> Parser:
    """One of the names a registry holds; the registry is asked when a value is parsed, so the
    configuration never imports the engine it configures."""

    def parse(value: Any, path: str) -> str:
        names = options()
        if value not in names:
            raise fail(path, value, "is not a known choice", ", ".join(names))
        return str(value)

    return parse


def text(optional: bool = True) -> Parser:
    def parse(value: Any, path: str) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise fail(
                path, value, "is not a string", "a string" + (" or null" if optional else "")
            )
        return value

    return parse


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise fail(path, value, "is not a boolean", "true or false")
    return value


def optional(inner: Parser) -> Parser:
    def parse(value: Any, path: str) -> Any:
        return None if value is None else inner(value, path)

    return parse


def str_list(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise fail(path, value, "is not a list of strings", "a list of strings")
    return tuple(value)


def mapping(data: Any, path: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise fail(path, data, "is not a mapping", "a mapping of keys to values")
    return data


def section(cls: type) -> Parser:
    """Parse a mapping into `cls`, merging over its defaults and rejecting unknown keys."""

    def parse(value: Any, path: str) -> Any:
        data = mapping(value, path)
        known = {f.name: f for f in fields(cls) if not f.metadata.get("internal")}
        kwargs: dict[str, Any] = {}
        for key, item in data.items():
            spec = known.get(str(key))
            if spec is None:
                raise ConfigError(f"{path}.{key}: unknown key; allowed: {', '.join(known)}")
            kwargs[str(key)] = spec.metadata["parse"](item, f"{path}.{key}")
        return cls(**kwargs)

    return parse


def named_map(parse_item: Parser) -> Parser:
    def parse(value: Any, path: str) -> dict[str, Any]:
        data = mapping(value, path)
        return {str(k): parse_item(v, f"{path}.{k}") for k, v in data.items()}

    return parse


def setting(default: Any, parse: Parser, help: str = "") -> Any:
    """A dataclass field with its default, its parser and a line of help (`config --init`)."""
    meta = {"parse": parse, "help": help}
    if isinstance(default, (dict, list)) or dataclasses.is_dataclass(default):
        return field(default_factory=lambda: _copy(default), metadata=meta)
    return field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value




def plain(value: Any) -> Any:
    """Dataclasses, tuples and maps as plain dicts and lists (for YAML, JSON and overrides);
    an object with `to_plain()` says its own form."""
    to_plain = getattr(value, "to_plain", None)
    if to_plain is not None and not isinstance(value, type):
        return to_plain()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name))
            for f in fields(value)
            if not f.metadata.get("internal")
        }
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
