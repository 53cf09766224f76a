"""The Ray engine: `count`, `compact` and `score-rl` over datasets larger than one machine.

The dataset is cut into shards (`ctxkit.engines.shards`: whole lines of a JSONL file, row ranges of a
Parquet file, or a whole file of any other layout). Ray runs one task per shard (`run_shards`:
plain Ray tasks queued in input order, their results taken back in that order); the task reads
its shard with the readers `read_path` uses and hands each conversation to the same library
call as the local engine (`count_row`, `compact`, `rl.score`), so both engines write the same
output. A task writes its own output file and its own archive shard, each to a temp file
renamed into place (the archive first), so a task that Ray retries after its worker died
leaves one copy.

Without an address a local Ray starts with this machine's usable CPUs, its files under
$TMPDIR, no dashboard, no autoscaler or log monitor (`_without_idle_daemons`), quiet logs, and
nothing written to $HOME. Ray is the `ctxkit[ray]` extra; nothing imports it before a run asks
for it.

People with a Ray Data pipeline of their own use the callable class:

    import ray, ctxkit.engines.ray
    ds = ray.data.read_text("dataset.jsonl")            # one JSON line per row, column "text"
    small = ds.map_batches(ctxkit.engines.ray.Compactor, fn_constructor_kwargs={"limit": 8000},
                           batch_format="pandas", compute=ray.data.ActorPoolStrategy(size=2))

Rows carry each conversation as its JSON text (column `text`), not as nested columns: Arrow
would give every message one struct type, filling the keys a message lacks with nulls.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

import orjson

from ctxkit.config.settings import SettingsSpec
from ctxkit.engines.dataset import (
    CompactJob,
    Fault,
    MapShards,
    ShardFault,
    compact_shards,
    shard_settings,
    worker_info,
)
from ctxkit.engines.shards import SHARD_BYTES, Shard, read_shard
from ctxkit.errors import CtxkitError, UsageError
from ctxkit.formats import ReadOptions, ReadStats

TASK_RETRIES = 3  # a task whose worker died (or that raised ShardFault) runs again, 3 times


@dataclass(frozen=True)
class RayOptions:
    """Where and how a run goes: `address` of a cluster (None: a local Ray with `num_cpus`, by
    default the usable CPUs, its files in `temp_dir`, by default a new dir in $TMPDIR),
    `workers` tasks at once (None: as many as the CPUs), the shard size, the local object
    store's size, a `fault` to inject (tests only), whether to `report` on stderr where the
    tasks ran and the workers' peak memory (`where_it_ran`; the CLI does), and the memory Ray
    reserves for each task (`task_mb`, Ray's `memory` resource: a node runs no more tasks at
    once than its memory holds)."""

    address: str | None = None
    num_cpus: int | None = None
    temp_dir: str | None = None
    workers: int | None = None
    shard_bytes: int = SHARD_BYTES
    object_store_mb: int | None = None
    fault: Fault | None = None
    report: bool = False
    task_mb: int | None = None

    @property
    def parallelism(self) -> int | None:
        """Tasks that run at once, to size the shards for (`plan_shards(workers=...)`): the
        workers asked for, else the local Ray's CPUs; None on a cluster (its size is not known
        before the run): then shards are `shard_bytes`."""
        if self.workers:
            return self.workers
        if self.address is not None:
            return None
        from ctxkit.compaction.parallel import usable_cpus

        return self.num_cpus or usable_cpus()


def import_ray(*, data: bool = False) -> Any:
    """The `ray` module (with `ray.data` loaded when `data`), or an error that says how to
    install it. The engine's own runs need no Ray Data: importing it costs the driver pyarrow
    and pandas (half a second, ~100 MB)."""
    try:
        import ray

        if data:
            import ray.data  # noqa: F401
    except ImportError:
        raise CtxkitError(
            "--engine ray needs Ray: pip install 'ctxkit[ray]' (or --engine local)"
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
        connect(ray, opts.address, **quiet)
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
        with _without_idle_daemons():
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


@contextmanager
def _without_idle_daemons() -> Iterator[None]:
    """While `ray.init` starts a local Ray: its head without the autoscaler monitor and the log
    monitor, as `ray start --head --no-monitor --include-log-monitor=False` starts one (ray.init
    has no such options). A local Ray that lives for one run has no nodes to add or remove, and
    its workers' logs are not sent to the driver (`log_to_driver=False`): neither daemon has
    work. Each is a Python process that takes ~0.4-0.6 s of CPU to start, beside the run on
    the same cores, and the monitor holds every shutdown for the full second Ray gives it to
    exit (on SIGTERM it reports its end to the GCS, which is already gone). A Ray whose
    RayParams lacks either field starts as ray.init starts it."""
    import inspect

    try:
        from ray._private.node import Node
        from ray._private.parameter import RayParams

        fields = inspect.signature(RayParams.__init__).parameters
        start = Node.__init__
    except (ImportError, AttributeError, TypeError, ValueError):
        yield
        return
    if "no_monitor" not in fields or "include_log_monitor" not in fields:
        yield
        return

    def lean(node: Any, ray_params: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("head", args[0] if args else False):
            ray_params.no_monitor = True
            ray_params.include_log_monitor = False
        start(node, ray_params, *args, **kwargs)

    Node.__init__ = lean  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Node.__init__ = start  # type: ignore[method-assign]


CONNECT_SECONDS = 5.0  # a head whose port does not answer in this long is not there
GCS_SECONDS = 12.0  # nor one whose GCS does not reply in this long (Ray itself waits 40 s);
# past the two tries Ray's client logs (at 5 and 10 s), which fall silent inside the wait


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a `host:port` or `ray://host:port` address; None for `auto` and the like."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _reachable(address: str) -> None:
    """A `host:port` (or `ray://host:port`) address whose port answers, else an error: Ray
    itself waits for an absent head for minutes. `auto` and other forms go to Ray as given."""
    import socket

    where = _host_port(address)
    if where is None:
        return
    try:
        socket.create_connection(where, timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise CtxkitError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one with "
            "`ray start --head`, or leave out --ray-address for a local Ray"
        ) from None


def connect(ray: Any, address: str, **init: Any) -> None:
    """`ray.init(address=...)` to a running cluster, at the address as given, in bounded time.

    Before Ray connects, the cluster's GCS is asked (`check_cluster`, at most ~17 s) whether it
    is a Ray head, whether it takes this process's token, and whether one of its nodes runs on
    this machine: a driver attaches to a local node's raylet, and without one Ray waits a
    minute, then fails. Each is a one-line error here. Then Ray connects with the address
    untouched (`_address_as_given`)."""
    if not address.startswith("ray://"):
        check_cluster(address)
    try:
        with _address_as_given():
            ray.init(address=address, **init)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CtxkitError(f"cannot connect to the Ray cluster at {address}: {first}") from None


def check_cluster(address: str) -> list[str]:
    """The ids of the cluster's live nodes, after three checks that each fail with one line: the
    port answers (`_reachable`), a GCS replies there with this process's auth token
    (RAY_AUTH_MODE/RAY_AUTH_TOKEN, as the cluster has it), and one of its nodes runs on this
    machine."""
    import threading

    _reachable(address)
    where = _host_port(address)
    if where is None:
        return []
    from ray._private import services
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    answer: dict[str, Any] = {}

    def ask() -> None:  # GcsClient waits 40 s for a port that is no GCS, with no timeout to set
        try:
            client = GcsClient(address=f"{where[0]}:{where[1]}")
            answer["nodes"] = client.get_all_node_info(timeout=GCS_SECONDS)
        except Exception as exc:  # noqa: BLE001 - said on the driver, in one line
            answer["error"] = exc

    asking = threading.Thread(target=ask, name="ctxkit-ray-probe", daemon=True)
    with _native_stderr_quiet():  # Ray's C++ client logs each failed try on fd 2
        asking.start()
        asking.join(GCS_SECONDS)
    if asking.is_alive():
        raise CtxkitError(
            f"{address} answers, but no Ray GCS replied there in {GCS_SECONDS:.0f} s: give the "
            "head's address as `ray start --head` printed it (`ray status` on the head)"
        )
    error = answer.get("error")
    if error is not None:
        if type(error).__name__ == "AuthenticationError":
            raise CtxkitError(
                f"the Ray cluster at {address} refused this process's auth token: set "
                "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) as its nodes have them"
            )
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CtxkitError(f"cannot reach the Ray cluster at {address}: {first}")
    alive = {
        node_id.hex(): info.node_manager_address
        for node_id, info in answer["nodes"].items()
        if info.state == GcsNodeInfo.GcsNodeState.ALIVE
    }
    if not alive:
        raise CtxkitError(f"the Ray cluster at {address} has no live node")
    if not set(alive) & set(services.find_node_ids()):
        where_nodes = ", ".join(sorted(set(alive.values())))
        raise CtxkitError(
            f"no node of the Ray cluster at {address} runs on this machine (its nodes: "
            f"{where_nodes}): run ctxkit on one of them, or give --ray-address ray://HEAD:10001 "
            "(Ray Client)"
        )
    return sorted(alive)


@contextmanager
def _native_stderr_quiet() -> Iterator[None]:
    """File descriptor 2 on /dev/null for the block (what C code writes there is lost; Python's
    own writes wait: none happen in the block). The error ctxkit then gives is the one line."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


