"""`ctxkit simulate`: generate overflow scenarios with ground truth (see `ctxkit.simulate`)."""

from __future__ import annotations

import sys

import click

from ctxkit.cli.options import FiniteFloat, echo_err
from ctxkit.cli.output import format_option
from ctxkit.cli.requests import scenario_names
from ctxkit.fidelity.truth import write_truth
from ctxkit.simulate import (
    MAX_TOKENS,
    MIN_TOKENS,
    OUTPUT_FORMATS,
    SCENARIOS,
    for_output,
    generate_many,
    is_dir_target,
    save,
    truth_path_for,
)


@click.command("simulate")
@click.option(
    "--scenario",
    "-s",
    "scenarios",
    multiple=True,
    type=click.Choice((*SCENARIOS, "all")),
    metavar="NAME",
    help="Scenario to generate (repeatable; `all` for every one). See --list.",
)
@click.option("--list", "list_", is_flag=True, help="List the scenarios and exit.")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the first transcript."
)
@click.option(
    "--tokens",
    type=click.IntRange(min=MIN_TOKENS, max=MAX_TOKENS),
    default=None,
    help="Size of each transcript in cl100k_base tokens (default: the scenario's; the limit "
    "scales with it).",
)
@click.option(
    "--p1-ratio",
    type=FiniteFloat(0.0, 1.0),
    default=None,
    help="Fraction of units marked P1 (a tool call always with its results).",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Transcripts per scenario, with seeds seed, seed+1, ...",
)
@format_option(OUTPUT_FORMATS, "units", "Output format.")
@click.option(
    "-o",
    "--output",
    "output",
    default=None,
    metavar="FILE|DIR/",
    help="A file for all transcripts, or a directory (existing, or ending in /) for one file "
    "each; the sidecar goes to <stem>.truth.jsonl or DIR/truth.jsonl. Default: stdout.",
)
@click.option(
    "--truth",
    "truth",
    default=None,
    metavar="FILE",
    help="Write the ground-truth sidecar here (needed to keep it with stdout output).",
)
def simulate(
    scenarios: tuple[str, ...],
    list_: bool,
    seed: int,
    tokens: int | None,
    p1_ratio: float | None,
    count: int,
    fmt: str,
    output: str | None,
    truth: str | None,
) -> None:
    """Generate agent transcripts that overflow a context limit, with ground truth.

    Every transcript carries needles (facts planted early that the final request depends on),
    its P1 ids and its limit; they go to a sidecar JSONL file so any tool can score against it.

    \b
    Examples:
      ctxkit simulate --list
      ctxkit simulate -s long_chat --seed 7 > long_chat.jsonl
      ctxkit simulate -s all --count 3 --format openai -o sims/
    """
    if list_:
        for s in SCENARIOS.values():
            click.echo(f"{s.name:20s} {s.default_tokens:>7,} {s.limit:>7,}  {s.description}")
        return
    names = scenario_names(scenarios)
    if not names:
        raise click.UsageError("name a scenario with --scenario (see --list), or --scenario all")
    from ctxkit.fileio import check_paths

    to_file = output not in (None, "-") and not is_dir_target(output)
    sidecar = truth or (str(truth_path_for(output)) if output not in (None, "-") else None)
    check_paths(
        {},
        {"-o": output if to_file else None, "--truth" if truth else "its ground truth": sidecar},
    )
    transcripts = list(
        generate_many(names, seed=seed, count=count, tokens=tokens, p1_ratio=p1_ratio)
    )
    if output is None or output == "-":
        from ctxkit.formats import write_transcripts

        write_transcripts([for_output(t, fmt) for t in transcripts], sys.stdout, fmt)
        if truth:
            write_truth(transcripts, truth)
        where = "stdout"
    else:
        paths = save(transcripts, output, fmt, truth)
        where = f"{output} (ground truth: {paths[-1]})"
    sizes = ", ".join(
        f"{t.id} {t.metadata['ground_truth']['tokens']:,}/{t.metadata['ground_truth']['limit']:,}"
        for t in transcripts[:6]
    )
    more = f", ... ({len(transcripts)} in all)" if len(transcripts) > 6 else ""
    echo_err(f"simulate: {sizes}{more} tokens/limit -> {where}")
