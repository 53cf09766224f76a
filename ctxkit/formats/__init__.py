"""Transcript formats: detect, read and write.

Each format is a module implementing one written contract (`formats.base.Format`: detect,
read, write, validate), listed in `formats.registry`; `formats.reader` and `formats.writer`
do the rest for every format alike. Every reader turns a file into `Transcript`s of canonical `Unit`s; every writer turns them back.
A unit read from a file keeps its source record in `raw` and the record's index in `group`, and a
writer emits the raw record once per untouched group, so reading then writing the same format
reproduces the file record for record.

    >>> import io
    >>> from ctxkit.formats import read_text, write_transcripts
    >>> text = '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]'
    >>> (t,) = read_text(text)
    >>> t.source_format, [(u.role, u.content) for u in t.units]
    ('openai', [('user', 'Hi'), ('assistant', 'Hello!')])
    >>> out = io.StringIO()
    >>> write_transcripts([t], out)  # same records, same format (read_path/write_path for files)
    >>> print(out.getvalue(), end="")
    [
      {
        "role": "user",
        "content": "Hi"
      },
      {
        "role": "assistant",
        "content": "Hello!"
      }
    ]
"""

from __future__ import annotations

from ctxkit.formats import parquet
from ctxkit.formats.base import Format
from ctxkit.formats.common import ReadOptions, ReadStats
from ctxkit.formats.reader import (
    expand_paths,
    is_text_transcript,
    known_file,
    read_conversation,
    read_dataset_line,
    read_path,
    read_text,
    reads_datasets,
)
from ctxkit.formats.registry import FORMATS, WRITABLE, detect_format, is_conversation
from ctxkit.formats.writer import (
    MAX_RECORD_DEPTH,
    check_depth,
    dataset_item,
    json_depth,
    output_format_for,
    write_path,
    write_transcripts,
)

parquet.bind(read_conversation, dataset_item)

__all__ = [
    "FORMATS",
    "MAX_RECORD_DEPTH",
    "WRITABLE",
    "Format",
    "ReadOptions",
    "ReadStats",
    "check_depth",
    "dataset_item",
    "detect_format",
    "expand_paths",
    "is_conversation",
    "is_text_transcript",
    "json_depth",
    "known_file",
    "output_format_for",
    "read_conversation",
    "read_dataset_line",
    "read_path",
    "read_text",
    "reads_datasets",
    "write_path",
    "write_transcripts",
]
