"""A dataset cut into shards, and archives kept as one SQLite shard per output file.

A *shard* is a slice of one input file that a single task reads, processes and writes on its
own: a byte range of a JSONL dataset (whole lines, so a conversation is never cut and its id,
`<stem>#<line>`, is the one `read_path` gives it), a range of a Parquet file's rows, or a whole
file of any other layout (a single transcript, an app log, a JSON array), read by `read_path`
itself. Shards are planned on one machine, in input order, and each is named for its input
file (`output_names`): the file's own name, or, for a file cut in several, Hugging Face's
`<stem>-<part>-of-<parts><ext>` after it (the parts of a file, in name order, are the file in
order).

An archive at scale is a directory: one `<output>.ctx.db` beside each output that holds a
compacted transcript, and an index (`ctxkit-index.sqlite`) of the outputs in input order and
of which transcript and which ref is in which archive shard, which `ShardedArchive` reads to
send `recall` and `expand` to the right file. Nothing here imports Ray: the same functions run
in `--engine ray`'s tasks and anywhere else.

Example (`plan_shards` cuts a 3-line file of 51-byte lines, 50 bytes a shard, like this):
    >>> shards = [Shard("data.jsonl", "jsonl", 0, part, 51 * part, 51 * (part + 1), part + 1, parts=3)
    ...           for part in range(3)]
    >>> [(s.name, s.first_line) for s in shards]
    [('data-00000-of-00003.jsonl', 1), ('data-00001-of-00003.jsonl', 2), ('data-00002-of-00003.jsonl', 3)]
"""

from __future__ import annotations

import builtins
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson

from ctxkit.archive.originals import made_by_compaction, refs_in, text_digest
from ctxkit.archive.store import Archive
from ctxkit.engines import SHARD_MB
from ctxkit.english import counted
from ctxkit.errors import ArchiveError, InputError
from ctxkit.formats import ReadOptions, ReadStats, read_dataset_line, read_path
from ctxkit.model import Transcript
from ctxkit.refs import parse_ref

SHARD_BYTES = int(SHARD_MB * 2**20)  # a task's slice of a JSONL dataset (whole lines)
PARQUET_SHARD_ROWS = 10_000  # a task's rows of a Parquet dataset (whole row groups)
INDEX_NAME = "ctxkit-index.sqlite"
ARCHIVE_SUFFIX = ".ctx.db"
_READ_CHUNK = 1 << 20
_KINDS = ("jsonl", "parquet", "file")  # a slice of lines, of rows, or the whole file


@dataclass(frozen=True)
class Shard:
    """One task's part of the input: `kind` jsonl (bytes `start` to `end`, whose first line is
    `first_line`), parquet (rows `start` to `end`, numbered from `first_line`) or file (all of
    `path`, read by `read_path`). `name` is its output file's name, in input order."""

    path: str
    kind: str
    file_index: int
    part: int
    start: int = 0
    end: int = -1
    first_line: int = 1
    label: str | None = None  # the path as given (ids, messages); `path` is what is opened
    base: str = ""  # its file's output name in the run (`output_names`); "": the file's own
    parts: int = 1  # how many shards its file is cut into

    @property
    def name(self) -> str:
        """Its output file's name: its input file's (`base`), with `-<part>-of-<parts>` before
        the extension when the file is cut in several."""
        base = self.base or own_output_name(self.label or self.path)
        if self.parts <= 1:
            return base
        stem, ext = _split_ext(base)
        return f"{stem}-{self.part:05d}-of-{self.parts:05d}{ext}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Shard:
        return cls(**d)


# What `expand_paths` takes from a directory whatever the file holds: an output keeps its
# input's name when it ends so (an aider history stays `.md`, found by its content)
_KEPT_SUFFIXES = (".json", ".jsonl", ".traj", ".md")


def own_output_name(path: str) -> str:
    """The output name of an input file in a directory run: the file's own name (a Parquet
    file's rows are written as JSONL, `<stem>.jsonl`; a name `expand_paths` would not take
    back gets `.jsonl` after it).

    >>> own_output_name("logs/session.jsonl"), own_output_name("train.parquet"), own_output_name("run.log")
    ('session.jsonl', 'train.jsonl', 'run.log.jsonl')
    """
    base = os.path.basename(path)
    if base.endswith(".parquet"):
        return base.removesuffix(".parquet") + ".jsonl"
    if not base.endswith(_KEPT_SUFFIXES):
        return base + ".jsonl"
    return base


