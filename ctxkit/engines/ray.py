"""The Ray Data engine: `count`, `compact` and `score-rl` over datasets larger than one machine.

The dataset is cut into shards (`ctxkit.engines.shards`: whole lines of a JSONL file, row ranges of a
Parquet file, or a whole file of any other layout). Ray Data runs one task per shard
(`map_batches` over a dataset of shard descriptions, in input order); the task reads its shard
with the readers `read_path` uses and hands each conversation to the same library call as the
local engine (`count_row`, `compact`, `rl.score`), so both engines write the same output. A
task writes its own output file and its own archive shard, each to a temp file renamed into
place (the archive first), so a task that Ray retries after its worker died leaves one copy.

Without an address a local Ray starts with this machine's usable CPUs, its files under
$TMPDIR, no dashboard, quiet logs, and nothing written to $HOME. Ray is the `ctxkit[ray]`
extra; nothing imports it before a run asks for it.

People with a Ray pipeline of their own use the callable class:

    import ray, ctxkit.engines.ray
    ds = ray.data.read_text("dataset.jsonl")            # one JSON line per row, column "text"
    small = ds.map_batches(ctxkit.engines.ray.Compactor, fn_constructor_kwargs={"limit": 8000},
                           batch_format="pandas", compute=ray.data.ActorPoolStrategy(size=2))

Rows carry each conversation as its JSON text (column `text`), not as nested columns: Arrow
would give every message one struct type, filling the keys a message lacks with nulls.
"""

from __future__ import annotations

import os
import pickle
import secrets
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ctxkit.engines.shards import SHARD_BYTES, Shard, archive_shard_path, read_shard, write_index
from ctxkit.errors import CtxkitError, UsageError
from ctxkit.formats import ReadOptions, ReadStats

TASK_RETRIES = 3  # a task whose worker died (or that raised ShardFault) runs again, 3 times


class ShardFault(RuntimeError):
    """A task failure worth a retry (Ray retries it; any other exception fails the run)."""


@dataclass(frozen=True)
class Fault:
    """Fault injection for tests: the first attempt at part `part` of input file `file_index`
    dies after writing `after` conversations, once (the `marker` file records that it did):
    `exit` kills the worker process, `raise` raises `ShardFault`."""

    marker: str
    file_index: int = 0
    part: int = 0
    after: int = 1
    mode: str = "exit"


@dataclass(frozen=True)
class RayOptions:
    """Where and how a run goes: `address` of a cluster (None: a local Ray with `num_cpus`, by
    default the usable CPUs, its files in `temp_dir`, by default a new dir in $TMPDIR),
    `workers` tasks at once (None: as many as the CPUs), the shard size, the local object
    store's size, and a `fault` to inject (tests only)."""

    address: str | None = None
    num_cpus: int | None = None
    temp_dir: str | None = None
    workers: int | None = None
    shard_bytes: int = SHARD_BYTES
    object_store_mb: int | None = None
    fault: Fault | None = None

    @property
    def parallelism(self) -> int | None:
        """Tasks that run at once, to cut even shards for (`plan_shards(workers=...)`): the
        workers asked for, else the local Ray's CPUs; None on a cluster (its size is not known
        before the run): then shards are `shard_bytes`."""
        if self.workers:
            return self.workers
        if self.address is not None:
            return None
        from ctxkit.compaction.parallel import usable_cpus

        return self.num_cpus or usable_cpus()


