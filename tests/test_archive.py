"""Archive: storing units whole, refs, recall (lines, search, max tokens), errors, restore."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proptest import examples

from ctxkit.archive.originals import refs_in
from ctxkit.archive.records import (
    transcript_from_json,
    transcript_to_json,
    unit_from_json,
    unit_to_json,
)
from ctxkit.archive.refs import default_archive_path
from ctxkit.archive.store import Archive, make_ref
from ctxkit.errors import ArchiveError
from ctxkit.model import ToolCall, Transcript, Unit
from ctxkit.refs import long_ref, parse_ref

LOG = "\n".join(
    f"line {i} ERROR disk full" if i % 10 == 0 else f"line {i} ok" for i in range(1, 61)
)


def tool_result(uid: str = "r1", content: str = LOG) -> Unit:
    return Unit(
        id=uid,
        role="tool",
        type="tool_result",
        content=content,
        timestamp=1700000000.5,
        priority=2,
        tool_call_id="call_1",
        name="bash",
        tokens=321,
        raw={
            "role": "tool",
            "tool_call_id": "call_1",
            "content": content,
            "extra": [1, {"x": None}],
        },
        group=4,
        meta={"note": "kept"},
    )


def call_unit() -> Unit:
    return Unit(
        id="a1",
        role="assistant",
        type="tool_call",
        content="",
        tool_calls=[ToolCall("call_1", "bash", '{"cmd": "make test"}')],
        raw={"role": "assistant", "content": None},
        group=3,
    )


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    a = Archive(str(tmp_path / "a.ctx.db"))
    yield a  # type: ignore[misc]
    a.close()


# -- storing and refs ------------------------------------------------------------------------


def test_put_stores_the_unit_whole_and_get_gives_it_back(archive: Archive) -> None:
    unit = tool_result()
    ref = archive.put("t0", unit, summary="bash output, 60 lines", tokens=321)
    assert re.fullmatch(r"ref-[0-9]{18}", ref)
    item = archive.get(ref)
    assert (item.ref, item.transcript_id, item.unit_id, item.type, item.tool_name) == (
        ref,
        "t0",
        "r1",
        "tool_result",
        "bash",
    )
    assert item.summary == "bash output, 60 lines" and item.tokens == 321 and item.content == LOG
    assert item.unit() == unit  # raw, group, meta, priority, timestamp all restored
    assert item.long_ref == "ctx://t0/r1"


def test_put_is_idempotent_and_refs_are_deterministic(tmp_path: Path) -> None:
    unit = tool_result()
    with Archive(str(tmp_path / "one.db")) as a, Archive(str(tmp_path / "two.db")) as b:
        ref = a.put("t0", unit)
        assert a.put("t0", unit) == ref
        assert len(a.list()) == 1
        assert b.put("t0", unit) == ref == make_ref("t0", "r1", LOG)
    assert make_ref("t0", "r1", LOG + "!") != ref
    assert make_ref("t1", "r1", LOG) != ref
    assert make_ref("t0", "r2", LOG) != ref


def test_tool_name_of_a_call_unit(archive: Archive) -> None:
    ref = archive.put("t0", call_unit())
    item = archive.get(ref)
    assert item.tool_name == "bash"
    assert archive.recall(ref) == '[tool call call_1: bash {"cmd": "make test"}]'


@pytest.mark.parametrize(
    ("ref", "bare", "lines", "match"),
    [
        ("ref-0123abcd", "ref-0123abcd", None, None),
        ("ref-0123abcd:L50-100", "ref-0123abcd", (50, 100), None),
        ("ref-0123abcd:L7", "ref-0123abcd", (7, 7), None),
        ("ctx://t0/u1:match-3", "ctx://t0/u1", None, 3),
        ("ctx://a%2Fb/u%3A1:L2-3", "ctx://a%2Fb/u%3A1", (2, 3), None),
    ],
)
def test_parse_ref(ref: str, bare: str, lines: tuple[int, int] | None, match: int | None) -> None:
    got_bare, where = parse_ref(ref)
    assert (got_bare, where.lines, where.match) == (bare, lines, match)


def test_every_ref_form_resolves(archive: Archive) -> None:
    unit = tool_result(uid="msg:7/b")
    ref = archive.put("session/42", unit)
    long = long_ref("session/42", "msg:7/b")
    assert long == "ctx://session%2F42/msg%3A7%2Fb"
    for form in (
        ref,
        f"{ref}:L2-3",
        long,
        f"{long}:L1",
        f"{long}:match-2",
        "ctx://session/42/msg:7/b",
    ):
        assert archive.get(form).ref == ref, form


def test_unknown_and_malformed_refs(archive: Archive) -> None:
    archive.put("t0", tool_result())
    with pytest.raises(ArchiveError) as err:
        archive.get("ref-00000000")
    assert str(err.value) == (
        f"unknown ref ref-00000000 in {archive.path}; "
        f"`ctxkit recall --list --archive {archive.path}` lists the refs"
    )
    with pytest.raises(ArchiveError, match="unknown ref ctx://t0/nope"):
        archive.get("ctx://t0/nope")
    with pytest.raises(ArchiveError, match="is not a ref"):
        archive.get("r1")


def test_get_counts_accesses(archive: Archive) -> None:
    ref = archive.put("t0", tool_result())
    assert archive.list()[0].access_count == 0 and archive.list()[0].last_accessed is None
    archive.get(ref)
    archive.recall(ref, lines=(1, 2))
    row = archive.list()[0]
    assert row.access_count == 2 and row.last_accessed is not None


def test_list_by_transcript_in_stored_order(archive: Archive) -> None:
    r1 = archive.put("t1", tool_result("x"))
    r2 = archive.put("t0", tool_result("y"))
    r3 = archive.put("t1", call_unit())
    assert [i.ref for i in archive.list()] == [r1, r2, r3]
    assert [i.ref for i in archive.list("t1")] == [r1, r3]
    assert archive.list("nope") == []


# -- recall ----------------------------------------------------------------------------------


def test_recall_whole_and_lines(archive: Archive) -> None:
    ref = archive.put("t0", tool_result())
    assert archive.recall(ref) == LOG
    assert archive.recall(ref, lines=(9, 11)) == "line 9 ok\nline 10 ERROR disk full\nline 11 ok"
    assert archive.recall(f"{ref}:L59-70") == "line 59 ok\nline 60 ERROR disk full"
    assert archive.recall(f"{ref}:L5") == "line 5 ok"
    # explicit lines win over the ref's location
    assert archive.recall(f"{ref}:L5", lines=(6, 6)) == "line 6 ok"
    with pytest.raises(ArchiveError, match="has 60 lines; line 61 is past the end"):
        archive.recall(ref, lines=(61, 62))
    with pytest.raises(ArchiveError, match="bad line range 3-2"):
        archive.recall(ref, lines=(3, 2))


def test_recall_search_with_context_and_nth_match(archive: Archive) -> None:
    ref = archive.put("t0", tool_result())
    out = archive.recall(ref, search="ERROR")
    groups = out.split("\n--\n")
    assert len(groups) == 6
    assert (
        groups[0]
        == "8-line 8 ok\n9-line 9 ok\n10:line 10 ERROR disk full\n11-line 11 ok\n12-line 12 ok"
    )
    assert (
        archive.recall(f"{ref}:match-2", search="ERROR").split("\n")[2]
        == "20:line 20 ERROR disk full"
    )
    assert archive.recall(ref, search=r"line [12]0 ") == "\n--\n".join(groups[:2])
    # a pattern that is not a valid regex is searched literally
    assert archive.recall(ref, search="(") == ""
    # line numbers stay those of the unit inside a range
    assert (
        archive.recall(ref, lines=(15, 25), search="ERROR").split("\n")[2]
        == "20:line 20 ERROR disk full"
    )
    with pytest.raises(ArchiveError, match="has 6 match\\(es\\) for 'ERROR'; match-7 is not one"):
        archive.recall(f"{ref}:match-7", search="ERROR")
    with pytest.raises(ArchiveError, match="give the pattern with --search"):
        archive.recall(f"{ref}:match-1")


def test_recall_overlapping_context_is_one_group(archive: Archive) -> None:
    ref = archive.put("t0", tool_result(content="a\nhit\nb\nhit\nc\nd\ne\nf\nhit"))
    assert (
        archive.recall(ref, search="hit") == "1-a\n2:hit\n3-b\n4:hit\n5-c\n6-d\n--\n7-e\n8-f\n9:hit"
    )


def test_recall_max_tokens_cuts_and_says_so(archive: Archive) -> None:
    from ctxkit.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    ref = archive.put("t0", tool_result())
    assert archive.recall(ref, max_tokens=10_000) == LOG
    out = archive.recall(ref, max_tokens=80)
    assert tok.count(out) <= 80
    body, note = out.rsplit("\n", 1)
    assert LOG.startswith(body) and body.count("\n") >= 3
    shown = body.count("\n") + 1
    assert note.startswith("[cut: ")
    assert note.endswith(f"lines 1-{shown} of 1-60; --lines {shown + 1}-60 for more]")
    # inside a line range the note speaks in the unit's line numbers
    out = archive.recall(f"{ref}:L21-40", max_tokens=60)
    body, note = out.rsplit("\n", 1)
    assert body.startswith("line 21 ok\n") and tok.count(out) <= 60
    last = 20 + body.count("\n") + 1
    assert note.endswith(f"lines 21-{last} of 21-40; --lines {last + 1}-40 for more]")
    # after a search the lines are not the unit's: the note says how to narrow instead
    out = archive.recall(ref, search="ERROR", max_tokens=60)
    assert out.endswith("narrow the pattern, pick one with :match-N, or raise --max-tokens]")
    assert out.startswith("8-line 8 ok\n") and tok.count(out) <= 60
    # a single huge line is cut inside the line
    one = archive.put("t0", tool_result("big", "word " * 2000))
    out = archive.recall(one, max_tokens=50, tokenizer=tok)
    assert tok.count(out) <= 50 and out.endswith(
        "part of line 1 of 1-1; raise --max-tokens for more]"
    )


# -- opening errors --------------------------------------------------------------------------


def test_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "a.db"
    with pytest.raises(ArchiveError) as err:
        Archive(str(path))
    assert (
        str(err.value)
        == f"cannot create archive {path}: the directory {path.parent} does not exist"
    )
    assert not path.parent.exists()


def test_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(
        ArchiveError, match=f"archive path {re.escape(str(tmp_path))} is a directory"
    ):
        Archive(str(tmp_path))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes through 0444")
def test_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    Archive(str(path)).close()
    path.chmod(0o444)
    try:
        with pytest.raises(ArchiveError, match=f"archive {re.escape(str(path))} is read-only"):
            Archive(str(path))
        with Archive(str(path), readonly=True) as a:  # reading still works
            assert a.list() == []
    finally:
        path.chmod(0o644)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_unwritable_location_even_as_root() -> None:
    # /proc takes no new files whoever asks, so this holds where chmod 0444 does not (root)
    path = "/proc/ctxkit-test.ctx.db"
    with pytest.raises(ArchiveError) as err:
        Archive(path)
    assert str(err.value).startswith(f"cannot open archive {path}: ")
    assert not os.path.exists(path)


def test_read_only_open_refuses_writes_and_does_not_count(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        ref = a.put("t0", tool_result())
    with Archive(str(path), readonly=True) as a:
        assert a.recall(ref, lines=(1, 1)) == "line 1 ok"
        with pytest.raises(ArchiveError, match="opened read-only"):
            a.put("t0", call_unit())
    with Archive(str(path)) as a:
        assert a.list()[0].access_count == 0


def test_not_an_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("just some text, not a database\n" * 20)
    for readonly in (False, True):
        with pytest.raises(ArchiveError) as err:
            Archive(str(path), readonly=readonly)
        assert str(err.value) == f"{path} is not a ctxkit archive (not an SQLite file)"
    assert path.read_text().startswith("just some text")


def test_another_sqlite_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(
        ArchiveError, match="is an SQLite database but not a ctxkit archive .*users"
    ):
        Archive(str(path))


def test_reading_a_missing_archive_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    for kwargs in ({"readonly": True}, {"create": False}):
        with pytest.raises(ArchiveError, match="no archive at .*missing.db"):
            Archive(str(path), **kwargs)  # type: ignore[arg-type]
    assert not path.exists()


def test_one_file_no_wal(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        a.put("t0", tool_result())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    cols = [r[1] for r in conn.execute("PRAGMA table_info(units)")]
    assert cols == [
        "ref",
        "scope",
        "transcript_id",
        "unit_id",
        "type",
        "tool_name",
        "summary",
        "content_digest",
        "position",
        "record",
        "tokens",
        "created",
        "last_accessed",
        "access_count",
    ]
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(units)")}
    assert "units_by_transcript" in indexes
    assert conn.execute("SELECT value FROM ctxkit_meta WHERE key = 'schema_version'").fetchone() == ("3",)
    conn.close()


def test_default_archive_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Beside the output; for stdout, the user's piped archive in the user's data folder
    (never a file in the working directory)."""
    assert default_archive_path("out/small.jsonl") == "out/small.jsonl.ctx.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("CTXKIT_DATA_DIR", raising=False)
    piped = str(tmp_path / "data" / "ctxkit" / "piped.ctx.db")
    assert default_archive_path(None) == default_archive_path("-") == piped
    monkeypatch.setenv("CTXKIT_DATA_DIR", str(tmp_path / "mine"))
    assert default_archive_path(None) == str(tmp_path / "mine" / "piped.ctx.db")


