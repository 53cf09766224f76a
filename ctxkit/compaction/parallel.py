"""Compaction of many transcripts (a dataset), optionally in forked worker processes."""

from __future__ import annotations

import dataclasses
import os
import signal
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import Any

from ctxkit.archive.store import Archive, Rows, ref_scope
from ctxkit.compaction.chain import compact
from ctxkit.compaction.options import CompactSettings
from ctxkit.compaction.result import CompactResult, Event, Failure, Observer
from ctxkit.counting import transcript_label
from ctxkit.errors import ArchiveError, CtxkitError
from ctxkit.memo import forget
from ctxkit.model import Transcript

_WORK: dict[str, Any] = {}  # what forked workers inherit: the run's settings (how it counts among them)


def _work_one(t: Transcript) -> tuple[str, Any, list[Event], Rows | None]:
    """Compact one transcript in a worker, into a private in-memory archive whose rows go back to
    the parent packed, as they will be stored (one process writes the SQLite file, and packs
    nothing again)."""
    events: list[Event] = []
    scratch = Archive(":memory:")
    settings = _WORK["settings"]
    try:
        result = compact(t, settings, archive=scratch, observe=events.append)
    except CtxkitError as exc:
        return ("error", Failure.of(t.id, exc, transcript_label(t)), events, None)
    finally:
        forget()  # no later conversation shares its units: the worker's memory stays flat
    rows = scratch.rows_of(scratch.key_for(t)) if result.changed else None
    scratch.close()
    # the parent has the original: it need not come back
    return ("ok", dataclasses.replace(result, original=None), events, rows)


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
    in the results instead, and none of its archive rows stay. A result's "after" is counted
    where it was compacted (`CompactSettings.as_written`): a worker's counts are warm for it,
    the parent's are not.
    """
    import sys

    items = iter(transcripts)
    workers, head = plan_workers(jobs, items)
    # Forking a process whose torch threads are running can deadlock the children: fork only
    # while torch is not loaded (the CLI's embedder is lazy, so its parent has not loaded it).
    if workers <= 1 or "torch" in sys.modules:
        for t in chain(head, items):
            result = _compact_one(t, settings, archive, observe, keep_going)
            forget()  # no later conversation shares its units: memory stays flat
            yield result
        return
    import multiprocessing

    _WORK.clear()
    _WORK["settings"] = settings
    try:
        with multiprocessing.get_context("fork").Pool(
            workers, initializer=_quiet_worker, initargs=(os.getpid(),)
        ) as pool:
            for t, (status, payload, events, rows) in _ordered(
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
                payload = dataclasses.replace(payload, original=t)
                if archive is not None and rows is not None:
                    key = archive.key_for(t)  # refs do not depend on it, rows do
                    if not archive.take(t, key, rows):
                        # a ref this archive holds already: store the units one by one, or
                        # redo this one here when a ref clashes, where it can grow
                        scope = ref_scope(t)
                        units = rows.archived(t)
                        if any(archive.ref_for(scope, u)[0] != ref for ref, u, _, _ in units):
                            yield _compact_one(t, settings, archive, observe, keep_going)
                            continue
                        archive.put_transcript(t, key=key)
                        for _ref, u, summary, tokens in units:
                            archive.put(key, u, summary=summary, tokens=tokens, scope=scope)
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
    except ArchiveError:
        # the archive's trouble (a full disk, a damaged row), not this conversation's: it
        # stops the run, whose other rows may be gone with it
        raise
    except CtxkitError as exc:
        if not keep_going:
            raise
        return Failure.of(t.id, exc, transcript_label(t))


def _ordered(pool: Any, items: Iterator[Transcript], *, window: int) -> Iterator[tuple[Transcript, Any]]:
    """(transcript, `_work_one(transcript)`) in input order, at most `window` transcripts in
    flight: `pool.imap` would read the whole input ahead of a slow transcript and hold every
    result that overtook it."""
    pending: deque[tuple[Transcript, Any]] = deque()
    for t in items:
        pending.append((t, pool.apply_async(_work_one, (t,))))
        if len(pending) >= window:
            first, result = pending.popleft()
            yield first, result.get()
    while pending:
        first, result = pending.popleft()
        yield first, result.get()