def import_ray() -> Any:
    """The `ray` module, or an error that says how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise CtxkitError(
            "--engine ray needs Ray Data: pip install 'ctxkit[ray]' (or --engine local)"
        ) from None
    return ray


_TOKEN: dict[str, str] = {}  # cache: one auth token per process, for every local Ray it starts


def _local_env(temp: str) -> None:
    """The environment a local Ray inherits: this ctxkit on the workers' path, no usage-stats
    file, and token auth (Ray's default) with a token kept in this process's environment, not
    in ~/.ray."""
    import ctxkit

    root = os.path.dirname(os.path.dirname(os.path.abspath(ctxkit.__file__)))
    path = os.environ.get("PYTHONPATH", "")
    if "site-packages" not in root and root not in path.split(os.pathsep):
        # a checkout on sys.path: the workers import this ctxkit, not an installed one
        os.environ["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_USAGE_STATS_CONFIG_PATH"] = os.path.join(temp, "usage.json")
    if any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return  # the user's choice
    token = _TOKEN.setdefault("token", secrets.token_hex(32))
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = token
    if "ray" in sys.modules:
        # Ray read its auth mode when it was imported: have it read the environment again
        try:
            from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

            Config.initialize("")
            AuthenticationTokenLoader.instance().reset_cache()
        except (ImportError, AttributeError):
            pass


@contextmanager
def ray_session(opts: RayOptions = RayOptions()) -> Iterator[Any]:
    """Ray, connected: to the running session, to `opts.address`, or to a new local Ray that
    stops (and whose files go) when the block ends."""
    import logging

    if opts.address is not None:
        _reachable(opts.address)  # an address that does not answer is an error, session or not
    running = sys.modules.get("ray")
    if running is not None and running.is_initialized():
        yield running
        return
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if opts.address is not None:
        ray = import_ray()
        ray.init(address=opts.address, **quiet)
        try:
            yield ray
        finally:
            ray.shutdown()
        return
    from ctxkit.compaction.parallel import usable_cpus

    # Ray keeps its sockets and logs in /tmp/ray by default: a private temp dir instead
    # (sockets want a short path, hence mkdtemp's in $TMPDIR). Ray reads its auth mode at
    # import; `_local_env` has it read the environment again.
    ray = import_ray()  # before anything is made: a missing extra leaves nothing behind
    temp = opts.temp_dir or tempfile.mkdtemp(prefix="ctxray-")
    _local_env(temp)
    try:
        ray.init(
            num_cpus=opts.num_cpus or usable_cpus(),
            include_dashboard=False,
            _temp_dir=temp,
            object_store_memory=opts.object_store_mb * 2**20 if opts.object_store_mb else None,
            **quiet,
        )
        yield ray
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if opts.temp_dir is None:
            shutil.rmtree(temp, ignore_errors=True)


CONNECT_SECONDS = 10.0  # a cluster's head that does not answer in this long is not there


def _reachable(address: str) -> None:
    """A `host:port` (or `ray://host:port`) address whose port answers, else an error: Ray
    itself waits for an absent head without end. `auto` and other forms go to Ray as given."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise CtxkitError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one with "
            "`ray start --head`, or leave out --ray-address for a local Ray"
        ) from None


@contextmanager
def _data_context(ray: Any) -> Iterator[None]:
    """Ray Data set for a run (outputs in input order, no progress bars, no log line per run),
    and as it was afterwards (a user's own session keeps its settings)."""
    import logging

    ctx = ray.data.DataContext.get_current()
    logger = logging.getLogger("ray.data")
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars, logger.level)
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved[:2]
        logger.setLevel(saved[2])


def _run_task(batch: dict[str, Any], fn: Callable[..., Any], job: Any) -> dict[str, Any]:
    """One Ray task: the shard in `batch` through `fn(shard, job)`; its result pickled."""
    results = []
    for raw in batch["shard"]:
        shard = Shard.from_dict(orjson.loads(raw))
        try:
            result = fn(shard, job)
        except CtxkitError as exc:
            # Ray would wrap it in its own errors (a traceback, not the one line the local
            # engine gives) and a retry would fail the same way: the driver raises it.
            result = {_ERROR: (str(exc), exc.exit_code, isinstance(exc, UsageError))}
        results.append(pickle.dumps(result))
    return {"result": results}


_ERROR = "ctxkit_error"  # a task's result that is the ctxkit error it raised


