"""`ctxkit score-rl`: run compaction actions on transcripts, score them, export datasets."""

from __future__ import annotations

from typing import Any

import click

from ctxkit.cli.budget_options import budget_options
from ctxkit.cli.options import FiniteFloat, count_option, echo_err, input_options, want_progress
from ctxkit.cli.output import format_option, output_option
from ctxkit.cli.sections import SectionedCommand, engine_section, section, tokens_section
from ctxkit.embedders import DEFAULT_EMBEDDER, EMBEDDERS
from ctxkit.formats import ReadOptions
from ctxkit.rl.actions import MODES
from ctxkit.rl.datasets import DPO_SHAPES, EXPORTS, FORMATS
from ctxkit.simulate.builder import MAX_TOKENS, MIN_TOKENS

_budget_options = section(
    "Budget",
    budget_options,
)


_transcripts_options = section(
    "Transcripts",
    input_options,
    click.option(
        "--truth",
        "truth_path",
        default=None,
        help="Ground-truth sidecar for input files (default: the one `ctxkit simulate` wrote beside them).",
    ),
    click.option(
        "--scenario",
        "-s",
        "scenario",
        multiple=True,
        metavar="NAME",
        help="Generate this scenario on the fly (repeatable; `all` for every one).",
    ),
    click.option(
        "--scenarios", default=None, metavar="LIST", help="Comma-separated scenarios, or `all`."
    ),
    click.option("--seed", type=int, default=0, show_default=True, help="Seed of the first scenario."),
    click.option(
        "--count", type=click.IntRange(min=1), default=1, show_default=True, help="Seeds per scenario."
    ),
    click.option(
        "--tokens",
        type=click.IntRange(min=MIN_TOKENS, max=MAX_TOKENS),
        default=None,
        help="Size of each generated transcript (default: the scenario's).",
    ),
    click.option(
        "--p1-ratio", type=FiniteFloat(0.0, 1.0), default=None, help="P1 share of generated units."
    ),
)


_actions_options = section(
    "Actions",
    click.option(
        "--action",
        "action_names",
        multiple=True,
        metavar="NAME",
        help="Run only these actions (repeatable); see --list-actions.",
    ),
    click.option(
        "--actions",
        "actions_path",
        default=None,
        help="YAML/JSON list of {name, chain, params, recovery_mode} (default: the built-in set).",
    ),
    click.option("--list-actions", is_flag=True, help="List the actions and exit."),
    click.option(
        "--mode",
        type=click.Choice(MODES),
        default="oneshot",
        show_default=True,
        help="Compact each transcript once, or replay it through an agent loop.",
    ),
    click.option(
        "--embedder",
        type=click.Choice(sorted(EMBEDDERS)),
        default=DEFAULT_EMBEDDER,
        show_default=True,
        help="Coherence and relevance embedder (auto: minilm when it loads).",
    ),
)


_dataset_options = section(
    "Dataset",
    output_option("Output file (atomic); default stdout."),
    click.option(
        "--export",
        "export",
        type=click.Choice(EXPORTS),
        default="rl",
        show_default=True,
        help="rl: {state_before, action, reward, state_after} log; dpo: best vs worst compaction "
        "pairs; sft: OpenAI chat fine-tuning lines (transcript -> best compaction).",
    ),
    format_option(FORMATS, help="Dataset file format (parquet needs -o); default: parquet for -o *.parquet, else jsonl."),
    click.option(
        "--dpo-shape",
        type=click.Choice(DPO_SHAPES),
        default=DPO_SHAPES[0],
        show_default=True,
        help="Pair layout: OpenAI preference fine-tuning (input, preferred_output, "
        "non_preferred_output) or TRL (prompt, chosen, rejected).",
    ),
    count_option("--max-example-tokens", "Skip dpo/sft examples over N tokens (counted on stderr); default: no budget.", metavar='N'),
)


SHOWN_REASONS = 10  # transcripts named with why they gave no example; the rest counted

EXIT_HELP = """\b
Exit codes:
  0    written
  1    runtime error: nothing written
  2    usage error: nothing written
  3    no row, pair or line to write (each transcript that gave none is named on stderr with
       why, and the --limit that makes it compact): nothing written, -o left as it was
  130  interrupted (Ctrl-C): nothing written"""


@click.command("score-rl", cls=SectionedCommand, epilog=EXIT_HELP)
@_budget_options
@_transcripts_options
@_actions_options
@_dataset_options
@tokens_section
@engine_section
def score_rl(paths: tuple[str, ...], read_opts: ReadOptions, **f: Any) -> None:
    """Score compaction actions as RL rewards; write the RL log or DPO/SFT datasets.

    \b
    Examples:
      ctxkit score-rl --scenarios all --count 3 -o rl.jsonl
      ctxkit score-rl --scenario long_chat --mode replay --export dpo -o pairs.jsonl
      ctxkit score-rl runs/*.json --export sft --max-example-tokens 65536 -o sft.jsonl
      ctxkit score-rl sessions/*.jsonl --limit 16000 --format parquet -o rl.parquet
      ctxkit score-rl 'data/*.jsonl' --limit 16000 --engine ray -o rl/   # a shard per task
    """
    from ctxkit import rl
    from ctxkit.cli.requests import score_request
    from ctxkit.engines.score import EMPTY_EXIT, KIND_NOUNS, score
    from ctxkit.english import counted

    actions = rl.select_actions(f["actions_path"], f["action_names"])
    if f["list_actions"]:
        for a in actions:
            click.echo(f"{a.name}\t{','.join(a.chain)}\t{a.recovery_mode}\t{a.to_dict()['params']}")
        return
    output = f["output"]
    request = score_request(paths, read_opts, f, tuple(actions), want_progress(f["progress"]))
    outcome = score(request, echo_err)
    if outcome.transcripts or outcome.shards:
        echo_err(outcome.summary.table())
    noun = KIND_NOUNS[request.export]
    where = "stdout" if output == "-" else output
    for label, why in outcome.reasons[:SHOWN_REASONS]:
        echo_err(f"{label}: no {noun}: {why}")
    if len(outcome.reasons) > SHOWN_REASONS:
        echo_err(f"... and {counted(len(outcome.reasons) - SHOWN_REASONS, 'more transcript')} without one")
    if outcome.over_budget:
        echo_err(
            f"{counted(outcome.over_budget, noun)} over --max-example-tokens "
            f"{request.max_example_tokens:,} skipped"
        )
    done = f"{request.mode}, {counted(len(actions), 'action')}"
    if not outcome.written:
        scored = counted(outcome.transcripts, "transcript")
        why = f"{scored} scored, none gave one" if outcome.transcripts else "no transcript to score"
        echo_err(
            f"no {noun} to write ({why}; {done}): nothing written to {where} (exit {EMPTY_EXIT})"
        )
        raise click.exceptions.Exit(EMPTY_EXIT)
    shards = f" in {counted(outcome.shards, 'shard')}" if outcome.shards else ""
    line = f"{counted(outcome.rows, noun)} written to {where}{shards} ({done})"
    if outcome.no_example:
        line += f"; {outcome.no_example:,} of {counted(outcome.transcripts, 'transcript')} gave none"
    echo_err(line)
