"""A Ray cluster of a head and a second node on this machine, started the
way a user starts one (``ray start --head`` then ``ray start --address``),
on loopback addresses, and stopped by process id (never ``ray stop``,
which would stop every Ray cluster of the user on the machine).

Ray rewrites ``--node-ip-address 127.0.0.1`` to the machine's outward
address (``resolve_ip_for_localhost``), so the nodes take 127.0.0.2 and
127.0.0.3: loopback addresses Ray keeps as given. Token authentication is
off (``RAY_AUTH_MODE=disabled``) for every process of the cluster and
the driver, so an auth token left in ``~/.ray`` by another cluster does
not make the nodes disagree. Every call has a bounded timeout."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD_IP, NODE_IP = "127.0.0.2", "127.0.0.3"


# Ports ``ray start`` takes by default for its other components: a port
# the OS hands out that is one of these makes ``ray start`` refuse ("used by
# other components"), as 52365, the dashboard agent's, once did in CI.
RAY_DEFAULT_PORTS = frozenset({6379, 8265, 10001, 52365, *range(10002, 20000)})


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on loopback now and none of Ray's defaults
    (the sockets stay bound until all are chosen, so no two are the same)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port not in RAY_DEFAULT_PORTS:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _tree(pids: list[int]) -> list[int]:
    seen, todo = [], list(pids)
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.append(p)
            todo += _children(p)
    return seen


class RayCluster:
    """``with RayCluster(env) as c:`` -- ``c.address`` for ``ray.init``;
    ``c.kill_node()`` kills the second node (its raylet and every process
    under it) as a machine failure would."""

    def __init__(self, env: dict[str, str], timeout: float = 120.0):
        self.port, self.node_port = _free_ports(2)
        self.temp = tempfile.mkdtemp(prefix="rmlo", dir="/tmp")  # short: Ray's socket paths have a limit
        self.env = dict(env, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
        self.timeout = timeout
        self.address = f"{HEAD_IP}:{self.port}"

    def _ray(self, *args: str) -> None:
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "start", *args, "--disable-usage-stats"],
                       env=self.env, check=True, timeout=self.timeout, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    def __enter__(self) -> RayCluster:
        try:
            self._ray("--head", "--node-ip-address", HEAD_IP, "--port", str(self.port), "--num-cpus", "1",
                      "--include-dashboard=false", "--temp-dir", self.temp)
            self._ray("--address", self.address, "--node-ip-address", NODE_IP, "--num-cpus", "1",
                      "--node-manager-port", str(self.node_port))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def processes(self) -> list[int]:
        """Every process of this cluster: those naming its temp dir or its
        GCS port, and everything under them."""
        marks = (self.temp, f":{self.port} ", f"gcs_server_port={self.port}", f"node_manager_port={self.node_port}")
        own = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and int(p.name) != os.getpid()
               and any(m in _cmdline(int(p.name)) + " " for m in marks)]
        return _tree(own)

    def node_processes(self) -> list[int]:
        """The second node's raylet and everything under it (its workers)."""
        raylets = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                   and f"--node_manager_port={self.node_port}" in _cmdline(int(p.name))]
        return _tree(raylets)

    def busy_on_node(self) -> bool:
        """Whether a task runs on the second node (a worker titled ray::call_task)."""
        return any(_cmdline(p).startswith("ray::call_task") for p in self.node_processes())

    def kill_node(self) -> None:
        for p in self.node_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self.processes()
            for p in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, sig)
            deadline = time.monotonic() + 10
            while pids and time.monotonic() < deadline:
                pids = [p for p in pids if Path(f"/proc/{p}").exists() and "(Z)" not in _state(p)]
                time.sleep(0.2)
        shutil.rmtree(self.temp, ignore_errors=True)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return "(Z)" if stat.split(")", 1)[1].split()[0] == "Z" else ""
    except OSError:
        return ""