def _task_error(message: str, exit_code: int, usage: bool) -> CtxkitError:
    """The error a task raised, rebuilt on the driver (errors with their own arguments do
    not pickle back as they were)."""
    exc = UsageError(message) if usage else CtxkitError(message)
    exc.exit_code = exit_code
    return exc


def run_shards(
    fn: Callable[[Shard, Any], Any], shards: Sequence[Shard], job: Any, opts: RayOptions
) -> Iterator[Any]:
    """`fn(shard, job)` for every shard as Ray Data tasks; the results in shard order."""
    if not shards:
        return
    with ray_session(opts) as ray, _data_context(ray):
        items = [{"shard": orjson.dumps(s.to_dict())} for s in shards]
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        with warnings.catch_warnings():
            # Ray 2.60 deprecates **ray_remote_args without naming a successor for retries
            warnings.simplefilter("ignore", DeprecationWarning)
            ds = ds.map_batches(
                _run_task,
                fn_kwargs={"fn": fn, "job": job},
                batch_size=1,
                batch_format="numpy",
                compute=ray.data.TaskPoolStrategy(size=opts.workers) if opts.workers else None,
                num_cpus=1,
                max_retries=TASK_RETRIES,
                retry_exceptions=[ShardFault],
            )
        for row in ds.iter_rows():
            result = pickle.loads(row["result"])
            if isinstance(result, dict) and _ERROR in result:
                raise _task_error(*result[_ERROR])
            yield result


