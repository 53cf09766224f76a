"""The original of a compacted transcript, found in an archive: through the refs it carries, or,
without refs, by what compaction keeps (its key within a file of many, its system units and
last request) and by telling what compaction made from what it left as it was."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Protocol

from ctxkit.archive.records import ArchivedUnit
from ctxkit.english import counted
from ctxkit.errors import ArchiveError
from ctxkit.model import Transcript, Unit
from ctxkit.refs import REFS_IN_TEXT, parse_ref


class ArchiveView(Protocol):
    """What finding an original reads of an archive (`archive.store.Archive` has it all)."""

    path: str

    def find(self, bare: str) -> ArchivedUnit | None: ...
    def original(self, transcript_id: str) -> Transcript | None: ...
    def latest_of(self, owners: set[str]) -> str: ...
    def ids_keyed(self, key: str) -> list[str]: ...
    def ids_asking(self, digest: str) -> list[str]: ...

# how a summary's opening line begins (`strategies.summarize_old.preamble`; the second after a
# loop's pinned summary)
PREAMBLE = ("[This session continues from earlier work that was compacted", "[Later work, compacted to fit")


def restore(archive: ArchiveView, compacted: Transcript, _depth: int = 0) -> Transcript:
    """The original of a compacted transcript, found through the refs it carries.

    Refs in placeholder and summary units (and in `meta`) must all resolve. Refs in other
    units' text are used too, since a round trip through a chat format drops unit types and
    meta, but one that does not resolve there may be ordinary text and is ignored, unless no
    ref resolves at all. A transcript without refs that was stored under its own id comes
    back from the store; one that shows no sign of compaction is returned as it is (compact
    leaves a transcript that already fits untouched and stores nothing for it).
    """
    owners = _owners(archive, compacted)
    tid = archive.latest_of(owners) if owners else compacted.id
    original = archive.original(tid)
    if original is not None:
        if _depth < 16 and refs_in(original) and original.units != compacted.units:
            try:
                return restore(archive, original, _depth=_depth + 1)
            except ArchiveError:
                return original
        return original
    if owners:
        raise ArchiveError(
            f"the refs of transcript {compacted.id!r} point to transcript {tid!r}, whose "
            f"original is not stored in {archive.path}"
        )
    matched = _by_key(archive, compacted)
    if matched is not None:
        return matched
    marked = any(made_by_compaction(u) for u in compacted.units)
    if not marked and _key_of(compacted.id) is not None:
        # One conversation of a file of many, with no sign of compaction and no original
        # under its key: compact left it as it was (another conversation that happens to
        # share its requests is not its original).
        return compacted
    matched = _by_invariants(archive, compacted)
    if matched is not None:
        return matched
    if marked:
        raise ArchiveError(
            f"transcript {compacted.id!r} was compacted but carries no ref into {archive.path} "
            "and its original is not stored there"
        )
    return compacted


def _owners(archive: ArchiveView, compacted: Transcript) -> set[str]:
    """The ids of the transcripts whose units the refs of `compacted` name; an `ArchiveError`
    when a ref that must resolve does not, or when they name several and not all are stored."""
    strict, loose = _refs_by_trust(compacted)
    owners: set[str] = set()
    unknown: list[str] = []
    unknown_loose: list[str] = []
    for ref in sorted(strict | loose):
        found = archive.find(parse_ref(ref)[0])
        if found is not None:
            owners.add(found.transcript_id)
        elif ref in strict:
            unknown.append(ref)
        else:
            unknown_loose.append(ref)
    if unknown or (unknown_loose and not owners):
        missing = unknown or unknown_loose
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise ArchiveError(
            f"{counted(len(missing), 'ref')} of transcript {compacted.id!r} "
            f"{'is' if len(missing) == 1 else 'are'} not in {archive.path}: "
            f"{shown}; was it compacted with another --archive?"
        )
    # Several owners: a compacted transcript compacted again keeps the first run's refs;
    # its own original is the one stored last, which expands in turn to the first original.
    # Every owner then has its original stored; refs into others are a mix-up.
    if len(owners) > 1 and any(archive.original(o) is None for o in owners):
        raise ArchiveError(
            f"the refs of transcript {compacted.id!r} point to several transcripts in "
            f"{archive.path} ({', '.join(sorted(owners))}); cannot tell which is its original"
        )
    return owners


def _by_key(archive: ArchiveView, compacted: Transcript) -> Transcript | None:
    """The stored original of the same conversation of a file of many (its id after the
    file's name: the line of a dataset, an aider session's start), when only one is, read
    back under another file's name."""
    key = _key_of(compacted.id)
    if key is None:
        return None
    found = [
        t
        for tid in archive.ids_keyed(key)
        if (t := archive.original(tid)) is not None and _could_come_from(t, compacted)
    ]
    return found[0] if len(found) == 1 else None