def _split_ext(name: str) -> tuple[str, str]:
    """(stem, extension), the extension one `own_output_name` keeps (`.traj.json` whole)."""
    for ext in (".traj.json", *_KEPT_SUFFIXES):
        if name.endswith(ext) and len(name) > len(ext):
            return name[: -len(ext)], ext
    return os.path.splitext(name)


def output_names(paths: Sequence[str]) -> list[str]:
    """One output name per input file, in order, each its own (`own_output_name`) unless two
    inputs share it: then each of those is named with as many of its folders as tell them apart
    (`run1/s.jsonl`, `run2/s.jsonl` -> `run1__s.jsonl`, `run2__s.jsonl`), and a file given
    twice gets `-2` after its stem the second time.

    >>> output_names(["a/x.jsonl", "b/x.jsonl", "c/y.json"])
    ['a__x.jsonl', 'b__x.jsonl', 'y.json']
    """
    files = list(dict.fromkeys(os.path.abspath(p) for p in paths))  # each file once
    names = [own_output_name(f) for f in files]
    folders = [f.split(os.sep)[:-1] for f in files]
    depth = [0] * len(files)
    while True:
        seen: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            seen.setdefault(n, []).append(i)
        grew = False
        for group in (g for g in seen.values() if len(g) > 1):
            for i in group:
                if depth[i] < len(folders[i]) and folders[i][-1 - depth[i]]:
                    depth[i] += 1
                    names[i] = "__".join([*folders[i][-depth[i]:], own_output_name(files[i])])
                    grew = True
        if not grew:
            break
    own = dict(zip(files, names, strict=True))
    taken = set(names)
    out: list[str] = []
    given: set[str] = set()
    for p in paths:
        f = os.path.abspath(p)
        name = own[f]
        if f in given:  # the same file again: numbered
            stem, ext = _split_ext(name)
            k = 2
            while f"{stem}-{k}{ext}" in taken:
                k += 1
            name = f"{stem}-{k}{ext}"
            taken.add(name)
        given.add(f)
        out.append(name)
    return out


def _is_dataset(path: str, opts: ReadOptions) -> bool:
    """Whether `path` is a JSONL dataset as `read_path` sees one (a conversation object on its
    first line and a record after it); anything else is read whole, by `read_path`."""
    from ctxkit.formats import is_conversation, reads_datasets

    if not reads_datasets(opts):
        return False
    try:
        with open(path, "rb") as f:
            first = next((r for r in f if not r.isspace()), b"")
            second = next((r for r in f if not r.isspace()), b"")
    except OSError as exc:
        raise InputError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if not first or not second or first.startswith(b"\xef\xbb\xbf"):
        return False
    try:
        obj = orjson.loads(first)
    except orjson.JSONDecodeError:
        return False
    return is_conversation(obj)


def _line_slices(path: str, size_at: Callable[[int], int]) -> Iterator[tuple[int, int, int]]:
    """(start, end, first line) of consecutive slices of whole lines (the last one's end is -1:
    to the end of the file). A slice that starts at byte `start` ends at the first line end at
    least `size_at(start)` bytes on."""
    start, first, pos, line = 0, 1, 0, 0
    cut = size_at(0)
    with open(path, "rb") as f:
        for raw in f:
            line += 1
            pos += len(raw)
            if pos - start >= cut:
                yield start, pos, first
                start, first = pos, line + 1
                cut = size_at(start)
    if pos > start or start == 0:
        yield start, -1, first


# With the workers known, slices shrink as the data left does (guided self-scheduling, by
# factoring): each is the rest of the JSONL data over FACTOR x workers, so the first ones are
# large (few tasks, few files) and the last ones small. The work per byte varies (one
# conversation compacts in 10 ms, another in 2 s): a worker that drew a slow slice is caught
# up by the others' next, smaller ones, and the last to finish waits on a small slice, not on
# a quarter of its share. FACTOR 2 keeps a slow first slice from deciding the end.
FACTOR = 2
MIN_SHARD_BYTES = 256 * 2**10  # below this a task's fixed cost (scheduling, an output and an
# archive file) outweighs the balance it buys


