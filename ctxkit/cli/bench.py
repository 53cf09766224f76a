"""`ctxkit bench`: speed and quality, measured against the spec's targets and against peers."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from ctxkit.bench.suites import SUITES
from ctxkit.cli.options import count_option, echo_err
from ctxkit.cli.output import output_option

SUITE_CHOICES = [*SUITES, "all"]

EXIT_HELP = """\b
Exit codes:
  0    every figure with a target met it
  1    runtime error
  2    usage error: nothing run
  3    some figure missed its target: the last line on stderr names each
  130  interrupted (Ctrl-C): nothing written"""


@click.command("bench", epilog=EXIT_HELP)
@click.option(
    "--suite",
    "suites",
    type=click.Choice(SUITE_CHOICES),
    multiple=True,
    default=("all",),
    show_default=True,
    help="Suite to run (repeat the flag for several).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="A short run (under a minute on 2 cores): fewer inputs, sizes and repeats, no MiniLM, "
    "no Ray (unless named).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the report as JSON instead of a table."
)
@click.option(
    "--plot",
    "plot_path",
    default=None,
    metavar="FILE.png|FILE.svg",
    help="Chart the scale curve and the peer comparison (needs matplotlib).",
)
@output_option("Write the table or JSON here (atomic); default stdout.")
@click.option(
    "--realdata",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Folder of real transcripts (default ../shared/realdata beside the checkout; skipped when absent).",
)
@count_option("--repeat", "Runs per timed figure.")
@click.option(
    "--dataset-mb",
    type=click.FloatRange(min=0.1),
    default=None,
    help="Size of the dataset the archive suite compacts (default 200, --quick 2).",
)
def bench(
    suites: tuple[str, ...],
    quick: bool,
    as_json: bool,
    plot_path: str | None,
    output: str,
    realdata: Path | None,
    repeat: int | None,
    dataset_mb: float | None,
) -> None:
    """Measure speed and quality against the spec's targets, raw tiktoken and peers.

    \b
    Examples:
      ctxkit bench --suite count --quick
      ctxkit bench --suite quality --suite scale --plot bench.png
      ctxkit bench --suite all --json -o bench.json
    """
    from ctxkit.atomic import write_bytes_atomic
    from ctxkit.bench import MISSED_EXIT, REALDATA, BenchOptions, plot, render_table, run
    from ctxkit.bench.records import summary_line, targets
    from ctxkit.errors import UsageError
    from ctxkit.fileio import check_paths

    if plot_path is not None and Path(plot_path).suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot {plot_path}: give a .png or .svg file name")
    if plot_path is not None and not {"scale", "quality", "all"} & set(suites):
        raise UsageError("--plot charts the scale and quality suites; add --suite scale or quality")
    check_paths({}, {"-o": output, "--plot": plot_path})
    options = BenchOptions(
        quick=quick, realdata=realdata or REALDATA, repeat=repeat, dataset_mb=dataset_mb
    )
    report = run(suites, options, progress=echo_err)
    if as_json:
        data = orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"
    else:
        data = render_table(report).encode()
    if output == "-":
        click.echo(data.decode(), nl=False)
    else:
        write_bytes_atomic(output, data)
        echo_err(f"bench: report written to {output}")
    if plot_path is not None:
        plot(report, plot_path)
        echo_err(f"bench: chart written to {plot_path}")
    echo_err(summary_line(report))
    if targets(report)[1]:
        raise click.exceptions.Exit(MISSED_EXIT)
