"""A `ctxkit compact` run as one frozen record, its flag combinations checked once.

The CLI parses flags into a `CompactRequest` and hands it to `engines.compact` (or
`engines.replay`); the same checks hold whichever engine runs it.

    >>> CompactRequest(("a.jsonl",), "-", html="-")
    Traceback (most recent call last):
    ...
    ctxkit.errors.UsageError: --html - needs -o FILE: stdout already carries the transcript
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ctxkit.config.settings import SettingsSpec
from ctxkit.engines import DEFAULT_ENGINE, check_engine
from ctxkit.errors import UsageError
from ctxkit.formats import ReadOptions


@dataclass(frozen=True)
class CompactRequest:
    """What to read (`inputs`, expanded; `-` is stdin), where to write (`output`: a file, `-`,
    or a directory of shards), how (`settings`, `to_format`, `recall_tool`, `jobs`, `engine`)
    and what else to write beside it (`archive`, `report`, `html`, `events`; `-` = a stream).

    A directory run (`--engine ray`, several inputs, or `-o DIR/`) writes one output file
    and one archive shard per shard of the input into `output`; a file run, one output and
    one archive (`archive`, default `<output>.ctx.db`).
    """

    inputs: tuple[str, ...]
    output: str = "-"
    settings: SettingsSpec = field(default_factory=SettingsSpec)
    read_opts: ReadOptions = ReadOptions()
    to_format: str | None = None
    archive: str | None = None
    recall_tool: bool = False
    dry_run: bool = False
    jobs: int = 1
    engine: str = DEFAULT_ENGINE
    ray: Any = None  # engines.ray.RayOptions, with --engine ray
    report: str | None = None
    html: str | None = None
    events: str | None = None
    explain: bool = False
    verbose: bool = False
    progress: bool = False
    replay: bool = False
    cost_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_engine(self.engine)
        if not self.inputs:
            raise UsageError("give a transcript file, or - for stdin")
        if self.directory:
            self._check_directory_run()
        else:
            self._check_file_run()

    @property
    def directory(self) -> bool:
        """Whether the output is a directory of shards (see the class)."""
        return (
            self.engine != DEFAULT_ENGINE
            or len(self.inputs) > 1
            or self.output.endswith(("/", os.sep))
            or os.path.isdir(self.output)
        )

    @property
    def archive_file(self) -> str:
        """The archive a file run writes: --archive, else `<output>.ctx.db`, else (stdout) the
        user's piped archive (`archive.refs.piped_archive`), its folder made when needed."""
        from ctxkit.archive.refs import default_archive_path

        path = self.archive or default_archive_path(None if self.output == "-" else self.output)
        if not self.archive and self.output == "-" and not self.dry_run:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def _check_directory_run(self) -> None:
        ray = self.engine != DEFAULT_ENGINE
        refused = {
            "--replay": self.replay,
            "--recall-tool": self.recall_tool,
            "--report": self.report,
            "--html": self.html,
            "--events": self.events,
            "--archive": self.archive,
            "--dry-run": self.dry_run,
            "--explain": self.explain,
            "--jobs": self.jobs > 1 and ray,
        }
        named = [flag for flag, value in refused.items() if value]
        if named:
            where, fix = ("--engine ray", "use --engine local") if ray else (
                "a directory of outputs",
                "compact one file to -o FILE",
            )
            raise UsageError(
                f"{', '.join(named)}: not with {where} (each shard's archive sits beside its "
                f"output in -o DIR); {fix}"
            )
        if self.output == "-":
            shown = ", ".join(self.inputs[:3]) + (", ..." if len(self.inputs) > 3 else "")
            raise UsageError(
                f"{len(self.inputs)} inputs ({shown}) are compacted into a directory, an output "
                "and an archive for each: give -o DIR"
            )

    def _check_file_run(self) -> None:
        to_stdout = self.output == "-" and not self.dry_run
        if self.replay and self.html:
            raise UsageError("--html shows one compaction; --replay runs many (use --report)")
        if self.html == "-" and to_stdout:
            raise UsageError("--html - needs -o FILE: stdout already carries the transcript")
        if self.html == "-" and self.report == "-":
            raise UsageError("--html - and --report - both write to stdout; give one a file")
        if self.replay and self.recall_tool:
            raise UsageError("--recall-tool adds a tool to compacted output; --replay writes none")
        if self.report == "-" and to_stdout and not self.replay:
            raise UsageError("--report - needs -o FILE: stdout already carries the transcript")


@dataclass(frozen=True)
class ScoreRequest:
    """A `ctxkit score-rl` run: transcripts (`inputs`, expanded files; and `scenarios`
    generated on the fly, `count` seeds each from `seed`), the `actions` to score on each,
    how (`mode`, `settings`, `embedder`), and the dataset to write (`export` rows in `fmt` to
    `output`, a directory of shards with `--engine ray`)."""

    inputs: tuple[str, ...] = ()
    scenarios: tuple[str, ...] = ()
    actions: tuple[Any, ...] = ()  # rl.Action
    actions_file: str | None = None  # where they were read from (never overwritten)
    settings: SettingsSpec = field(default_factory=SettingsSpec)
    read_opts: ReadOptions = ReadOptions()
    truth: str | None = None
    seed: int = 0
    count: int = 1
    tokens: int | None = None
    p1_ratio: float | None = None
    mode: str = "oneshot"
    embedder: str | None = None
    export: str = "rl"
    dpo_shape: str | None = None
    max_example_tokens: int | None = None
    fmt: str = "jsonl"
    output: str = "-"
    engine: str = DEFAULT_ENGINE
    ray: Any = None
    progress: bool = False

    def __post_init__(self) -> None:
        check_engine(self.engine)
        if not self.scenarios and not self.inputs:
            raise UsageError("give transcript files, or --scenario NAME / --scenarios all")
        if self.fmt == "parquet" and self.output == "-":
            raise UsageError("--format parquet needs -o FILE (Parquet is not written to stdout)")
        if self.engine != DEFAULT_ENGINE and (self.scenarios or not self.inputs):
            raise UsageError("--engine ray scores dataset files; --scenario runs on --engine local")

    @property
    def fixed_limit(self) -> bool:
        """Whether --limit or --model sets every transcript's limit (else its ground truth's)."""
        return self.settings.budget.limit is not None or self.settings.budget.model is not None
