"""The benchmark suite behind `ctxkit bench`: speed against the spec's targets and against the
limit (raw tiktoken), quality against peers, and growth from 1k to 1M tokens.

Every figure is measured in the run that reports it, and every ratio is taken between two
measurements of that same run. Suites (`SUITES`):

- `count`: token estimation per call (cached and cold) and count throughput against raw
  tiktoken on the same texts, for cl100k_base and o200k_base;
- `guard`: time of one guard decision;
- `embed`: MiniLM load time (a fresh process) and embedding time per unit, batched;
- `compact`: extractive summarization of 2,000 tokens, the full chain on 50 units (~10k tokens)
  with the lexical and MiniLM embedders, and compaction time as a multiple of one tiktoken pass;
- `quality`: ctxkit's chain against LangChain's `trim_messages`, plain drop-oldest truncation and
  observation masking, on simulated transcripts (with ground truth) and real ones, with a
  fidelity table (`ctxkit.fidelity.measures`: needles, files-touched trail, user messages verbatim);
- `scale`: 1k to 1M tokens of simulated scenarios and of real logs chained, and 25k to 200k
  tiny messages, one fresh process per size: time against one tiktoken pass, peak memory,
  log-log slope;
- `startup`: `ctxkit count` of a two-message file, the whole process, against
  `python -c "import tiktoken"`;
- `archive`: the archive of a compacted dataset (200 MB by default) against its size;
- `ray`: `compact --engine ray` against `compact --jobs` on this machine, per core.

Example:
    >>> from ctxkit.bench import BenchOptions, run
    >>> report = run(["guard"], BenchOptions(quick=True, repeat=1))
    >>> list(report.suites), report.suites["guard"].figures[0].value > 0
    (['guard'], True)
"""

from __future__ import annotations

from ctxkit.bench.harness import (
    PACKAGES,
    QUICK_SCENARIOS,
    REAL_MIN_TOKENS,
    SCALE_SCENARIOS,
    SCALE_SIZES,
    STANDARD,
    loglog_slope,
    machine_notes,
    raw_encoding,
    real_transcripts,
    standard_transcript,
)
from ctxkit.bench.peers import (
    PEER_LABELS,
    PEERS,
    raw_unit_tokens,
    run_peer,
    runnable_peers,
    summarize_peers,
)
from ctxkit.bench.records import (
    MISSED_EXIT,
    REALDATA,
    BenchOptions,
    BenchReport,
    Figure,
    Progress,
    SuiteResult,
)
from ctxkit.bench.render import fmt_value, plot, render_table
from ctxkit.bench.suites import SUITES, TABLES, run
from ctxkit.bench.suites.embed import embed_texts
from ctxkit.bench.suites.quality import FIDELITY_COLUMNS, PEER_COLUMNS
from ctxkit.bench.suites.scale import scale_worker

__all__ = [
    "BenchOptions",
    "BenchReport",
    "FIDELITY_COLUMNS",
    "MISSED_EXIT",
    "Figure",
    "PACKAGES",
    "PEERS",
    "PEER_COLUMNS",
    "PEER_LABELS",
    "Progress",
    "QUICK_SCENARIOS",
    "REALDATA",
    "REAL_MIN_TOKENS",
    "SCALE_SCENARIOS",
    "SCALE_SIZES",
    "STANDARD",
    "SUITES",
    "TABLES",
    "SuiteResult",
    "raw_encoding",
    "embed_texts",
    "fmt_value",
    "loglog_slope",
    "machine_notes",
    "plot",
    "raw_unit_tokens",
    "real_transcripts",
    "render_table",
    "run",
    "run_peer",
    "runnable_peers",
    "scale_worker",
    "standard_transcript",
    "summarize_peers",
]
