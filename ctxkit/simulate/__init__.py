"""Overflow scenarios: agent-like transcripts generated with faker, with ground truth.

A scenario is a named recipe (`SCENARIOS`) that fills a transcript to a token size with the
kinds of content an agent accumulates: user tasks, assistant turns with (parallel) tool calls,
file reads of Python/TypeScript/Go, grep hits, test and build logs with stack traces, JSON API
responses, plan references and a P1 To Do List. Some facts (*needles*: an order id, a file
path, a decision, a constraint) are planted early and asked for by a later user request without
being repeated there, so a compaction that loses them can be caught.

Everything is drawn from one `random.Random` and seeded faker instances, never global random
state or the clock: the same scenario, seed and size give the same transcript, byte for byte.
The ground truth rides along in `Transcript.metadata["ground_truth"]`:

    {"scenario", "seed", "limit", "tokens", "needles": [{"id", "fact", "unit_id",
     "needed_by_unit_id", "pattern"}], "p1_ids", "final_request_id", "misclassified"}

`pattern` is a regular expression (for generated needles also a literal substring) that is
found in the planting unit and nowhere else in the generated transcript.

Example:

    >>> t = generate("long_chat", seed=7)
    >>> t.metadata["ground_truth"]["limit"]
    5000
"""

from __future__ import annotations

from ctxkit.simulate.builder import (
    HOOK_TOKENS,
    MAX_TOKENS,
    MESSAGE_OVERHEAD,
    MIN_TOKENS,
    MIN_TURN_TOKENS,
    REPLY_PRIMING,
    Builder,
    Scenario,
)
from ctxkit.simulate.content import KINDS, MIX, Output
from ctxkit.simulate.output import (
    OUTPUT_FORMATS,
    TRUTH_NAME,
    for_output,
    is_dir_target,
    save,
    truth_path_for,
)
from ctxkit.simulate.scenarios import SCENARIOS, generate, generate_many, ground_truth, scenario
from ctxkit.simulate.vocabulary import (
    ADJS,
    ATTRS,
    EMOJI,
    LOCALES,
    NEEDLE_KINDS,
    NOUNS,
    PKGS,
    VARS,
    VERBS,
)

__all__ = [
    "ADJS",
    "ATTRS",
    "Builder",
    "EMOJI",
    "HOOK_TOKENS",
    "KINDS",
    "LOCALES",
    "MESSAGE_OVERHEAD",
    "MAX_TOKENS",
    "MIN_TOKENS",
    "MIN_TURN_TOKENS",
    "MIX",
    "NEEDLE_KINDS",
    "NOUNS",
    "OUTPUT_FORMATS",
    "Output",
    "PKGS",
    "REPLY_PRIMING",
    "SCENARIOS",
    "Scenario",
    "TRUTH_NAME",
    "VARS",
    "VERBS",
    "for_output",
    "generate",
    "generate_many",
    "ground_truth",
    "is_dir_target",
    "save",
    "scenario",
    "truth_path_for",
]
