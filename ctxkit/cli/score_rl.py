"""`ctxkit score-rl`: run compaction actions on transcripts, score them, export datasets."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import click

from ctxkit.cli.options import (
    FiniteFloat,
    budget_options,
    echo_err,
    engine_options,
    input_options,
    progress_option,
    tokenizer_options,
    want_progress,
)
from ctxkit.embedders import DEFAULT_EMBEDDER, EMBEDDERS
from ctxkit.errors import UsageError
from ctxkit.formats import ReadOptions
from ctxkit.model import Transcript
from ctxkit.rl.actions import MODES
from ctxkit.rl.datasets import DPO_SHAPES, EXPORTS, FORMATS
from ctxkit.simulate import SCENARIOS
from ctxkit.simulate.builder import MAX_TOKENS, MIN_TOKENS


def _scenario_names(values: tuple[str, ...], scenarios: str | None) -> list[str]:
    wanted = list(values)
    if scenarios:
        wanted += [s.strip() for s in scenarios.split(",") if s.strip()]
    names: list[str] = []
    for v in wanted:
        if v != "all" and v not in SCENARIOS:
            known = ", ".join(sorted(SCENARIOS))
            raise UsageError(f"unknown scenario {v!r}; known: {known}, all")
        for name in sorted(SCENARIOS) if v == "all" else [v]:
            if name not in names:
                names.append(name)
    return names


@click.command("score-rl")
@input_options
@click.option(
    "--scenario",
    "-s",
    "scenario",
    multiple=True,
    metavar="NAME",
    help="Generate this scenario on the fly (repeatable; `all` for every one).",
)
@click.option(
    "--scenarios", default=None, metavar="LIST", help="Comma-separated scenarios, or `all`."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the first scenario.")
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="Seeds per scenario."
)
@click.option(
    "--tokens",
    type=click.IntRange(min=MIN_TOKENS, max=MAX_TOKENS),
    default=None,
    help="Size of each generated transcript (default: the scenario's).",
)
@click.option(
    "--p1-ratio", type=FiniteFloat(0.0, 1.0), default=None, help="P1 share of generated units."
)
@click.option(
    "--truth",
    "truth_path",
    default=None,
    help="Ground-truth sidecar for input files (default: the one `ctxkit simulate` wrote beside them).",
)
@click.option(
    "--actions",
    "actions_path",
    default=None,
    help="YAML/JSON list of {name, chain, params, recovery_mode} (default: the built-in set).",
)
@click.option(
    "--action",
    "action_names",
    multiple=True,
    metavar="NAME",
    help="Run only these actions (repeatable); see --list-actions.",
)
@click.option("--list-actions", is_flag=True, help="List the actions and exit.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="oneshot",
    show_default=True,
    help="Compact each transcript once, or replay it through an agent loop.",
)
@click.option(
    "--embedder",
    type=click.Choice(sorted(EMBEDDERS)),
    default=DEFAULT_EMBEDDER,
    show_default=True,
    help="Coherence and relevance embedder (auto: minilm when it loads).",
)
@click.option(
    "--export",
    "export",
    type=click.Choice(EXPORTS),
    default="rl",
    show_default=True,
    help="rl: {state_before, action, reward, state_after} log; dpo: best vs worst compaction "
    "pairs; sft: OpenAI chat fine-tuning lines (transcript -> best compaction).",
)
@click.option(
    "--dpo-shape",
    type=click.Choice(DPO_SHAPES),
    default=DPO_SHAPES[0],
    show_default=True,
    help="Pair layout: OpenAI preference fine-tuning (input, preferred_output, "
    "non_preferred_output) or TRL (prompt, chosen, rejected).",
)
@click.option(
    "--max-example-tokens",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Skip dpo/sft examples over N tokens (counted on stderr); default: no budget.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Dataset file format (parquet needs -o); default: parquet for -o *.parquet, else jsonl.",
)
@click.option("-o", "--output", "output", default="-", help="Output file (atomic); default stdout.")
@engine_options
@progress_option
@budget_options
@tokenizer_options
def score_rl(
    paths: tuple[str, ...],
    read_opts: ReadOptions,
    scenario: tuple[str, ...],
    scenarios: str | None,
    seed: int,
    count: int,
    tokens: int | None,
    p1_ratio: float | None,
    truth_path: str | None,
    actions_path: str | None,
    action_names: tuple[str, ...],
    list_actions: bool,
    mode: str,
    limit: int | None,
    model: str | None,
    target: int | None,
    config_path: str | None,
    embedder: str,
    export: str,
    dpo_shape: str,
    max_example_tokens: int | None,
    fmt: str | None,
    output: str,
    engine: str,
    ray_opts: Any,
    progress: bool | None,
    tokenizer: str | None,
    image_tokens: int | None,
    tool_schema_scale: float | None,
) -> None:
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

    actions = rl.load_actions(actions_path) if actions_path else rl.builtin_actions()
    if action_names:
        by_name = {a.name: a for a in actions}
        missing = [n for n in action_names if n not in by_name]
        if missing:
            raise UsageError(f"unknown action {missing[0]!r}; known: {', '.join(sorted(by_name))}")
        actions = [by_name[n] for n in dict.fromkeys(action_names)]
    if list_actions:
        for a in actions:
            d = a.to_dict()
            click.echo(f"{a.name}\t{','.join(a.chain)}\t{a.recovery_mode}\t{d['params']}")
        return

    names = _scenario_names(scenario, scenarios)
    if not names and not paths:
        raise UsageError("give transcript files, or --scenario NAME / --scenarios all")
    if fmt is None:
        fmt = "parquet" if output.endswith(".parquet") else "jsonl"
    if fmt == "parquet" and output == "-":
        raise UsageError("--format parquet needs -o FILE (Parquet is not written to stdout)")

    from ctxkit.fileio import check_paths
    from ctxkit.formats import expand_paths

    check_paths(
        {
            "PATH": expand_paths(list(paths)) if paths else None,
            "--truth": truth_path,
            "--actions": actions_path,
            "--config": config_path,
        },
        {"-o": output},
    )

    from ctxkit.config.settings import compact_settings
    from ctxkit.embedders import get_embedder

    settings_args: dict[str, Any] = {
        "limit": limit,
        "model": model,
        "target": target,
        "config_path": config_path,
        "tokenizer": tokenizer,
        "image_tokens": image_tokens,
        "tool_schema_scale": tool_schema_scale,
        "seed": seed,
    }
    settings = compact_settings(**settings_args, warn=echo_err)
    if ray_opts is not None:
        _score_ray(paths, names, read_opts, truth_path, settings_args, embedder, actions, mode,
                   export, fmt, output, ray_opts, fixed_limit=limit is not None or model is not None)
        return
    settings = settings.replace(embedder=get_embedder(embedder, warn=echo_err))
    fixed_limit = limit is not None or model is not None

    def limit_for(t: Transcript) -> int:
        truth = t.metadata.get("ground_truth")
        if not fixed_limit and truth and truth.get("limit"):
            return int(truth["limit"])
        return settings.limit

    transcripts = _transcripts(
        paths,
        names,
        read_opts,
        truth_path,
        seed=seed,
        count=count,
        tokens=tokens,
        p1_ratio=p1_ratio,
    )
    total = len(names) * count if names and not paths else None
    bar = _bar(total, want_progress(progress))
    summary = rl.Summary()
    exporter = rl.Exporter(
        rl.ExportOptions(
            kind=export, dpo_shape=dpo_shape, max_example_tokens=max_example_tokens
        ),
        settings.tok,
    )
    with rl.DatasetWriter(output, fmt, export) as writer:
        for trials in rl.score(transcripts, actions, settings, limit_for=limit_for, mode=mode):
            for tr in trials:
                summary.add(tr)
            writer.write(exporter.rows(trials))
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    echo_err(summary.table())
    kind = {"rl": "rows", "dpo": "preference pairs", "sft": "fine-tuning lines"}[export]
    where = "stdout" if output == "-" else output
    echo_err(f"{writer.rows:,} {kind} written to {where} ({mode}, {len(actions)} actions)")
    if exporter.no_example:
        why = "no preference" if export == "dpo" else "no successful action"
        echo_err(
            f"{exporter.no_example:,} transcript(s) gave none: nothing to compact, or {why}"
        )
    if exporter.over_budget:
        echo_err(
            f"{exporter.over_budget:,} {kind} over --max-example-tokens "
            f"{max_example_tokens:,} skipped"
        )


def _score_ray(
    paths: tuple[str, ...],
    names: list[str],
    read_opts: ReadOptions,
    truth_path: str | None,
    settings_args: dict[str, Any],
    embedder: str,
    actions: list[Any],
    mode: str,
    export: str,
    fmt: str,
    output: str,
    ray_opts: Any,
    *,
    fixed_limit: bool,
) -> None:
    """`--engine ray`: each shard of the input files scored by a Ray task into -o DIR."""
    import os

    from ctxkit import rl
    from ctxkit.engines import check_shard_dir
    from ctxkit.engines.ray import ScoreJob, score_dataset
    from ctxkit.engines.shards import plan_shards
    from ctxkit.fidelity.truth import no_truth_message
    from ctxkit.formats import expand_paths

    if names or not paths:
        raise UsageError("--engine ray scores dataset files; --scenario runs on --engine local")
    check_shard_dir(output)
    files = expand_paths(list(paths))
    if len(files) > 1:  # as read_with_truth: a directory of simulate output holds its sidecars
        files = [f for f in files if not f.endswith(("/truth.jsonl", ".truth.jsonl"))]
    settings_args = {
        **settings_args,
        "config_path": os.path.abspath(settings_args["config_path"])
        if settings_args["config_path"]
        else None,
    }
    job = ScoreJob(
        os.path.abspath(output),
        tuple(actions),
        settings_args,
        embedder,
        read_opts,
        mode,
        export,
        fmt,
        os.path.abspath(truth_path) if truth_path else None,
        fixed_limit,
    )
    summary = rl.Summary()
    rows = 0
    warned = False
    shards = plan_shards(
        files, read_opts, shard_bytes=ray_opts.shard_bytes, workers=ray_opts.parallelism
    )
    for result in score_dataset(shards, job, ray_opts):
        summary.merge(result["summary"])
        rows += result["rows"]
        if result["no_truth"] and not warned:
            echo_err(no_truth_message(result["no_truth"], result["truth_source"]))
            warned = True
    echo_err(summary.table())
    kind = {"rl": "rows", "dpo": "preference pairs", "sft": "fine-tuning lines"}[export]
    echo_err(
        f"{rows:,} {kind} written to {output} in {len(shards):,} shards "
        f"({mode}, {len(actions)} actions)"
    )


def _transcripts(
    paths: tuple[str, ...],
    names: list[str],
    read_opts: ReadOptions,
    truth_path: str | None,
    *,
    seed: int,
    count: int,
    tokens: int | None,
    p1_ratio: float | None,
) -> Iterator[Transcript]:
    """Input files first (read lazily, with their ground truth), then generated scenarios."""
    from ctxkit.fidelity.truth import read_with_truth
    from ctxkit.simulate import generate_many

    if paths:
        yield from read_with_truth(paths, read_opts, truth_path=truth_path, warn=echo_err)
    if names:
        yield from generate_many(names, seed=seed, count=count, tokens=tokens, p1_ratio=p1_ratio)


def _bar(total: int | None, show: bool) -> Any:
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="transcript", file=sys.stderr, leave=False)
