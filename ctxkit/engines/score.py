"""`score(request)`: the one call behind `ctxkit score-rl`, on either engine.

Each transcript (input files with their ground truth, then generated scenarios) is run under
every action (`rl.score`, each compaction through `compaction.run`) and the trials are
exported as they come: RL log rows, DPO pairs or SFT lines, to one file, or with
`--engine ray` to a directory with one file per shard.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ctxkit.engines.request import ScoreRequest
from ctxkit.model import Transcript

Say = Callable[[str], None]
KINDS = {"rl": "rows", "dpo": "preference pairs", "sft": "fine-tuning lines"}
KIND_NOUNS = {"rl": "row", "dpo": "preference pair", "sft": "fine-tuning line"}  # one of them


@dataclass
class ScoreOutcome:
    """What a score run did, to render: per-action totals, rows written and where, the shards
    of a Ray run (0: one file), transcripts that gave no example, examples over the budget."""

    summary: Any  # rl.Summary
    rows: int = 0
    shards: int = 0
    no_example: int = 0
    over_budget: int = 0
    notes: list[str] = field(default_factory=list)
    # (transcript, why) for each that gave no example (`rl.no_example_reason`)
    reasons: list[tuple[str, str]] = field(default_factory=list)
    written: bool = True  # False: no row, so nothing was written (`EMPTY_EXIT`)
    transcripts: int = 0  # transcripts scored


EMPTY_EXIT = 3  # `score-rl`: no row to write, so nothing was written


class _NothingToWrite(Exception):
    """Raised inside the writer when no row came: the target is left as it was."""


def score(request: ScoreRequest, say: Say) -> ScoreOutcome:
    """Run `request` (see the module); what it did, to render. `say` takes warnings."""
    from ctxkit.fileio import check_paths

    check_paths(
        {
            "PATH": list(request.inputs) or None,
            "--truth": request.truth,
            "--actions": request.actions_file,
            "--config": request.settings.config_path,
        },
        {"-o": request.output},
    )
    settings = request.settings.build(warn=say)
    if request.engine != "local":
        return _score_ray(request, say)
    from ctxkit import rl
    from ctxkit.embedders import DEFAULT_EMBEDDER, get_embedder

    settings = settings.replace(embedder=get_embedder(request.embedder or DEFAULT_EMBEDDER, warn=say))

    def limit_for(t: Transcript) -> int | None:
        truth = t.metadata.get("ground_truth")
        if not request.fixed_limit and truth and truth.get("limit"):
            return int(truth["limit"])
        return None  # the settings' limit, or the log's own target (`rl.run_action`)

    shape = request.dpo_shape or rl.DPO_SHAPES[0]
    options = rl.ExportOptions(request.export, shape, request.max_example_tokens)
    exporter = rl.Exporter(options, settings.tok)
    outcome = ScoreOutcome(rl.Summary())
    total = len(request.scenarios) * request.count if request.scenarios and not request.inputs else None
    bar = _bar(total) if request.progress else None
    try:
        with rl.DatasetWriter(request.output, request.fmt, request.export) as writer:
            trials_of = rl.score(
                _transcripts(request, say), list(request.actions), settings,
                limit_for=limit_for, mode=request.mode,
            )
            for trials in trials_of:
                outcome.transcripts += 1
                for tr in trials:
                    outcome.summary.add(tr)
                writer.write(exporter.rows(trials))
                if bar is not None:
                    bar.update(1)
            if not writer.rows:
                raise _NothingToWrite  # no empty dataset: the target stays as it was
    except _NothingToWrite:
        outcome.written = False
    if bar is not None:
        bar.close()
    outcome.rows = writer.rows
    outcome.no_example, outcome.over_budget = exporter.no_example, exporter.over_budget
    outcome.reasons = list(exporter.reasons)
    return outcome


def _score_ray(request: ScoreRequest, say: Say) -> ScoreOutcome:
    """`--engine ray`: each shard of the input files scored by a Ray task into -o DIR."""
    from ctxkit import rl
    from ctxkit.engines import check_shard_dir
    from ctxkit.engines.ray import ScoreJob, score_dataset
    from ctxkit.engines.shards import plan_shards
    from ctxkit.fidelity.truth import no_truth_message

    check_shard_dir(request.output)
    files = list(request.inputs)
    if len(files) > 1:  # as read_with_truth: a directory of simulate output holds its sidecars
        files = [f for f in files if not f.endswith(("/truth.jsonl", ".truth.jsonl"))]
    job = ScoreJob(
        os.path.abspath(request.output),
        tuple(request.actions),
        request.settings.portable(),
        request.embedder,
        request.read_opts,
        request.mode,
        request.export,
        request.fmt,
        os.path.abspath(request.truth) if request.truth else None,
        request.fixed_limit,
    )
    outcome = ScoreOutcome(rl.Summary())
    shards = plan_shards(
        files,
        request.read_opts,
        shard_bytes=request.ray.shard_bytes,
        workers=request.ray.parallelism,
    )
    outcome.shards = len(shards)
    warned = False
    for result in score_dataset(shards, job, request.ray):
        outcome.summary.merge(result["summary"])
        outcome.rows += result["rows"]
        if result["no_truth"] and not warned:
            say(no_truth_message(result["no_truth"], result["truth_source"]))
            warned = True
    return outcome


def _transcripts(request: ScoreRequest, say: Say) -> Iterator[Transcript]:
    """Input files first (read lazily, with their ground truth), then generated scenarios."""
    from ctxkit.fidelity.truth import read_with_truth
    from ctxkit.simulate import generate_many

    if request.inputs:
        yield from read_with_truth(
            list(request.inputs), request.read_opts, truth_path=request.truth, warn=say
        )
    if request.scenarios:
        yield from generate_many(
            list(request.scenarios),
            seed=request.seed,
            count=request.count,
            tokens=request.tokens,
            p1_ratio=request.p1_ratio,
        )


def _bar(total: int | None) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="transcript", file=sys.stderr, leave=False)
