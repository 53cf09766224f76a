"""`--engine ray`: the same output as the local engine, retried tasks that leave one copy, and
archive shards that `recall` and `expand` read as one archive (issue 15).

Tests that run Ray share one local Ray (2 CPUs) per module and are marked slow (Ray takes
seconds to start); shard planning and the CLI's refusals run without it.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.cli import cli
from ctxkit.engines.shards import INDEX_NAME, ShardedArchive, plan_shards, read_shard
from ctxkit.formats import ReadOptions, ReadStats, read_path

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
SHARD_MB = "0.02"  # ~20 KB a task: the test datasets make several shards


def run(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def lines(path: Path | str) -> list[Any]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def shard_lines(directory: Path) -> list[Any]:
    return [row for f in sorted(glob.glob(str(directory / "*.jsonl"))) for row in lines(f)]


# --------------------------------------------------------------------------- datasets


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Simulated conversations (openai format, one per line), with their truth sidecar."""
    d = tmp_path_factory.mktemp("sims")
    result = run("simulate", "-s", "all", "--tokens", "2000", "--format", "openai",
                 "-o", str(d / "sims.jsonl"))
    assert result.exit_code == 0, result.output
    return d / "sims.jsonl"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, sims: Path) -> Path:
    """Real conversations (ShareGPT, tau-bench wrapped as {"messages": [...]}) and simulated
    ones in one JSONL dataset, with a blank line and an unchanged short chat among them."""
    d = tmp_path_factory.mktemp("mixed")
    out: list[bytes] = []
    share = REALDATA / "sharegpt"
    if share.is_dir():
        for f in sorted(share.glob("*.json")):
            out += [orjson.dumps(c) for c in json.loads(f.read_text())[:25]]
    tau = REALDATA / "openai-chat"
    if tau.is_dir():
        out += [orjson.dumps({"messages": json.loads(f.read_text())}) for f in sorted(tau.glob("*.json"))]
    out.insert(1, b"")
    out.append(orjson.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    out += sims.read_bytes().splitlines()
    path = d / "mixed.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("ray")
    from ctxkit.engines.ray import RayOptions, ray_session

    # a short path: Ray's sockets live under it (Unix sockets take ~107 characters)
    temp = tmp_path_factory.mktemp("r", numbered=True)
    with ray_session(RayOptions(num_cpus=2, temp_dir=str(temp))) as ray:
        yield ray


# --------------------------------------------------------------------------- shards, no Ray


@pytest.mark.parametrize("shard_bytes", [1, 700, 5000, 10**9])
def test_shards_read_what_read_path_reads(tmp_path: Path, shard_bytes: int) -> None:
    rows = [{"messages": [{"role": "user", "content": f"question {i} " * (i % 7 + 1)}]} for i in range(30)]
    data = b"\n".join(orjson.dumps(r) for r in rows[:10]) + b"\n\n  \n"
    data += b"\n".join(orjson.dumps(r) for r in rows[10:]) + b"\n"
    path = tmp_path / "data.jsonl"
    path.write_bytes(data)
    shards = plan_shards([str(path)], shard_bytes=shard_bytes)
    got = [t for s in shards for t in read_shard(s)]
    want = list(read_path(str(path)))
    assert [(t.id, t.line, t.path) for t in got] == [(t.id, t.line, t.path) for t in want]
    assert [t.units for t in got] == [t.units for t in want]
    assert [s.name for s in shards] == sorted(s.name for s in shards)
    if shard_bytes == 1:
        assert len(shards) == 32  # a line each, the two blank ones too


def test_shards_shrink_with_the_data_left_for_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `workers`, each slice is the data left over FACTOR x workers (the first ones large,
    the last ones small, so the last task to finish is a short one), at most `shard_bytes`;
    without, slices of `shard_bytes`."""
    from ctxkit.engines import shards as shards_module

    monkeypatch.setattr(shards_module, "MIN_SHARD_BYTES", 2000)
    rows = [{"messages": [{"role": "user", "content": f"question {i} " * 20}]} for i in range(400)]
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    size = path.stat().st_size
    line = max(len(orjson.dumps(r)) + 1 for r in rows)

    def sizes(shards: list[Any]) -> list[int]:
        return [(s.end if s.end >= 0 else size) - s.start for s in shards]

    fixed = plan_shards([str(path)], shard_bytes=int(size * 0.64))  # one big slice, one small
    assert len(fixed) == 2
    guided = plan_shards([str(path)], shard_bytes=size, workers=2)
    got = sizes(guided)
    factor = shards_module.FACTOR
    assert abs(got[0] - size / (factor * 2)) <= line  # the first: the whole over FACTOR x 2
    rest = size
    for n in got[:-1]:  # each: the data left then over FACTOR x 2, at least the minimum
        assert max(2000, rest / (factor * 2)) <= n <= max(2000, rest / (factor * 2)) + line
        rest -= n
    assert got[-1] <= 2000 + line and len(guided) > 2 * factor
    read = [t for s in guided for t in read_shard(s)]
    assert [(t.id, t.units) for t in read] == [(t.id, t.units) for t in read_path(str(path))]
    # shard_bytes stays the most a slice holds (a line more at most)
    capped = plan_shards([str(path)], shard_bytes=size // 20, workers=2)
    assert max(sizes(capped)) <= size // 20 + line and len(capped) >= 20
    # over several files, the data left counts the next files' too
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes())
    both = plan_shards([str(path), str(other)], shard_bytes=2 * size, workers=2)
    assert abs(sizes(both)[0] - 2 * size / (factor * 2)) <= line


def test_shards_skip_invalid_lines_as_read_path_does(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    ok = orjson.dumps({"messages": [{"role": "user", "content": "hi"}]})
    path.write_bytes(ok + b"\n{broken\n" + ok + b"\n")
    opts = ReadOptions(skip_invalid=True)
    stats = ReadStats()
    got = [t.id for s in plan_shards([str(path)], shard_bytes=1) for t in read_shard(s, opts, stats=stats)]
    assert got == ["data#1", "data#3"] and stats.skipped_invalid == 1
    from ctxkit.errors import InputError

    with pytest.raises(InputError, match=r"data.jsonl:2"):
        [t for s in plan_shards([str(path)], shard_bytes=1) for t in read_shard(s)]


def test_parquet_rows_read_as_the_lines_of_the_same_dataset(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [{"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
            for i in range(7)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data.parquet", row_group_size=3)
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "data.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    shards = plan_shards([str(tmp_path / "data.parquet")], parquet_rows=3)
    assert [(s.kind, s.start, s.end, s.name) for s in shards] == [
        ("parquet", 0, 3, "data-00000-of-00003.jsonl"),
        ("parquet", 3, 6, "data-00001-of-00003.jsonl"),
        ("parquet", 6, 7, "data-00002-of-00003.jsonl"),
    ]
    got = [t for s in shards for t in read_shard(s)]
    want = list(read_path(str(tmp_path / "jsonl" / "data.jsonl")))
    assert [t.id for t in got] == [t.id for t in want] == [f"data#{i}" for i in range(1, 8)]
    assert [t.units for t in got] == [t.units for t in want]
    local = list(read_path(str(tmp_path / "data.parquet")))  # the local engine's Parquet reader
    assert [(t.id, t.units) for t in got] == [(t.id, t.units) for t in local]


def test_parquet_shards_read_the_public_trajectory_shape_as_the_local_engine_does(tmp_path: Path) -> None:
    """A SWE trajectory dataset (a `trajectory` column of messages, JSON-text tools) is read on
    Ray exactly as `read_path` reads it: one reader of Parquet rows."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [{"instance_id": f"repo__{i}", "trajectory": [
        {"role": "system", "text": "You are an agent."}, {"role": "user", "text": f"fix issue {i}"},
        {"role": "ai", "text": f"done {i}"}], "target": bool(i % 2)} for i in range(5)]
    path = tmp_path / "swe.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    got = [t for s in plan_shards([str(path)], parquet_rows=2) for t in read_shard(s)]
    local = list(read_path(str(path)))
    assert [t.id for t in got] == [f"repo__{i}" for i in range(5)]  # named by their instance_id
    assert [(t.id, t.units) for t in got] == [(t.id, t.units) for t in local]
    assert [u.role for u in got[0].units] == ["system", "user", "assistant"]


