"""`ctxkit compact DIR -o OUT/` writes only what it produces, under names the user recognises
(issue 36, point 3): no empty output for a log left out, no empty archive beside a file that
needed nothing, no `00000-00000-` prefix; `expand` and `recall` read the directory whole, in
input order, through its index.

Real logs from ../shared/realdata (skipped where it is absent). At --limit 20,000 the dmux
session is left out (what its calls carry and the log never shows is 30,820 tokens), the
templar session is compacted, and the short Claude Code session and the tau-bench chat fit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.engines.shards import INDEX_NAME, output_names, plan_shards
from ctxkit.formats import read_path

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
LEFT_OUT = "applab-nl__dmux__logs-chat-json@eef6c282__session-a9185eb7.jsonl"
COMPACTED = "conneroisu__templar__logs-chat-json@7c1b6b43__session-5fa42961.jsonl"
FITS = [
    "d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "sierra-research__tau-bench__gpt-4o-airline__idx003_task3_trial0_reward0.json",
]


def run(*args: str) -> object:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    for name in (LEFT_OUT, COMPACTED, FITS[0]):
        src = REALDATA / "claude-code" / name
        if not src.is_file():
            pytest.skip(f"{src} not here")
        shutil.copy(src, d / name)
    src = REALDATA / "openai-chat" / FITS[1]
    if not src.is_file():
        pytest.skip(f"{src} not here")
    shutil.copy(src, d / FITS[1])
    return d


def test_a_directory_run_writes_only_what_it_produces_under_the_inputs_names(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "small"
    result = run("compact", str(logs), "--limit", "20000", "-o", f"{out}/")
    assert result.exit_code == 3, result.stderr
    # the log left out: named by its file, and no output or archive of it
    assert f"{logs / LEFT_OUT}: left out: limit 20,000 is below" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [COMPACTED, COMPACTED + ".ctx.db", *FITS, INDEX_NAME]
    )
    assert all(p.stat().st_size > 0 for p in out.iterdir())
    for name in FITS:  # what fits is written as it was, byte for byte, with no archive
        assert (out / name).read_bytes() == (logs / name).read_bytes()
    assert "4 conversations from 4 files: 1 compacted, 2 unchanged, 1 left out;" in result.stderr
    assert f"Output: {out}/, 3 files and 1 archive (ctxkit expand {out}/ -o restored/;" in result.stderr

    # expand reads the directory whole: file by file into a directory, each as it was read
    restored = tmp_path / "restored"
    expanded = run("expand", str(out), "-o", f"{restored}/")
    assert expanded.exit_code == 0, expanded.stderr
    assert "Expanded 3 transcripts from 3 files of " in expanded.stderr
    assert sorted(p.name for p in restored.iterdir()) == sorted([COMPACTED, *FITS])
    for name in (COMPACTED, *FITS):
        assert [t.units for t in read_path(str(restored / name))] == [
            t.units for t in read_path(str(logs / name))
        ]
    for name in FITS:
        assert (restored / name).read_bytes() == (logs / name).read_bytes()
    # recall reads the archive shards through the index
    listed = run("recall", "--list", "--archive", str(out), "--format", "jsonl")
    assert listed.exit_code == 0 and listed.stdout.count('"ref"') > 0

    # a second run into the same directory leaves nothing of the first under its names
    again = run("compact", str(logs), "--limit", "500000", "-o", f"{out}/")
    assert again.exit_code == 0, again.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([LEFT_OUT, COMPACTED, *FITS, INDEX_NAME])
    assert "4 conversations from 4 files: 0 compacted, 4 unchanged;" in again.stderr
    shutil.rmtree(restored)
    assert run("expand", str(out), "-o", f"{restored}/").exit_code == 0  # nothing archived
    for name in (LEFT_OUT, COMPACTED, *FITS):
        assert (restored / name).read_bytes() == (logs / name).read_bytes()


def test_inputs_keep_their_order_and_names_that_clash_are_told_apart(tmp_path: Path) -> None:
    """`compact b a -o out/`: expand gives b, then a (the index's order, not the names');
    two inputs of one name are named with their folders."""
    for folder, seed in (("run1", "1"), ("run2", "2")):
        (tmp_path / folder).mkdir()
        made = run("simulate", "-s", "long_chat", "--count", "2", "--seed", seed, "--format", "openai",
                   "-o", str(tmp_path / folder / "chat.jsonl"))
        assert made.exit_code == 0, made.stderr
    b, a = tmp_path / "run2" / "chat.jsonl", tmp_path / "run1" / "chat.jsonl"
    out = tmp_path / "out"
    result = run("compact", str(b), str(a), "--limit", "3000", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    names = ["run2__chat.jsonl", "run1__chat.jsonl"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*names, *(n + ".ctx.db" for n in names), INDEX_NAME]
    )
    restored = tmp_path / "restored.jsonl"
    assert run("expand", str(out), "-o", str(restored)).exit_code == 0
    want = [*read_path(str(b)), *read_path(str(a))]
    assert [t.units for t in read_path(str(restored))] == [t.units for t in want]


def test_output_names() -> None:
    assert output_names(["logs/s.jsonl", "t.json", "u.traj", "a.aider.chat.history.md"]) == [
        "s.jsonl", "t.json", "u.traj", "a.aider.chat.history.md"
    ]
    assert output_names(["d.parquet", "run.log"]) == ["d.jsonl", "run.log.jsonl"]
    assert output_names(["/x/a/s.jsonl", "/y/a/s.jsonl"]) == ["x__a__s.jsonl", "y__a__s.jsonl"]
    assert output_names(["s.jsonl", "s.jsonl", "s.jsonl"]) == ["s.jsonl", "s-2.jsonl", "s-3.jsonl"]


def test_a_file_cut_in_several_is_named_part_of_parts(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(f'{{"messages": [{{"role": "user", "content": "q{i}"}}]}}\n' for i in range(12)))
    shards = plan_shards([str(path)], shard_bytes=100)
    assert [s.name for s in shards] == [f"data-{i:05d}-of-{len(shards):05d}.jsonl" for i in range(len(shards))]
    assert len(shards) > 3


def test_the_inputs_own_folder_is_refused_and_left_as_it_was(logs: Path) -> None:
    """Outputs keep their inputs' names: `-o` the inputs' folder would replace them."""
    before = {p.name: p.read_bytes() for p in logs.iterdir()}
    result = CliRunner().invoke(cli, ["compact", str(logs), "--limit", "20000", "-o", f"{logs}/"])
    assert result.exit_code == 2
    assert "would replace the input" in result.stderr and "give another -o DIR" in result.stderr
    assert {p.name: p.read_bytes() for p in logs.iterdir()} == before


def test_a_file_of_the_same_name_no_run_wrote_is_left_alone(logs: Path, tmp_path: Path) -> None:
    """A run removes only what an earlier run indexed, never a file it did not write."""
    out = tmp_path / "out"
    out.mkdir()
    (out / LEFT_OUT).write_text("mine\n")
    result = run("compact", str(logs), "--limit", "20000", "-o", f"{out}/")
    assert result.exit_code == 3
    assert (out / LEFT_OUT).read_text() == "mine\n"
