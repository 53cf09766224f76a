"""`ctxkit expand`'s engine: read a compacted transcript -> restore each from its archive ->
write the originals (atomically), for a file, a piped one, or a directory run's shards.

A file in which nothing was compacted is written as read, byte for byte; one that compact
left unchanged has no archive and needs none.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxkit.atomic import spooled_input
from ctxkit.english import counted
from ctxkit.errors import UsageError
from ctxkit.fileio import check_paths

if TYPE_CHECKING:
    from ctxkit.archive.store import Archive
    from ctxkit.engines.shards import ShardedArchive
    from ctxkit.model import Transcript


@dataclass(frozen=True)
class ExpandRequest:
    """What to expand (`compacted`: a file, `-`, or a directory run's output), from which
    archive (None: the one beside it, else the one compact writes for stdout), to where
    (`output`: a file, `-`, or `DIR/`), and the formats (None: detected, the original's)."""

    compacted: str = "-"
    archive: str | None = None
    output: str = "-"
    from_format: str | None = None
    to_format: str | None = None


@dataclass(frozen=True)
class ExpandSummary:
    """What an expand did: transcripts restored, how many had nothing archived, from which
    archive; for a directory run, its files and the -o DIR/ they went into."""

    transcripts: int
    untouched: int = 0
    archive: str | None = None  # None: no archive (nothing was compacted)
    files: int | None = None  # a directory run's outputs
    into: str | None = None  # -o DIR/

    def describe(self) -> str:
        """The line for people: 'Expanded 2 transcripts from a.ctx.db'."""
        n = counted(self.transcripts, "transcript")
        if self.archive is None:
            return f"Expanded {n}: none was compacted (no refs, no archive), written as read"
        if self.files is not None:
            where = f" into {self.into}" if self.into else ""
            return f"Expanded {n} from {counted(self.files, 'file')} of {self.archive}{where}"
        note = (
            f" ({self.untouched:,} had nothing archived and "
            f"{'is' if self.untouched == 1 else 'are'} written as read)"
            if self.untouched
            else ""
        )
        return f"Expanded {n} from {self.archive}{note}"


def open_for_reading(path: str) -> Archive | ShardedArchive:
    """Open an existing archive, or a directory of archive shards (`compact --engine ray`);
    read-only when the file cannot be written (no access stats then)."""
    from ctxkit.engines.shards import open_archive

    readonly = os.path.exists(path) and not os.access(path, os.W_OK)
    return open_archive(path, readonly=readonly)


class _Tally:
    """Transcripts read and those the archive had nothing for (restored as they were)."""

    def __init__(self) -> None:
        self.read = 0
        self.untouched = 0

    def restored(
        self, archive: Archive | ShardedArchive, found: Iterator[Transcript]
    ) -> Iterator[Transcript]:
        """Each transcript's original, one conversation at a time: a dataset is never held whole."""
        for t in found:
            original = archive.restore(t)
            self.read += 1
            self.untouched += original is t
            yield original


def expand(request: ExpandRequest) -> ExpandSummary:
    """Restore the originals of `request.compacted` into `request.output`.

        >>> expand(ExpandRequest("small.jsonl", output="original.jsonl"))  # doctest: +SKIP
    """
    from ctxkit.archive.refs import archives_for, default_archive_path
    from ctxkit.archive.store import Archive
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.formats import read_path

    r = request
    if os.path.isdir(r.compacted):
        # `compact --engine ray -o DIR`: its output shards in order, its archive shards beside
        return _expand_shards(r.compacted, r.archive or r.compacted, r.output, r.from_format, r.to_format)
    path = r.archive or default_archive_path(None if r.compacted == "-" else r.compacted)
    if not r.archive and not os.path.exists(path):
        # a file compact wrote to stdout: its archive is the user's piped one
        path = next((p for p in archives_for(r.compacted) if os.path.exists(p)), path)
    check_paths({"COMPACTED": r.compacted, "--archive": path}, {"-o": r.output})
    if not os.path.exists(path):
        if not r.archive:
            unchanged = _written_as_read(r.compacted, r.output, r.from_format, r.to_format)
            if unchanged is not None:
                return unchanged  # compact changed nothing and so archived nothing
        Archive(path, create=False)  # raises the clear error
    tally = _Tally()
    with spooled_input(r.compacted) as source, open_for_reading(path) as archive:
        label = None if source == r.compacted else ("<stdin>" if r.compacted == "-" else r.compacted)
        with transcript_output(r.output, source, r.to_format) as sink:
            sink.write(tally.restored(archive, read_path(source, r.from_format, label=label)))
            if not tally.read:
                raise UsageError(f"{r.compacted}: no transcript to expand")
            if tally.untouched == tally.read:
                sink.keep_input()  # nothing was compacted: the input, byte for byte
    return ExpandSummary(tally.read, tally.untouched, path)


def _written_as_read(
    compacted: str, output: str, from_format: str | None, to_format: str | None
) -> ExpandSummary | None:
    """A file compact left unchanged (no unit names an archive, so it wrote none): written as
    read; None when some unit was compacted (its archive is needed)."""
    from ctxkit.archive.refs import first_compacted
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.formats import read_path

    with spooled_input(compacted) as source:
        found = list(read_path(source, from_format, label=None if source == compacted else compacted))
        if not found or any(first_compacted(t.units) is not None for t in found):
            return None
        with transcript_output(output, source, to_format) as sink:
            sink.write(iter(found))
            sink.keep_input()
    return ExpandSummary(len(found))


def _expand_shards(
    directory: str, archive_path: str, output: str, from_format: str | None, to_format: str | None
) -> ExpandSummary:
    """Every output of a directory run restored, in input order (its index's; without one, name
    order): into one output, or with `-o DIR/` each into a file of its own name there (a file
    in which nothing was compacted as it was, byte for byte)."""
    from ctxkit.atomic import output_directory
    from ctxkit.compaction.sinks import transcript_output
    from ctxkit.engines.shards import indexed_outputs
    from ctxkit.formats import expand_paths, read_path

    files = indexed_outputs(directory)
    if files is None:
        files = expand_paths([directory])
    elif not files:
        raise UsageError(f"{directory}: no transcript to expand (the run that wrote it wrote no output)")
    to_dir = output.endswith(os.sep) or os.path.isdir(output)
    check_paths({"COMPACTED": files, "--archive": archive_path}, {"-o": None if to_dir else output})
    tally = _Tally()

    def originals(archive: Archive | ShardedArchive, paths: list[str]) -> Iterator[Transcript]:
        for path in paths:
            yield from tally.restored(archive, read_path(path, from_format))

    with open_for_reading(archive_path) as archive:
        if to_dir:
            if os.path.realpath(output) == os.path.realpath(directory):
                raise UsageError(f"-o {output} is the directory expanded: give another -o DIR/")
            with output_directory(output):
                for path in files:
                    read, untouched = tally.read, tally.untouched
                    with transcript_output(os.path.join(output, os.path.basename(path)), path, to_format) as sink:
                        sink.write(originals(archive, [path]))
                        if tally.untouched - untouched == tally.read - read:
                            sink.keep_input()  # nothing compacted in it: the file as it was
        else:
            with transcript_output(output, directory, to_format) as sink:
                sink.write(originals(archive, files))
                if not tally.read:
                    raise UsageError(f"{directory}: no transcript to expand")
    return ExpandSummary(tally.read, tally.untouched, archive_path, len(files), output if to_dir else None)
