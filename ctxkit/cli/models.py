"""`ctxkit models`: the known models, their budgets, tokenizers and prices (models.toml)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ctxkit.cli.output import format_option
from ctxkit.report.tables import default_format, write_rows


@click.command("models")
@click.argument("names", nargs=-1)
@format_option()
def models(names: tuple[str, ...], fmt: str | None) -> None:
    """List the known models: window, max output, tokenizer, prices per million tokens.

    Names are strict: a model's name, an alias, or either with a dated snapshot suffix
    (`gpt-4o-2024-08-06`); an unknown name is an error that suggests the closest.

    \b
    Examples:
      ctxkit models
      ctxkit models claude-sonnet-4-20250514 gpt-4o --format json
    """
    from ctxkit.budget.models import known_model, load_models

    rows = [known_model(name) for name in names] if names else list(load_models().values())
    fmt = fmt or default_format()
    if fmt == "table":
        write_rows([_table_row(m) for m in rows], fmt, sys.stdout)
    else:
        write_rows([m.to_dict() for m in rows], fmt, sys.stdout)


def _table_row(m: Any) -> dict[str, Any]:
    tokenizer = f"{m.tokenizer} (proxy)" if m.tokenizer_proxy else m.tokenizer
    return {
        "model": m.name,
        "provider": m.provider,
        "window": m.context_window,
        "max output": m.max_output_tokens,
        "tokenizer": tokenizer,
        "$ in/M": _price(m.input_per_mtok),
        "$ cached/M": _price(m.cached_input_per_mtok),
        "$ cache write/M": _price(m.cache_write_per_mtok),
        "$ out/M": _price(m.output_per_mtok),
        "aliases": ", ".join(m.aliases),
    }


def _price(usd: float | None) -> str | None:
    """A price as listed ($0.075, not a rounded 0.1)."""
    return None if usd is None else f"{usd:g}"