# -- restore ---------------------------------------------------------------------------------


def original() -> Transcript:
    units = [
        Unit(
            id="s",
            role="system",
            content="Be brief.",
            raw={"role": "system", "content": "Be brief."},
            group=0,
        ),
        Unit(
            id="u",
            role="user",
            content="run the tests",
            raw={"role": "user", "content": "run the tests"},
            group=1,
        ),
        call_unit(),
        dataclasses.replace(tool_result(), tokens=None),
        Unit(
            id="z",
            role="assistant",
            content="2 failures",
            raw={"role": "assistant", "content": "2 failures"},
            group=5,
        ),
    ]
    return Transcript(
        units=units,
        id="sess-1",
        source_format="openai",
        layout="object",
        tools=[{"type": "function", "function": {"name": "bash"}}],
        envelope={"model": "gpt-4o", "temperature": 0},
        path="in.json",
        metadata={"source": "test"},
    )


def compacted_of(t: Transcript, archive: Archive, *, new_id: str | None = None) -> Transcript:
    """What a strategy leaves: the big result archived and replaced by a placeholder."""
    result = t.units[3]
    ref = archive.put(t.id, result)
    stub = result.replace(
        type="placeholder",
        content=f"[bash output, 60 lines, archived: {ref}]",
        meta={"ref": ref, "strategy": "offload"},
    )
    return Transcript(
        units=[*t.units[:3], stub, t.units[4]], id=new_id or t.id, source_format="openai"
    )


