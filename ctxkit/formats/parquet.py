"""Parquet conversation datasets: one conversation per row, its messages in a list column.

This is the shape of the public agent-trajectory datasets on the Hugging Face hub
(SWE-Gym's `messages`, nebius' and NVIDIA's `trajectory`: list<struct<role, content, ...>>,
beside columns such as `instance_id`). A row is read as a JSONL dataset line is
(`formats.read_conversation`: same ids, `<stem>#<row>`, and errors), and a transcript is
written as the conversation object a JSONL line would hold (`formats.dataset_item`).

Reading streams: `polars.scan_parquet` in batches of `BATCH_ROWS`, so a file larger than
memory is read in the memory of one batch. Writing spools rows as JSONL and streams the spool
into the Parquet file, atomically (temp file, then rename).

The schema written keeps every conversation lossless and every file's messages one type:

- the messages column is list<struct<role, content, from, value, name, tool_calls,
  tool_call_id, extra>>: text fields as text (`from`/`value` are ShareGPT's role and content),
  `tool_calls` OpenAI's calls (list<struct<id, type, function: struct<name, arguments>>>), and
  `extra` (JSON text) every other field of the message, and content that is not text
  (content parts, Anthropic blocks, null); content parts that are all text also give their
  text, joined, as `content`, for readers that know no `extra`;
- a column whose values are all text, all integers, all floats or all booleans keeps that
  type; any other column (objects, lists, mixed) is JSON text, named in the file's `ctxkit`
  metadata so it is decoded on reading;
- a null in the file is a field the conversation did not have (Parquet structs have every
  field), an explicit JSON null is kept in `extra` or as JSON text.

The building blocks are public for other engines (Ray Data reads the same rows):
`row_to_conversation`, `rows_to_transcripts`, `transcript_to_row`, `read_parquet`,
`write_parquet` and `ParquetWriter`.

Example:
    >>> from ctxkit.formats import read_text
    >>> from ctxkit.formats.parquet import row_to_conversation, transcript_to_row
    >>> (t,) = read_text('{"messages": [{"role": "user", "content": "Hi"}], "instance_id": "x-1"}')
    >>> row = transcript_to_row(t)
    >>> row["messages"][0]["role"], row["instance_id"]
    ('user', 'x-1')
    >>> row_to_conversation(row)
    {'messages': [{'role': 'user', 'content': 'Hi'}], 'instance_id': 'x-1'}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

import orjson

from ctxkit.atomic import atomic_writer
from ctxkit.errors import CtxkitError, InputError, UsageError
from ctxkit.fileio import check_writable, copy_limited, max_input_bytes
from ctxkit.formats.base import Format
from ctxkit.formats.common import ReadOptions, ReadStats, snippet_of
from ctxkit.model import Transcript

# How a row's conversation becomes a transcript and a transcript a row's item: the dataset
# readers' and writers' own (`formats.read_conversation`, `formats.dataset_item`), bound by
# `formats/__init__.py` when the package loads (this module sits below the reader and writer,
# which open Parquet files through it).
_read_conversation: Callable[..., Transcript | None]
_dataset_item: Callable[[Transcript, str | None], Any]


def bind(read_conversation: Callable[..., Transcript | None],
         dataset_item: Callable[[Transcript, str | None], Any]) -> None:
    """Set the reader of one conversation and the writer of one dataset item (the package's)."""
    global _read_conversation, _dataset_item
    _read_conversation, _dataset_item = read_conversation, dataset_item

MAGIC = b"PAR1"
SUFFIX = ".parquet"
BATCH_ROWS = 256  # rows per batch read: memory is one batch's conversations, not the file's
ROW_GROUP_ROWS = 256  # rows per row group written: what a streaming reader holds at a time

# A column that holds a conversation's messages is a format's key (`Format.key`, `item_key`: the
# default `messages` first, then the registry's order), read under that name; or `trajectory`,
# the name nebius' and NVIDIA's datasets give their messages (read only when it holds messages
# and no column before it does: a SWE-agent `.traj` names its steps so), read as `messages`.
_FOREIGN = ("trajectory",)


def own_columns() -> tuple[str, ...]:
    """The formats' keys of their records, the default first (see above)."""
    from ctxkit.formats.registry import record_keys

    return record_keys()


def message_columns() -> tuple[str, ...]:
    """Every column a row's messages may be in, in the order they are looked for."""
    return own_columns() + _FOREIGN


_TEXT_FIELDS = ("role", "content", "from", "value", "name", "tool_call_id")
_META_KEY = "ctxkit"
_ORIGINAL_COLUMN = "parquet_messages_column"  # Transcript.metadata: the column read from


def polars(what: str = "Parquet datasets need", alternative: str = "") -> Any:
    """polars, or a usage error that says how to get it (it is the `[parquet]` extra): "<what>
    polars, which the light install leaves out: pip install 'ctxkit[parquet]'<alternative>"."""
    try:
        import polars as pl
    except ImportError as e:
        raise UsageError(
            f"{what} polars, which the light install leaves out: "
            f"pip install 'ctxkit[parquet]'{alternative}"
        ) from e
    return pl


def is_parquet(path: str) -> bool:
    """Whether `path` is a Parquet file: its suffix, or its first bytes (`PAR1`)."""
    if path.endswith(SUFFIX):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


# ---------------------------------------------------------------- schema


def message_dtype() -> Any:
    """The polars type of one message in the messages column."""
    pl = polars()
    call = pl.Struct(
        {
            "id": pl.String,
            "type": pl.String,
            "function": pl.Struct({"name": pl.String, "arguments": pl.String}),
        }
    )
    return pl.Struct(
        {
            "role": pl.String,
            "content": pl.String,
            "from": pl.String,
            "value": pl.String,
            "name": pl.String,
            "tool_calls": pl.List(call),
            "tool_call_id": pl.String,
            "extra": pl.String,
        }
    )


def _is_call(c: Any) -> bool:
    """An OpenAI tool call whose every field fits the typed schema (text, no nulls)."""
    if not isinstance(c, dict) or set(c) - {"id", "type", "function"}:
        return False
    if not all(isinstance(c[k], str) for k in ("id", "type") if k in c):
        return False
    fn = c.get("function")
    if fn is None:
        return "function" not in c
    return (
        isinstance(fn, dict)
        and not set(fn) - {"name", "arguments"}
        and all(isinstance(v, str) for v in fn.values())
    )


def message_to_struct(m: Any) -> dict[str, Any]:
    """One message as a row of the messages column (the inverse of `message_from_struct`)."""
    if not isinstance(m, dict):
        return {"extra": orjson.dumps(m).decode()}  # not an object: the value itself
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for k, v in m.items():
        if k in _TEXT_FIELDS and isinstance(v, str):
            out[k] = v
        elif k == "tool_calls" and isinstance(v, list) and all(_is_call(c) for c in v):
            out[k] = v
        else:
            extra[k] = v
    if extra:
        out["extra"] = orjson.dumps(extra).decode()
        text = _parts_text(extra.get("content"))
        if text is not None:
            out["content"] = text  # for readers that know no `extra`; ours reads the parts from it
    return out


def _parts_text(content: Any) -> str | None:
    """The text of content parts that are all text (a summary joined to a message), else None."""
    if not isinstance(content, list) or not content:
        return None
    texts = [p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text"
             and isinstance(p.get("text"), str)]
    return "\n\n".join(texts) if len(texts) == len(content) else None


def _strip_nulls(v: Any) -> Any:
    """Struct fields a row did not have come back as nulls: drop them, at every depth."""
    if isinstance(v, dict):
        return {k: _strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip_nulls(x) for x in v]
    return v


def message_from_struct(s: Any, *, ours: bool = True) -> Any:
    """A message from a row of a messages column: typed fields, then those kept in `extra`.

    Nulls are fields the message did not have. In another writer's file (`ours` False) a
    message with `text` but no `content` (nebius' SWE-agent trajectories) gets it as its
    content, or its `system_prompt` when that is where its text is (nebius' system message)."""
    if not isinstance(s, dict):
        return s
    extra = s.get("extra")
    if ours:
        # Our own schema: text fields, and tool calls the only nested structs.
        out = {k: v for k, v in s.items() if v is not None and k != "extra"}
        calls = out.get("tool_calls")
        if calls:
            out["tool_calls"] = [_strip_nulls(c) for c in calls]
    else:
        out = _strip_nulls({k: v for k, v in s.items() if k != "extra" or not isinstance(v, str)})
    if isinstance(extra, str):
        try:
            more = orjson.loads(extra)
        except orjson.JSONDecodeError:
            out["extra"] = extra  # someone else's `extra` text column: keep it as it is
        else:
            if not isinstance(more, dict):
                return more
            out.update(more)
    if not ours and "content" not in out and "role" in out:
        if isinstance(out.get("text"), str) and (out["text"] or not out.get("system_prompt")):
            out["content"] = out.pop("text")
        elif isinstance(out.get("system_prompt"), str):  # nebius' system message: `text` null
            out["content"] = out.pop("system_prompt")
    return out


# ---------------------------------------------------------------- rows -> conversations


def file_info(path: str) -> dict[str, Any]:
    """The `ctxkit` metadata of a Parquet file this module wrote ({} for another's file)."""
    pl = polars()
    try:
        meta = pl.read_parquet_metadata(path)
    except Exception:  # noqa: BLE001 - a file polars cannot read is reported by the scan
        return {}
    try:
        info = orjson.loads(meta.get(_META_KEY, "{}"))
    except orjson.JSONDecodeError:
        return {}
    return info if isinstance(info, dict) else {}


def messages_column(row: Mapping[str, Any]) -> str | None:
    """The column of a row that holds its messages (see `message_columns`); None if none does."""
    for key in message_columns():
        v = row.get(key)
        if key in _FOREIGN and isinstance(v, list):
            if v and isinstance(v[0], dict) and "role" in v[0]:
                return key
        elif isinstance(v, list | str):
            return key
    return None


_BUILTIN = (str, int, float, bool, list, dict, type(None))


def _plain(v: Any) -> Any:
    """Python values for array types (numpy arrays, as Ray Data and pandas hand out list columns)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if not isinstance(v, _BUILTIN) and hasattr(v, "tolist"):
        return _plain(v.tolist())  # an array (a list) or a numpy scalar (its Python value)
    return v


def row_to_conversation(row: Mapping[str, Any], info: Mapping[str, Any] | None = None) -> Any:
    """A Parquet row as the conversation object a JSONL dataset line holds.

    `info` is the file's `ctxkit` metadata (`file_info`): with it, JSON columns are decoded and
    nulls are fields the conversation did not have. A messages column of JSON text is parsed.
    A row with no messages column is returned as it is (`read_conversation` reports it)."""
    info = info or {}
    ours = bool(info)
    if not all(isinstance(v, _BUILTIN) for v in row.values()):
        row = {k: _plain(v) for k, v in row.items()}
    json_columns = set(info.get("json_columns", ()))
    key = messages_column(row)
    obj: dict[str, Any] = {}
    for k, v in row.items():
        if k == key:
            if isinstance(v, str):
                try:
                    v = orjson.loads(v)
                except orjson.JSONDecodeError:
                    obj[k] = v
                    continue
            name = k if k in own_columns() else Format.key
            obj[name] = (
                [message_from_struct(m, ours=ours) for m in v] if isinstance(v, list) else v
            )
            continue
        if v is None:
            if not ours:
                obj[k] = None  # another writer's null may be the source's own null
            continue
        if k in json_columns and isinstance(v, str):
            v = orjson.loads(v)
        elif k == "tools" and isinstance(v, str) and key not in (None, "conversations"):
            # Chat datasets that keep tool schemas as JSON text (ShareGPT's are text by design).
            try:
                parsed = orjson.loads(v)
            except orjson.JSONDecodeError:
                parsed = None
            v = parsed if isinstance(parsed, list) else v
        elif not ours and isinstance(v, dict | list):
            v = _strip_nulls(v)
        obj[k] = v
    return obj


def rows_to_transcripts(
    rows: Iterable[Mapping[str, Any]],
    path: str,
    opts: ReadOptions | str | None = None,
    *,
    info: Mapping[str, Any] | None = None,
    start: int = 1,
    stats: ReadStats | None = None,
) -> Iterator[Transcript]:
    """Transcripts of Parquet rows (row `start` first), read as JSONL dataset lines are: ids
    `<stem>#<row>`, errors naming `path` and the row. Rows skipped as invalid give nothing."""
    stats = stats if stats is not None else ReadStats()
    skip = getattr(opts, "skip_invalid", False)
    for n, row in enumerate(rows, start):
        if not all(isinstance(v, _BUILTIN) for v in row.values()):
            row = {k: _plain(v) for k, v in row.items()}
        key = messages_column(row)
        if key is None:
            problem = (
                "not a conversation: a row needs a messages list column ("
                + ", ".join(message_columns())
                + "); found columns "
                + ", ".join(list(row)[:8])
            )
            if skip:
                stats.records += 1
                stats.skipped_invalid += 1
                stats.warnings.append(f"{path}:{n}: {problem}")
                continue
            raise InputError(path, n, problem, snippet_of(dict(row)))
        t = _read_conversation(row_to_conversation(row, info), path, n, opts, stats=stats)
        if t is None:
            continue
        if key not in own_columns():
            t.metadata[_ORIGINAL_COLUMN] = key
        yield t


def read_parquet(
    path: str,
    opts: ReadOptions | str | None = None,
    *,
    stats: ReadStats | None = None,
    label: str | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Iterator[Transcript]:
    """Transcripts of a Parquet dataset, one per row, streamed in batches of `batch_rows`.

    `label` names the file in ids and errors instead of `path` (as `read_path`'s)."""
    pl = polars()
    name = label if label is not None else path
    stats = stats if stats is not None else ReadStats()
    try:
        lf = pl.scan_parquet(path)
        lf.collect_schema()
    except Exception as exc:  # noqa: BLE001 - polars raises its own types for a bad file
        raise InputError(name, None, f"cannot read as Parquet: {_first_line(exc)}") from None
    stats.files += 1
    info = file_info(path)
    row = 1
    try:
        for batch in _batches(lf, batch_rows):
            yield from rows_to_transcripts(
                batch.iter_rows(named=True), name, opts, info=info, start=row, stats=stats
            )
            row += batch.height
    except CtxkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged row group: say where
        if type(exc).__module__.split(".")[0] != "polars":
            raise
        raise InputError(name, row, f"cannot read as Parquet: {_first_line(exc)}") from None


def read_parquet_stream(
    stream: IO[bytes],
    opts: ReadOptions | str | None = None,
    *,
    stats: ReadStats | None = None,
    label: str = "<stdin>",
) -> Iterator[Transcript]:
    """Transcripts of a Parquet dataset read from a stream (stdin): Parquet keeps its index at
    the end, so the stream is copied to a temp file ($TMPDIR) first, then read as a file."""
    import tempfile

    with tempfile.NamedTemporaryFile(prefix="ctxkit-stdin-", suffix=SUFFIX) as tmp:
        mb = opts.max_input_mb if isinstance(opts, ReadOptions) else None
        copy_limited(stream, tmp, max_input_bytes(mb), label)  # type: ignore[arg-type]
        tmp.flush()
        yield from read_parquet(tmp.name, opts, stats=stats, label=label)


def _batches(lf: Any, rows: int) -> Iterator[Any]:
    """The frame's rows, `rows` at a time, read as they are asked for."""
    if hasattr(lf, "collect_batches"):
        yield from lf.collect_batches(chunk_size=rows)
        return
    offset = 0  # polars before collect_batches: a slice reads only the row groups it needs
    while True:
        batch = lf.slice(offset, rows).collect()
        if batch.height == 0:
            return
        yield batch
        offset += batch.height


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# ---------------------------------------------------------------- conversations -> rows


def transcript_to_row(t: Transcript, fmt: str | None = None) -> dict[str, Any]:
    """A transcript as a Parquet row: `formats.dataset_item(t, fmt)`, its messages as structs
    (`message_to_struct`) under the column they were read from (OpenAI messages for a format
    written as text, such as aider's markdown)."""
    item = _dataset_item(t, fmt)
    if not isinstance(item, dict):
        # A format written as text (an aider history) has no messages to put in a column: the
        # row holds its chat messages instead.
        item = _dataset_item(t, "openai")
    key = next((k for k in own_columns() if isinstance(item.get(k), list)), None)
    column = t.metadata.get(_ORIGINAL_COLUMN) if key == Format.key else None
    row: dict[str, Any] = {}
    for k, v in item.items():
        if k == key:
            row[column or k] = [message_to_struct(m) for m in v]
        elif k != _ORIGINAL_COLUMN:
            row[k] = v
    meta = row.get("metadata")
    if isinstance(meta, dict) and _ORIGINAL_COLUMN in meta:
        # A units record carries the transcript's metadata, the column name included.
        row["metadata"] = {k: v for k, v in meta.items() if k != _ORIGINAL_COLUMN}
    return row


_SCALARS: dict[type, str] = {str: "String", int: "Int64", float: "Float64", bool: "Boolean"}
_INT64 = 2**63


class ParquetWriter:
    """Writes transcripts (or rows) to a Parquet dataset at `path`, atomically.

    Rows are spooled as JSONL next to nothing in memory; on a clean exit the spool is streamed
    into the file with one schema for all rows. On an exception nothing is written and the
    target is left as it was.

        with ParquetWriter("out.parquet") as w:
            for t in transcripts:
                w.write(t)
    """

    def __init__(
        self, path: str, fmt: str | None = None, *, row_group_rows: int = ROW_GROUP_ROWS
    ) -> None:
        polars()  # say it before any work
        self.path = path
        self.fmt = fmt
        self.row_group_rows = row_group_rows
        self.rows = 0
        self._columns: dict[str, set[str]] = {}  # column -> kinds of its values
        self._message_columns: list[str] = []
        self._stack = ExitStack()
        self._spool: IO[bytes]
        self._verbatim: str | None = None

    def __enter__(self) -> ParquetWriter:
        import tempfile

        check_writable(self.path, "dataset")
        try:
            self._spool = self._stack.enter_context(
                tempfile.NamedTemporaryFile(prefix=".ctxkit-", suffix=".spool.jsonl")
            )
        except OSError as exc:
            raise CtxkitError(f"cannot spool {self.path}: {exc.strerror or exc}") from None
        return self

    def write(self, t: Transcript) -> None:
        """Add one transcript as a row."""
        self.write_row(transcript_to_row(t, self.fmt))

    def write_row(self, row: Mapping[str, Any]) -> None:
        """Add one row (`transcript_to_row`'s shape: messages as structs)."""
        key = messages_column(row)
        spooled: dict[str, Any] = {}
        for k, v in row.items():
            kinds = self._columns.setdefault(k, set())
            if k == key and isinstance(v, list):
                kinds.add("messages")
                if k not in self._message_columns:
                    self._message_columns.append(k)
                spooled[k] = v
                continue
            kind = _SCALARS.get(type(v), "json")
            if kind == "Int64" and not -_INT64 <= v < _INT64:
                kind = "json"
            kinds.add(kind)
            spooled[k] = orjson.dumps(v).decode()
        self._spool.write(orjson.dumps(spooled) + b"\n")
        self.rows += 1

    def replace_with(self, source: str) -> None:
        """Write the bytes of `source` (a Parquet file) instead of the rows written so far."""
        self._verbatim = source

    def _plan(self) -> tuple[dict[str, Any], list[Any], list[str]]:
        """The spool's schema, the expressions that give the file's columns, the JSON columns."""
        pl = polars()
        spool: dict[str, Any] = {}
        exprs: list[Any] = []
        json_columns: list[str] = []
        for col, kinds in self._columns.items():
            if kinds == {"messages"}:
                spool[col] = pl.List(message_dtype())
                continue
            if "messages" in kinds:
                raise CtxkitError(
                    f"cannot write {self.path}: column {col!r} holds messages in some rows "
                    "and other values in others"
                )
            spool[col] = pl.String
            if len(kinds) == 1 and (kind := next(iter(kinds))) != "json":
                exprs.append(pl.col(col).str.json_decode(getattr(pl, kind)))
            else:
                json_columns.append(col)
        if not self._columns:
            spool["messages"] = pl.List(message_dtype())
            self._message_columns.append("messages")
        return spool, exprs, json_columns

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            if exc_type is None:
                self._spool.flush()
                self._finish()
        except OSError as err:
            raise CtxkitError(f"cannot write dataset {self.path}: {err.strerror or err}") from None
        finally:
            self._stack.close()

    def _finish(self) -> None:
        import shutil

        if self._verbatim is not None:
            with atomic_writer(self.path, "wb") as out, open(self._verbatim, "rb") as src:
                shutil.copyfileobj(src, out)
            return
        pl = polars()
        schema, exprs, json_columns = self._plan()
        info = {"version": 1, "message_columns": self._message_columns, "json_columns": json_columns}
        metadata = {_META_KEY: orjson.dumps(info).decode()}
        with atomic_writer(self.path, "wb") as out:
            if self.rows == 0:
                pl.DataFrame(schema=schema).write_parquet(out, metadata=metadata)
                return
            lf = pl.scan_ndjson(self._spool.name, schema=schema)
            if exprs:
                lf = lf.with_columns(exprs)
            lf.sink_parquet(out, metadata=metadata, row_group_size=self.row_group_rows)


def write_parquet(
    transcripts: Iterable[Transcript],
    path: str,
    fmt: str | None = None,
    *,
    row_group_rows: int = ROW_GROUP_ROWS,
) -> int:
    """Write transcripts to a Parquet dataset, one row each, atomically; returns the row count."""
    with ParquetWriter(path, fmt, row_group_rows=row_group_rows) as w:
        for t in transcripts:
            w.write(t)
    return w.rows


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every row of a Parquet file as polars gives it (tests and small files: not streamed)."""
    return list(polars().read_parquet(Path(path)).to_dicts())
