"""The `ctxkit` command: a click group whose subcommands are imported only when run.

Lazy loading keeps `ctxkit count` and `ctxkit guard` from paying for modules they never use.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from ctxkit.errors import CtxkitError, UsageError

# name -> (module, attribute, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "count": ("ctxkit.cli.count", "count", "Count tokens per message, role, type and region."),
    "guard": ("ctxkit.cli.guard", "guard", "Will it fit the model, with room for the answer?"),
    "config": ("ctxkit.cli.config_cmd", "config", "Show or write the configuration."),
    "models": ("ctxkit.cli.models", "models", "List known models: windows, tokenizers, prices."),
    "tools": ("ctxkit.cli.tools_cmd", "tools", "Tool schemas against the window: which to defer."),
    "compact": ("ctxkit.cli.compact", "compact", "Shrink a transcript to fit a budget."),
    "recall": ("ctxkit.cli.recall", "recall", "Read back what compaction archived."),
    "expand": ("ctxkit.cli.recall", "expand", "Restore a compacted transcript from its archive."),
    "report": ("ctxkit.cli.report_cmd", "report", "Show a compaction report as an HTML page."),
    "fidelity": ("ctxkit.cli.fidelity_cmd", "fidelity", "What a compaction kept of the task, probe by probe."),
    "mcp": ("ctxkit.cli.mcp_cmd", "mcp", "Serve recall and search over an archive to a model (MCP)."),
    "simulate": ("ctxkit.cli.simulate", "simulate", "Generate overflow scenarios with ground truth."),
    "score-rl": ("ctxkit.cli.score_rl", "score_rl", "Score strategies as RL rewards; export datasets."),
    "bench": ("ctxkit.cli.bench", "bench", "Measure speed and quality against targets and peers."),
}


class LazyGroup(click.Group):
    """Imports a subcommand's module on first use and maps domain errors to exit codes."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attr, _ = entry
        try:
            with _interrupt_after_import():
                return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("ctxkit"):
                return _unavailable(cmd_name)
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUBCOMMANDS[name][2]) for name in SUBCOMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise click.UsageError(str(exc)) from None
        except CtxkitError as exc:
            raise _Failure(str(exc), exc.exit_code) from None
        except BrokenPipeError:
            _quiet_exit_on_broken_pipe()
        except KeyboardInterrupt:
            # Ctrl-C: the atomic writers have removed their temp files on the way up.
            sys.exit(130)
        except RecursionError:
            raise _Failure(
                "input nested too deeply to process (JSON of hundreds of levels); "
                "flatten it or remove the record",
                1,
            ) from None
        except OSError as exc:
            # A disk or permission error the engine did not name: still one line, no traceback.
            raise _Failure(_os_error_text(exc), 1) from None


@contextmanager
def _interrupt_after_import() -> Iterator[None]:
    """Ctrl-C while a subcommand's modules are imported is raised once the import is done: a
    KeyboardInterrupt raised inside a C extension's initialisation (orjson's, seen in a fresh
    clone) crashes the interpreter instead of unwinding. Only where Python's own handler is in
    place (the main thread, SIGINT not ignored)."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    try:
        signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def _os_error_text(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{exc.filename}: {what[:1].lower()}{what[1:]}"
    return what


def _quiet_exit_on_broken_pipe() -> None:
    """`ctxkit ... | head -1`: the reader left; stop as a Unix filter does, without a word.

    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(141)  # 128 + SIGPIPE, what a shell reports for a filter killed by the pipe


class _Failure(click.ClickException):
    """A domain error as click reports it: `Error: <message>` and the error's exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class


def _unavailable(name: str) -> click.Command:
    @click.command(name)
    def cmd() -> None:
        raise click.ClickException(f"`ctxkit {name}` is not available in this build")

    return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxkit")
def cli() -> None:
    """ctxkit: count, guard and compact LLM agent transcripts, offline.

    \b
    Examples:
      ctxkit count session.jsonl --by role
      ctxkit guard session.jsonl --model gpt-4o
      ctxkit compact session.jsonl --limit 5000 -o small.jsonl
    """


def main() -> None:
    """Console entry point."""
    try:
        cli(prog_name="ctxkit")
    except KeyboardInterrupt:  # Ctrl-C before a subcommand runs (parsing, loading)
        sys.exit(130)
    except BrokenPipeError:  # --help or --version into `head`
        _quiet_exit_on_broken_pipe()
