"""The `ctxkit` command: a click group whose subcommands are imported only when run.

Lazy loading keeps `ctxkit count` and `ctxkit guard` from paying for modules they never use.
"""

from __future__ import annotations

# The C module, not `signal`: importing that one builds its enums, long enough for a Ctrl-C to
# land in it (seen), and this runs before anything can catch one (and at every start-up).
import _signal
import sys


def _defer_interrupts() -> tuple[list[int], object] | None:
    """Hold Ctrl-C while this module loads (the command is starting): a KeyboardInterrupt raised
    inside an import (click's, locale's) prints a traceback through it. Returns what
    `_end_of_start_up` needs, or None where Python's own handler is not in place."""
    if _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        return None
    caught: list[int] = []
    try:
        previous = _signal.signal(_signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not the main thread
        return None
    return caught, previous


_START_UP = _defer_interrupts()

import atexit  # noqa: E402 - after the handler, on purpose
import gc  # noqa: E402
import importlib  # noqa: E402
import re  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from ctxkit.cli.streams import guard_standard_streams, quiet_exit_on_broken_pipe  # noqa: E402
from ctxkit.errors import CtxkitError, UsageError  # noqa: E402

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
    "replay": ("ctxkit.cli.replay_cmd", "replay", "What each agent would have kept of a session."),
    "forensics": ("ctxkit.cli.forensics_cmd", "forensics", "What the compactions in logs lost and cost."),
    "mcp": ("ctxkit.cli.mcp_cmd", "mcp", "Serve recall and search over an archive to a model (MCP)."),
    "simulate": ("ctxkit.cli.simulate", "simulate", "Generate overflow scenarios with ground truth."),
    "score-rl": ("ctxkit.cli.score_rl", "score_rl", "Score strategies as RL rewards; export datasets."),
    "bench": ("ctxkit.cli.bench", "bench", "Measure speed and quality against targets and peers."),
    "agent": ("ctxkit.cli.agent_cmd", "agent", "Run a real agent offline and count what it sends."),
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
            raise click.UsageError(one_line(str(exc))) from None
        except CtxkitError as exc:
            raise _Failure(str(exc), exc.exit_code) from None
        except BrokenPipeError:
            quiet_exit_on_broken_pipe()
        except MemoryError:
            raise _Failure(
                "out of memory: the input is too large for this machine's memory (or its limit, "
                "ulimit -v); raise the limit, or split the input",
                1,
            ) from None
        except KeyboardInterrupt:
            # Ctrl-C: the atomic writers have removed their temp files on the way up.
            sys.exit(130)
        except RuntimeError as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                # Ctrl-C while a module a command imports defines a dataclass: Python 3.11
                # wraps it ("Error calling __set_name__ on 'Field' instance")
                sys.exit(130)
            raise
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
    if _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        yield
        return
    caught: list[int] = []
    try:
        _signal.signal(_signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt


def _os_error_text(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{exc.filename}: {what[:1].lower()}{what[1:]}"
    return what


# control characters, except the tab: a newline in a file name must not split the error line
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def one_line(text: str) -> str:
    """`text` with its control characters escaped (`\\n`, `\\x1b`): an error stays one line and
    a file name cannot move the cursor or colour the terminal."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class _Failure(click.ClickException):
    """A domain error as click reports it: `Error: <message>` and the error's exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(one_line(message))
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
    # The interpreter's last garbage collection, at exit, walks every object the command's
    # imports made: 7% of a count of a small file (21M of 317M instructions). Frozen objects are
    # skipped. What that collection would finalize matters to nobody then: outputs are closed
    # and renamed before the command returns, and Python flushes stdout and stderr itself.
    atexit.register(gc.freeze)
    try:
        guard_standard_streams()
        cli(prog_name="ctxkit")
    except KeyboardInterrupt:  # Ctrl-C before a subcommand runs (parsing, loading)
        sys.exit(130)
    except BrokenPipeError:  # --help or --version into `head`
        quiet_exit_on_broken_pipe()
    except CtxkitError as exc:  # --help or --version to a closed stdout
        click.echo(f"Error: {one_line(str(exc))}", err=True)
        sys.exit(exc.exit_code)


def _end_of_start_up() -> None:
    """Give Ctrl-C back to Python; one that came while the module loaded ends the command now,
    quietly, as 130."""
    if _START_UP is None:
        return
    caught, previous = _START_UP
    _signal.signal(_signal.SIGINT, previous)
    if caught:
        raise SystemExit(130)


_end_of_start_up()
