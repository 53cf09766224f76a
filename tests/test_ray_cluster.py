"""`--engine ray --ray-address` on a running cluster of two nodes (issue 37).

The cluster is started here as a user starts one, `ray start --head` and `ray start
--address=HEAD` with one CPU a node, every node on 127.0.0.1 (`tests/ray_cluster.py`); ctxkit
runs as a separate process that reaches it by address, as on a cluster started by someone else.
A module fixture starts it and its finalizer kills every process of it, whatever happened.
The dataset is a folder: simulated conversations (two files, with their ground truth) and real
logs (a Claude Code session, a Codex rollout, ShareGPT chats and tau-bench dialogues) from
../shared/realdata. Which node ran a task is what the task itself reports (Ray's runtime
context, in `engines.dataset.worker_info`), checked against the cluster's nodes as its GCS
lists them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from ctxkit.cli import cli

pytest.importorskip("ray")

from ray_cluster import RayCluster  # noqa: E402 - tests/ is on sys.path (rootdir conftest)

pytestmark = pytest.mark.slow

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
LIMIT = ["--limit", "1500", "--no-usage"]  # the real logs compacted on their content too


def short_temp(factory: pytest.TempPathFactory) -> Path:
    """A folder for Ray's session with as short a path as pytest's temporary folders give: under
    the run's own folder rather than an xdist worker's (`.../pytest-N/popen-gwK/rc0/t` put the
    plasma store's socket at 108 bytes, over AF_UNIX's 107, and the head did not start)."""
    base = factory.getbasetemp()
    if base.name.startswith("popen-gw"):
        base = base.parent
    temp = Path(tempfile.mkdtemp(prefix="r", dir=base))
    sock = temp / "session_2026-11-29_10-48-26_910194_1234567" / "sockets" / "plasma_store"
    assert len(str(sock)) <= 107, f"Ray's sockets would not fit AF_UNIX's 107 bytes under {temp}"
    return temp


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    root = tmp_path_factory.mktemp("rc", numbered=True)
    running = RayCluster(root, workers=1, num_cpus=1, temp=short_temp(tmp_path_factory))
    try:
        yield running.start()
    finally:
        running.stop()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset folder: two simulated JSONL datasets (ground truth beside them) and real logs."""
    d = tmp_path_factory.mktemp("dataset")
    for seed in (1, 2):
        result = CliRunner().invoke(cli, ["simulate", "-s", "all", "--seed", str(seed), "--tokens", "2500",
                                          "--format", "openai", "-o", str(d / f"sims-{seed}.jsonl")])
        assert result.exit_code == 0, result.output
    claude = REALDATA / "claude-code" / (
        "d-kimuson__claude-code-viewer__mock-sample-project@64fdb7f2__"
        "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl")
    codex = REALDATA / "codex" / (
        "AcidicSoil__codex-session-view__rollout-2025-11-17T15-30-28-"
        "019a93b9-f380-7600-98ff-940e6b99603c.jsonl")
    for log in (claude, codex):
        if log.exists():
            shutil.copyfile(log, d / log.name)
    chats: list[bytes] = []
    for f in sorted((REALDATA / "sharegpt").glob("*.json"))[:1]:
        chats += [orjson.dumps(c) for c in json.loads(f.read_text())[:20]]
    for f in sorted((REALDATA / "openai-chat").glob("*.json")):
        chats.append(orjson.dumps({"messages": json.loads(f.read_text())}))
    if chats:
        (d / "chats.jsonl").write_bytes(b"\n".join(chats) + b"\n")
    return d


def ctxkit(cluster: RayCluster, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`ctxkit ARGS` as its own process, with the cluster's token (as a user's shell has it)."""
    return subprocess.run([sys.executable, "-m", "ctxkit", *args], env=cluster.env, capture_output=True,
                          text=True, timeout=timeout)


def local(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def on_cluster(cluster: RayCluster, *args: str) -> list[str]:
    return [*args, "--engine", "ray", "--ray-address", cluster.address]


def nodes_in_report(stderr: str) -> dict[str, int]:
    """The tasks per node (8-hex prefix of its id) of the `ray: ...` line a run prints."""
    line = next(x for x in stderr.splitlines() if x.startswith("ray: "))
    inside = line[line.index("(") + 1:line.index(")")]
    out = {}
    for part in inside.split(", "):
        name, n = part.rsplit(": ", 1)
        out[name.split()[1]] = int(n)
    return out


def archive_rows(path: Path) -> dict[str, list[Any]]:
    """Every table of an archive shard (or the index), rows sorted, times left out."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        out = {}
        for table in sorted(tables):
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            kept = [c for c in columns if c not in ("created", "last_accessed")]
            rows = conn.execute(f"SELECT {', '.join(kept)} FROM {table}").fetchall()
            out[table] = sorted(rows, key=repr)
        return out
    finally:
        conn.close()


def assert_same_directory(one: Path, other: Path) -> None:
    """File for file: the same names, the same outputs byte for byte, the same archive rows."""
    assert sorted(os.listdir(one)) == sorted(os.listdir(other))
    for name in sorted(os.listdir(one)):
        if name.endswith((".ctx.db", ".sqlite")):
            assert archive_rows(one / name) == archive_rows(other / name), name
        else:
            assert (one / name).read_bytes() == (other / name).read_bytes(), name


