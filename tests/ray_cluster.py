"""A Ray cluster of separate nodes on this machine, started as a user starts one: `ray start
--head` and `ray start --address=HEAD` (issue 37), every node on 127.0.0.1.

`ray start` turns a loopback `--node-ip-address` and `--address` into the machine's outward
address (Ray's `resolve_ip_for_localhost`); `loopback_node`, loaded by `ray start` through Ray's
own hook (`RAY_START_HOOK`), keeps both at 127.0.0.1, so every Ray server of these nodes listens
on loopback only. Each node is a `ray start --block` in a process group of its own, and every
process of the cluster carries a marker in its environment: `stop` kills the groups, then any
process left with the marker (a worker whose raylet was killed first), and waits until none is.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MARKER = "CTXKIT_TEST_RAY_CLUSTER"
START_SECONDS = 180.0  # a safety net for a stuck start, not a speed check


def loopback_node(ray_params: Any, head: bool) -> None:
    """`RAY_START_HOOK`: this node on 127.0.0.1, and the head's address taken as given."""
    from ray._private import services

    ray_params.node_ip_address = "127.0.0.1"
    ray_params.node_name = "127.0.0.1"
    services.resolve_ip_for_localhost = lambda host: host


class RayCluster:
    """A head and `workers` worker nodes, `num_cpus` CPUs each, their files under `root`."""

    def __init__(self, root: Path, *, workers: int = 1, num_cpus: int = 1, temp: Path | None = None) -> None:
        self.root = root
        # Ray's session folder, whose sockets must fit AF_UNIX's 107 bytes with Ray's 61-byte tail
        # (session_<date>_<time>_<us>_<pid>/sockets/plasma_store): a short path of its own
        self.temp = temp or root / "t"
        self.token = secrets.token_hex(32)
        self.marker = secrets.token_hex(8)
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.address = ""
        self.workers, self.num_cpus = workers, num_cpus

    @property
    def env(self) -> dict[str, str]:
        """The environment of the nodes, and of a driver that is to reach them."""
        path = os.pathsep.join([str(REPO), str(REPO / "tests")])
        return {
            **os.environ,
            "PYTHONPATH": path,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self.token,
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_START_HOOK": "ray_cluster.loopback_node",
            MARKER: self.marker,
        }

    def _ray_start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the node's, closed by it
        ray = str(Path(sys.executable).with_name("ray"))
        node = subprocess.Popen(
            [ray, "start", "--block", f"--num-cpus={self.num_cpus}", "--object-store-memory=80000000",
             "--disable-usage-stats", *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.nodes.append(node)
        return node

    def start(self) -> RayCluster:
        self._ray_start("head", "--head", "--port=0", "--include-dashboard=false",
                        f"--temp-dir={self.temp}", "--node-ip-address=127.0.0.1")
        self.address = self._wait_for(lambda: self._printed_address(), "the head's address")
        for i in range(self.workers):
            self._ray_start(f"worker{i}", f"--address={self.address}", "--node-ip-address=127.0.0.1")
        self._wait_for(lambda: len(self.alive()) == 1 + self.workers or None, "every node alive")
        return self

    def _printed_address(self) -> str | None:
        found = re.search(r"ray start --address='([^']+)'", (self.root / "head.log").read_text(errors="replace"))
        return found.group(1) if found else None

    def _wait_for(self, probe: Any, what: str) -> Any:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.poll() is not None:
                    raise RuntimeError(f"a Ray node exited while waiting for {what}: {self.logs()}")
            try:
                got = probe()
            except Exception:  # noqa: BLE001 - not up yet
                got = None
            if got:
                return got
            time.sleep(0.5)
        raise RuntimeError(f"no {what} in {START_SECONDS:.0f} s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(self.root.glob("*.log")))

    def alive(self) -> dict[str, dict[str, Any]]:
        """The live nodes, by node id: address and whether it is the head (from the GCS)."""
        code = (
            "import json, sys\n"
            "from ray._raylet import GcsClient\n"
            "from ray.core.generated.gcs_pb2 import GcsNodeInfo\n"
            "nodes = GcsClient(address=sys.argv[1]).get_all_node_info(timeout=10)\n"
            "print(json.dumps({k.hex(): {'ip': v.node_manager_address, 'head': v.is_head_node}\n"
            "      for k, v in nodes.items() if v.state == GcsNodeInfo.GcsNodeState.ALIVE}))\n"
        )
        out = subprocess.run([sys.executable, "-c", code, self.address], env=self.env,
                             capture_output=True, text=True, timeout=60, check=True)
        import json

        return dict(json.loads(out.stdout))

    def pids(self, *, group: int | None = None) -> dict[int, str]:
        """The processes of the cluster (pid: command name), or of one node's process group."""
        found: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if f"{MARKER}={self.marker}".encode() not in environ.split(b"\0"):
                continue
            name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if fields[0] == "Z":
                continue
            if group is None or int(fields[2]) == group:
                found[pid] = name
        return found

    def raylet_pid(self, node: int) -> int:
        """The raylet of node `node` (0: the head, 1: the first worker node)."""
        raylets = [pid for pid, name in self.pids(group=self.nodes[node].pid).items() if name == "raylet"]
        assert len(raylets) == 1, raylets
        return raylets[0]

    def listening(self) -> set[str]:
        """The local addresses the cluster's processes listen on (TCP)."""
        inodes: set[str] = set()
        for pid in self.pids():
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
            except OSError:
                continue
        found: set[str] = set()
        for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    found.add(_address(cols[1], v6))
        return found

    def stop(self) -> None:
        """Kill every process of the cluster, and wait until none is left."""
        for node in self.nodes:
            try:
                os.killpg(node.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 60
        while True:
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for node in self.nodes:
                try:
                    node.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not self.pids(), f"processes of the test cluster left: {self.pids()}"


def _address(hexed: str, v6: bool) -> str:
    """`0100007F:1F90` (or its IPv6 form) as `127.0.0.1:8080`."""
    import ipaddress
    import struct

    host, port = hexed.split(":")
    raw = bytes.fromhex(host)
    if v6:
        words = struct.unpack("<4I", raw)
        addr = ipaddress.IPv6Address(b"".join(struct.pack(">I", w) for w in words))
        text = str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)
    else:
        text = str(ipaddress.IPv4Address(struct.unpack("<I", raw)[0].to_bytes(4, "big")))
    return f"{text}:{int(port, 16)}"
