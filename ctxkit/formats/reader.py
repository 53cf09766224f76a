"""Reading transcripts: a file (or stdin, or a string) to `Transcript`s, whatever its format.

The reader sniffs the stream (a text format, one JSON document, or JSONL), tells a dataset (one
conversation per line or item) from one transcript, asks the registry which format it is, and
hands the records to that format's `read`. It names no format: what it needs to know about one
is in its `Format` record (its shape, its key, whether a forced --from must see its records).
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ctxkit.errors import InputError, unknown_name
from ctxkit.fileio import max_input_bytes, read_limited, too_large
from ctxkit.formats import parquet
from ctxkit.formats.base import Format
from ctxkit.formats.common import ReadOptions, ReadStats, Source, loads, snippet_of
from ctxkit.formats.registry import FORMATS, detect_format, is_conversation, kinds
from ctxkit.model import Transcript

__all__ = [
    "expand_paths",
    "is_text_transcript",
    "known_file",
    "read_conversation",
    "read_dataset_line",
    "read_path",
    "read_text",
    "reads_datasets",
    "suffixes",
]

# Transcript.metadata: the key a conversation object held its records under, when it was one of
# its format's `also_keys`
RECORDS_KEY = "records_key"


def suffixes() -> tuple[str, ...]:
    """The file suffixes a directory argument expands to: every format's (`Format.suffixes`), in
    registry order, then Parquet's (a text format's *.md files are found by their first bytes)."""
    out = [s for f in FORMATS.values() for s in f.suffixes]
    return tuple(dict.fromkeys([*out, parquet.SUFFIX]))

_SNIFF_BYTES = 8192
_CHUNK = 1 << 20  # a line is read in pieces of this size
_LEADING_SPACE = re.compile(rb"\s*")


def _text_formats() -> list[Format]:
    return [f for f in FORMATS.values() if f.shape == "text"]


def _a(label: str) -> str:
    return ("an " if label[:1].lower() in "aeiou" else "a ") + label


# ---------------------------------------------------------------- paths


def expand_paths(paths: Sequence[str]) -> list[str]:
    """Globs expanded (sorted), directories to their *.json/*.jsonl/*.traj/*.parquet (and aider
    histories, *.md that are one), none to ["-"] (stdin)."""
    if not paths:
        return ["-"]
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
        elif any(ch in p for ch in "*?["):
            import glob  # here: a plain path never needs it

            hits = sorted(h for h in glob.glob(p, recursive=True) if os.path.isfile(h))
            if not hits:
                raise InputError(p, None, "no file matches this pattern")
            out.extend(hits)
        elif os.path.isdir(p):
            known = suffixes()
            hits = sorted(
                str(h) for h in Path(p).iterdir()
                if h.is_file() and (h.suffix in known or (h.suffix == ".md" and _is_text_transcript(h)))
            )
            if not hits:
                globs = ", ".join(f"*{s}" for s in known)
                raise InputError(p, None, f"directory holds no {globs} or aider *.md file")
            out.extend(hits)
        elif os.path.exists(p):
            out.append(p)
        else:
            try:
                os.stat(p)
            except PermissionError:
                raise InputError(p, None, "permission denied (a folder on the path cannot be searched)") from None
            except OSError:
                pass
            raise InputError(p, None, "no such file or directory")
    return out


def is_text_transcript(path: str | Path) -> bool:
    """Whether a markdown file is a transcript of a text format (an aider chat history)."""
    return _is_text_transcript(Path(path))


def _is_text_transcript(path: Path) -> bool:
    """Whether a markdown file is a transcript of a text format (an aider chat history)."""
    if any(f.suffix and path.name.endswith(f.suffix) for f in _text_formats()):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return False
    return any(f.looks_like(head) for f in _text_formats())



# ---------------------------------------------------------------- reading


def _stem(path: str) -> str:
    if path in ("-", "<stdin>", "<string>"):
        return "stdin" if path != "<string>" else "string"
    name = Path(path).name
    for suffix in (".jsonl", ".json", ".parquet", ".traj", ".md"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _diagnose(data: bytes, exc: Exception | None, *, last: bool) -> str:
    """Why a line (or document) is not JSON, in words a user can act on."""
    if b"\x00" in data[:_SNIFF_BYTES]:
        return "binary data, not a JSON transcript"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"invalid UTF-8 (byte {err.start}): transcripts must be UTF-8 JSON"
    stripped = data.rstrip()
    if last and not data.endswith(b"\n") and stripped[:1] in (b"{", b"[") and stripped[-1:] not in (b"}", b"]"):
        return "truncated record: the last line ends before its closing bracket"
    msg = str(exc).split(":", 1)[0] if exc else "invalid JSON"
    return f"not valid JSON ({msg}); expected one JSON object per line or one JSON document"


class _Reader:
    """Reads one stream: sniffs JSON document vs JSONL, then hands records to a format."""

    def __init__(self, path: str, opts: ReadOptions, stats: ReadStats) -> None:
        self.path = path
        self.fmt = opts.format
        self.include_sidechains = opts.include_sidechains
        self.include_compacted = opts.include_compacted
        self.skip_invalid = opts.skip_invalid
        self.stats = stats
        self.stem = _stem(path)
        self.seen_blocks: set[str] = set()
        # nothing larger is held: a line, a document, the lines of one transcript (an endless
        # input meets it instead of the machine's memory)
        self.limit = max_input_bytes(opts.max_input_mb)

    def _forced_shape(self) -> str | None:
        return FORMATS[self.fmt].shape if self.fmt is not None else None

    def _reads_datasets(self) -> bool:
        """A forced log format reads every line as one of its records, never as a dataset."""
        return self._forced_shape() != "log"

    # -- errors

    def fail(self, line: int | None, problem: str, snippet: Any = None) -> None:
        """Raise, or count and go on when skipping invalid input."""
        if self.skip_invalid:
            self.stats.skipped_invalid += 1
            self.stats.warnings.append(f"{self.path}:{line or '-'}: {problem}")
            return
        raise InputError(self.path, line, problem, snippet_of(snippet))

    # -- bounded reads

    def _lines(self, stream: BinaryIO, before: int) -> Iterator[bytes]:
        """The stream's lines (line `before` + 1 first), each at most the input limit."""
        n = before
        while True:
            raw = stream.readline(_CHUNK)
            if not raw:
                return
            n += 1
            if len(raw) == _CHUNK and not raw.endswith(b"\n"):
                raw = self._long_line(stream, raw, n)
            yield raw

    def _long_line(self, stream: BinaryIO, start: bytes, n: int) -> bytes:
        """The rest of a line longer than a chunk, gathered in chunks: over the limit, it fails
        holding the limit once (a single `readline(limit)` grows to twice that, slowly)."""
        chunks, size = [start], len(start)
        while not chunks[-1].endswith(b"\n"):
            chunk = stream.readline(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > self.limit:
                del chunks
                raise InputError(self.path, n, too_large(self.limit, "line"))
            chunks.append(chunk)
        return b"".join(chunks)

    def _rest(self, stream: BinaryIO, line: int, held: int) -> bytes:
        """The rest of the stream, when `held` bytes of the same document are already read."""
        try:
            return read_limited(stream, self.limit - held, self.path, line)
        except InputError:
            raise InputError(self.path, line, too_large(self.limit, "document")) from None

    # -- entry

    def read(self, stream: BinaryIO) -> Iterator[Transcript]:
        peek = getattr(stream, "peek", None)
        if peek is not None and b"\x00" in peek(_SNIFF_BYTES)[:_SNIFF_BYTES]:
            # /dev/zero, an image, a database: not a transcript, said before reading a line of it
            self.fail(1, "binary data, not a JSON transcript")
            return
        lineno = 0
        first = b""
        lead = b""  # the blank lines before the first line (a text format keeps them)
        for raw in self._lines(stream, 0):
            lineno += 1
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
                lead = b"\xef\xbb\xbf"
            if not raw.isspace():
                first = raw
                break
            lead += raw
        if not first:
            self.fail(None, "empty file: expected a JSON or JSONL transcript")
            return
        if b"\x00" in first[:_SNIFF_BYTES]:
            self.fail(lineno, "binary data, not a JSON transcript")
            return
        # Never strip a line that may be 50 MB: look at its first non-blank byte in place.
        start = _LEADING_SPACE.match(first).end()  # type: ignore[union-attr]
        head = first[start : start + 1]
        forced = FORMATS[self.fmt] if self.fmt is not None else None
        if head not in (b"{", b"[") or (forced is not None and forced.shape == "text"):
            data = lead + first + self._rest(stream, lineno, len(lead) + len(first))
            # A text format says so in its first line, or (a history that opens with an editor's
            # mode line, say) in its first few kilobytes.
            text_fmt = forced.name if forced is not None and forced.shape == "text" else next(
                (f.name for f in _text_formats() if forced is None and (f.sniff(first) or f.looks_like(data[:_SNIFF_BYTES]))),
                None,
            )
            if text_fmt is not None:
                yield from self.text(text_fmt, data, lineno, json_like=head in (b"{", b"["))
                return
            stream = io.BytesIO(data[len(lead) + len(first) :])
        bare = len(first) < 64 and first.strip() in (b"{", b"[")
        if head == b"{" and not bare:
            try:
                obj = loads(first)
            except orjson.JSONDecodeError:
                obj = None
            if obj is None:
                # A JSON document whose first line is not a whole object, or a JSONL file with a
                # broken first line: the document reading decides, else the lines do.
                rest = self._rest(stream, lineno, len(first))
                try:
                    doc = loads(first + rest)
                except orjson.JSONDecodeError:
                    yield from self.jsonl([(lineno, first, None)], io.BytesIO(rest), lineno)
                    return
                yield from self.document(doc, one_line=False)
                return
            nxt, nxt_line = b"", lineno
            for raw in self._lines(stream, lineno):
                nxt_line += 1
                if not raw.isspace():
                    nxt = raw
                    break
            if not nxt:
                yield from self.document(obj, one_line=True)
                return
            yield from self.jsonl([(lineno, first, obj), (nxt_line, nxt, None)], stream, nxt_line)
            return
        if head in (b"{", b"["):
            rest = self._rest(stream, lineno, len(first))
            data = first + rest if rest else first
            del rest
            try:
                doc = loads(data)
            except orjson.JSONDecodeError as exc:
                line = lineno + (getattr(exc, "lineno", 1) or 1) - 1
                problem = _diagnose(data, exc, last=False)
                if "end of data" in str(exc) or "EOF" in str(exc):
                    problem = "truncated JSON document: the file ends before its closing bracket"
                self.fail(line, problem, first)
                return
            yield from self.document(doc, one_line=False, newline=data.rstrip(b" \t\r").endswith(b"\n"))
            return
        yield from self.jsonl([(lineno, first, None)], stream, lineno)

    def text(self, fmt: str, data: bytes, lineno: int, *, json_like: bool) -> Iterator[Transcript]:
        """A text format's file, read whole (aider's markdown)."""
        label = _a(FORMATS[fmt].label)
        if json_like:
            self.fail(lineno, f"not {label}: the file is JSON (leave --from out)", data[:60])
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            self.fail(None, f"invalid UTF-8 (byte {err.start}): {label} must be UTF-8 text")
            return
        del data
        src = self._source("lines", {}, None, None, self.stem)
        try:
            transcripts = FORMATS[fmt].read(text, src)
        except InputError:
            if not self.skip_invalid:
                raise
            self.fail(None, f"not {label}")
            return
        for t in transcripts if isinstance(transcripts, list) else [transcripts]:
            yield self._finish(t, t.id)

    def _parsed(self, first: list[tuple[int, bytes, Any]], stream: BinaryIO, start: int) -> Iterator[tuple[int, Any, int]]:
        """(line number, parsed record, its bytes) for the lines already read, then the rest."""
        for n, raw, obj in first:
            if obj is None:
                obj = self._parse_line(n, raw)
                if obj is None:
                    continue
            yield n, obj, len(raw)
        n = start
        for raw in self._lines(stream, start):
            n += 1
            try:
                yield n, loads(raw), len(raw)
            except orjson.JSONDecodeError:
                if raw.isspace():
                    continue
                obj = self._parse_line(n, raw)
                if obj is not None:
                    yield n, obj, len(raw)

    def _parse_line(self, n: int, raw: bytes) -> Any:
        """A line's record, or None after reporting (or counting) why it is not one."""
        try:
            return loads(raw)
        except orjson.JSONDecodeError as exc:
            problem = _diagnose(raw, exc, last=not raw.endswith(b"\n"))
            self.fail(n, problem, None if problem.startswith("binary") else raw)
            return None

    # -- layouts

    def jsonl(self, first: list[tuple[int, bytes, Any]], stream: BinaryIO, start: int) -> Iterator[Transcript]:
        """One record per line: either a dataset (a conversation per line) or one transcript."""
        parsed = self._parsed(first, stream, start)
        records: list[Any] = []
        numbers: list[int] = []
        dataset = False
        held = 0  # bytes of the records of one transcript (a dataset holds one line at a time)
        for n, obj, size in parsed:
            self.stats.records += 1
            if not records and not dataset and self._reads_datasets():
                dataset = is_conversation(obj) or self._forced_shape() == "object"
            if dataset:
                if not is_conversation(obj):
                    self.fail(n, "expected a conversation object ({\"messages\": [...]}) like the lines before", obj)
                    continue
                t = self.conversation(obj, layout="dataset", line=n, tid=f"{self.stem}#{n}")
                if t is not None:
                    yield t
                continue
            held += size
            if held > self.limit:
                raise InputError(self.path, n, too_large(self.limit, "transcript"))
            records.append(obj)
            numbers.append(n)
        if dataset:
            return
        if not records:
            # Only reachable when every line was skipped as invalid.
            self.stats.warnings.append(f"{self.path}: no readable record in the file")
            return
        fmt = self.fmt or _detect_records(records)
        if fmt is None and is_truth_record(records[0]):
            self._skip_truth()
            return
        if fmt is None:
            self.fail(numbers[0], _unknown_shape(records[0]), records[0])
            return
        yield self.messages(fmt, records, layout="lines", lines=numbers, envelope={})

    def _skip_truth(self) -> None:
        """`ctxkit simulate -o DIR/` writes its ground truth beside its transcripts: a folder of
        them is an input (the commands that use the truth find it on their own), and the file
        is said to be skipped."""
        self.stats.skipped_files.append(f"{self.path} (simulate's ground truth, not a transcript)")

    def document(self, doc: Any, *, one_line: bool, newline: bool = True) -> Iterator[Transcript]:
        """A single JSON document: a message array, a conversation object, or a dataset array."""
        if isinstance(doc, list):
            self.stats.records += len(doc)
            if not doc:
                self.fail(1, "empty JSON array: expected messages or conversations")
                return
            if is_conversation(doc[0]):
                for i, conv in enumerate(doc):
                    if not is_conversation(conv):
                        self.fail(None, f"item {i + 1}: expected a conversation object like the items before", conv)
                        continue
                    t = self.conversation(conv, layout="dataset", line=i + 1, tid=f"{self.stem}#{i + 1}")
                    if t is not None:
                        t.metadata["dataset_layout"] = "array"  # written back as an array
                        yield t
                return
            fmt = self.fmt or _detect_records(doc)
            if fmt is None:
                self.fail(1, _unknown_shape(doc[0]), doc[0])
                return
            yield self.messages(fmt, doc, layout="array", lines=None, envelope={})
            return
        if isinstance(doc, dict):
            self.stats.records += 1
            if is_conversation(doc) or self._forced_shape() == "object":
                t = self.conversation(doc, layout="object", line=None, tid=self.stem)
                if t is not None:
                    if not newline and FORMATS[t.source_format].shape == "object":
                        t.metadata["eof_newline"] = False  # written back without one, as it was
                    yield t
                return
            fmt = self.fmt or detect_format([doc])
            if fmt is None and is_truth_record(doc):  # the ground truth of one scenario
                self._skip_truth()
                return
            if fmt is None:
                self.fail(1, _unknown_shape(doc), doc)
                return
            yield self.messages(fmt, [doc], layout="lines", lines=[1], envelope={})
            return
        self.fail(1, f"JSON {type(doc).__name__} is not a transcript: expected an array of messages, an object with `messages`, or JSONL", doc)

    def conversation(self, obj: dict[str, Any], *, layout: str, line: int | None, tid: str) -> Transcript | None:
        """One conversation object: a whole transcript of an object format, a format's own
        conversation object, or its records under the format's key beside an envelope."""
        fmt_name = self.fmt or detect_format(obj)
        if fmt_name is None:
            self.fail(line, _unknown_shape(obj), obj)
            return None
        fmt = FORMATS[fmt_name]
        if fmt.shape == "object":
            if self.fmt is not None and not fmt.detect_object(obj):
                self.fail(line, f"not {_a(fmt.label)}: {_found(obj)}", obj)
                return None
            read = fmt.read(obj, self._source(layout, {}, None, line, tid))
            if isinstance(read, list):
                raise TypeError(f"format {fmt.name}: read() of an object gives one transcript")
            return self._finish(read, tid)
        if fmt.read_object is not None and fmt.detect_object(obj):
            return self._finish(fmt.read_object(obj, self._source(layout, {}, None, line, tid)), tid)
        key = next((k for k in (fmt.key, *fmt.also_keys) if isinstance(obj.get(k), list)), fmt.key)
        if not isinstance(obj.get(key), list):
            self.fail(line, f"expected an object with a `{key}` list for format {fmt.name}", obj)
            return None
        envelope = {k: v for k, v in obj.items() if k != key}
        t = self.messages(fmt.name, obj[key], layout=layout, lines=None, envelope=envelope, line=line, tid=tid,
                          keys=list(obj))
        if key != fmt.key:
            t.metadata[RECORDS_KEY] = key  # written back under it
        return t

    def messages(
        self,
        fmt: str,
        records: list[Any],
        *,
        layout: str,
        lines: Sequence[int] | None,
        envelope: dict[str, Any],
        line: int | None = None,
        tid: str | None = None,
        keys: list[str] | None = None,
    ) -> Transcript:
        """Hand a list of records to the format's reader."""
        if fmt not in FORMATS:
            raise unknown_name("format", fmt, FORMATS)
        tid = tid or self.stem
        if self.fmt is not None and FORMATS[fmt].strict:
            self._check_forced(fmt, records, lines, line)
        src = self._source(layout, envelope, lines, line, tid)
        read = FORMATS[fmt].read(records, src)
        if isinstance(read, list):
            raise TypeError(f"format {fmt}: read() of records gives one transcript")
        return self._finish(read, tid, keys)

    def _check_forced(self, fmt: str, records: list[Any], lines: Sequence[int] | None, line: int | None) -> None:
        """A forced app-log format skips records it does not know, so a file of another format
        would read as nothing at all: refuse it when not one record has the format's shape."""
        detect = FORMATS[fmt].detect
        if any(detect([rec]) for rec in records):
            return
        found = detect_format(records) if records else None
        if found is None and records and is_conversation(records[0]):
            found = detect_format(records[0])  # a dataset: one conversation per line
        if found == fmt:
            found = None
        what = f"it looks like {found}" if found else f"its first record is {_found(records[0]) if records else 'nothing'}"
        hint = f"use --from {found} or leave --from out" if found else "leave --from out"
        where = lines[0] if lines else line
        raise InputError(
            self.path,
            where,
            f"not a {fmt} file: none of its {len(records):,} records is a {FORMATS[fmt].label} record "
            f"({what}; {hint})",
            snippet_of(records[0]) if records else "",
        )

    def _source(
        self, layout: str, envelope: dict[str, Any], lines: Sequence[int] | None, line: int | None, tid: str
    ) -> Source:
        return Source(
            path=self.path,
            layout=layout,
            envelope=envelope,
            lines=lines,
            line=line,
            tid=tid,
            include_sidechains=self.include_sidechains,
            skip_invalid=self.skip_invalid,
            stats=self.stats,
            seen_blocks=self.seen_blocks,
            include_compacted=self.include_compacted,
        )

    def _finish(self, t: Transcript, tid: str, keys: list[str] | None = None) -> Transcript:
        t.path = self.path
        for u in t.units:
            if u.source is None:
                u.source = u.raw  # the template a writer rebuilds a changed unit from
        own = FORMATS.get(t.source_format)
        if keys and keys != [own.key if own is not None else "messages"]:
            t.metadata["key_order"] = keys
        if t.id == "t0" or not t.id:
            t.id = tid
        if len({u.id for u in t.units}) != len(t.units):
            # The units and chat readers never repeat an id; an app log that does would have its
            # compaction steps refused by the checks, which name units by id: say so up front.
            twice = next(uid for uid, n in Counter(u.id for u in t.units).items() if n > 1)
            self.stats.warnings.append(
                f"{self.path}:{t.line or '-'}: unit id {twice!r} repeats in transcript {t.id}; "
                "compaction steps that touch it will be refused"
            )
        return t


def _detect_records(records: list[Any]) -> str | None:
    """The format of a list of records; when one broken record spoils the whole, the format of
    the first, so its reader reports the broken record on its own line."""
    return detect_format(records) or (detect_format(records[:1]) if len(records) > 1 else None)


def is_truth_record(obj: Any) -> bool:
    """Whether a record is one of `ctxkit simulate`'s ground truth ({id, file, line,
    ground_truth}), which is no transcript."""
    return isinstance(obj, dict) and "id" in obj and isinstance(obj.get("ground_truth"), dict)


def _found(obj: Any) -> str:
    """What a parsed value is, in words: "an object with keys a, b", "a list", "a number"."""
    if isinstance(obj, dict):
        return "an object with keys " + ", ".join(sorted(obj)[:8])
    return {"int": "a number", "float": "a number", "str": "a string", "list": "a list", "bool": "a boolean",
            "NoneType": "null"}.get(type(obj).__name__, type(obj).__name__)


def known_file(found: Any) -> str | None:
    """What a format knows a file it does not read to be, and what reads it instead (the
    formats' `hint`s, in registry order: `found` is the parsed first record or object, or a
    text file's head); None when no format knows it."""
    for fmt in FORMATS.values():
        said = fmt.hint(found)
        if said:
            return said
    return None


def _unknown_shape(obj: Any) -> str:
    said = known_file(obj)
    if said:
        return f"not a transcript ctxkit reads: {said}"
    return (
        f"JSON of no known transcript shape (found {_found(obj)}); expected {kinds()}; "
        "use --from to force a format"
    )


def _read_options(opts: ReadOptions | str | None) -> ReadOptions:
    """`opts` as a record: a bare format name is `ReadOptions(format=name)`."""
    if opts is None:
        return ReadOptions()
    if isinstance(opts, str):
        opts = ReadOptions(format=opts)
    if opts.format is not None and opts.format not in FORMATS:
        raise unknown_name("format", opts.format, FORMATS)
    return opts


def read_path(
    path: str,
    opts: ReadOptions | str | None = None,
    *,
    stats: ReadStats | None = None,
    label: str | None = None,
) -> Iterator[Transcript]:
    """Transcripts in a file ("-" = stdin), read lazily; one per conversation (datasets yield many).

    Example: `for t in read_path("session.jsonl"): print(t.id, len(t.units))`.

    `opts` says how to read (`ReadOptions`, or just a format name). `label` names the input in
    transcript ids, `Transcript.path` and error messages instead of `path` (a CLI that spools
    stdin to a temp file passes "<stdin>", so ids stay deterministic). A Claude Code log keeps
    only its last compaction summary and what follows (what the model still sees) unless
    `opts.include_compacted`; so do the other formats that read their agent's own compaction.
    """
    opts = _read_options(opts)
    stats = stats if stats is not None else ReadStats()
    name = label if label is not None else ("<stdin>" if path == "-" else path)
    reader = _Reader(name, opts, stats)
    if path == "-":
        stdin: Any = sys.stdin.buffer
        if not hasattr(stdin, "peek"):
            stdin = io.BufferedReader(stdin)  # to look at the first bytes without taking them
        if stdin.peek(4)[:4] == parquet.MAGIC:
            yield from parquet.read_parquet_stream(stdin, opts, stats=stats, label=name)
            return
        stats.files += 1
        yield from reader.read(stdin)
        return
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed in finally, around a generator
    except IsADirectoryError:
        raise InputError(name, None, "is a directory; pass its files or a glob") from None
    except OSError as exc:
        raise InputError(name, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        if path.endswith(parquet.SUFFIX) or stream.peek(4)[:4] == parquet.MAGIC:
            if not os.path.isfile(path):  # a pipe (`<(cmd)`): Parquet needs a file to seek in
                yield from parquet.read_parquet_stream(stream, opts, stats=stats, label=name)
                return
            stream.close()
            yield from parquet.read_parquet(path, opts, stats=stats, label=name)
            return
        stats.files += 1
        yield from reader.read(stream)
    finally:
        stream.close()


def read_conversation(
    obj: Any,
    path: str,
    line: int,
    opts: ReadOptions | str | None = None,
    *,
    stats: ReadStats | None = None,
) -> Transcript | None:
    """One conversation of a dataset (a JSONL line or a Parquet row, already parsed), read as
    `read_path` reads line `line` of `path`: same id (`<stem>#<line>`), same errors. None when it
    was skipped as invalid (`opts.skip_invalid`)."""
    stats = stats if stats is not None else ReadStats()
    reader = _Reader(path, _read_options(opts), stats)
    stats.records += 1
    if not is_conversation(obj):
        reader.fail(line, "expected a conversation object ({\"messages\": [...]})", obj)
        return None
    return reader.conversation(obj, layout="dataset", line=line, tid=f"{reader.stem}#{line}")


def read_dataset_line(
    raw: bytes,
    path: str,
    line: int,
    opts: ReadOptions | str | None = None,
    *,
    stats: ReadStats | None = None,
) -> Transcript | None:
    """Line `line` of a JSONL dataset (its bytes, as read), read as `read_path` reads it: the
    same id, errors and skips. None for a blank line or one skipped as invalid."""
    if not raw or raw.isspace():
        return None
    stats = stats if stats is not None else ReadStats()
    obj = _Reader(path, _read_options(opts), stats)._parse_line(line, raw)
    if obj is None:
        return None
    return read_conversation(obj, path, line, opts, stats=stats)


def reads_datasets(opts: ReadOptions | str | None) -> bool:
    """Whether a file of conversation objects reads as a dataset (a forced log format reads
    every line as one of its records instead)."""
    fmt = _read_options(opts).format
    return fmt is None or FORMATS[fmt].shape != "log"


def read_text(
    text: str,
    opts: ReadOptions | str | None = None,
    *,
    path: str = "<string>",
    stats: ReadStats | None = None,
) -> list[Transcript]:
    """Transcripts in a string (tests, library use); same rules as `read_path`."""
    stats = stats if stats is not None else ReadStats()
    reader = _Reader(path, _read_options(opts), stats)
    stats.files += 1
    return list(reader.read(io.BytesIO(text.encode("utf-8"))))