def test_a_file_that_is_no_jsonl_dataset_is_one_shard(tmp_path: Path, sims: Path) -> None:
    array = tmp_path / "array.json"
    array.write_text(json.dumps([json.loads(x) for x in sims.read_text().splitlines()[:3]], indent=2))
    shards = plan_shards([str(array)], shard_bytes=1)
    assert [s.kind for s in shards] == ["file"]
    assert [t.id for t in read_shard(shards[0])] == [t.id for t in read_path(str(array))]


def test_sharded_archive_restores_and_recalls_through_its_index(tmp_path: Path) -> None:
    from ctxkit.archive.originals import refs_in
    from ctxkit.archive.store import Archive
    from ctxkit.compaction import compact
    from ctxkit.engines.shards import write_index
    from ctxkit.simulate import generate

    originals = [generate("long_chat", seed=s, tokens=3000) for s in (1, 2)]
    compacted = []
    for name, t in zip(("a.jsonl", "b.jsonl"), originals, strict=True):
        with Archive(str(tmp_path / f"{name}.ctx.db")) as archive:
            compacted.append(compact(t, limit=1500, archive=archive).transcript)
    write_index(str(tmp_path), ["a.jsonl", "b.jsonl"])
    untouched = generate("long_chat", seed=3, tokens=1000)
    with ShardedArchive(str(tmp_path)) as archive:
        assert [archive.restore(c).units for c in compacted] == [t.units for t in originals]
        assert archive.restore(untouched) is untouched
        ref = refs_in(compacted[1])[0]
        assert archive.recall(ref) == archive.get(ref).text()
        assert archive.transcript_ids() == [t.id for t in originals]
        hidden = compacted[0].replace(id="elsewhere")  # no id match: found by its refs
        assert archive.restore(hidden).units == originals[0].units


