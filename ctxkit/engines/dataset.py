"""A directory run: every shard of a dataset compacted into its own output and archive shard.

`compact_shard` runs one shard through `compaction.run` (the one run every caller uses); the
local engine maps it over the shards in this process, `--engine ray` as Ray tasks
(`engines.ray.run_shards`), so both write the same directory: an output file per shard that
holds a conversation (named for its input, `shards.output_names`), the archive shard beside
it (`<output>.ctx.db`) when something in it was compacted, and the index `recall` and
`expand` read. A shard whose every conversation is left out writes nothing. Nothing here
imports Ray.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxkit.atomic import output_directory
from ctxkit.config.settings import SettingsSpec
from ctxkit.engines.shards import Shard, archive_shard_path, read_shard, write_index
from ctxkit.formats import ReadOptions, ReadStats
from ctxkit.model import Transcript

# map_shards(fn, shards, job): fn(shard, job) for every shard, results in shard order
MapShards = Callable[[Callable[[Shard, Any], Any], Sequence[Shard], Any], Iterable[Any]]


class ShardFault(RuntimeError):
    """A task failure worth a retry (Ray retries it; any other exception fails the run)."""


@dataclass(frozen=True)
class Fault:
    """Fault injection for tests: the first attempt at part `part` of input file `file_index`
    (with `node`, at any shard that runs on that Ray node) dies after writing `after`
    conversations, once (the `marker` file records that it did): `exit` kills the worker
    process, `raise` raises `ShardFault`, `hold` waits there until something outside kills it
    (a test that takes the node down)."""

    marker: str
    file_index: int = 0
    part: int = 0
    after: int = 1
    mode: str = "exit"
    node: str | None = None


@dataclass(frozen=True)
class CompactJob:
    """A directory run: `settings` (every worker builds the same `CompactSettings` from them,
    once), `out_dir` takes the output and archive shards, `to_format` as `compact --to`,
    `jobs` processes per shard (the local engine's --jobs)."""

    out_dir: str
    settings: SettingsSpec = field(default_factory=SettingsSpec)
    read_opts: ReadOptions = ReadOptions()
    to_format: str | None = None
    fault: Fault | None = None
    jobs: int = 1


def map_here(fn: Callable[[Shard, Any], Any], shards: Sequence[Shard], job: Any) -> Iterator[Any]:
    """The local engine's `MapShards`: one shard after the other, in this process."""
    for shard in shards:
        yield fn(shard, job)


def compact_shards(
    shards: Sequence[Shard], job: CompactJob, map_shards: MapShards = map_here
) -> Iterator[dict[str, Any]]:
    """Each shard's `compact_shard` tally, in input order; then a file in which nothing changed
    is written as it was, the index of the outputs and archive shards is written, and leftovers
    of killed attempts (and the files an earlier run indexed under a name this run left
    unwritten) are removed."""
    from ctxkit.engines.shards import indexed_names

    earlier = indexed_names(job.out_dir)  # what an earlier run into this directory wrote
    with output_directory(job.out_dir):
        changed: dict[int, int] = {}
        written: list[str] = []
        archived: set[str] = set()
        for shard, tally in zip(shards, map_shards(compact_shard, shards, job), strict=True):
            # a conversation left out is a change too: the output is not the input
            touched = tally["changed"] + len(tally["failures"])
            changed[shard.file_index] = changed.get(shard.file_index, 0) + touched
            if tally["conversations"] > len(tally["failures"]):
                written.append(shard.name)
            if tally["changed"]:
                archived.add(shard.name)
            yield tally
        if job.to_format is None:
            # A file in which nothing changed is written as it was, as `compact` writes it. Here,
            # not through `map_shards`: it is a copy of bytes this process has already read once
            # (to plan the shards), and a second round of Ray tasks would start a second Ray.
            for shard in shards:
                if not changed[shard.file_index] and shard.kind != "parquet" and shard.name in written:
                    copy_shard(shard, job)
        names = [s.name for s in shards]
        for name in names:  # this run's names: an earlier run's file is not taken for its own
            if name not in written and name in earlier:
                _remove(os.path.join(job.out_dir, name))
            if name not in archived and archive_shard_path(name) in earlier:
                _remove(os.path.join(job.out_dir, archive_shard_path(name)))
        finish_directory(job.out_dir, names)


def _remove(path: str) -> None:
    if os.path.lexists(path):
        os.unlink(path)


_SETTINGS: dict[SettingsSpec, Any] = {}  # per worker process: settings built once per run


def shard_settings(spec: SettingsSpec) -> Any:
    """The `CompactSettings` of `spec`, built once in this process."""
    if spec not in _SETTINGS:
        _SETTINGS.clear()
        _SETTINGS[spec] = spec.build()
    return _SETTINGS[spec]


def compact_shard(shard: Shard, job: CompactJob) -> dict[str, Any]:
    """Compact one shard into `<out_dir>/<shard name>` and its archive shard beside it, through
    `compaction.run`: both written whole (the archive first), a conversation that cannot be
    compacted left out and listed. No output when no conversation is written (every one left
    out, or none read), no archive shard when nothing was compacted. The tally:
    `RunSummary.to_dict()`, shard, stats, worker."""
    from ctxkit.compaction.run import ArchiveTarget, RunSummary, run
    from ctxkit.formats import check_depth

    output = os.path.join(job.out_dir, shard.name)
    stats = ReadStats()

    def source() -> Iterator[Transcript]:
        for t in read_shard(shard, job.read_opts, stats=stats):
            yield check_depth(t)

    seen = RunSummary()
    settings = shard_settings(job.settings).with_output_format(job.to_format)
    sidecar = _truth_beside(shard.path) if settings.from_log else None
    if sidecar is not None:  # a simulated scenario: its own limit, where none is given
        from ctxkit.fidelity.truth import read_truth_records

        settings = settings.with_truth_limits(read_truth_records(sidecar))
    own_limits = [0]

    def after_each(item: Any, _archive: Any) -> None:
        seen.add(item)
        if hasattr(item, "transcript") and settings.truth_limit(item.transcript) is not None:
            own_limits[0] += 1
        maybe_fail(job.fault, shard, seen.conversations)

    def before_commit() -> None:
        if not seen.written:
            raise _NothingWritten  # undone: no empty output, no archive

    try:
        summary = run(
            source(),
            settings,
            sink=_shard_sink(output, job.to_format),
            archive=ArchiveTarget(archive_shard_path(output), staged=True),
            jobs=job.jobs,
            on_result=after_each,
            keep_going=True,
            before_commit=before_commit,
        )
    except _NothingWritten:
        summary = seen
    return {
        "shard": shard.name,
        **summary.to_dict(),
        "stats": asdict(stats),
        "worker": worker_info(),
        "own_limits": own_limits[0],
        "truth": sidecar,
    }


def _truth_beside(path: str) -> str | None:
    """The ground truth `simulate` wrote beside an input file, when there is one."""
    from ctxkit.fidelity.truth import sidecar_for

    found = sidecar_for(path)
    return str(found) if found is not None else None


class _NothingWritten(Exception):
    """No conversation of a shard is written: its run is undone."""


class _ShardOutput:
    def __init__(self, out: Any, to_format: str | None) -> None:
        self.out, self.to_format = out, to_format

    def write(self, transcripts: Iterable[Transcript]) -> None:
        from ctxkit.formats import write_transcripts

        write_transcripts(transcripts, self.out, self.to_format)

    def keep_input(self) -> None:
        pass  # per file, after every shard of it (`compact_shards`)


@contextmanager
def _shard_sink(output: str, to_format: str | None) -> Iterator[_ShardOutput]:
    from ctxkit.atomic import atomic_writer

    with atomic_writer(output) as out:
        yield _ShardOutput(out, to_format)


def copy_shard(shard: Shard, job: CompactJob) -> dict[str, Any]:
    """The shard's own bytes as its output (atomic): `compact` writes an input in which nothing
    changed as it was, byte for byte."""
    from ctxkit.atomic import atomic_writer

    with open(shard.path, "rb") as f, atomic_writer(os.path.join(job.out_dir, shard.name), "wb") as out:
        f.seek(shard.start)
        left = None if shard.end < 0 else shard.end - shard.start
        while left is None or left > 0:
            chunk = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            out.write(chunk)
            if left is not None:
                left -= len(chunk)
    return {"shard": shard.name}


def finish_directory(out_dir: str, names: Sequence[str]) -> None:
    """Index the archive shards and remove the temp files of attempts that died."""
    write_index(out_dir, names)
    prefixes = tuple(f".{n}." for n in names) + tuple(f".{archive_shard_path(n)}." for n in names)
    for entry in os.listdir(out_dir):
        if entry.startswith(prefixes) and entry.endswith((".tmp", ".tmp-journal")):
            os.unlink(os.path.join(out_dir, entry))


def maybe_fail(fault: Fault | None, shard: Shard, done: int) -> None:
    """The injected fault, when this is its shard and moment and it has not struck yet."""
    if fault is None or done != fault.after:
        return
    if fault.node is not None:
        if worker_info().get("node") != fault.node:
            return
    elif (shard.file_index, shard.part) != (fault.file_index, fault.part):
        return
    try:
        fd = os.open(fault.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # struck once already: this is the retry
    os.close(fd)
    if fault.mode == "raise":
        raise ShardFault(f"injected fault in shard {shard.name}")
    if fault.mode == "hold":
        import time

        while True:  # until the test kills this worker's node
            time.sleep(1)
    os._exit(1)  # the worker dies mid-write, as one killed by the OOM killer would


def worker_info() -> dict[str, Any]:
    """The process that ran a task, its peak resident memory so far (MB), and in a Ray task the
    node it ran on (Ray's node id, hex) and that node's address."""
    import resource
    import sys

    info: dict[str, Any] = {
        "pid": os.getpid(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        info["node"] = ray.get_runtime_context().get_node_id()
        info["node_ip"] = ray.util.get_node_ip_address()
    return info


def merge_stats(total: ReadStats, d: dict[str, Any]) -> None:
    """Add a task's reading counts to `total`."""
    total.files += d["files"]
    total.records += d["records"]
    total.skipped_invalid += d["skipped_invalid"]
    for k, v in d["skipped_non_message"].items():
        total.skip(k, v)
    total.skipped_sidechain += d["skipped_sidechain"]
    total.warnings.extend(d["warnings"])
    total.skipped_files.extend(d.get("skipped_files", ()))
