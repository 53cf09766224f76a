"""Outcomes, rewards and datasets: the evidence `ctxkit score-rl` turns compaction into.

An *action* is one way to compact (a strategy alone, a chain, a parameter set, a recovery
mode). `run_action` applies it to a transcript, one-shot (the whole transcript compacted once)
or replayed (an agent loop, see `ctxkit.replay`), and records the spec's outcome; `reward`
scores that outcome exactly as the spec does:

    +1 on success (fits and every invariant holds), -1 on failure
    +0.5 x coherence_delta          coherence of the result vs the original, in [0, 1]
    +0.3 x reduction ratio          tokens_reduced / original_tokens
    +0.2 x priority_preserved       share of P1 units kept verbatim (1.0 when there are none)
    -0.7 if recovery was used
    clamped to [-2, 2]

The spec's time term (-0.1 per second above 500 ms, `time_penalty`) is reported beside the
reward, not in it: time depends on the machine's load, and the datasets are byte-identical
across runs and machines.

Rows are written as they are produced (JSONL, or Parquet through a JSONL spool that polars
streams into the Parquet file), so a large dataset runs in bounded memory.

Example:
    >>> from ctxkit.rl import builtin_actions, run_action
    >>> from ctxkit.simulate import generate
    >>> action = builtin_actions()[0]
    >>> trial = run_action(generate("long_chat", seed=1), action, limit=5000)
    >>> action.name, trial.outcome.fits, trial.outcome.final_tokens <= 5000
    ('offload', True, True)
    >>> again = run_action(generate("long_chat", seed=1), action, limit=5000)
    >>> trial.outcome.reward == again.outcome.reward  # no term depends on the time taken
    True
"""

from __future__ import annotations

from ctxkit.rl.actions import (
    DEFAULT_THRESHOLDS,
    MODES,
    Action,
    builtin_actions,
    load_actions,
    select_actions,
)
from ctxkit.rl.datasets import (
    DPO_SHAPES,
    EXPORTS,
    FORMATS,
    SFT_INSTRUCTION,
    DatasetWriter,
    Exporter,
    ExportOptions,
    best_and_worst,
    dpo_record,
    example_tokens,
    export_rows,
    plain_refs,
    read_dataset,
    render,
    rl_schema,
    sft_record,
)
from ctxkit.rl.reward import REWARD_MAX, REWARD_MIN, SLOW_MS, reward, reward_terms, time_penalty
from ctxkit.rl.run import Outcome, Summary, Trial, coherence, run_action, score, state_features

__all__ = [
    "Action",
    "DEFAULT_THRESHOLDS",
    "DPO_SHAPES",
    "DatasetWriter",
    "EXPORTS",
    "ExportOptions",
    "Exporter",
    "FORMATS",
    "MODES",
    "Outcome",
    "REWARD_MAX",
    "REWARD_MIN",
    "SFT_INSTRUCTION",
    "SLOW_MS",
    "Summary",
    "Trial",
    "best_and_worst",
    "builtin_actions",
    "coherence",
    "dpo_record",
    "example_tokens",
    "export_rows",
    "load_actions",
    "select_actions",
    "plain_refs",
    "read_dataset",
    "render",
    "reward",
    "reward_terms",
    "time_penalty",
    "rl_schema",
    "run_action",
    "score",
    "sft_record",
    "state_features",
]
