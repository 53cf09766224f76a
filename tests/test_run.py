"""`compaction.run`: the one run behind compact, Ray, score-rl and bench (issue 27).

Source, sink, settings and archive in, a summary out; the archive commits before the sink is
closed; a failure rolls both back, or with `keep_going` leaves one conversation out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxkit.archive.store import Archive
from ctxkit.compaction import CompactSettings
from ctxkit.compaction.result import CompactResult, Failure
from ctxkit.compaction.run import ArchiveTarget, ListSink, RunSummary, compact_one, run
from ctxkit.errors import CtxkitError
from ctxkit.model import Transcript, Unit
from ctxkit.simulate import generate

SETTINGS = CompactSettings(limit=3000)


def corpus() -> list[Transcript]:
    return [generate("long_chat", seed=n, tokens=5000).replace(id=f"chat-{n}") for n in range(2)]


def doomed() -> Transcript:
    """A system prompt alone above the limit: no strategy can help."""
    t = generate("long_chat", seed=9, tokens=5000)
    system = Unit(id="sys", role="system", content="rule " * 4000)
    return t.replace(id="doomed", units=[system, *t.units])


def test_a_run_writes_every_transcript_and_sums_them() -> None:
    sink = ListSink()
    summary = run(corpus(), SETTINGS, sink=sink)
    assert [t.id for t in sink.transcripts] == ["chat-0", "chat-1"]
    assert (summary.conversations, summary.changed, summary.written) == (2, 2, 2)
    assert summary.tokens_after < summary.tokens_before and summary.failures == []
    assert RunSummary.from_dict(summary.to_dict()) == summary


def test_a_failure_stops_the_run_and_leaves_the_archive_as_it_was(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    with pytest.raises(CtxkitError, match="below the least a compaction can leave"):
        run([*corpus(), doomed()], SETTINGS, sink=ListSink(), archive=ArchiveTarget(path))
    assert not os.path.exists(path)  # the run made it: a failed run leaves nothing behind
    run(corpus()[:1], SETTINGS, sink=ListSink(), archive=ArchiveTarget(path))
    with Archive(path, readonly=True) as a:
        before = (a.transcript_ids(), [u.ref for u in a.list()])
    with pytest.raises(CtxkitError, match="below the least a compaction can leave"):
        run([corpus()[1], doomed()], SETTINGS, sink=ListSink(), archive=ArchiveTarget(path))
    with Archive(path, readonly=True) as a:
        assert (a.transcript_ids(), [u.ref for u in a.list()]) == before == (["chat-0"], before[1])


@pytest.mark.parametrize("jobs", [1, 2])
def test_keep_going_leaves_one_out_and_keeps_the_others(tmp_path: Path, jobs: int) -> None:
    path = str(tmp_path / "a.db")
    seen: list[CompactResult | Failure] = []
    sink = ListSink()
    items = [corpus()[0], doomed(), corpus()[1]]
    summary = run(
        items, SETTINGS, sink=sink, archive=ArchiveTarget(path), jobs=jobs,
        on_result=lambda item, _archive: seen.append(item), keep_going=True,
    )
    assert [t.id for t in sink.transcripts] == ["chat-0", "chat-1"]
    assert [f.transcript_id for f in summary.failures] == ["doomed"]
    assert summary.failures[0].exit_code == 2 and (summary.conversations, summary.written) == (3, 2)
    assert [type(x).__name__ for x in seen] == ["CompactResult", "Failure", "CompactResult"]
    with Archive(path, readonly=True) as a:
        assert sorted(a.transcript_ids()) == ["chat-0", "chat-1"]
        assert {u.transcript_id for u in a.list()} == {"chat-0", "chat-1"}


def test_a_staged_archive_is_whole_or_absent(tmp_path: Path) -> None:
    path = tmp_path / "shard.ctx.db"
    with pytest.raises(CtxkitError):
        run([corpus()[0], doomed()], SETTINGS, archive=ArchiveTarget(str(path), staged=True))
    assert os.listdir(tmp_path) == []  # no archive, no temp file
    run(corpus(), SETTINGS, archive=ArchiveTarget(str(path), staged=True))
    assert os.listdir(tmp_path) == ["shard.ctx.db"]
    with Archive(str(path), readonly=True) as a:
        assert sorted(a.transcript_ids()) == ["chat-0", "chat-1"]


def test_the_archive_commits_before_the_sink_closes(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    committed: list[list[str]] = []

    class Probe(ListSink):
        def __exit__(self, *exc: object) -> None:
            with Archive(path, readonly=True) as a:  # another reader, as a user of the output
                committed.append(a.transcript_ids())

    run(corpus(), SETTINGS, sink=Probe(), archive=ArchiveTarget(path))
    assert committed == [["chat-0", "chat-1"]]


def test_compact_one_is_one_run() -> None:
    t = corpus()[0]
    assert compact_one(t, SETTINGS).transcript.units == run_units(t)


def run_units(t: Transcript) -> list[Unit]:
    sink = ListSink()
    run([t], SETTINGS, sink=sink)
    return sink.transcripts[0].units


def _archived(path: str) -> list[tuple[object, ...]]:
    with Archive(path, readonly=True) as a:
        rows = [(x.ref, x.transcript_id, x.unit_id, x.tokens, x.text()) for x in a.list()]
        return sorted(rows, key=str) + [(tid, a.original(tid)) for tid in a.transcript_ids()]


def test_workers_hand_over_the_rows_a_serial_run_stores(tmp_path: Path) -> None:
    """`--jobs 2`: each worker's conversation goes into the archive as the worker packed it;
    the rows, originals and outputs are a serial run's, and a second run into the same archive
    (its refs stored already) stores nothing twice and changes nothing."""
    items = [generate("long_chat", seed=n, tokens=5000).replace(id=f"chat-{n}") for n in range(4)]
    outs = {}
    for jobs in (1, 2):
        sink = ListSink()
        path = str(tmp_path / f"a{jobs}.db")
        summary = run(items, SETTINGS, sink=sink, archive=ArchiveTarget(path), jobs=jobs)
        outs[jobs] = ([t.to_dict() for t in sink.transcripts], summary.to_dict(), _archived(path))
    assert outs[1] == outs[2]
    again = run(items, SETTINGS, sink=ListSink(), archive=ArchiveTarget(str(tmp_path / "a2.db")), jobs=2)
    assert again.to_dict() == outs[2][1] and _archived(str(tmp_path / "a2.db")) == outs[2][2]