def test_transcript_json_round_trip() -> None:
    t = original()
    t.units[3].tokens = 321
    back = transcript_from_json(transcript_to_json(t))
    # a token count cached on the way is not part of an openai original
    assert back.units[3].tokens is None and t.units[3].tokens == 321
    back.units[3].tokens = 321
    assert back == t
    t.source_format = "units"  # there tokenCount is a field of the record
    assert transcript_from_json(transcript_to_json(t)) == t


def test_restore_round_trip(archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    small = compacted_of(t, archive)
    assert refs_in(small) == [small.units[3].meta["ref"]]
    assert archive.restore(small) == t


def test_restore_finds_the_original_through_refs_when_ids_differ(archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    archive.put_transcript(Transcript(units=[], id="other"))
    small = compacted_of(t, archive, new_id="read-back-under-another-id")
    small.units[3].meta = {}  # a writer that drops meta: the ref in the text still leads home
    assert archive.restore(small) == t


def test_restore_with_unknown_ref_fails(tmp_path: Path, archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    with Archive(str(tmp_path / "elsewhere.db")) as other:
        small = compacted_of(t, other)
    ref = small.units[3].meta["ref"]
    with pytest.raises(
        ArchiveError, match=f"1 ref of transcript 'sess-1' is not in .*: {ref}"
    ):
        archive.restore(small)


def test_restore_without_refs(archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    archive.put_transcript(Transcript(units=[], id="t2"))
    # stored under its own id
    assert archive.restore(Transcript(units=[], id="sess-1")) == t
    # never compacted (compact stores nothing for a transcript that fits): comes back as it is
    untouched = Transcript(units=[Unit(id="u", role="user", content="hi")], id="x")
    assert archive.restore(untouched) is untouched
    # compacted, but nothing leads to its original
    lost = Transcript(
        units=[Unit(id="p", role="user", type="placeholder", content="[gone]")], id="x"
    )
    with pytest.raises(ArchiveError, match="'x' was compacted but carries no ref"):
        archive.restore(lost)


def test_restore_refs_in_plain_text_and_ambiguity(archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    small = compacted_of(t, archive, new_id="other")
    # a chat-format round trip loses type and meta: the ref in plain text still leads home,
    # and a ref-like word in ordinary text that resolves nowhere is ignored
    plain = small.units[3].replace(type="tool_result", meta={})
    chatty = small.units[4].replace(content="see ref-00000000 in the wiki")
    assert archive.restore(small.replace(units=[*small.units[:3], plain, chatty])) == t
    # but when nothing resolves, it is an error
    with pytest.raises(
        ArchiveError, match="1 ref of transcript 'x' is not in .*ref-00000000"
    ):
        archive.restore(Transcript(units=[chatty], id="x"))
    # refs into two transcripts
    ref2 = archive.put("t2", tool_result("q"))
    two = Unit(
        id="p", role="user", type="placeholder", content=f"{small.units[3].meta['ref']} {ref2}"
    )
    with pytest.raises(ArchiveError, match="point to several transcripts .*sess-1, t2"):
        archive.restore(Transcript(units=[two], id="x"))
    # refs into a transcript whose original was not stored
    alone = Unit(id="p", role="user", type="placeholder", content=ref2)
    with pytest.raises(
        ArchiveError, match="point to transcript 't2', whose original is not stored"
    ):
        archive.restore(Transcript(units=[alone], id="x"))


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def units(draw: st.DrawFn) -> Unit:
    return Unit(
        id=draw(st.text(min_size=1, max_size=8)),
        role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        type=draw(st.sampled_from(["message", "tool_result", "placeholder", "code"])),
        content=draw(st.text(max_size=200)),
        timestamp=draw(st.none() | st.floats(0, 2e9)),
        priority=draw(st.sampled_from([None, 1, 2, 3])),
        tool_calls=[
            ToolCall(i, n, a)
            for i, n, a in draw(
                st.lists(
                    st.tuples(
                        st.text(min_size=1, max_size=5), st.text(max_size=5), st.text(max_size=20)
                    ),
                    max_size=2,
                )
            )
        ],
        tool_call_id=draw(st.none() | st.text(min_size=1, max_size=6)),
        name=draw(st.none() | st.text(max_size=6)),
        reasoning=draw(st.text(max_size=20)),
        images=draw(st.integers(0, 3)),
        tokens=draw(st.none() | st.integers(0, 10_000)),
        raw=draw(json_values),
        group=draw(st.none() | st.integers(0, 100)),
        meta=draw(st.dictionaries(st.text(min_size=1, max_size=5), json_values, max_size=2)),
    )


@settings(max_examples=examples(200), deadline=None)
@given(units())
def test_unit_json_round_trip(unit: Unit) -> None:
    assert unit_from_json(unit_to_json(unit)) == unit


@settings(max_examples=examples(50), deadline=None)
@given(st.text(max_size=8), st.text(min_size=1, max_size=8))
def test_long_ref_resolves_any_ids(
    tmp_path_factory: pytest.TempPathFactory, tid: str, uid: str
) -> None:
    path = tmp_path_factory.mktemp("lr") / "a.db"
    with Archive(str(path)) as a:
        ref = a.put(tid, tool_result(uid))
        assert a.get(long_ref(tid, uid)).ref == ref
        assert a.get(f"{long_ref(tid, uid)}:L2-3").ref == ref


def test_has_does_not_count_and_memory_archive_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Archive(":memory:") as a:
        ref = a.put("t0", tool_result())
        assert a.has(ref) and a.has(f"{ref}:L1-2") and a.has("ctx://t0/r1")
        assert not a.has("ref-00000000") and not a.has("nonsense")
        assert a.list()[0].access_count == 0
    assert list(tmp_path.iterdir()) == []


def test_restore_by_invariants_when_a_handover_names_no_ref(archive: Archive) -> None:
    t = original()
    archive.put_transcript(t)
    other = original()
    other.id = "sess-2"
    other.units = [other.units[0], Unit(id="u", role="user", content="run the linter")]
    archive.put_transcript(other)
    # fresh_start keeps the system prompt and the last user request verbatim
    handover = Unit(id="h", role="user", type="summary", content="## Task\n- run the tests")
    last = Unit(id="q", role="user", content="run the tests")
    small = Transcript(units=[t.units[0], handover, last], id="small")
    assert archive.restore(small) == t
    # another system prompt: not this original
    foreign = Transcript(units=[Unit(id="s", role="system", content="Be long."), last], id="small")
    assert archive.restore(foreign) is foreign
    # two originals that both fit: an error, unless one is the very same text
    twin = original()
    twin.id = "sess-3"
    twin.units = [*twin.units[:4], Unit(id="z", role="assistant", content="3 failures")]
    archive.put_transcript(twin)
    with pytest.raises(ArchiveError, match="matches several originals .*sess-1, sess-3"):
        archive.restore(small)
    assert archive.restore(Transcript(units=list(twin.units), id="copy")) == twin


def test_an_untouched_conversation_is_not_taken_for_another_that_shares_its_request(archive: Archive) -> None:
    """Two conversations of a dataset that end on the same request: the one compaction left
    untouched (nothing stored for it, no ref) comes back as it is, never as the other."""
    ask = Unit(id="q2", role="user", content="Can you tell me a joke?")
    compacted_one = Transcript(units=[Unit(id="q", role="user", content="Edit this sentence."),
                                      Unit(id="a", role="assistant", content="Done."), ask], id="data#1")
    archive.put_transcript(compacted_one)  # stored: compaction changed it
    untouched = Transcript(units=[Unit(id="q", role="user", content="Find the GCF of 66 and 44."),
                                  Unit(id="a", role="assistant", content="22."), ask], id="out#2")
    assert archive.restore(untouched) is untouched


def test_writes_land_together_on_commit(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    a = Archive(str(path))
    a.put("t0", tool_result("one"))
    a.put("t0", tool_result("two"))
    assert len(a.list()) == 2  # the writer sees its own writes
    with Archive(str(path), readonly=True) as other:
        assert other.list() == []  # nobody else sees half a compaction
    a.commit()
    with Archive(str(path), readonly=True) as other:
        assert [i.unit_id for i in other.list()] == ["one", "two"]
    a.put("t0", tool_result("three"))
    a.close()
    with Archive(str(path), readonly=True) as other:
        assert len(other.list()) == 3


@settings(max_examples=examples(100), deadline=None)
@given(units())
def test_put_get_round_trip(unit: Unit) -> None:
    with Archive(":memory:") as a:
        ref = a.put("t", unit)
        assert a.get(ref).unit() == unit
        assert a.put("t", unit) == ref == make_ref("t", unit.id, unit.content)


def test_recall_tiny_budget_still_says_it_cut(archive: Archive) -> None:
    from ctxkit.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    ref = archive.put("t0", tool_result())
    out = archive.recall(ref, max_tokens=20, tokenizer=tok)
    assert out.endswith("\n[cut: raise --max-tokens]") and tok.count(out) <= 20


def test_list_covers_a_transcripts_digest_keys(archive: Archive) -> None:
    """Compacted again with other content (an agent loop), a transcript gets `id~digest` keys;
    its listing still holds every unit archived for it, and no other transcript's."""
    first = archive.put("sess", tool_result("a"))
    again = archive.put("sess~1a2b3c4d", tool_result("b"))
    archive.put("sess-2", tool_result("c"))
    archive.put("sessx", tool_result("d"))
    assert [a.ref for a in archive.list("sess")] == [first, again]


# -- issue 16: refs that never collide, runs that fail leave nothing, concurrent writers --------


def test_refs_are_decimal_and_cost_the_same_tokens_whatever_the_digest() -> None:
    from ctxkit.archive.store import REF_DIGITS, REF_PROBE
    from ctxkit.tokens import get_tokenizer

    tok = get_tokenizer("cl100k_base")
    refs = {make_ref("scope", f"u{i}", "x") for i in range(500)}
    assert len(refs) == 500 and all(re.fullmatch(r"ref-\d{18}", r) for r in refs)
    assert {tok.count(f"recall: {r}]") for r in refs} == {tok.count(f"recall: {REF_PROBE}]")}
    # a longer ref ends with the shorter one: a clash extends the ref, it does not replace it
    assert make_ref("s", "u", "c", REF_DIGITS + 6).endswith(make_ref("s", "u", "c")[4:])


def test_ref_scope_ignores_the_name_and_the_token_cache() -> None:
    from ctxkit.archive.store import ref_scope

    t = original()
    assert ref_scope(t) == ref_scope(dataclasses.replace(t, id="other", path="elsewhere.json"))
    before = ref_scope(t)
    # the same messages in another envelope are another transcript: expand must give each back
    assert ref_scope(dataclasses.replace(t, envelope={"model": "gpt-4o", "seed": 2})) != before
    for u in t.units:
        u.tokens = 7  # counted on the way
    assert ref_scope(t) == before
    t.units[-1].content = "3 failures"
    assert ref_scope(t) != before


def _occupy(path: Path, ref: str, unit_id: str, content: str) -> None:
    """Store another unit under `ref` the way a digest clash would (as an older ctxkit could)."""
    with Archive(str(path)) as a:
        stored = a.put("squatter", Unit(id=unit_id, role="tool", content=content), scope="other")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE units SET ref = ? WHERE ref = ?", (ref, stored))
    conn.close()


def test_a_clashing_ref_is_extended_deterministically(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    unit = tool_result("r9")
    short = make_ref("scope-a", unit.id, unit.content)
    _occupy(path, short, "someone-else", "their text")
    with Archive(str(path)) as a:
        got = a.put("t", unit, scope="scope-a")
        assert got != short and got.endswith(short[4:]) and re.fullmatch(r"ref-\d{24}", got)
        assert a.ref_for("scope-a", unit) == (got, True)
        assert a.put("t", unit, scope="scope-a") == got  # stored once, same ref again
        assert a.get(got).unit() == unit
        assert a.get(short).content == "their text"  # the first owner keeps its ref
    with Archive(str(path)) as a:  # another run: same ref
        assert a.put("t", unit, scope="scope-a") == got
        assert len(a.list()) == 2


def test_collision_corpus_every_unit_keeps_its_own_ref(tmp_path: Path) -> None:
    """A corpus built to collide: many transcripts sharing unit ids and texts, twins under other
    names, and the short refs of half its units taken by other units beforehand."""
    path = tmp_path / "a.db"
    corpus = []
    for n in range(40):
        units = [tool_result(f"r{i}", f"same text {i % 7}") for i in range(25)]
        units.append(tool_result("last", f"conversation {n % 20}"))  # 20 distinct, 20 twins
        corpus.append(Transcript(units=units, id=f"conv#{n}", source_format="openai"))
    from ctxkit.archive.store import ref_scope

    squatted = [make_ref(ref_scope(t), u.id, u.content) for t in corpus[:10] for u in t.units[::2]]
    for i, r in enumerate(squatted):
        _occupy(path, r, f"s{i}", f"squatter {i}")
    refs: dict[tuple[str, str], str] = {}
    with Archive(str(path)) as a:
        for t in corpus:
            scope = ref_scope(t)
            for u in t.units:
                refs[(t.id, u.id)] = a.put(t.id, u, scope=scope)
    by_text: dict[str, set[str]] = {}
    for (tid, _uid), ref in refs.items():
        by_text.setdefault(ref, set()).add(tid)
    with Archive(str(path), readonly=True) as a:
        for (tid, uid), ref in refs.items():
            n = int(tid.split("#")[1])
            got = a.get(ref)
            assert got.unit_id == uid
            expected = (
                f"conversation {n % 20}" if uid == "last" else f"same text {int(uid[1:]) % 7}"
            )
            assert got.content == expected
        assert len(a.list()) == len(squatted) + 20 * 26  # twins share, squatters stay
    # a ref names one conversation's content: twins (same messages) share, no one else does
    for ref, owners in by_text.items():
        assert len({int(o.split("#")[1]) % 20 for o in owners}) == 1, (ref, owners)
    extended = {r for r in refs.values() if len(r) > len("ref-") + 18}
    assert len(extended) == len(set(squatted))


def _sim_dataset(tmp_path: Path, name: str) -> Path:
    from ctxkit.formats import write_path
    from ctxkit.simulate import generate

    ts = [generate("fragmented", seed=6), generate("deep_reasoning", seed=6)]
    path = tmp_path / name
    write_path(ts, str(path), "openai")
    return path


@pytest.mark.slow
def test_output_does_not_depend_on_the_file_name_and_one_archive_takes_both(
    tmp_path: Path,
) -> None:
    """Issue 16: `t.json` and `in.json` with the same content gave different compactions (the
    ref came from the name, and hex refs cost 4 to 10 tokens), and the two simulated
    conversations collided in one archive."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    runner = CliRunner()
    outs = []
    for name in ("t.jsonl", "in.jsonl", "a-much-longer-file-name.jsonl"):
        src = _sim_dataset(tmp_path, name)
        out = tmp_path / f"{name}.out.jsonl"
        r = runner.invoke(
            cli,
            [
                "compact",
                str(src),
                "--limit",
                "3000",
                "-o",
                str(out),
                "--embedder",
                "lexical",
                "--archive",
                str(tmp_path / "one.db"),
            ],
            catch_exceptions=False,
        )
        assert r.exit_code == 0, r.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    for name in ("t.jsonl", "in.jsonl"):
        back = tmp_path / f"{name}.back.jsonl"
        r = runner.invoke(
            cli,
            [
                "expand",
                str(tmp_path / f"{name}.out.jsonl"),
                "--archive",
                str(tmp_path / "one.db"),
                "-o",
                str(back),
            ],
            catch_exceptions=False,
        )
        assert r.exit_code == 0, r.output
        assert back.read_bytes() == (tmp_path / name).read_bytes()


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_a_conversation_that_fails_leaves_none_of_its_rows(tmp_path: Path) -> None:
    """A dataset whose second conversation cannot be compacted (its system prompt alone is over
    the limit): the first is written and archived, the second left out, its rows undone (exit 3);
    alone, it fails the run (exit 2) and the archive is as it was."""
    from click.testing import CliRunner, Result

    from ctxkit.cli import cli
    from ctxkit.formats import read_path, write_path

    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        a.put("earlier", tool_result())
    before = _dump(path)
    big = original()
    big = big.replace(
        id="ok", units=[*big.units[:3], big.units[3].replace(content=LOG * 20), big.units[4]]
    )
    doomed = original().replace(
        id="doomed",
        units=[original().units[0].replace(content="rule " * 3000), *original().units[1:]],
    )
    src = tmp_path / "two.jsonl"
    write_path([big, doomed], str(src), "openai")
    alone = tmp_path / "doomed.jsonl"
    write_path([doomed], str(alone), "openai")

    def compact(source: Path, out: str) -> Result:
        args = ["compact", str(source), "--limit", "800", "-o", str(tmp_path / out)]
        args += ["--archive", str(path), "--embedder", "lexical"]
        return CliRunner().invoke(cli, args, catch_exceptions=False)

    r = compact(alone, "alone.jsonl")
    assert r.exit_code == 2 and "below the least a compaction can leave" in r.output
    assert not (tmp_path / "alone.jsonl").exists()
    assert _dump(path) == before
    assert not os.path.exists(f"{path}-journal")
    r = compact(src, "o.jsonl")
    assert r.exit_code == 3
    assert f"{src}:2: left out: limit 800 is below the least a compaction can leave" in r.stderr
    assert len(list(read_path(str(tmp_path / "o.jsonl")))) == 1
    with Archive(str(path), readonly=True) as a:
        assert sorted(a.transcript_ids()) == ["two#1"]
        assert {u.transcript_id for u in a.list()} == {"earlier", "two#1"}
    assert not os.path.exists(f"{path}-journal")


def test_leaving_the_block_on_an_error_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        kept = a.put("t0", tool_result("kept"))
    with pytest.raises(RuntimeError), Archive(str(path)) as a:
        a.put("t0", tool_result("lost"))
        a.put_transcript(original())
        raise RuntimeError("killed mid-run")
    with Archive(str(path), readonly=True) as a:
        assert [i.ref for i in a.list()] == [kept] and a.transcript_ids() == []


def test_archives_are_private(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    old = os.umask(0o022)
    try:
        with Archive(str(path)) as a:
            a.put("t0", tool_result())
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o600


def test_a_failed_recall_counts_no_access(archive: Archive) -> None:
    ref = archive.put("t0", tool_result())
    for bad in (
        lambda: archive.recall(ref, lines=(500, 600)),
        lambda: archive.recall(f"{ref}:match-9", search="ERROR"),
        lambda: archive.recall("ref-000000000000000000"),
    ):
        with pytest.raises(ArchiveError):
            bad()
    assert archive.list()[0].access_count == 0
    archive.recall(ref, lines=(1, 2))
    assert archive.list()[0].access_count == 1


def test_a_failed_recall_on_the_command_line_counts_no_access(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctxkit.cli import cli

    path = tmp_path / "a.db"
    with Archive(str(path)) as a:
        ref = a.put("t0", tool_result())
    r = CliRunner().invoke(cli, ["recall", f"{ref}:L500", "--archive", str(path)])
    assert r.exit_code == 1
    with Archive(str(path), readonly=True) as a:
        assert a.list()[0].access_count == 0


def _write_one(path: str, n: int) -> list[str]:
    from ctxkit.compaction import CompactSettings, compact
    from ctxkit.tokens import get_tokenizer

    t = original()
    t = t.replace(
        id=f"writer-{n}",
        units=[
            *t.units[:3],
            t.units[3].replace(content=f"writer {n}\n" + LOG * 30),
            t.units[4],
        ],
    )
    with Archive(path) as a:
        settings = CompactSettings(limit=600, tokenizer=get_tokenizer("cl100k_base"))
        result = compact(t, settings, archive=a)
        assert result.changed
        return refs_in(result.transcript)


def test_eight_concurrent_writers_all_land(tmp_path: Path) -> None:
    import multiprocessing

    path = str(tmp_path / "shared.ctx.db")
    with multiprocessing.get_context("fork").Pool(8) as pool:
        results = pool.starmap(_write_one, [(path, n) for n in range(8)])
    with Archive(path, readonly=True) as a:
        assert sorted(a.transcript_ids()) == sorted(f"writer-{n}" for n in range(8))
        for n, refs in enumerate(results):
            assert refs
            for ref in refs:
                assert a.get(ref).transcript_id == f"writer-{n}"


def test_a_recall_during_a_compaction_reads_at_once_and_counts_later(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    with Archive(path) as a:
        ref = a.put("t0", tool_result())
    writer = Archive(path)
    writer.begin()  # a compaction in progress holds the write lock
    writer.put("t1", tool_result("other"))
    try:
        with Archive(path) as reader:
            assert reader.recall(ref, lines=(1, 1)) == "line 1 ok"
    finally:
        writer.close()
    with Archive(path) as a:
        assert a.get(ref, count=False).access_count == 0
        assert a.recall(ref, lines=(1, 1)) == "line 1 ok"
        assert a.get(ref, count=False).access_count == 1


def test_an_archive_from_before_scoped_refs_still_reads_and_takes_new_units(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(
            """
            CREATE TABLE ctxkit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO ctxkit_meta VALUES ('format', 'ctxkit-archive'), ('schema_version', '1');
            CREATE TABLE units (ref TEXT PRIMARY KEY, transcript_id TEXT NOT NULL,
                unit_id TEXT NOT NULL, type TEXT NOT NULL, tool_name TEXT,
                summary TEXT NOT NULL DEFAULT '', content TEXT NOT NULL, unit_json TEXT NOT NULL,
                tokens INTEGER, created TEXT NOT NULL, last_accessed TEXT,
                access_count INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE transcripts (transcript_id TEXT PRIMARY KEY,
                transcript_json TEXT NOT NULL, units INTEGER NOT NULL,
                last_request TEXT NOT NULL, created TEXT NOT NULL);
            INSERT INTO units (ref, transcript_id, unit_id, type, content, unit_json, created)
                VALUES ('ref-0123abcd', 'old', 'u1', 'message', 'from before', '{"id": "u1",
                "role": "tool"}', 'x');
            """
        )
    conn.close()
    with Archive(str(path), readonly=True) as a:  # read as it is
        assert a.recall("ref-0123abcd") == "from before"
    with Archive(str(path)) as a:
        new = a.put("t0", tool_result())
        assert a.recall("ref-0123abcd") == "from before" and a.recall(new, lines=(1, 1))
    with Archive(str(path), readonly=True) as a:
        assert {item.ref for item in a.list()} == {"ref-0123abcd", new}


@pytest.mark.slow
def test_parallel_workers_respect_a_clash_in_the_archive(tmp_path: Path) -> None:
    """Workers make refs in a scratch archive; one that clashes in the real archive is redone
    in the parent, so a --jobs run gives what a serial run gives."""
    from ctxkit.archive.store import ref_scope
    from ctxkit.compaction import CompactSettings, compact_many
    from ctxkit.tokens import get_tokenizer

    def corpus() -> list[Transcript]:
        out = []
        for n in range(3):
            t = original()
            units = [*t.units[:3], t.units[3].replace(content=f"run {n}\n" + LOG * 30)]
            units[3].raw = t.units[3].raw
            out.append(t.replace(id=f"conv#{n}", units=[*units, t.units[4]]))
        return out

    victim = corpus()[1]
    squat = make_ref(ref_scope(victim), victim.units[3].id, victim.units[3].content)
    outputs = []
    for jobs in (1, 2):
        path = tmp_path / f"a{jobs}.db"
        _occupy(path, squat, "someone", "their text")
        with Archive(str(path)) as a:
            results = list(
                compact_many(
                    corpus(),
                    CompactSettings(limit=600, tokenizer=get_tokenizer("cl100k_base")),
                    jobs=jobs,
                    archive=a,
                )
            )
        outputs.append([r.transcript.units for r in results])
        extended = [ref for r in results for ref in refs_in(r.transcript) if len(ref) == 4 + 24]
        assert extended and extended[0].endswith(squat[4:])  # the clash was met, and resolved
        with Archive(str(path), readonly=True) as a:
            assert a.get(squat).content == "their text"
            for r, t in zip(results, corpus(), strict=True):
                assert r.changed and a.restore(r.transcript).units == t.units
    assert outputs[0] == outputs[1]


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGINT"])
def test_a_run_killed_mid_way_leaves_the_archive_as_it_was(
    tmp_path: Path, signal_name: str
) -> None:
    """Killed at several points of a dataset run, the archive holds either nothing of the run
    (exactly its former content) or all of it, never part."""
    import signal
    import subprocess
    import sys

    from ctxkit.formats import write_path
    from ctxkit.simulate import generate

    src = tmp_path / "set.jsonl"
    write_path([generate("log_heavy", seed=s) for s in range(6)], str(src), "openai")
    root = Path(__file__).resolve().parents[1]
    outcomes = set()
    for delay_s in (0.5, 1.5, 3.0, 60.0):
        path = tmp_path / f"a{delay_s}.db"
        with Archive(str(path)) as a:
            a.put("earlier", tool_result())
        before = _dump(path)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ctxkit",
                "compact",
                str(src),
                "--limit",
                "3000",
                "--embedder",
                "lexical",
                "-o",
                str(tmp_path / "o.jsonl"),
                "--archive",
                str(path),
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            proc.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(getattr(signal, signal_name))
            proc.wait(timeout=60)
        with Archive(str(path)) as a:  # opening rolls back what a killed run left
            ids = a.transcript_ids()
        if _dump(path) == before:
            outcomes.add("untouched")
        else:
            # all of the run or none: a signal that lands after the commit (the archive commits
            # just before the output is renamed into place) may still end the process
            assert sorted(ids) == sorted(f"set#{n}" for n in range(1, 7)), proc.returncode
            outcomes.add("complete")
    assert "complete" in outcomes  # the last run was given time to finish


# -- storage layout ----------------------------------------------------------------------------

LAYOUT1 = Path(__file__).parent / "data" / "archive"


@st.composite
def units_with_long_texts(draw: st.DrawFn) -> Unit:
    """Units whose long content recurs in their source record, with the strings that could be
    mistaken for a marker (NUL and 32 hex digits), lone surrogates and integers past 64 bits."""
    from ctxkit.archive.packing import INLINE_MAX_CHARS

    u = draw(units())
    chars = st.characters(blacklist_categories=())  # surrogates too
    piece = draw(st.text(chars, min_size=1, max_size=20))
    text = piece * (INLINE_MAX_CHARS // len(piece) + 1)
    fake_marker = "\x00" + "0123456789abcdef" * 2
    u.content = text
    u.reasoning = draw(st.sampled_from(["", text, fake_marker]))
    u.raw = {
        "role": u.role,
        "content": [{"type": "text", "text": text}, text],
        "big": 2**70,
        "maybe": draw(st.sampled_from(["plain", fake_marker, "\x00"])),
    }
    return u


@settings(max_examples=examples(100), deadline=None)
@given(units_with_long_texts())
def test_long_texts_round_trip_through_the_packed_layout(unit: Unit) -> None:
    with Archive(":memory:") as a:
        ref = a.put("t", unit)
        assert a.get(ref).unit() == unit
        t = Transcript(units=[unit, tool_result()], id="t", source_format="units")
        a.put_transcript(t)
        assert a.original("t") == t
        (stored,) = a._conn.execute("SELECT count(*) FROM texts").fetchone()
        assert stored <= 2  # the content (and a long reasoning) once, however often it recurs


@st.composite
def mixed_records(draw: st.DrawFn) -> list[Unit]:
    """Short units, units with long texts, and units holding what the writer must treat apart:
    a NUL-led string, a float orjson cannot write (nan, inf), an integer past 64 bits."""
    out: list[Unit] = []
    for k in range(draw(st.integers(1, 6))):
        u = draw(st.one_of(units(), units_with_long_texts()))
        u.id = f"u{k}"
        odd = draw(st.sampled_from([None, float("nan"), float("inf"), 2**70, "\x00x", "null"]))
        if odd is not None:
            u.raw = {"role": u.role, "odd": odd}
        out.append(u)
    return out


@settings(max_examples=examples(100), deadline=None)
@given(mixed_records())
def test_records_written_together_read_back_as_each_alone(records: list[Unit]) -> None:
    """Records without long texts are written in one call: the array is the one each record
    written alone makes, and the transcript reads back whole."""
    import math

    from ctxkit.archive import packing
    from ctxkit.archive.records import unit_record

    dicts = [packing.stored(unit_record(u)) for u in records]
    together, moved = packing.records_json(dicts)
    alone = [packing.unit_json(d) for d in dicts]
    if any(used is None for _, used in alone):
        assert together is None  # a real NUL-led string: no markers anywhere
    else:
        assert together == b"[" + b",".join(data for data, _ in alone) + b"]"
        assert moved == {k: v for _, used in alone for k, v in (used or {}).items()}
    t = Transcript(units=records, id="t", source_format="units")
    with Archive(":memory:") as a:
        a.put_transcript(t)
        back = a.original("t")
    assert back is not None

    def same(x: Any, y: Any) -> bool:  # nan is not nan's equal
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x):
            return math.isnan(y)
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        return bool(x == y)

    assert [u.id for u in back.units] == [u.id for u in records]
    assert all(same(unit_record(a), unit_record(b)) for a, b in zip(back.units, records, strict=True))


def test_each_text_is_stored_once_and_compressed(tmp_path: Path) -> None:
    """An archived unit that is its original's unit is stored as its position in the original;
    a text long enough to outrun compression's window is stored once, apart, compressed."""
    from ctxkit.archive.packing import INLINE_MAX_CHARS, digest
    from ctxkit.compaction import compact
    from ctxkit.simulate import generate

    t = generate("giant_tool_output", seed=3, tokens=30_000)
    giant = max(t.units, key=lambda u: len(u.content))
    assert len(giant.content) >= INLINE_MAX_CHARS
    with Archive(str(tmp_path / "a.db")) as a:
        result = compact(t, limit=8_000, archive=a)
        assert result.changed
        conn = a._conn
        rows = conn.execute("SELECT unit_id, position, record FROM units").fetchall()
        named = {uid for uid, position, record in rows if position is not None and record is None}
        originals = {u.id for u in t.units}
        assert giant.id in named and named <= originals
        whole = conn.execute("SELECT ref FROM units WHERE record IS NOT NULL").fetchall()
        content = {u.id: u.content for u in t.units}
        for (ref,) in whole:  # changed (a chunk of a unit), or made (a summary)
            item = a.get(ref, count=False)
            assert content.get(item.unit_id) != item.content
        stored = conn.execute("SELECT body FROM texts WHERE digest = ?", (digest(giant.content),))
        (body,) = stored.fetchone()
        assert len(body) < len(giant.content.encode()) / 2
        from ctxkit.archive.store import ref_scope

        ref, stored_already = a.ref_for(ref_scope(t), giant)
        assert stored_already and a.get(ref).unit() == giant
        assert a.original(t.id) == t


def test_an_archive_is_smaller_than_its_input(tmp_path: Path) -> None:
    """A dataset's archive (every original whole, and every unit compaction took out) takes
    less room than the dataset (plain JSON took 5.5 times as much); a small file's archive pays
    SQLite's fixed ~40 KB (a page or two per table and index) on top."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    runner = CliRunner()
    data = tmp_path / "data.jsonl"
    scenarios = ["-s", "agent_session", "-s", "long_chat", "-s", "code_heavy", "-s", "json_heavy"]
    args = ["simulate", *scenarios, "--count", "2", "--tokens", "20000", "--format", "openai"]
    assert runner.invoke(cli, [*args, "-o", str(data)], catch_exceptions=False).exit_code == 0
    out, db = tmp_path / "small.jsonl", tmp_path / "small.db"
    args = ["compact", str(data), "--limit", "6000", "-o", str(out), "--archive", str(db)]
    r = runner.invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert db.stat().st_size < 0.8 * data.stat().st_size


def _expanded(compacted: Path, db: Path, out: Path) -> Any:
    """What `ctxkit expand` makes of a compacted file with its archive."""
    from click.testing import CliRunner

    from ctxkit.cli import cli

    args = ["expand", str(compacted), "--archive", str(db), "-o", str(out)]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return json.loads(out.read_bytes())


def test_an_archive_of_layout_1_is_read_as_it_is_and_upgraded_when_written(
    tmp_path: Path,
) -> None:
    """tests/data/archive/layout1.*: the tau-bench sample compacted by ctxkit before the packed
    layout (plain JSON, 5.5 times its input), one unit recalled once. recall and expand read it
    as it is (they may count accesses in it); the first write rewrites it in layout 3."""
    import shutil

    db = tmp_path / "old.ctx.db"
    shutil.copy(LAYOUT1 / "layout1.ctx.db", db)
    before = db.read_bytes()
    recalled = "ref-613909785738661897"

    def expand(name: str) -> Any:
        return _expanded(LAYOUT1 / "layout1.out.json", db, tmp_path / name)

    original = json.loads((LAYOUT1 / "layout1.in.json").read_bytes())

    with Archive(str(db), readonly=True) as a:
        assert a.layout == 1
        items = [(x.ref, x.unit_id, x.text(), x.tokens, x.access_count) for x in a.list()]
        assert len(items) == 47 and (recalled, "u5") in {(x[0], x[1]) for x in items}
    assert expand("restored-1.json") == original
    assert db.read_bytes() == before  # reading changes nothing
    with Archive(str(db)) as a:  # written to: upgraded in place first
        assert a.layout == 1
        a.put("t9", tool_result())
        assert a.layout == 3
        assert [(x.ref, x.unit_id, x.text(), x.tokens, x.access_count) for x in a.list()][:47] == items
    with Archive(str(db), readonly=True) as a:
        assert a.layout == 3 and len(a.list()) == 48
        meta = dict(a._conn.execute("SELECT key, value FROM ctxkit_meta"))
        assert meta == {"format": "ctxkit-archive", "schema_version": "3"}
    assert expand("restored-2.json") == original


def test_an_archive_of_layout_2_takes_zstd_rows_beside_its_zlib_ones(tmp_path: Path) -> None:
    """tests/data/archive/layout2.*: the same sample compacted by ctxkit's layout 2 (zlib), and
    a unit stored whole beside it. It is read as it is; its first write marks it layout 3 and
    adds zstd rows, its zlib rows left as they are, every one still read."""
    import shutil

    db = tmp_path / "two.ctx.db"
    shutil.copy(LAYOUT1 / "layout2.ctx.db", db)
    before = db.read_bytes()
    original = json.loads((LAYOUT1 / "layout1.in.json").read_bytes())

    def expand(name: str) -> Any:
        return _expanded(LAYOUT1 / "layout2.out.json", db, tmp_path / name)

    def tags(a: Archive) -> set[bytes]:
        rows = a._conn.execute("SELECT record FROM units WHERE record IS NOT NULL").fetchall()
        rows += a._conn.execute("SELECT record FROM transcripts").fetchall()
        rows += a._conn.execute("SELECT body FROM texts").fetchall()
        return {bytes(r[0][:1]) for r in rows}

    note = "ref-428435230236621473"  # stored whole by layout 2
    with Archive(str(db), readonly=True) as a:
        assert a.layout == 2 and tags(a) == {b"z", b"Z"}
        old = [(x.ref, x.unit_id, x.text(), x.tokens) for x in a.list()]
        assert a.get(note, count=False).content == "a stored note\n" * 20
    assert expand("restored-1.json") == original
    assert db.read_bytes() == before  # reading changes nothing
    with Archive(str(db)) as a:
        a.put("t9", tool_result("n9", content="x" * 200))
        a.put_transcript(Transcript(units=[tool_result("n8", content="y" * 300)], id="t9"))
        assert a.layout == 3
    with Archive(str(db), readonly=True) as a:
        meta = dict(a._conn.execute("SELECT key, value FROM ctxkit_meta"))
        assert meta == {"format": "ctxkit-archive", "schema_version": "3"}
        assert {b"x", b"X"} & tags(a) and {b"z", b"Z"} <= tags(a)
        assert [(x.ref, x.unit_id, x.text(), x.tokens) for x in a.list()][: len(old)] == old
        assert a.get(note, count=False).content == "a stored note\n" * 20
        assert a.original("t9") == Transcript(units=[tool_result("n8", content="y" * 300)], id="t9")
    assert expand("restored-2.json") == original


def test_an_archive_of_a_later_layout_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.ctx.db"
    with Archive(str(db)) as a:
        a.put("t", tool_result())
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE ctxkit_meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    for readonly in (True, False):
        with pytest.raises(ArchiveError, match=r"written by a newer ctxkit \(archive layout 4"):
            Archive(str(db), readonly=readonly)


def test_unit_rows_go_in_together_and_every_read_sees_them(tmp_path: Path) -> None:
    """Units put are written in one statement, before anything reads the archive; an archive
    known to hold only this object's rows asks no query to find a ref free; one another run
    wrote to is asked."""
    db = str(tmp_path / "a.ctx.db")
    statements: list[str] = []
    with Archive(db) as a:
        a.begin()  # a new archive, under our lock: every row will be ours
        a._db.set_trace_callback(statements.append)
        refs = [a.put("t", tool_result(f"u{i}", content=f"output {i}")) for i in range(20)]
        assert not [x for x in statements if x.startswith(("SELECT", "INSERT"))]
        assert [x.unit_id for x in a.list("t")] == [f"u{i}" for i in range(20)]  # read: written
        assert sum(x.startswith("INSERT INTO units") for x in statements) == 20  # one batch
    statements.clear()
    with Archive(db) as b:  # rows another run wrote: a ref is looked up
        b.begin()
        b._db.set_trace_callback(statements.append)
        assert b.ref_for("t", tool_result("u3", content="output 3")) == (refs[3], True)
        assert b.put("t", tool_result("u3", content="output 3")) == refs[3]
        assert any(x.startswith("SELECT") for x in statements)
    with Archive(db, readonly=True) as c:
        assert len(c.list("t")) == 20


def test_rows_of_a_conversation_that_fails_are_never_written(tmp_path: Path) -> None:
    with Archive(str(tmp_path / "a.ctx.db")) as a:
        kept = a.put("t", tool_result("k", content="kept"))
        with pytest.raises(RuntimeError), a.savepoint():
            a.put("t", tool_result("gone", content="gone"))
            raise RuntimeError("the conversation failed")
        assert [x.ref for x in a.list("t")] == [kept]
        assert a.ref_for("t", tool_result("gone", content="gone"))[1] is False


def test_a_unit_rolled_back_is_not_stored_any_more(archive: Archive) -> None:
    # ref_for remembers units it found stored; a conversation's savepoint undone takes them back
    unit = tool_result("kept nowhere")
    with pytest.raises(RuntimeError), archive.savepoint():
        ref = archive.put("t0", unit)
        assert archive.ref_for("t0", unit) == (ref, True)
        raise RuntimeError("the conversation failed")
    assert archive.ref_for("t0", unit) == (ref, False)
    with pytest.raises(ArchiveError, match="unknown ref"):
        archive.get(ref)


def test_rows_taken_from_another_archive_are_the_rows_it_would_store(tmp_path: Path) -> None:
    """A worker's scratch archive hands a conversation over packed (`rows_of`, `take`): the
    parent's archive then holds what compacting into it would have stored; a ref it already
    holds makes `take` store nothing and say so."""
    from ctxkit.compaction import compact
    from ctxkit.simulate import generate

    t = generate("long_chat", seed=5, tokens=6000)
    with Archive(":memory:") as scratch:
        compact(t, limit=3000, archive=scratch)
        rows = scratch.rows_of(t.id)
    direct, taken = str(tmp_path / "direct.db"), str(tmp_path / "taken.db")
    with Archive(direct) as a:
        compact(t, limit=3000, archive=a)
    with Archive(taken) as b:
        assert b.take(t, t.id, rows)
        assert not b.take(t, t.id, rows)  # its refs are held now

    def held(path: str) -> list[tuple[object, ...]]:
        with Archive(path, readonly=True) as a:
            units = sorted((x.ref, x.unit_id, x.tokens, x.text()) for x in a.list())
            return [*units, a.original(t.id)]

    assert held(taken) == held(direct) and len(held(taken)) > 1
