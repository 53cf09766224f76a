"""One compaction run: source, sink, settings and archive in; a run summary out.

`run` owns the sequence every caller used to spell out: the archive transaction opens, each
transcript of the source is compacted (in `jobs` processes) and written to the sink as it
comes, then the archive commits before the sink is closed, so an output always finds its refs;
anything raised rolls both back (the archive as it was, no output). `ctxkit compact`
(`engines.compact`), both Ray paths (`engines.ray`), `score-rl` (`rl.run_action`) and `bench`
call it.

Example:
    >>> from ctxkit.compaction import CompactSettings
    >>> from ctxkit.compaction.run import ListSink, run
    >>> from ctxkit.simulate import generate
    >>> sink = ListSink()
    >>> summary = run([generate("long_chat", seed=1)], CompactSettings(limit=5000), sink=sink)
    >>> summary.conversations, summary.changed, len(sink.transcripts)
    (1, 1, 1)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from ctxkit.archive.store import Archive
from ctxkit.compaction.options import CompactSettings
from ctxkit.compaction.parallel import compact_many
from ctxkit.compaction.result import CompactResult, Failure, Observer
from ctxkit.model import Transcript

MEMORY = ":memory:"


class Sink(Protocol):
    """Where a run's transcripts go: `write` takes them lazily, in input order; `keep_input`
    is called when nothing changed (an output that can be the input byte for byte is)."""

    def write(self, transcripts: Iterable[Transcript]) -> None: ...

    def keep_input(self) -> None: ...


class ListSink:
    """A sink that keeps the transcripts in memory (a library call, a Ray batch, a test)."""

    def __init__(self) -> None:
        self.transcripts: list[Transcript] = []

    def write(self, transcripts: Iterable[Transcript]) -> None:
        self.transcripts.extend(transcripts)

    def keep_input(self) -> None:
        pass

    def __enter__(self) -> ListSink:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@dataclass(frozen=True)
class ArchiveTarget:
    """Where a run archives what it removes: a file, or memory (a dry run, a score).

    `staged`: the file is written under a temp name beside `path` and renamed to it once
    committed, so it is whole or absent (a Ray shard's archive); otherwise rows join the file
    in one transaction, which a failed run rolls back.
    """

    path: str = MEMORY
    staged: bool = False

    def open(self) -> tuple[Archive, str | None]:
        """The open archive, and its temp name when staged."""
        if not self.staged or self.path == MEMORY:
            return Archive(self.path), None
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, scratch = tempfile.mkstemp(
            prefix=f".{os.path.basename(self.path)}.", suffix=".tmp", dir=folder
        )
        os.close(fd)
        os.unlink(scratch)  # the archive creates it, 0600
        return Archive(scratch), scratch


@dataclass
class RunSummary:
    """What a run did: conversations read, compacted (changed), tokens before and after, each
    broken invariant (`<id>: <violation>`), and each conversation it could not compact."""

    conversations: int = 0
    changed: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    violations: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def written(self) -> int:
        """Conversations written to the sink."""
        return self.conversations - len(self.failures)

    def add(self, item: CompactResult | Failure) -> None:
        """Count one result or failure."""
        self.conversations += 1
        if isinstance(item, Failure):
            self.failures.append(item)
            return
        self.changed += item.changed
        self.tokens_before += item.tokens_before
        self.tokens_after += item.tokens_after
        tid = item.transcript.id
        self.violations += [f"{tid}: {v}" for v in item.invariants["violations"]]

    def merge(self, other: RunSummary) -> None:
        """Add another run's figures (a shard run elsewhere) to these: each count summed, each
        list extended."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "changed": self.changed,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "violations": list(self.violations),
            "failures": [f.to_dict() for f in self.failures],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSummary:
        return cls(
            int(d["conversations"]),
            int(d["changed"]),
            int(d["tokens_before"]),
            int(d["tokens_after"]),
            list(d["violations"]),
            [Failure.from_dict(f) for f in d["failures"]],
        )


OnResult = Callable[[CompactResult | Failure, Archive], None]


def run(
    source: Iterable[Transcript],
    settings: CompactSettings,
    *,
    sink: AbstractContextManager[Sink] | None = None,
    archive: ArchiveTarget = ArchiveTarget(),
    jobs: int = 1,
    observe: Observer | None = None,
    on_result: OnResult | None = None,
    keep_going: bool = False,
    before_commit: Callable[[], None] | None = None,
) -> RunSummary:
    """Compact every transcript of `source` (read lazily) into `sink`, archiving what is
    removed in `archive`; the summary.

    `sink` is entered by the run and left after the archive commits (None: the transcripts go
    nowhere, `on_result` sees each result with the open archive). A transcript that cannot be
    compacted raises its error, and nothing is written; with `keep_going` (a dataset) it is
    left out of the output, its archive rows undone, and listed in the summary's failures.
    `before_commit` runs once every transcript is written, before the archive commits (what
    must be whole for the run to count: a report staged beside the output); if it raises,
    nothing is written. A compacted transcript's "after" is counted on what the sink's file
    holds when `settings.as_written` says how it reads back (`with_output_format`), so it is
    what `count` says of the output (a format may join a summary to the request before it).
    """
    summary = RunSummary()
    store, scratch = archive.open()
    try:
        store.begin()  # the write lock, held to the commit: keys and refs chosen once
        with sink if sink is not None else nullcontext(ListSink()) as out:
            results = compact_many(
                source, settings, jobs=jobs, archive=store, observe=observe, keep_going=keep_going
            )
            out.write(_written(results, summary, store, on_result, settings))
            if not summary.changed and not summary.failures:
                out.keep_input()
            if before_commit is not None:
                before_commit()
            if not summary.changed and store.created:
                store.abort()  # nothing archived: an archive file this run made is not left empty
                if scratch is not None:
                    _discard(scratch)  # a staged archive: never renamed into place
            else:
                store.close()  # commits: the archive is whole before the output appears
                if scratch is not None:
                    os.replace(scratch, archive.path)
    except BaseException:
        store.abort()
        if scratch is not None:
            _discard(scratch)
        raise
    return summary


def _discard(scratch: str) -> None:
    """A staged archive's temp file (and journal), gone."""
    for leftover in (scratch, scratch + "-journal"):
        if os.path.exists(leftover):
            os.unlink(leftover)


def _written(
    results: Iterable[CompactResult | Failure],
    summary: RunSummary,
    archive: Archive,
    on_result: OnResult | None,
    settings: CompactSettings,
) -> Iterator[Transcript]:
    for item in results:
        summary.add(item)
        if on_result is not None:
            on_result(item, archive)
        if isinstance(item, CompactResult):
            yield item.transcript


def compact_one(
    t: Transcript, settings: CompactSettings, *, archive: ArchiveTarget = ArchiveTarget()
) -> CompactResult:
    """One transcript through `run` (scratch archive in memory unless given): its result."""
    got: list[CompactResult] = []

    def keep(item: CompactResult | Failure, _archive: Archive) -> None:
        if isinstance(item, CompactResult):
            got.append(item)

    run([t], settings, archive=archive, on_result=keep)
    return got[0]