def plan_shards(
    files: Sequence[str],
    opts: ReadOptions | None = None,
    *,
    shard_bytes: int = SHARD_BYTES,
    parquet_rows: int = PARQUET_SHARD_ROWS,
    workers: int | None = None,
) -> list[Shard]:
    """The shards of these files, in input order (one pass over each JSONL file's bytes, to
    number its lines). JSONL slices are about `shard_bytes` (a line more at most); with
    `workers`, each is the JSONL data left (this file's and the next files') over FACTOR x
    workers, between MIN_SHARD_BYTES and `shard_bytes`: a 40 MB file on 2 workers is 16
    slices, of 10 MB, 7.7 MB, 5.7 MB ... down to 256 KB."""
    opts = opts or ReadOptions()
    shards: list[Shard] = []
    plans: list[tuple[int, str, str, str]] = []  # (file index, label, path, kind)
    for i, label in enumerate(files):
        path = os.path.abspath(label)  # a worker may run in another directory
        if label == "-":
            raise InputError(path, None, "a distributed run reads files, not stdin; save it first")
        kind = "parquet" if path.endswith(".parquet") else "jsonl" if _is_dataset(path, opts) else "file"
        plans.append((i, label, path, kind))
    left = sum(os.path.getsize(path) for _, _, path, kind in plans if kind == "jsonl")
    names = output_names([label for _, label, _, _ in plans])
    for i, label, path, kind in plans:
        own: list[Shard] = []
        if kind == "parquet":
            rows = _parquet_rows(path)
            for part, start in enumerate(range(0, max(rows, 1), parquet_rows)):
                end = min(rows, start + parquet_rows)
                own.append(Shard(path, "parquet", i, part, start, end, start + 1, label))
        elif kind == "file":
            own.append(Shard(path, "file", i, 0, label=label))
        else:
            size_at = _slice_sizes(left, os.path.getsize(path), shard_bytes, workers)
            for part, (start, end, line) in enumerate(_line_slices(path, size_at)):
                own.append(Shard(path, "jsonl", i, part, start, end, line, label))
            left -= os.path.getsize(path)
        shards += [replace(s, base=names[i], parts=len(own)) for s in own]
    return shards


