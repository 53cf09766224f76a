"""Domain errors. The CLI turns `UsageError` into exit 2 and every other `CtxkitError` into exit 1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")


class CtxkitError(Exception):
    """Base class: a message for people, no traceback."""

    exit_code = 1


class UsageError(CtxkitError):
    """A bad flag or flag combination (exit 2)."""

    exit_code = 2


class InputError(CtxkitError):
    """Bad input: names the file, the line and what was expected."""

    def __init__(self, path: str | None, line: int | None, problem: str, snippet: str = ""):
        self.path = path or "<stdin>"
        self.line = line
        self.problem = problem
        self.snippet = snippet
        where = self.path if line is None else f"{self.path}:{line}"
        text = f"{where}: {problem}"
        if snippet:
            text += f" (starts with {snippet[:60]!r})"
        super().__init__(text)


class SettingsFileError(InputError):
    """A bad settings file other than the config (an `--actions` list): exit 2, as a config
    error is, with the file and line."""

    exit_code = 2


class ConfigError(CtxkitError):
    """A bad configuration key or value; names the key, the value and what is allowed."""

    exit_code = 2


class TokenizerError(CtxkitError):
    """A tokenizer that cannot be loaded (offline data missing, bad spec)."""

    exit_code = 2


class ArchiveError(CtxkitError):
    """The archive cannot be opened or a ref cannot be resolved."""


class BreakerFailed(CtxkitError):
    """Compaction could not reach the target and recovery_mode is `error`."""

    def __init__(self, message: str):
        super().__init__(f"BREAKER_FAILED: {message}")


def unknown_name(kind: str, name: str, known: object) -> CtxkitError:
    """The error for a registry miss: lists the known names."""
    names = ", ".join(sorted(known))  # type: ignore[call-overload]
    return UsageError(f"unknown {kind} {name!r}; known: {names}")


def registered(registry: Mapping[str, V], kind: str, name: str) -> V:
    """What `registry` holds under `name`; an unknown name is the error listing the known ones."""
    try:
        return registry[name]
    except KeyError:
        raise unknown_name(kind, name, registry) from None


class EmbedderError(CtxkitError):
    """An embedding model that cannot be loaded (missing path, no offline copy)."""

    exit_code = 2


class LLMError(CtxkitError):
    """The LLM summarizer endpoint failed for good (after retries) or answered nonsense."""
