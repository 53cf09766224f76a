"""Summarizers: turn a run of units into one short text that keeps the task alive.

`extractive` (offline, deterministic, the default) and `llm` (an OpenAI-compatible endpoint,
falling back to `extractive` when it fails). The registry below is what the configuration, the
CLI's `--summarizer` and the chain choose from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ctxkit.errors import LLMError, registered
from ctxkit.summarizers.extractive import Summarizer, summarize_extractive

if TYPE_CHECKING:
    from ctxkit.model import Unit
    from ctxkit.tokens import Tokenizer

SUMMARIZERS: dict[str, Summarizer] = {"extractive": summarize_extractive}
# Every summarizer a configuration can name: the offline ones above, and `llm` (an
# OpenAI-compatible endpoint, built with its settings by `make_summarizer`).
SUMMARIZER_NAMES = (*SUMMARIZERS, "llm")


def get_summarizer(name: str) -> Summarizer:
    """The summarizer registered under `name`; unknown names list the known ones."""
    return registered(SUMMARIZERS, "summarizer", name)


def make_summarizer(
    name: str,
    *,
    llm_settings: Any = None,
    tok: Tokenizer | None = None,
    warn: Callable[[str], None] | None = None,
) -> Summarizer:
    """The summarizer the chain calls as `(units, target_tokens, previous_summary)`.

    `llm` calls the OpenAI-compatible endpoint in `llm_settings` (retries are its own); when it
    still fails, this run falls back to `extractive` and says so once through `warn` (the spec's
    graceful degradation).
    """
    if name != "llm":
        base = get_summarizer(name)

        def offline(units: Sequence[Unit], target: int, previous: str | None = None) -> str:
            return base(units, target, previous, tok)

        offline.offline = True  # type: ignore[attr-defined]  # cheap to ask again (summarize_old)
        return offline

    from ctxkit.summarizers.llm import summarize_llm

    failed: list[str] = []

    def summarize(units: Sequence[Unit], target: int, previous: str | None = None) -> str:
        if not failed:
            try:
                return summarize_llm(
                    units, llm_settings, previous_summary=previous, target_tokens=target
                )
            except LLMError as exc:
                failed.append(str(exc))
                if warn is not None:
                    warn(f"warning: LLM summarizer failed ({exc}); using the extractive summarizer")
        return summarize_extractive(units, target, previous, tok)

    return summarize
