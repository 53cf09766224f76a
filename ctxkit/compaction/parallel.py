"""Compaction of many transcripts (a dataset), optionally in forked worker processes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ctxkit.archive import Archive, ref_scope
from ctxkit.compaction.chain import compact
from ctxkit.compaction.options import CompactSettings
from ctxkit.compaction.result import CompactResult, Event, Observer
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
        return ("error", (type(exc).__name__, str(exc), exc.exit_code), events, [], None)
    rows = scratch.list(t.id) if result.changed else []
    original = scratch.original(t.id) if result.changed else None
    scratch.close()
    return ("ok", result, events, rows, original)


def compact_many(
    transcripts: Iterable[Transcript],
    settings: CompactSettings,
    *,
    jobs: int = 1,
    archive: Archive | None = None,
    observe: Observer | None = None,
) -> Iterator[CompactResult]:
    """`compact` over many transcripts, results in input order; `jobs` > 1 forks worker processes.

    Workers archive into memory and hand their rows back, so the archive file has one writer and
    the same refs as a serial run (refs are content hashes).
    """
    import sys

    # Forking a process whose torch threads are running can deadlock the children: fork only
    # while torch is not loaded (the CLI's embedder is lazy, so its parent has not loaded it).
    if jobs <= 1 or "torch" in sys.modules:
        for t in transcripts:
            yield compact(t, settings, archive=archive, observe=observe)
        return
    import multiprocessing

    _WORK.clear()
    _WORK["settings"] = settings
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for status, payload, events, rows, original in pool.imap(_work_one, transcripts):
                for event in events:
                    if observe is not None:
                        observe(event)
                if status == "error":
                    kind, message, code = payload
                    error = CtxkitError(message)
                    error.exit_code = code
                    raise error
                if archive is not None and original is not None:
                    archive.begin()
                    key = archive.key_for(original)  # refs do not depend on it, rows do
                    scope = ref_scope(original)
                    units = [(row, row.unit()) for row in rows]
                    if any(archive.ref_for(scope, u)[0] != row.ref for row, u in units):
                        # A ref clashes with a unit this archive already holds: redo this one
                        # here, where the ref can grow.
                        yield compact(original, settings, archive=archive, observe=observe)
                        continue
                    archive.put_transcript(original, key=key)
                    for row, u in units:
                        archive.put(key, u, summary=row.summary, tokens=row.tokens, scope=scope)
                yield payload
    finally:
        _WORK.clear()