@contextmanager
def _address_as_given() -> Iterator[None]:
    """While `ray.init` connects: the address as the user gave it. Ray rewrites a loopback
    address (127.0.0.1, localhost) to this machine's outward one before connecting, but a
    cluster whose nodes were started on 127.0.0.1 (`--node-ip-address`) listens on loopback
    only: Ray then retried the other address for 13 minutes. Ray without that function
    connects as it always did."""
    try:
        from ray._private import services
    except ImportError:
        yield
        return
    resolve = getattr(services, "resolve_ip_for_localhost", None)
    if resolve is None:
        yield
        return
    services.resolve_ip_for_localhost = lambda host: host
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = resolve


SHARED = "the inputs and -o DIR must be on storage every node mounts at the same path"


def _shard_task(fn: Callable[[Shard, Any], Any], shard: Shard, job: Any) -> Any:
    """One Ray task: `fn(shard, job)`, or the ctxkit error it raised as a result. A shard or
    an -o DIR this node cannot see (the driver could) is said as such: no shared storage."""
    try:
        open(shard.path, "rb").close()
    except OSError as exc:
        where = f"{shard.label or shard.path}: cannot read on a Ray node ({exc.strerror or exc}); {SHARED}"
        return {_ERROR: (where, 1, False)}
    out_dir = getattr(job, "out_dir", None)
    if out_dir and not os.path.isdir(out_dir):
        return {_ERROR: (f"-o {out_dir}: no such directory on a Ray node; {SHARED}", 1, False)}
    try:
        return fn(shard, job)
    except CtxkitError as exc:
        # Ray would wrap it in its own errors (a traceback, not the one line the local
        # engine gives) and a retry would fail the same way: the driver raises it.
        return {_ERROR: (str(exc), exc.exit_code, isinstance(exc, UsageError))}