@pytest.mark.parametrize(
    "args, message",
    [
        (["count", "--ray-address", "auto"], "--ray-address, --ray-workers and --ray-task-mb go with --engine ray"),
        (["count", "--engine", "ray", "--by", "role"], "--by, --cost, --calibrate and --archive run on --engine local"),
        (["compact", "--engine", "ray", "--limit", "2000"], "give -o DIR"),
        (["compact", "--engine", "ray", "--limit", "2000", "-o", "small.jsonl"], "give -o DIR, not 'small.jsonl'"),
        (["score-rl", "--engine", "ray", "-o", "rl.parquet"], "give -o DIR, not 'rl.parquet'"),
        (["compact", "--engine", "ray", "--limit", "2000", "-o", "d", "--explain"], "--explain: not with --engine ray"),
        (["score-rl", "--engine", "ray", "-s", "long_chat", "-o", "d"], "--scenario runs on --engine local"),
    ],
)
def test_engine_usage_errors(sims: Path, args: list[str], message: str, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = args[:1] + ([] if "-s" in args else [str(sims)]) + args[1:]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_without_the_extra_says_which(sims: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    result = CliRunner().invoke(cli, ["count", str(sims), "--engine", "ray"])
    assert result.exit_code == 1
    assert "--engine ray needs Ray: pip install 'ctxkit[ray]' (or --engine local)" in result.output


def test_count_and_guard_never_import_ray(sims: Path) -> None:
    code = (
        "import sys\n"
        "from ctxkit.cli import cli\n"
        f"cli(['count', {str(sims)!r}, '--format', 'jsonl'], standalone_mode=False)\n"
        "try:\n"
        f"    cli(['guard', {str(sims)!r}, '--model', 'gpt-4o'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('HEAVY', [m for m in ('ray', 'pyarrow', 'pandas', 'torch') if m in sys.modules], file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- on Ray

@pytest.mark.slow
def test_workers_import_this_ctxkit(ray_session: Any) -> None:
    """A local Ray's workers import the ctxkit the driver runs (a checkout, not an installed
    copy): both engines must run the same code."""
    import ctxkit

    @ray_session.remote
    def where() -> str:
        import ctxkit

        return str(ctxkit.__file__)

    assert ray_session.get(where.remote()) == ctxkit.__file__



@pytest.mark.slow
def test_a_local_ray_starts_without_idle_daemons(ray_session: Any) -> None:
    """The local Ray of a run has no autoscaler monitor and no log monitor (each ~0.5 s of CPU
    at start-up; the monitor held every shutdown for a second), and ray.init's Node is itself
    again afterwards."""
    from ray._private import node, worker

    from ctxkit.engines.ray import _without_idle_daemons

    started = set(worker._global_node.all_processes)
    assert {"raylet", "gcs_server"} <= started
    assert not started & {"monitor", "log_monitor"}
    init = node.Node.__init__
    with _without_idle_daemons():
        assert node.Node.__init__ is not init
    assert node.Node.__init__ is init


@pytest.mark.slow
def test_count_on_ray_is_count(ray_session: Any, mixed: Path) -> None:
    local = run("count", str(mixed), "--format", "jsonl")
    distributed = run("count", str(mixed), "--format", "jsonl", "--engine", "ray", "--shard-mb", SHARD_MB)
    assert distributed.exit_code == 0, distributed.output
    assert distributed.stdout == local.stdout
    assert len(lines_of(local.stdout)) > 5


def lines_of(text: str) -> list[Any]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.mark.slow
def test_compact_on_ray_is_compact_and_expands_back(ray_session: Any, mixed: Path, tmp_path: Path) -> None:
    from ctxkit.archive.refs import first_compacted

    local_out = tmp_path / "local.jsonl"
    assert run("compact", str(mixed), "--limit", "2000", "-o", str(local_out)).exit_code == 0
    out = tmp_path / "shards"
    result = run("compact", str(mixed), "--limit", "2000", "--engine", "ray", "--shard-mb", SHARD_MB,
                 "-o", str(out))
    assert result.exit_code == 0, result.output
    outputs = sorted(glob.glob(str(out / "*.jsonl")))
    assert len(outputs) > 3
    # an archive shard beside each output that holds a compacted conversation, none beside the rest
    compacted = [any(first_compacted(t.units) is not None for t in read_path(f)) for f in outputs]
    assert [os.path.exists(f + ".ctx.db") for f in outputs] == compacted
    assert any(compacted) and not all(compacted)
    # the shards, in name order, are the local output
    assert b"".join(Path(f).read_bytes() for f in outputs) == local_out.read_bytes()
    # expand over the directory restores every conversation, in order
    restored = tmp_path / "restored.jsonl"
    result = run("expand", str(out), "-o", str(restored))
    assert result.exit_code == 0, result.output
    assert lines(restored) == lines(mixed)
    # one shard against the directory of archives, and recall through the index
    one = tmp_path / "one.jsonl"
    assert run("expand", outputs[1], "--archive", str(out), "-o", str(one)).exit_code == 0
    ids = [t.id for t in read_path(outputs[1])]
    assert len(lines(one)) == len(ids)
    listed = run("recall", "--list", "--archive", str(out), "--format", "jsonl")
    refs = lines_of(listed.stdout)
    assert refs and len({r["ref"] for r in refs}) == len(refs)
    first = run("recall", refs[-1]["ref"], "--archive", str(out))
    assert first.exit_code == 0 and first.stdout.strip()
    # a dataset that already fits is written as it was, as the local engine writes it
    same = tmp_path / "same"
    result = run("compact", str(mixed), "--limit", "100000", "--engine", "ray", "--shard-mb",
                 SHARD_MB, "-o", str(same))
    assert result.exit_code == 0, result.output
    assert b"".join(Path(f).read_bytes() for f in sorted(glob.glob(str(same / "*.jsonl")))) == mixed.read_bytes()


@pytest.mark.slow
def test_score_rl_on_ray_is_score_rl(ray_session: Any, sims: Path, tmp_path: Path) -> None:
    actions = ["--action", "offload", "--action", "default"]
    local = tmp_path / "rl.jsonl"
    assert run("score-rl", str(sims), *actions, "-o", str(local)).exit_code == 0
    out = tmp_path / "rl"
    result = run("score-rl", str(sims), *actions, "--engine", "ray", "--shard-mb", SHARD_MB,
                 "-o", str(out))
    assert result.exit_code == 0, result.output

    want, got = lines(local), shard_lines(out)  # rewards and rows hold no duration
    assert got == want and len(got) == 2 * len(lines(sims))
    assert all(r["outcome"]["needles_total"] for r in got)  # the sidecar's truth reached the tasks


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exit", "raise"])
def test_a_task_that_dies_once_leaves_one_copy(ray_session: Any, mixed: Path, tmp_path: Path,
                                               mode: str) -> None:
    from ctxkit.budget.resolve import BudgetRequest
    from ctxkit.config.settings import SettingsSpec
    from ctxkit.engines.ray import CompactJob, Fault, RayOptions, compact_dataset

    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    shards = plan_shards([str(mixed)], shard_bytes=int(float(SHARD_MB) * 2**20))
    settings = SettingsSpec(budget=BudgetRequest(limit=2000))
    list(compact_dataset(shards, CompactJob(str(clean), settings), RayOptions()))
    marker = tmp_path / "struck"
    fault = Fault(str(marker), part=1, after=1, mode=mode)
    tallies = list(compact_dataset(shards, CompactJob(str(faulty), settings), RayOptions(fault=fault)))
    assert marker.exists()  # the fault struck: the shard's first attempt died mid-write
    assert sorted(os.listdir(clean)) == sorted(os.listdir(faulty))  # no temp file left
    for name in os.listdir(clean):
        if name.endswith(".jsonl"):
            assert (faulty / name).read_bytes() == (clean / name).read_bytes()
    assert sum(t["conversations"] for t in tallies) == len(lines(mixed))
    with ShardedArchive(str(faulty)) as archive:
        ids = archive.transcript_ids()
    assert len(ids) == len(set(ids))  # no duplicate
    assert (faulty / INDEX_NAME).exists()
    restored = tmp_path / "restored.jsonl"
    assert run("expand", str(faulty), "-o", str(restored)).exit_code == 0
    assert lines(restored) == lines(mixed)  # no loss


@pytest.mark.slow
def test_compactor_in_a_ray_pipeline(ray_session: Any, sims: Path, tmp_path: Path) -> None:
    import ray

    from ctxkit.engines.ray import Compactor

    local = tmp_path / "local.jsonl"
    assert run("compact", str(sims), "--limit", "2000", "-o", str(local)).exit_code == 0
    rows = [{"path": str(sims), "line": i + 1, "text": text}
            for i, text in enumerate(sims.read_text().splitlines())]
    archive_dir = tmp_path / "archive"
    ds = ray.data.from_items(rows, override_num_blocks=3).map_batches(
        Compactor,
        fn_constructor_kwargs={"limit": 2000, "archive_dir": str(archive_dir)},
        batch_format="pandas",
        batch_size=4,
        compute=ray.data.ActorPoolStrategy(size=2),
    )
    got = sorted(ds.take_all(), key=lambda r: int(r["id"].split("#")[1]))
    assert [json.loads(r["text"]) for r in got] == lines(local)
    assert [r["id"] for r in got] == [t.id for t in read_path(str(sims))]
    assert all(r["tokens_after"] <= 2000 for r in got)
    # the batches' archive shards restore every conversation (no index: shards by name)
    with ShardedArchive(str(archive_dir)) as archive:
        restored = [archive.restore(t) for t in read_path(str(local))]
    assert [t.units for t in restored] == [t.units for t in read_path(str(sims))]


@pytest.mark.slow
# the chain short of its goal with recovery error (BREAKER_FAILED); below the system prompt
@pytest.mark.parametrize("flags", [["--limit", "800", "--recovery", "error"], ["--limit", "300"]])
def test_a_conversation_that_cannot_fit_is_left_out_as_on_the_local_engine(
    ray_session: Any, sims: Path, tmp_path: Path, flags: list[str]
) -> None:
    local = CliRunner().invoke(cli, ["compact", str(sims), *flags, "-o", str(tmp_path / "l.jsonl")])
    assert local.exit_code == 3, local.stderr
    result = CliRunner().invoke(cli, ["compact", str(sims), *flags, "--engine", "ray",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 3, result.stderr

    def left_out(text: str) -> list[str]:
        return [x for x in text.splitlines() if ": left out: " in x]

    assert left_out(result.stderr) == left_out(local.stderr) != []
    assert result.stderr.splitlines()[-1] == local.stderr.splitlines()[-1]  # "N of M ... (exit 3)"
    assert shard_lines(tmp_path / "out") == lines(tmp_path / "l.jsonl")


def test_an_unreachable_ray_address_is_one_line_not_a_hang(sims: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = CliRunner().invoke(cli, ["count", str(sims), "--engine", "ray", "--ray-address", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: no Ray cluster answers at 127.0.0.1:{port}")