def _by_invariants(archive: ArchiveView, compacted: Transcript) -> Transcript | None:
    """The stored original that the compaction invariants point to, when only one does.

    Compaction keeps the system units and the last user request verbatim, so a transcript
    read back under another id (the output file's name) and without refs (a placeholder
    whose ref lived in metadata the output format dropped) still matches its original.
    Read back from a chat format, a placeholder may itself look like a user request, so
    every request is tried, the latest first.
    """
    from ctxkit.structure import is_user_request

    system = [u.content for u in compacted.units if u.role == "system"]
    tried: set[str] = set()
    for u in reversed(compacted.units):
        if not (is_user_request(u) and u.content):
            continue
        digest = text_digest(u.content)
        if digest in tried:
            continue
        tried.add(digest)
        matches = []
        for tid in archive.ids_asking(digest):
            candidate = archive.original(tid)
            if (
                candidate is not None
                and [c.content for c in candidate.system_units] == system
                and _could_come_from(candidate, compacted)
            ):
                matches.append(candidate)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            same = [m for m in matches if _same_text(m, compacted)]
            if len(same) == 1:
                return same[0]
            raise ArchiveError(
                f"transcript {compacted.id!r} carries no ref and matches several originals "
                f"in {archive.path} ({', '.join(m.id for m in matches[:5])}); cannot tell which"
            )
    return None


def _key_of(transcript_id: str) -> str | None:
    """The part of a transcript id that names it within its file (`data#12` -> `12`); None for
    the id of a file's only transcript."""
    stem, sep, key = transcript_id.rpartition("#")
    return key.split("~")[0] if sep and stem and key else None


def text_digest(text: str) -> str:
    """16 hex of a SHA-256 over `text`: how the archive keys a transcript's last request."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def last_request_digest(units: Sequence[Unit]) -> str:
    """16 hex of a SHA-256 over the last user request's text ("" when there is none)."""
    from ctxkit.structure import is_user_request

    return text_digest(next((u.content for u in reversed(units) if is_user_request(u)), ""))


def _could_come_from(original: Transcript, compacted: Transcript) -> bool:
    """Whether compaction could have made `compacted` from `original`: its units that carry no
    sign of compaction (no ref, not made up) are units of the original, in the same order. Two
    conversations that share a request (a dataset's) are told apart this way."""
    texts = iter(u.content for u in original.units)
    for u in compacted.units:
        if made_by_compaction(u) or REFS_IN_TEXT.search(u.content):
            continue
        if not any(u.content == t for t in texts):
            return False
    return True


def _same_text(a: Transcript, b: Transcript) -> bool:
    return [(u.role, u.content) for u in a.units] == [(u.role, u.content) for u in b.units]


def same_units(a: Transcript, b: Transcript) -> bool:
    """Same messages (ids, roles, content, pairing, source records), whatever the transcript ids."""

    def key(u: Unit) -> tuple[Any, ...]:
        return (u.id, u.role, u.content, [c.to_dict() for c in u.tool_calls], u.tool_call_id, u.raw)

    return [key(u) for u in a.units] == [key(u) for u in b.units]


def made_by_compaction(u: Unit) -> bool:
    """Made by ctxkit's compaction. An agent's own summary read from its log (a Codex
    `compacted` record, Claude Code's compact summary, an OpenHands condensation) is a summary
    too, but it is the log's own text: it has its record and none of our marks."""
    if u.type == "placeholder" or u.id.startswith("ctxkit-"):
        return True
    if u.type != "summary":
        return False
    return u.raw is None or bool(REFS_IN_TEXT.search(u.content)) or u.content.startswith(PREAMBLE)


def _refs_by_trust(t: Transcript) -> tuple[set[str], set[str]]:
    """(refs that must resolve, refs that are probably ours) of a transcript."""
    strict: set[str] = set()
    loose: set[str] = set()
    for u in t.units:
        ref = u.meta.get("ref")
        if isinstance(ref, str):
            strict.add(ref)
        strict.update(r for r in u.meta.get("refs") or [] if isinstance(r, str))
        found = REFS_IN_TEXT.findall(u.content)
        (strict if made_by_compaction(u) else loose).update(found)
    return strict, loose - strict


def refs_in(t: Transcript) -> list[str]:
    """Every ref a transcript carries (meta and text), sorted."""
    strict, loose = _refs_by_trust(t)
    return sorted(strict | loose)