_ERROR = "ctxkit_error"  # a task's result that is the ctxkit error it raised


def _task_failure(exc: BaseException, shard: Shard) -> CtxkitError:
    """A shard's task that Ray gave up on, in one line: the exception it raised (a file a node
    cannot read, say), or what killed it after its retries (a worker or a node that died each
    time)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, OSError) and cause.filename:
        return CtxkitError(f"{cause.filename}: cannot read on a Ray node ({cause.strerror or cause}); {SHARED}")
    if cause is not None:
        first = (f"{type(cause).__name__}: {cause}".strip().splitlines() or ["?"])[0]
        return CtxkitError(f"shard {shard.name} failed on Ray: {first}")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return CtxkitError(
        f"shard {shard.name}: Ray lost its task {1 + TASK_RETRIES} times "
        f"({type(exc).__name__}: {first})"
    )


def _task_error(message: str, exit_code: int, usage: bool) -> CtxkitError:
    """The error a task raised, rebuilt on the driver (errors with their own arguments do
    not pickle back as they were)."""
    exc = UsageError(message) if usage else CtxkitError(message)
    exc.exit_code = exit_code
    return exc


def run_shards(
    fn: Callable[[Shard, Any], Any], shards: Sequence[Shard], job: Any, opts: RayOptions
) -> Iterator[Any]:
    """`fn(shard, job)` for every shard as a Ray task (at most `opts.workers` at once); the
    results in shard order.

    Plain tasks, not Ray Data: a shard's result is a small tally and its output a file the task
    writes, so Ray Data's blocks, executor and actors (a stats actor and an autoscaling
    coordinator, each a worker process of ~200 MB, and pyarrow in every worker) would only add
    start-up, memory and driver time. Tasks are queued in shard order, so the workers take the
    next shard as they free up and a slow shard holds back no other."""
    if not shards:
        return
    running_ray = sys.modules.get("ray")
    shared = running_ray is not None and running_ray.is_initialized()  # a session of the caller's
    with ray_session(opts) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(_shard_task)
        settings = {
            "num_cpus": 1,
            "max_retries": TASK_RETRIES,
            "retry_exceptions": [ShardFault],
            "name": "ctxkit-shard",
        }
        if opts.task_mb:
            _check_task_memory(ray, opts.task_mb)
            settings["memory"] = opts.task_mb * 2**20
        task = remote.options(**settings)
        job_ref = ray.put(job)  # one copy in the object store, not one per task
        window = opts.workers or len(shards)
        first = _first_round(ray)

        def submit(index: int) -> Any:
            if index < len(first):
                strategy = NodeAffinitySchedulingStrategy(first[index], soft=True)
                pinned = remote.options(**settings, scheduling_strategy=strategy)
                return pinned.remote(fn, shards[index], job_ref)
            return task.remote(fn, shards[index], job_ref)

        running: dict[Any, int] = {}  # task ref -> shard index
        workers: list[dict[str, Any]] = []  # each result's worker_info, for the report
        finished: dict[int, Any] = {}  # results that came before their turn (small tallies)
        queued = 0
        try:
            for turn in range(len(shards)):
                while turn not in finished:
                    while queued < len(shards) and len(running) < window:
                        running[submit(queued)] = queued
                        queued += 1
                    ready, _ = ray.wait(list(running), num_returns=1)
                    for ref in ready:
                        index = running.pop(ref)
                        try:
                            finished[index] = ray.get(ref)
                        except ray.exceptions.RayError as exc:
                            raise _task_failure(exc, shards[index]) from None
                result = finished.pop(turn)
                if isinstance(result, dict) and _ERROR in result:
                    raise _task_error(*result[_ERROR])
                if isinstance(result, dict) and "worker" in result:
                    workers.append(result["worker"])
                yield result
        finally:
            # a failed or abandoned run: stop what is still going. In a session that ends with
            # the run, its end stops them (Ray ends a job's tasks with its driver); cancelling
            # them first races their replies in the driver, which Ray may crash on ("Tried to
            # complete task that was not pending", printed under the run's one-line error)
            for ref in running if shared else ():
                ray.cancel(ref, force=True)
    if opts.report and workers:
        sys.stderr.write(where_it_ran(workers, opts.task_mb) + "\n")


def _check_task_memory(ray: Any, task_mb: int) -> None:
    """An error when no node can give a task `task_mb` (Ray would wait for one without end)."""
    most = max(
        (n.get("Resources", {}).get("memory", 0) for n in ray.nodes() if n.get("Alive")), default=0
    )
    if most < task_mb * 2**20:
        raise CtxkitError(
            f"--ray-task-mb {task_mb:,}: no Ray node has that much memory for a task (the most a "
            f"node offers: {most / 2**20:,.0f} MB); give less"
        )


def _first_round(ray: Any) -> list[str]:
    """On a cluster of several nodes, the node of each of the first tasks: one a CPU, the nodes
    in turn (ids in order). Left to itself Ray hands a node's next task to the worker that
    finished the last one there, so shards that take less time than a worker takes to start on
    another node all ran on the driver's node; the first round puts a task on every CPU, and
    the rest go where a CPU frees up. Soft: a task whose node is gone runs elsewhere."""
    nodes = sorted(
        (n["NodeID"], int(n.get("Resources", {}).get("CPU", 0)))
        for n in ray.nodes()
        if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1
    )
    if len(nodes) < 2:
        return []
    return [node for k in range(max(c for _, c in nodes)) for node, cpus in nodes if cpus > k]


def where_it_ran(workers: Sequence[dict[str, Any]], task_mb: int | None = None) -> str:
    """One line on the tasks of a run: how many ran on each node, the workers' peak resident
    memory (each task reports its worker's, `engines.dataset.worker_info`), and how many went
    above the memory reserved for a task (`task_mb`).

    >>> runs = [{"pid": 1, "peak_rss_mb": 300.4, "node": "ab" * 14, "node_ip": "10.0.0.1"},
    ...         {"pid": 2, "peak_rss_mb": 351.6, "node": "cd" * 14, "node_ip": "10.0.0.2"},
    ...         {"pid": 1, "peak_rss_mb": 310.0, "node": "ab" * 14, "node_ip": "10.0.0.1"}]
    >>> where_it_ran(runs)
    'ray: 3 tasks on 2 nodes (10.0.0.1 abababab: 2, 10.0.0.2 cdcdcdcd: 1); 2 workers, peak memory 310 to 352 MB'
    >>> where_it_ran(runs, 320).split("; ")[-1]
    '2 workers, peak memory 310 to 352 MB (1 above --ray-task-mb 320)'
    """
    from collections import Counter

    from ctxkit.english import counted

    tasks = Counter((w.get("node_ip", "?"), w.get("node", "?")) for w in workers)
    peak: dict[tuple[Any, Any], float] = {}
    for w in workers:
        key = (w.get("node"), w["pid"])
        peak[key] = max(peak.get(key, 0.0), float(w["peak_rss_mb"]))
    nodes = ", ".join(f"{ip} {node[:8]}: {n}" for (ip, node), n in sorted(tasks.items()))
    low, high = min(peak.values()), max(peak.values())
    memory = f"{low:.0f} MB" if round(low) == round(high) else f"{low:.0f} to {high:.0f} MB"
    if task_mb:
        memory += f" ({sum(p > task_mb for p in peak.values())} above --ray-task-mb {task_mb:,})"
    return (
        f"ray: {counted(len(workers), 'task')} on {counted(len(tasks), 'node')} ({nodes}); "
        f"{counted(len(peak), 'worker')}, peak memory {memory}"
    )


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
    return {"rows": rows, "stats": asdict(stats), "worker": worker_info()}


def count_dataset(
    shards: Sequence[Shard], job: CountJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """Each shard's `count_shard` result, in input order."""
    yield from run_shards(count_shard, shards, job, opts)


# ---------------------------------------------------------------- compact


def compact_dataset(
    shards: Sequence[Shard], job: CompactJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """`engines.dataset.compact_shards` with the shards as Ray tasks: each shard's tally, in
    input order; then the index of the archive shards."""
    job = replace(job, fault=job.fault or opts.fault)
    yield from compact_shards(shards, job, shard_mapper(opts))


def shard_mapper(opts: RayOptions) -> MapShards:
    """`engines.dataset.MapShards` as Ray tasks: `fn(shard, job)` for every shard."""
    return partial(_map_shards, opts=opts)


def _map_shards(
    fn: Callable[[Shard, Any], Any], shards: Sequence[Shard], job: Any, *, opts: RayOptions
) -> Iterator[Any]:
    return run_shards(fn, shards, job, opts)


# ---------------------------------------------------------------- score-rl


@dataclass(frozen=True)
class ScoreJob:
    """A score-rl run: settings and embedder, actions, mode, export kind and file format,
    ground truth, and where the shards go."""

    out_dir: str
    actions: tuple[Any, ...]
    settings: SettingsSpec = field(default_factory=SettingsSpec)
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

    settings = shard_settings(job.settings)
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

    def limit_for(t: Any) -> int | None:
        truth = t.metadata.get("ground_truth")
        if not job.fixed_limit and truth and truth.get("limit"):
            return int(truth["limit"])
        return None  # the settings' limit, or the log's own target (`rl.run_action`)

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
        "stats": asdict(stats),
        "worker": worker_info(),
    }


def score_dataset(
    shards: Sequence[Shard], job: ScoreJob, opts: RayOptions = RayOptions()
) -> Iterator[dict[str, Any]]:
    """Each shard's `score_shard` result, in input order."""
    from ctxkit.atomic import output_directory

    with output_directory(job.out_dir):
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

        from ctxkit.compaction.run import ArchiveTarget, run
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
        archive = ArchiveTarget()
        if self.archive_dir is not None:
            key = hashlib.sha256("\n".join(t.id for t in transcripts).encode()).hexdigest()[:16]
            os.makedirs(self.archive_dir, exist_ok=True)
            archive = ArchiveTarget(os.path.join(self.archive_dir, f"batch-{key}.ctx.db"), staged=True)

        def row(r: Any, _archive: Any) -> None:
            out["id"].append(r.transcript.id)
            out["text"].append(orjson.dumps(dataset_item(r.transcript, self.to_format)).decode())
            out["changed"].append(r.changed)
            out["tokens_before"].append(r.tokens_before)
            out["tokens_after"].append(r.tokens_after)
            out["fits"].append(r.fits)

        settings = self.settings.with_output_format(self.to_format)
        run(transcripts, settings, archive=archive, on_result=row)
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

    ray = import_ray(data=True)
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
