"""`ctxkit config`: show the effective configuration, or write a commented default file."""

from __future__ import annotations

import os

import click

from ctxkit.atomic import write_bytes_atomic
from ctxkit.cli.options import echo_err
from ctxkit.cli.output import format_option
from ctxkit.config.file import DUMP_FORMATS
from ctxkit.errors import UsageError
from ctxkit.fileio import check_paths


@click.command("config")
@click.option(
    "--show", "show", is_flag=True, help="Print the effective configuration (the default)."
)
@click.option(
    "--init", "init", is_flag=True, help="Write a commented default file to PATH (./ctxkit.yaml)."
)
@click.argument("path", required=False, default=None)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="Configuration to show (default ./ctxkit.yaml when present).",
)
@format_option(DUMP_FORMATS, "yaml", "Output format of --show.")
@click.option("--force", is_flag=True, help="With --init: overwrite an existing file.")
def config(
    show: bool, init: bool, path: str | None, config_path: str | None, fmt: str, force: bool
) -> None:
    """Show the effective configuration, or write a commented default file.

    \b
    Examples:
      ctxkit config --show
      ctxkit config --show --config team.yaml --format json
      ctxkit config --init            # writes ./ctxkit.yaml
      ctxkit config --init ci.yaml --force
    """
    from ctxkit.config.file import DEFAULT_PATH, default_config_text, dump_config, load_config

    if show and init:
        raise UsageError("give --show or --init, not both")
    if init:
        if config_path is not None:
            raise UsageError("--config is for --show; give the file to write as PATH")
        target = path or DEFAULT_PATH
        check_paths({}, {"PATH": target})
        if os.path.exists(target) and not force:
            raise UsageError(f"{target} exists; use --force to overwrite it")
        write_atomic(target, default_config_text())
        echo_err(f"wrote {target}")
        return
    if path is not None:
        raise UsageError(f"unexpected argument {path!r}; did you mean --config {path}?")
    cfg = load_config(config_path)
    echo_err(f"# configuration from {cfg.source or 'built-in defaults'}")
    click.echo(dump_config(cfg, fmt), nl=False)


def write_atomic(path: str, text: str) -> None:
    """Write `text` to `path` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))
