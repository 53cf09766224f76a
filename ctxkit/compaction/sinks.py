"""The sinks `compaction.run` writes files through: `compact` and `expand` write transcripts to a
text file (JSON / JSONL) or a Parquet dataset (`-o x.parquet`), written in full before it
replaces the target."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from ctxkit.atomic import rewindable_output, rewrite_with
from ctxkit.formats import write_transcripts
from ctxkit.formats.parquet import SUFFIX, ParquetWriter, is_parquet
from ctxkit.model import Transcript


class _TextSink:
    def __init__(self, out: IO[str], source: str, to_format: str | None) -> None:
        self.out, self.source, self.to_format = out, source, to_format

    def write(self, transcripts: Iterable[Transcript]) -> None:
        write_transcripts(transcripts, self.out, self.to_format)

    def keep_input(self) -> None:
        # A Parquet input becomes JSONL even when nothing changed: the text is the point.
        if self.to_format is None and not is_parquet(self.source):
            rewrite_with(self.out, self.source)


class _ParquetSink:
    def __init__(self, writer: ParquetWriter, source: str, to_format: str | None) -> None:
        self.writer, self.source, self.to_format = writer, source, to_format

    def write(self, transcripts: Iterable[Transcript]) -> None:
        for t in transcripts:
            self.writer.write(t)

    def keep_input(self) -> None:
        if self.to_format is None and is_parquet(self.source):
            self.writer.replace_with(self.source)


@contextmanager
def transcript_output(
    output: str, source: str, to_format: str | None, *, discard: bool = False
) -> Iterator[Any]:
    """A sink with `write(transcripts)` and `keep_input()` (nothing changed: the output is the
    input, byte for byte, when both are of a kind); `output` ending in .parquet is a Parquet
    dataset, anything else text (`-` = stdout). With `discard`, nothing is written."""
    if output.endswith(SUFFIX) and not discard:
        with ParquetWriter(output, to_format) as w:
            yield _ParquetSink(w, source, to_format)
        return
    with rewindable_output("-" if discard else output, discard=discard) as out:
        yield _TextSink(out, source, to_format)