def _maybe_fail(fault: Fault | None, shard: Shard, done: int) -> None:
    """The injected fault, when this is its shard and moment and it has not struck yet."""
    if fault is None or done != fault.after:
        return
    if (shard.file_index, shard.part) != (fault.file_index, fault.part):
        return
    try:
        fd = os.open(fault.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # struck once already: this is the retry
    os.close(fd)
    if fault.mode == "raise":
        raise ShardFault(f"injected fault in shard {shard.name}")
    os._exit(1)  # the worker dies mid-write, as one killed by the OOM killer would


def _stats_dict(stats: ReadStats) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(stats)


def worker_info() -> dict[str, Any]:
    """The process that ran a task and its peak resident memory so far (MB)."""
    import resource

    return {"pid": os.getpid(), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def merge_stats(total: ReadStats, d: dict[str, Any]) -> None:
    """Add a task's reading counts to `total`."""
    total.files += d["files"]
    total.records += d["records"]
    total.skipped_invalid += d["skipped_invalid"]
    for k, v in d["skipped_non_message"].items():
        total.skip(k, v)
    total.skipped_sidechain += d["skipped_sidechain"]
    total.warnings.extend(d["warnings"])


# ---------------------------------------------------------------- count


@dataclass(frozen=True)
class CountJob:
    """What `ctxkit count` counts with: reading options, tokenizer, count options, the system
    prompt and tool schemas to add (--system, --tools), and whether to use recorded usage."""

    read_opts: ReadOptions = ReadOptions()
    tokenizer: str | None = None
    count_opts: Any = None
    usage: bool = True
    system: str | None = None
    tools: tuple[Any, ...] = ()


def count_shard(shard: Shard, job: CountJob) -> dict[str, Any]:
    """`count`'s region rows of one shard (`count_row`, as the local engine counts)."""
    from ctxkit.counting import count_row
    from ctxkit.formats.extras import with_context
    from ctxkit.tokens import CountOptions, get_tokenizer

    tok = get_tokenizer(job.tokenizer)
    opts = job.count_opts or CountOptions()
    stats = ReadStats()
    rows = [
        count_row(with_context(t, job.system, list(job.tools)), tok, opts, usage=job.usage)
        for t in read_shard(shard, job.read_opts, stats=stats)
    ]
    return {"rows": rows, "stats": _stats_dict(stats), "worker": worker_info()}


def count_dataset(
    shards: Sequence[Shard], job: CountJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """Each shard's `count_shard` result, in input order."""
    yield from run_shards(count_shard, shards, job, opts)


# ---------------------------------------------------------------- compact


@dataclass(frozen=True)
class CompactJob:
    """A compaction run: `settings` are `compact_settings` keyword arguments (every worker
    builds the same `CompactSettings` from them), `out_dir` takes the output and archive
    shards, `to_format` as `compact --to`."""

    out_dir: str
    settings: dict[str, Any] = field(default_factory=dict)
    read_opts: ReadOptions = ReadOptions()
    to_format: str | None = None
    fault: Fault | None = None


_SETTINGS: dict[str, Any] = {}  # per worker process: settings built once per run


def _settings(kwargs: dict[str, Any]) -> Any:
    from ctxkit.config.settings import compact_settings

    key = repr(sorted(kwargs.items()))
    if key not in _SETTINGS:
        _SETTINGS.clear()
        _SETTINGS[key] = compact_settings(**kwargs)
    return _SETTINGS[key]


def compact_shard(shard: Shard, job: CompactJob) -> dict[str, Any]:
    """Compact one shard into `<out_dir>/<shard name>` and its archive shard beside it.

    Both are written under temp names and renamed when whole, the archive first (an output
    always finds its refs).
    """
    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact
    from ctxkit.fileio import atomic_writer
    from ctxkit.formats import check_depth, write_transcripts

    settings = _settings(job.settings)
    output = os.path.join(job.out_dir, shard.name)
    archive_file = archive_shard_path(output)
    fd, scratch = tempfile.mkstemp(
        prefix=f".{os.path.basename(archive_file)}.", suffix=".tmp", dir=job.out_dir
    )
    os.close(fd)
    os.unlink(scratch)  # the archive creates it, 0600
    stats = ReadStats()
    tally: dict[str, Any] = {
        "shard": shard.name,
        "conversations": 0,
        "changed": 0,
        "tokens_before": 0,
        "tokens_after": 0,
        "violations": [],
    }

    def results() -> Iterator[Any]:
        for t in read_shard(shard, job.read_opts, stats=stats):
            r = compact(check_depth(t), settings, archive=archive)
            tally["conversations"] += 1
            tally["changed"] += r.changed
            tally["tokens_before"] += r.tokens_before
            tally["tokens_after"] += r.tokens_after
            tally["violations"] += [f"{t.id}: {v}" for v in r.invariants["violations"]]
            yield r.transcript
            _maybe_fail(job.fault, shard, tally["conversations"])

    archive = Archive(scratch)
    try:
        with atomic_writer(output) as out:
            write_transcripts(results(), out, job.to_format)
            archive.close()
            os.replace(scratch, archive_file)
    except BaseException:
        archive.abort()
        for leftover in (scratch, scratch + "-journal"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise
    tally["stats"] = _stats_dict(stats)
    tally["worker"] = worker_info()
    return tally


def copy_shard(shard: Shard, job: CompactJob) -> dict[str, Any]:
    """The shard's own bytes as its output (atomic): `compact` writes an input in which nothing
    changed as it was, byte for byte."""
    from ctxkit.fileio import atomic_writer

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


def compact_dataset(
    shards: Sequence[Shard], job: CompactJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """Each shard's `compact_shard` tally, in input order; then the index of the archive
    shards is written and leftovers of killed attempts are removed."""
    job = replace(job, fault=job.fault or opts.fault)
    os.makedirs(job.out_dir, exist_ok=True)
    changed: dict[int, int] = {}
    for shard, tally in zip(shards, run_shards(compact_shard, shards, job, opts), strict=True):
        changed[shard.file_index] = changed.get(shard.file_index, 0) + tally["changed"]
        yield tally
    if job.to_format is None:
        # a file in which nothing changed is written as it was, as `compact` writes it
        same = [s for s in shards if not changed[s.file_index] and s.kind != "parquet"]
        for _ in run_shards(copy_shard, same, job, replace(opts, fault=None)):
            pass
    finish_directory(job.out_dir, [s.name for s in shards])


def finish_directory(out_dir: str, names: Sequence[str]) -> None:
    """Index the archive shards and remove the temp files of attempts that died."""
    write_index(out_dir, names)
    prefixes = tuple(f".{n}." for n in names) + tuple(f".{archive_shard_path(n)}." for n in names)
    for entry in os.listdir(out_dir):
        if entry.startswith(prefixes) and entry.endswith((".tmp", ".tmp-journal")):
            os.unlink(os.path.join(out_dir, entry))


# ---------------------------------------------------------------- score-rl


@dataclass(frozen=True)
class ScoreJob:
    """A score-rl run: settings (`compact_settings` keyword arguments) and embedder, actions,
    mode, export kind and file format, ground truth, and where the shards go."""

    out_dir: str
    actions: tuple[Any, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    embedder: str | None = None
    read_opts: ReadOptions = ReadOptions()
    mode: str = "oneshot"
    export: str = "rl"
    fmt: str = "jsonl"
    truth_path: str | None = None
    fixed_limit: bool = False


def score_shard(shard: Shard, job: ScoreJob) -> dict[str, Any]:
    """Score every action on one shard's transcripts (`rl.score`, as the local engine does);
    the rows to `<out_dir>/<shard name>` (atomic), the per-action totals back."""
    from ctxkit import rl
    from ctxkit.embedders import get_embedder
    from ctxkit.fidelity.truth import TruthMatcher, match_truth, read_truth_records, sidecar_for

    settings = _settings(job.settings)
    if job.embedder is not None:
        settings = settings.replace(embedder=get_embedder(job.embedder))
    source = job.truth_path or sidecar_for(shard.path)
    matcher = TruthMatcher(read_truth_records(source), source) if source else None
    stats = ReadStats()
    missing: list[str] = []

    def transcripts() -> Iterator[Any]:
        for t in read_shard(shard, job.read_opts, stats=stats):
            if matcher is not None and not match_truth(t, matcher) and not missing:
                missing.append(t.id)
            yield t

    def limit_for(t: Any) -> int:
        truth = t.metadata.get("ground_truth")
        if not job.fixed_limit and truth and truth.get("limit"):
            return int(truth["limit"])
        return int(settings.limit)

    summary = rl.Summary()
    name = shard.name.removesuffix(".jsonl") + (".parquet" if job.fmt == "parquet" else ".jsonl")
    with rl.DatasetWriter(os.path.join(job.out_dir, name), job.fmt, job.export) as writer:
        for trials in rl.score(
            transcripts(), list(job.actions), settings, limit_for=limit_for, mode=job.mode
        ):
            for tr in trials:
                summary.add(tr)
            writer.write(rl.export_rows(trials, job.export))
    return {
        "shard": name,
        "rows": writer.rows,
        "summary": summary,
        "no_truth": missing[0] if missing else None,
        "truth_source": str(source) if source else None,
        "stats": _stats_dict(stats),
    }


def score_dataset(
    shards: Sequence[Shard], job: ScoreJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """Each shard's `score_shard` result, in input order."""
    os.makedirs(job.out_dir, exist_ok=True)
    yield from run_shards(score_shard, shards, job, opts)


# ---------------------------------------------------------------- for Ray pipelines


class Compactor:
    """A callable class for `Dataset.map_batches`: compacts each row's conversation.

    A row holds one conversation as JSON text in column `text` (what `ray.data.read_text` gives
    for a JSONL dataset); `path` and `line`, when present, name it as the CLI does
    (`<stem>#<line>`), else it is `ray#<row of its batch>`. The output rows have `id`, `text`
    (the compacted conversation, one JSON line in its own format, or `to_format`), `changed`,
    `tokens_before`, `tokens_after` and `fits`. With `archive_dir`, each batch archives what it
    removed in its own shard there (named after the batch's ids, written whole), for `recall`
    and `expand` over the directory. Batches may be pandas DataFrames or dicts of arrays.

    The other keyword arguments are `compact_settings`' (limit, model, target, chain, ...):

        ds.map_batches(Compactor, fn_constructor_kwargs={"limit": 8000, "archive_dir": "arch"},
                       batch_format="pandas", compute=ray.data.ActorPoolStrategy(size=4))
    """

    def __init__(
        self,
        *,
        archive_dir: str | None = None,
        to_format: str | None = None,
        read_opts: ReadOptions | None = None,
        **settings: Any,
    ) -> None:
        from ctxkit.config.settings import compact_settings

        self.settings = compact_settings(**settings)
        self.archive_dir = archive_dir
        self.to_format = to_format
        self.read_opts = read_opts or ReadOptions()

    def __call__(self, batch: Any) -> Any:
        import hashlib

        from ctxkit.archive.store import Archive
        from ctxkit.compaction import compact
        from ctxkit.formats import check_depth, dataset_item, read_conversation

        is_frame = hasattr(batch, "to_dict") and hasattr(batch, "columns")
        columns = {c: list(batch[c]) for c in (batch.columns if is_frame else batch)}
        texts = columns["text"]
        paths = columns.get("path") or ["ray"] * len(texts)
        lines = columns.get("line") or list(range(1, len(texts) + 1))
        out: dict[str, list[Any]] = {
            k: [] for k in ("id", "text", "changed", "tokens_before", "tokens_after", "fits")
        }
        transcripts = []
        for text, path, line in zip(texts, paths, lines, strict=True):
            t = read_conversation(orjson.loads(text), str(path), int(line), self.read_opts)
            if t is not None:
                transcripts.append(check_depth(t))
        key = hashlib.sha256("\n".join(t.id for t in transcripts).encode()).hexdigest()[:16]
        scratch = None
        if self.archive_dir is not None:
            os.makedirs(self.archive_dir, exist_ok=True)
            target = os.path.join(self.archive_dir, f"batch-{key}.ctx.db")
            fd, scratch = tempfile.mkstemp(prefix=f".batch-{key}.", suffix=".tmp", dir=self.archive_dir)
            os.close(fd)
            os.unlink(scratch)
        archive = Archive(scratch or ":memory:")
        try:
            for t in transcripts:
                r = compact(t, self.settings, archive=archive)
                out["id"].append(t.id)
                out["text"].append(orjson.dumps(dataset_item(r.transcript, self.to_format)).decode())
                out["changed"].append(r.changed)
                out["tokens_before"].append(r.tokens_before)
                out["tokens_after"].append(r.tokens_after)
                out["fits"].append(r.fits)
            archive.close()
            if scratch is not None:
                os.replace(scratch, target)
        except BaseException:
            archive.abort()
            if scratch is not None and os.path.exists(scratch):
                os.unlink(scratch)
            raise
        if is_frame:
            import pandas as pd

            return pd.DataFrame(out)
        import numpy as np

        return {k: np.asarray(v, dtype=object if k in ("id", "text") else None) for k, v in out.items()}


def read_conversations(paths: Sequence[str], opts: RayOptions = RayOptions()) -> Any:
    """A Ray dataset of a dataset's conversations, one row each: `path`, `line`, `text` (the
    conversation's JSON), read by shard as the CLI reads them; for `Compactor`."""
    from ctxkit.engines.shards import plan_shards
    from ctxkit.formats import dataset_item, expand_paths

    ray = import_ray()
    shards = plan_shards(
        expand_paths(list(paths)), shard_bytes=opts.shard_bytes, workers=opts.parallelism
    )

    def rows(item: dict[str, Any]) -> list[dict[str, Any]]:
        shard = Shard.from_dict(orjson.loads(item["shard"]))
        return [
            {"path": t.path, "line": t.line or 0, "text": orjson.dumps(dataset_item(t)).decode()}
            for t in read_shard(shard)
        ]

    items = [{"shard": orjson.dumps(s.to_dict())} for s in shards]
    return ray.data.from_items(items, override_num_blocks=max(1, len(items))).flat_map(rows)