def _slice_sizes(
    left: int, size: int, shard_bytes: int, workers: int | None
) -> Callable[[int], int]:
    """The size of a slice that starts at byte `start` of a file of `size` bytes, `left` bytes
    of JSONL data from this file's start on: `shard_bytes`, or with `workers` the data left
    over FACTOR x workers, between MIN_SHARD_BYTES and `shard_bytes`."""
    cap = max(1, shard_bytes)
    if not workers:
        return lambda start: cap

    def size_at(start: int) -> int:
        rest = left - start
        return min(cap, max(MIN_SHARD_BYTES, -(-rest // (FACTOR * workers))))

    return size_at


def _parquet_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def read_shard(
    shard: Shard, opts: ReadOptions | None = None, *, stats: ReadStats | None = None
) -> Iterator[Transcript]:
    """The transcripts of one shard, lazily, with the ids, errors and skips of `read_path`."""
    opts = opts or ReadOptions()
    stats = stats if stats is not None else ReadStats()
    name = shard.label or shard.path
    if shard.kind == "file":
        yield from read_path(shard.path, opts, stats=stats, label=name)
        return
    if shard.part == 0:
        stats.files += 1
    if shard.kind == "parquet":
        yield from _read_parquet_rows(shard, opts, stats)
        return
    with open(shard.path, "rb") as f:
        f.seek(shard.start)
        pos, line = shard.start, shard.first_line
        for raw in f:
            if shard.end >= 0 and pos >= shard.end:
                break
            pos += len(raw)
            t = read_dataset_line(raw, name, line, opts, stats=stats)
            line += 1
            if t is not None:
                yield t


def _read_parquet_rows(shard: Shard, opts: ReadOptions, stats: ReadStats) -> Iterator[Transcript]:
    """Rows `start` to `end` of a Parquet file, a record batch at a time, read as the local
    engine reads them (`formats.parquet.rows_to_transcripts`: the same messages columns, JSON
    columns and row numbers from 1)."""
    import pyarrow.parquet as pq

    from ctxkit.formats.parquet import file_info, rows_to_transcripts

    info = file_info(shard.path)
    pf = pq.ParquetFile(shard.path)
    row = 0
    for batch in pf.iter_batches(batch_size=1024):
        n = batch.num_rows
        if row + n <= shard.start:
            row += n
            continue
        lo = max(shard.start - row, 0)
        hi = n if shard.end < 0 else min(n, shard.end - row)
        rows = batch.slice(lo, hi - lo).to_pylist()
        number = shard.first_line + (row + lo - shard.start)
        yield from rows_to_transcripts(rows, shard.label or shard.path, opts, info=info, start=number, stats=stats)
        row += n
        if shard.end >= 0 and row >= shard.end:
            return


# ---------------------------------------------------------------- the index of archive shards


def archive_shard_path(output: str) -> str:
    """The archive shard beside an output shard."""
    return output + ARCHIVE_SUFFIX


def write_index(directory: str, names: Sequence[str]) -> str:
    """Index the outputs of these names (in input order) and their archive shards: which
    transcript and which ref is in which shard. An output or archive shard that is not there
    (a run that left a file out, or changed nothing in it) is not listed. Written whole, then
    renamed into place."""
    import tempfile

    from ctxkit.fileio import check_writable

    target = os.path.join(directory, INDEX_NAME)
    check_writable(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_NAME}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        with conn:
            conn.executescript(
                "CREATE TABLE outputs (output TEXT PRIMARY KEY, position INTEGER NOT NULL);"
                "CREATE TABLE shards (shard TEXT PRIMARY KEY, position INTEGER NOT NULL);"
                "CREATE TABLE transcripts "
                "(transcript_id TEXT NOT NULL, last_request TEXT NOT NULL, shard TEXT NOT NULL);"
                "CREATE TABLE refs (ref TEXT NOT NULL, shard TEXT NOT NULL);"
                "CREATE INDEX transcripts_by_id ON transcripts (transcript_id);"
                "CREATE INDEX transcripts_by_request ON transcripts (last_request);"
                "CREATE INDEX refs_by_ref ON refs (ref);"
            )
            for position, name in enumerate(names):
                if os.path.exists(os.path.join(directory, name)):
                    conn.execute("INSERT INTO outputs VALUES (?, ?)", (name, position))
                shard = archive_shard_path(name)
                path = os.path.join(directory, shard)
                if not os.path.exists(path):
                    continue
                conn.execute("INSERT INTO shards VALUES (?, ?)", (shard, position))
                src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                try:
                    conn.executemany(
                        "INSERT INTO transcripts VALUES (?, ?, ?)",
                        (
                            (r[0], r[1], shard)
                            for r in src.execute("SELECT transcript_id, last_request FROM transcripts")
                        ),
                    )
                    conn.executemany(
                        "INSERT INTO refs VALUES (?, ?)",
                        ((r[0], shard) for r in src.execute("SELECT ref FROM units")),
                    )
                finally:
                    src.close()
        conn.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target


def indexed_names(directory: str) -> set[str]:
    """The names of the outputs and archive shards a directory's index lists (an earlier
    run's files); empty without an index."""
    index = os.path.join(directory, INDEX_NAME)
    if not os.path.exists(index):
        return set()
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        names = {r[0] for r in conn.execute("SELECT shard FROM shards")}
        try:
            names |= {r[0] for r in conn.execute("SELECT output FROM outputs")}
        except sqlite3.OperationalError:
            pass  # an index of the shards alone
    except sqlite3.DatabaseError:
        return set()  # not an index we can read: nothing of it is ours to remove
    finally:
        conn.close()
    return names


def indexed_outputs(directory: str) -> builtins.list[str] | None:
    """The outputs a directory run wrote, in input order, as its index lists them (paths);
    None when there is no index, or one written before the index listed its outputs."""
    index = os.path.join(directory, INDEX_NAME)
    if not os.path.exists(index):
        return None
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT output FROM outputs ORDER BY position").fetchall()
    except sqlite3.OperationalError:
        return None  # an index of the shards alone: outputs named in input order
    finally:
        conn.close()
    return [os.path.join(directory, r[0]) for r in rows if os.path.exists(os.path.join(directory, r[0]))]


class ShardedArchive:
    """A directory of archive shards, read through its index as one archive: `recall`, `list`
    and `restore` as `Archive` has them. Without an index, the shards are read in name order.
    An index without shards is a run that compacted nothing: every output is as it was read.
    """

    def __init__(self, directory: str) -> None:
        self.path = directory
        index = os.path.join(directory, INDEX_NAME)
        self._index: sqlite3.Connection | None = None
        if os.path.exists(index):
            self._index = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
            rows = self._index.execute("SELECT shard FROM shards ORDER BY position")
            self.shards = [r[0] for r in rows if os.path.exists(os.path.join(directory, r[0]))]
        else:
            self.shards = sorted(n for n in os.listdir(directory) if n.endswith(ARCHIVE_SUFFIX))
        if not self.shards and self._index is None:
            raise ArchiveError(
                f"{directory} holds no archive shard (*{ARCHIVE_SUFFIX}); "
                "`ctxkit compact DATASET --engine ray -o DIR` writes them"
            )
        self._open: dict[str, Archive] = {}

    def _archive(self, shard: str) -> Archive:
        if shard not in self._open:
            path = os.path.join(self.path, shard)
            readonly = not os.access(path, os.W_OK)
            self._open[shard] = Archive(path, readonly=readonly, create=False)
        return self._open[shard]

    def _candidates(self, ref: str) -> builtins.list[str]:
        """The shards that may hold `ref`: the index's answer, else every shard."""
        bare, _ = parse_ref(ref)
        if self._index is not None and not bare.startswith("ctx://"):
            rows = self._index.execute("SELECT shard FROM refs WHERE ref = ?", (bare,))
            return [r[0] for r in rows]
        return self.shards

    def _holder(self, ref: str) -> Archive:
        for shard in self._candidates(ref):
            archive = self._archive(shard)
            if archive.has(ref):
                return archive
        raise ArchiveError(
            f"unknown ref {ref} in {self.path}; "
            f"`ctxkit recall --list --archive {self.path}` lists the refs"
        )

    def has(self, ref: str) -> bool:
        """True when a shard holds the ref."""
        return any(self._archive(s).has(ref) for s in self._candidates(ref))

    def get(self, ref: str, *, count: bool = True) -> Any:
        """The archived unit a ref names, from the shard that holds it."""
        return self._holder(ref).get(ref, count=count)

    def recall(self, ref: str, **kwargs: Any) -> str:
        """`Archive.recall` on the shard that holds the ref."""
        return self._holder(ref).recall(ref, **kwargs)

    def list(self, transcript_id: str | None = None) -> builtins.list[Any]:
        """Archived units of every shard (or of one transcript), shard by shard."""
        shards = self.shards
        if transcript_id is not None and self._index is not None:
            rows = self._index.execute(
                "SELECT DISTINCT shard FROM transcripts WHERE transcript_id = ?", (transcript_id,)
            )
            held = {r[0] for r in rows}
            shards = [s for s in shards if s in held]
        return [u for s in shards for u in self._archive(s).list(transcript_id)]

    def transcript_ids(self) -> builtins.list[str]:
        """Ids of the original transcripts stored, shard by shard."""
        return [i for s in self.shards for i in self._archive(s).transcript_ids()]

    def original(self, transcript_id: str) -> Transcript | None:
        """The original transcript stored under this id in any shard, or None."""
        for s in self._shards_of(transcript_id):
            found = self._archive(s).original(transcript_id)
            if found is not None:
                return found
        return None

    def _shards_of(self, transcript_id: str) -> builtins.list[str]:
        if self._index is None:
            return self.shards
        rows = self._index.execute(
            "SELECT shard FROM transcripts WHERE transcript_id = ?", (transcript_id,)
        )
        return [r[0] for r in rows]

    def restore(self, compacted: Transcript) -> Transcript:
        """The original of a compacted transcript, from the shard its refs point to; without
        refs, from the shard the index names for its id or last request (`Archive.restore`'s
        rules, in that shard)."""
        refs = refs_in(compacted)
        for ref in refs:
            for shard in self._candidates(ref):
                if self._archive(shard).has(ref):
                    return self._archive(shard).restore(compacted)
        if self._index is None:
            shards = self.shards  # no index (a pipeline's batches): ask each shard
        else:
            shards = self._shards_of(compacted.id) + self._shards_by_request(compacted)
        error: ArchiveError | None = None
        for shard in dict.fromkeys(shards):
            try:
                restored = self._archive(shard).restore(compacted)
            except ArchiveError as exc:  # not this shard's (or ambiguous there): the next one
                error = error or exc
                continue
            if restored is not compacted:
                return restored
        if error is not None and not refs:
            raise error
        if refs or any(made_by_compaction(u) for u in compacted.units):
            what = counted(len(refs), "ref") if refs else "its original"
            raise ArchiveError(
                f"transcript {compacted.id!r} was compacted, but {what} is in no shard of "
                f"{self.path}; was it compacted with another --archive?"
            )
        return compacted  # compact left it as it was and stored nothing

    def _shards_by_request(self, compacted: Transcript) -> builtins.list[str]:
        """Shards holding an original whose last request is one of this transcript's."""
        from ctxkit.structure import is_user_request

        assert self._index is not None
        digests = {text_digest(u.content) for u in compacted.units if is_user_request(u) and u.content}
        found: builtins.list[str] = []
        for d in sorted(digests):
            rows = self._index.execute("SELECT shard FROM transcripts WHERE last_request = ?", (d,))
            found += [r[0] for r in rows]
        return found

    def close(self) -> None:
        """Close every shard opened (committing access counts) and the index."""
        for archive in self._open.values():
            archive.close()
        self._open.clear()
        if self._index is not None:
            self._index.close()

    def __enter__(self) -> ShardedArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_archive(path: str, *, readonly: bool = False) -> Archive | ShardedArchive:
    """An archive file, or a directory of archive shards, for reading."""
    if os.path.isdir(path):
        return ShardedArchive(path)
    return Archive(path, readonly=readonly, create=False)
