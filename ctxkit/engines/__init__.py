"""Where `count`, `compact` and `score-rl` run a dataset: the registry of engines.

`local` streams the dataset on this machine (`--jobs N` processes for compact); `ray` hands its
shards to Ray as tasks (`ctxkit.engines.ray`, the `ctxkit[ray]` extra), on a local Ray or a cluster. Both
run the same library functions on each conversation, so they write the same output.
"""

from __future__ import annotations

import os

from ctxkit.errors import UsageError, unknown_name

ENGINES: dict[str, str] = {
    "local": "this machine: the dataset streamed, --jobs N processes",
    "ray": "Ray: shards as tasks on a local Ray or a cluster (--ray-address); ctxkit[ray]",
}
DEFAULT_ENGINE = "local"
SHARD_MB = 32.0  # --shard-mb: a Ray task's slice of a JSONL dataset (whole lines)


def check_engine(name: str) -> str:
    """`name` when it is a known engine, else an error that lists them."""
    if name not in ENGINES:
        raise unknown_name("engine", name, ENGINES)
    return name


# Names of one output file, which a directory of shards must not take.
_FILE_SUFFIXES = (".json", ".jsonl", ".parquet", ".md", ".traj", ".csv")


def check_shard_dir(output: str) -> str:
    """`output` when it can be the directory of shards `--engine ray` writes (new or existing),
    else a usage error: stdout, an existing file, or a new path named like a file."""
    is_dir = os.path.isdir(output)
    if output == "-" or (os.path.exists(output) and not is_dir) or (
        not is_dir and output.lower().endswith(_FILE_SUFFIXES)
    ):
        raise UsageError(
            f"--engine ray writes a directory of shards, one file per shard: give -o DIR, not {output!r}"
        )
    return output
