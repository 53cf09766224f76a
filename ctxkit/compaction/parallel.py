"""Compaction of many transcripts (a dataset), optionally in forked worker processes."""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any

from ctxkit.archive.store import Archive, ref_scope
from ctxkit.compaction.chain import compact
from ctxkit.compaction.options import CompactSettings
from ctxkit.compaction.result import CompactResult, Event, Failure, Observer
from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript

_WORK: dict[str, CompactSettings] = {}  # what forked workers inherit: the run's settings


def _work_one(t: Transcript) -> tuple[str, Any, list[Event], list[Any], Transcript | None]:
    """Compact one transcript in a worker, into a private in-memory archive whose rows go back to
    the parent (one process writes the SQLite file)."""
    events: list[Event] = []
    scratch = Archive(":memory:")
    try:
        result = compact(t, _WORK["settings"], archive=scratch, observe=events.append)
    except CtxkitError as exc:
        return ("error", Failure.of(t.id, exc), events, [], None)
    rows = scratch.list(t.id) if result.changed else []
    original = scratch.original(t.id) if result.changed else None
    scratch.close()
    return ("ok", result, events, rows, original)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as in a container), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _quiet_worker(parent: int) -> None:
    """A worker leaves Ctrl-C to its parent (which stops the pool) and dies quietly with it.

    A killed parent never closes the task pipe (every forked worker holds its write end too), so
    a waiting worker would wait forever: Linux sends it SIGTERM when the parent dies instead, and
    a worker with a result for a dead parent dies of SIGPIPE, not of a BrokenPipeError traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the pipe's EOF is all there is
        pass
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(0)


_PR_SET_PDEATHSIG = 1


def plan_workers(jobs: int, items: Iterator[Transcript]) -> tuple[int, list[Transcript]]:
    """How many workers `--jobs N` gets: min(N, transcripts, usable CPUs); and the transcripts
    read ahead to know (at most one per worker, so a lazy input stays lazy)."""
    head = list(islice(items, min(jobs, usable_cpus())))
    return len(head), head


def compact_many(
    transcripts: Iterable[Transcript],
    settings: CompactSettings,
    *,
    jobs: int = 1,
    archive: Archive | None = None,
    observe: Observer | None = None,
    keep_going: bool = False,
) -> Iterator[CompactResult | Failure]:
    """`compact` over many transcripts, results in input order; `jobs` > 1 forks worker processes.

    Workers archive into memory and hand their rows back, so the archive file has one writer and
    the same refs as a serial run (refs are content hashes). There are never more workers than
    transcripts or usable CPUs, and never more than two transcripts per worker in flight, so
    memory follows the largest conversation, not the dataset (`transcripts` may be lazy).
    A transcript that cannot be compacted raises its error; with `keep_going` it is a `Failure`
    in the results instead, and none of its archive rows stay.
    """
    import sys

    items = iter(transcripts)
    workers, head = plan_workers(jobs, items)
    # Forking a process whose torch threads are running can deadlock the children: fork only
    # while torch is not loaded (the CLI's embedder is lazy, so its parent has not loaded it).
    if workers <= 1 or "torch" in sys.modules:
        for t in chain(head, items):
            yield _compact_one(t, settings, archive, observe, keep_going)
        return
    import multiprocessing

    _WORK.clear()
    _WORK["settings"] = settings
    try:
        with multiprocessing.get_context("fork").Pool(
            workers, initializer=_quiet_worker, initargs=(os.getpid(),)
        ) as pool:
            for status, payload, events, rows, original in _ordered(
                pool, chain(head, items), window=2 * workers
            ):
                for event in events:
                    if observe is not None:
                        observe(event)
                if status == "error":
                    if not keep_going:
                        raise payload.error()
                    yield payload
                    continue
                if archive is not None and original is not None:
                    key = archive.key_for(original)  # refs do not depend on it, rows do
                    scope = ref_scope(original)
                    units = [(row, row.unit()) for row in rows]
                    if any(archive.ref_for(scope, u)[0] != row.ref for row, u in units):
                        # A ref clashes with a unit this archive already holds: redo this one
                        # here, where the ref can grow.
                        yield _compact_one(original, settings, archive, observe, keep_going)
                        continue
                    archive.put_transcript(original, key=key)
                    for row, u in units:
                        archive.put(key, u, summary=row.summary, tokens=row.tokens, scope=scope)
                yield payload
    finally:
        _WORK.clear()


def _compact_one(
    t: Transcript,
    settings: CompactSettings,
    archive: Archive | None,
    observe: Observer | None,
    keep_going: bool,
) -> CompactResult | Failure:
    try:
        if archive is None:
            return compact(t, settings, observe=observe)
        with archive.savepoint():  # a failure takes its rows with it
            return compact(t, settings, archive=archive, observe=observe)
    except CtxkitError as exc:
        if not keep_going:
            raise
        return Failure.of(t.id, exc)


def _ordered(pool: Any, items: Iterator[Transcript], *, window: int) -> Iterator[Any]:
    """`pool.imap(_work_one, items)` with at most `window` transcripts in flight: imap would
    read the whole input ahead of a slow transcript and hold every result that overtook it."""
    pending: deque[Any] = deque()
    for t in items:
        pending.append(pool.apply_async(_work_one, (t,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()