# --------------------------------------------------------------------------- the cluster


def test_every_server_of_the_cluster_listens_on_loopback(cluster: RayCluster) -> None:
    nodes = cluster.alive()
    assert len(nodes) == 2 and {n["ip"] for n in nodes.values()} == {"127.0.0.1"}
    listening = cluster.listening()
    assert listening and all(a.startswith("127.0.0.1:") for a in listening), listening
    assert cluster.address.startswith("127.0.0.1:")


def test_count_compact_and_score_rl_on_two_nodes_are_one_machines(
    cluster: RayCluster, folder: Path, tmp_path: Path
) -> None:
    nodes = {node[:8] for node in cluster.alive()}
    # count: the same rows
    one = local("count", str(folder), "--format", "jsonl")
    assert one.exit_code == 0, one.output
    run = ctxkit(cluster, *on_cluster(cluster, "count", str(folder), "--format", "jsonl"))
    assert run.returncode == 0, run.stderr
    assert run.stdout == one.stdout
    assert len(run.stdout.splitlines()) > 40
    assert set(nodes_in_report(run.stderr)) == nodes  # both nodes counted shards

    # compact: the same outputs and archives, file for file
    here, there = tmp_path / "here", tmp_path / "there"
    one = local("compact", str(folder), *LIMIT, "-o", f"{here}/")
    assert one.exit_code == 0, one.output
    run = ctxkit(cluster, *on_cluster(cluster, "compact", str(folder), *LIMIT, "-o", str(there)))
    assert run.returncode == 0, run.stderr
    assert_same_directory(here, there)
    assert len([n for n in os.listdir(there) if n.endswith(".ctx.db")]) >= 3
    assert set(nodes_in_report(run.stderr)) == nodes
    restored = tmp_path / "restored.jsonl"
    assert local("expand", str(there), "-o", str(restored)).exit_code == 0

    # score-rl: the same rows
    rl_here, rl_there = tmp_path / "rl.jsonl", tmp_path / "rl"
    actions = ["--action", "offload", "--action", "default"]
    assert local("score-rl", str(folder), *actions, "-o", str(rl_here)).exit_code == 0
    run = ctxkit(cluster, *on_cluster(cluster, "score-rl", str(folder), *actions, "-o", str(rl_there)))
    assert run.returncode == 0, run.stderr
    rows = [r for f in sorted(rl_there.glob("*.jsonl")) for r in f.read_text().splitlines()]
    assert rows == rl_here.read_text().splitlines() and rows
    assert set(nodes_in_report(run.stderr)) == nodes


def test_the_report_names_nodes_and_peak_memory(cluster: RayCluster, folder: Path) -> None:
    run = ctxkit(cluster, *on_cluster(cluster, "count", str(folder), "--format", "jsonl"))
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stderr.splitlines() if x.startswith("ray: "))
    assert " tasks on 2 nodes (127.0.0.1 " in line
    assert " peak memory " in line and line.endswith(" MB")


# --------------------------------------------------------------------------- wrong addresses


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_wrong_address_is_one_line(cluster: RayCluster, folder: Path) -> None:
    port = _free_port()
    run = ctxkit(cluster, "count", str(folder), "--engine", "ray", "--ray-address", f"127.0.0.1:{port}",
                 timeout=120)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"Error: no Ray cluster answers at 127.0.0.1:{port} (Connection refused); start one with "
        "`ray start --head`, or leave out --ray-address for a local Ray"
    ]


def test_a_wrong_token_is_one_line(cluster: RayCluster, folder: Path) -> None:
    env = {**cluster.env, "RAY_AUTH_TOKEN": "0" * 64}
    run = subprocess.run([sys.executable, "-m", "ctxkit", "count", str(folder), "--engine", "ray",
                          "--ray-address", cluster.address], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"Error: the Ray cluster at {cluster.address} refused this process's auth token: set "
        "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) as its nodes have them"
    ]


