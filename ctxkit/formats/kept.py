"""A log's records that are no units, kept in their place for the writer.

An agent's log holds more than the messages its model reads: notices, progress, snapshots,
usage events, sub-agent turns, and the history before the agent's own compaction. Readers leave
those out of the units but keep every one here, with its index in the file and the unit it goes
with (its anchor: the unit read before it, or the one after it when it `precedes` that unit).
Writers put them back: reading a log and writing it again gives the file back record for record,
and `expand` of a compacted log gives back every record of the original.

In a compacted log a kept record stays when its anchor does (or when it has none: the records
before the first unit, the history before the agent's own compaction): what went with a removed
message goes with it, into the archive.

The kept records live in `Transcript.metadata["kept"]` as plain JSON (archived with the
transcript): `{"records": [[index, anchor unit id or null, record], ...], "spans": {unit id:
[indexes of its source records]}, "names": {index: the record's own id}}`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ctxkit.model import Transcript, Unit

KEY = "kept"


class Keeper:
    """Collects, while a log is read, the records that become no unit and where each unit's own
    records were."""

    def __init__(self) -> None:
        self.records: list[list[Any]] = []  # [index, anchor, record]
        self.spans: dict[str, list[int]] = {}
        self.names: dict[int, str] = {}  # index -> the record's own id (a uuid), where it has one
        self._last: str | None = None
        self._waiting: list[list[Any]] = []  # records that precede the next unit

    def unit(self, uid: str, indexes: Iterable[int], name: str | None = None) -> None:
        """A unit read from the records at `indexes` (its first record's index first); `name`
        is its record's own id, which other records may point to."""
        indexes = list(indexes)
        if name is not None and indexes:
            self.names[indexes[0]] = name
        span = self.spans.setdefault(uid, [])
        span.extend(i for i in indexes if i not in span)
        for entry in self._waiting:
            entry[1] = uid
        self._waiting.clear()
        self._last = uid

    def also(self, uid: str, index: int, name: str | None = None) -> None:
        """Another record of a unit already read (a response written as several records)."""
        if name is not None:
            self.names[index] = name
        span = self.spans.setdefault(uid, [])
        if index not in span:
            span.append(index)

    def keep(self, index: int, record: Any, *, precedes: bool = False, name: str | None = None) -> None:
        """A record that is no unit: it goes with the unit before it, or with the next one."""
        if name is not None:
            self.names[index] = name
        entry = [index, None if precedes else self._last, record]
        self.records.append(entry)
        if precedes:
            self._waiting.append(entry)

    def hide(self, units: Sequence[Unit]) -> None:
        """Units the reader leaves out after all (the history before the agent's own compaction):
        their records become kept records with no anchor, so they stay in the file."""
        gone = {u.id for u in units}
        seen: set[int] = set()
        for u in units:
            for index, rec in zip(self.spans.pop(u.id, []), _records_of(u), strict=False):
                if index not in seen:
                    seen.add(index)
                    self.records.append([index, None, rec])
        for entry in self.records:
            if entry[1] in gone:
                entry[1] = None

    def drop(self, uid: str) -> None:
        """A unit that turned out to hold nothing (its records are kept instead)."""
        self.spans.pop(uid, None)

    def metadata(self) -> dict[str, Any]:
        """What goes in `Transcript.metadata[KEY]`."""
        for entry in self._waiting:
            entry[1] = None  # nothing followed: they end the file
        return {"records": sorted(self.records, key=lambda e: e[0]), "spans": self.spans,
                "names": {str(i): n for i, n in self.names.items()}}


def _records_of(u: Unit) -> list[Any]:
    src = u.source if u.source is not None else u.raw
    return list(src) if isinstance(src, list) else [src]


def records(t: Transcript) -> list[Any]:
    """The records a log holds beside its units (session headers, events, notices...), in file
    order: what a reader kept for the writer."""
    kept = t.metadata.get(KEY)
    return [e[2] for e in kept.get("records") or []] if isinstance(kept, dict) else []


def names(t: Transcript) -> set[str]:
    """The own ids (uuids) of every record the transcript was read from, units' and kept."""
    kept = t.metadata.get(KEY)
    return set((kept.get("names") or {}).values()) if isinstance(kept, dict) else set()


def place(t: Transcript, produced: Sequence[tuple[Unit | None, Any]], at: dict[int, int] | None = None) -> list[Any]:
    """The records of a log in file order: what the writer `produced` for the units (each with
    the unit it came from, in unit order) merged with the kept records whose anchor is still
    there. A record produced from a source unit takes its place in the file; one made up by
    compaction goes right before the next unit from the source (and what precedes it); `at`
    names the file index of a produced record that stands for a source record of no unit left."""
    kept = t.metadata.get(KEY)
    if not isinstance(kept, dict):
        return [rec for _, rec in produced]
    spans: dict[str, list[int]] = kept.get("spans") or {}
    survivors = {u.id for u in t.units if u.id in spans}
    records = [e for e in kept.get("records") or [] if e[1] is None or e[1] in survivors]
    # where each produced record goes: its source record's index, or (made up) just before
    # the next source unit and the kept records that precede it
    starts = {uid: min(span) for uid, span in spans.items() if span}
    for e in records:
        if e[1] is not None and e[1] in starts and e[0] < starts[e[1]]:
            starts[e[1]] = e[0]
    keys: list[float] = []
    pending: list[int] = []
    used: dict[str, int] = {}
    for n, (unit, _) in enumerate(produced):
        uid = unit.id if unit is not None else None
        span = spans.get(uid) if uid is not None else None
        if at is not None and n in at:
            for m in pending:
                keys[m] = at[n] - 0.5
            pending.clear()
            keys.append(float(at[n]))
        elif uid is not None and span:
            k = used.get(uid, 0)  # the unit's k-th record (one unit may make several)
            used[uid] = k + 1
            key = float(span[min(k, len(span) - 1)])
            for m in pending:
                keys[m] = starts[uid] - 0.5
            pending.clear()
            keys.append(key)
        else:
            keys.append(float("inf"))
            pending.append(n)
    out: list[Any] = []
    i = 0
    # a response written as several records has them far apart (its tool results between):
    # every produced record goes where its source record was
    for n in sorted(range(len(produced)), key=keys.__getitem__):
        key, rec = keys[n], produced[n][1]
        while i < len(records) and records[i][0] < key:
            out.append(records[i][2])
            i += 1
        out.append(rec)
    out.extend(e[2] for e in records[i:])
    return out


def relinked(t: Transcript, records: list[dict[str, Any]], made: set[str],
             fixed: Callable[[dict[str, Any]], bool] = lambda _: False) -> list[dict[str, Any]]:
    """Written records with each `parentId` as it was where its parent is still written; a
    record the writer made up (its id in `made`), or one whose parent is gone (a record `t` was
    read from that is not written: compaction removed it), hangs from the record before it.
    `fixed` records (Pi's session header) are left as they are, and none hangs from them."""
    gone = names(t) - {r.get("id") for r in records}
    out = []
    before: Any = None
    for rec in records:
        if fixed(rec):
            out.append(rec)
            continue
        parent = rec.get("parentId")
        if rec.get("id") in made or (parent is not None and parent in gone):
            rec = {**rec, "parentId": before}
        out.append(rec)
        before = rec.get("id")
    return out
