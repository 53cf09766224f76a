"""The archive suite: `ctxkit compact` of a simulated dataset (200 MB by default): the
archive's size against the dataset's (issue 23: no bigger), and the run's throughput."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ctxkit.bench.processes import DATASET_LIMIT, local_cpus, run_ctxkit, simulated_dataset
from ctxkit.bench.records import BenchOptions, Figure, Progress, SuiteResult

NAME = "archive"
ARCHIVE_TARGET = 1.0  # an archive no bigger than its input
ARCHIVE_MB, QUICK_ARCHIVE_MB = 200.0, 2.0


def measure(opts: BenchOptions, say: Progress) -> SuiteResult:
    """`ctxkit compact` of a dataset of simulated conversations (`--dataset-mb`, default 200
    MB): the archive's size against the dataset's, and the run's throughput."""
    res = SuiteResult("archive")
    mb = opts.dataset_mb or (QUICK_ARCHIVE_MB if opts.quick else ARCHIVE_MB)
    with tempfile.TemporaryDirectory(prefix="ctxkit-bench-") as tmp:
        data = Path(tmp) / "dataset.jsonl"
        say(f"archive: simulating {mb:g} MB")
        n = simulated_dataset(data, mb)
        size = data.stat().st_size
        jobs = local_cpus()
        say(f"archive: compacting {n:,} conversations, --jobs {jobs}")
        out, db = Path(tmp) / "small.jsonl", Path(tmp) / "small.jsonl.ctx.db"
        wall, cpu = run_ctxkit(
            "compact", str(data), "--limit", str(DATASET_LIMIT), "--jobs", str(jobs),
            "-o", str(out), "--archive", str(db),
        )
        stored = db.stat().st_size
        res.figures.append(
            Figure(
                "archive size / input size",
                stored / size,
                "ratio",
                ARCHIVE_TARGET,
                note=f"{stored / 2**20:,.1f} MB archive for a {size / 2**20:,.1f} MB dataset of "
                f"{n:,} conversations (every original whole and every unit compaction took out; "
                f"output {out.stat().st_size / 2**20:,.1f} MB)",
                detail={"archive_bytes": stored, "input_bytes": size, "conversations": n},
            )
        )
        res.figures.append(
            Figure(
                "compaction throughput, with the archive",
                size / 2**20 / wall,
                "MB/s",
                note=f"compact --limit {DATASET_LIMIT:,} --jobs {jobs}: {wall:,.1f} s wall, "
                f"{cpu:,.1f} s CPU",
            )
        )
    return res