def test_a_port_that_is_no_ray_head_is_given_up_on_in_bounded_time(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listener that never answers as a GCS: ctxkit stops waiting after GCS_SECONDS (Ray's own
    client waits 40 s, with no timeout to set)."""
    from ctxkit.engines import ray as engine

    monkeypatch.setattr(engine, "GCS_SECONDS", 1.0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        address = f"127.0.0.1:{s.getsockname()[1]}"
        result = CliRunner().invoke(cli, ["count", str(folder), "--engine", "ray", "--ray-address", address])
    assert result.exit_code == 1
    assert f"Error: {address} answers, but no Ray GCS replied there in 1 s" in result.output


def test_a_cluster_with_no_node_on_this_machine_is_one_line(cluster: RayCluster) -> None:
    """A driver attaches to a node on its own machine; without one Ray waits a minute. Here the
    machine's raylets are hidden from the check, as on a machine outside the cluster."""
    code = (
        "import sys\n"
        "from ray._private import services\n"
        "from ctxkit.engines.ray import check_cluster\n"
        "from ctxkit.errors import CtxkitError\n"
        "services.find_node_ids = lambda: []\n"
        "try:\n"
        "    check_cluster(sys.argv[1])\n"
        "except CtxkitError as exc:\n"
        "    print(exc)\n"
    )
    run = subprocess.run([sys.executable, "-c", code, cluster.address], env=cluster.env,
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.startswith(
        f"no node of the Ray cluster at {cluster.address} runs on this machine (its nodes: 127.0.0.1)"
    ), run.stdout + run.stderr


# --------------------------------------------------------------------------- a node lost


DRIVER = """
import dataclasses, json, sys
import ctxkit.engines.ray as engine
from ctxkit.cli import main
from ctxkit.engines.dataset import Fault

fault = Fault(**json.loads(sys.argv[1]))
mapper = engine.shard_mapper
engine.shard_mapper = lambda opts: (
    lambda fn, shards, job: mapper(opts)(fn, shards, dataclasses.replace(job, fault=fault)))
sys.argv = ["ctxkit", *sys.argv[2:]]
main()
"""


def test_a_worker_node_lost_mid_run_and_the_rerun(cluster: RayCluster, folder: Path, tmp_path: Path) -> None:
    """The worker node's raylet is killed while one of its tasks is half way through a shard:
    Ray runs that shard again on the head, and the directory is the one-machine directory.
    Then the same command again, on the cluster that is left, writes it again."""
    here = tmp_path / "here"
    assert local("compact", str(folder), *LIMIT, "-o", f"{here}/").exit_code == 0
    worker = next(node for node, info in cluster.alive().items() if not info["head"])
    marker = tmp_path / "held"
    fault = {"marker": str(marker), "node": worker, "after": 1, "mode": "hold"}
    there = tmp_path / "there"
    args = on_cluster(cluster, "compact", str(folder), *LIMIT, "-o", str(there))
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(fault), *args], env=cluster.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # a hang guard, not a speed check
        while not marker.exists():
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "no task reached the worker node"
            time.sleep(0.2)
        os.kill(cluster.raylet_pid(1), signal.SIGKILL)  # the node is lost, its task half done
        _, stderr = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, stderr
    assert_same_directory(here, there)
    assert not [n for n in os.listdir(there) if n.startswith(".")]  # no temp file of the lost attempt

    nodes = cluster.alive()
    assert worker not in nodes and len(nodes) == 1  # the worker node is gone for good
    again = tmp_path / "again"
    run = ctxkit(cluster, *on_cluster(cluster, "compact", str(folder), *LIMIT, "-o", str(again)))
    assert run.returncode == 0, run.stderr
    assert_same_directory(here, again)
    assert set(nodes_in_report(run.stderr)) == {next(iter(nodes))[:8]}


def test_memory_reserved_for_each_task_is_checked_and_reported(cluster: RayCluster, folder: Path) -> None:
    """--ray-task-mb is Ray's memory resource of each task; the report counts the workers that
    went above it (every one, at 1 MB), and a reservation no node can give is one line, not a
    run that waits for ever."""
    run = ctxkit(cluster, *on_cluster(cluster, "count", str(folder), "--format", "jsonl", "--ray-task-mb", "1"))
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stderr.splitlines() if x.startswith("ray: "))
    workers = int(line.split("; ")[1].split()[0])
    assert line.endswith(f" ({workers} above --ray-task-mb 1)")
    run = ctxkit(cluster, *on_cluster(cluster, "count", str(folder), "--ray-task-mb", "100000000"))
    assert run.returncode == 1
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith("Error: --ray-task-mb 100,000,000: no Ray node has that much memory")


def _can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _can_unshare(), reason="needs unshare -m (a mount namespace of its own)")
def test_inputs_the_nodes_cannot_read_are_one_line_and_leave_nothing(
    cluster: RayCluster, folder: Path, tmp_path: Path
) -> None:
    """The dataset on storage only the driver sees (a tmpfs in a mount namespace of the driver's
    own), as on a cluster without a shared filesystem: the first shard a node cannot open fails
    the run with one line that says what to do, and the -o DIR/ the run made is gone."""
    private, out = tmp_path / "private", tmp_path / "out"
    private.mkdir()
    for args in (["count", f"{private}/data"], ["compact", f"{private}/data", *LIMIT, "-o", str(out)]):
        script = (
            f"mount -t tmpfs none {private} && cp -r {folder} {private}/data && "
            f"exec {sys.executable} -m ctxkit {' '.join(args)} --engine ray --ray-address {cluster.address}"
        )
        run = subprocess.run(["unshare", "-m", "sh", "-c", script], env=cluster.env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 1, run.stderr
        lines = run.stderr.splitlines()
        assert len(lines) == 1, run.stderr
        assert lines[0].startswith(f"Error: {private}/data/")
        assert lines[0].endswith(": cannot read on a Ray node (No such file or directory); the inputs and "
                                 "-o DIR must be on storage every node mounts at the same path")
    assert not out.exists()
    assert os.listdir(private) == []  # the nodes' view: the tmpfs was the driver's alone
