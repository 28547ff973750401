"""A real Ray head: what the local kubelet runs for each RayCluster head pod.

``ray start --head --block`` (Ray's own, with no Ray Client server: ``ray_start.py``) runs as a
child in its own process group, with every port chosen free up front (several sandboxes can run
side by side) and a short ``--temp-dir`` (Ray's unix socket paths are length-limited).

Loopback only: ``ray start`` swaps ``--node-ip-address=127.0.0.1`` for the machine's LAN address
and then binds all interfaces, unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's default on
macOS and Windows) says no other node will join. With it every Ray server — GCS, raylet, dashboard
and agents, autoscaler metrics, each worker's and driver's gRPC server — binds 127.0.0.1; job
drivers inherit the variable and connect over loopback too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from nrl_k8s.errors import SandboxError

from .cpus import start_slots
from .pids import group_members, log_tail, open_private, wait_gone

NUM_CPUS = 8
OBJECT_STORE_BYTES = 200 * 1024 * 1024
#: A laptop holds many heads at once, each mostly idle: Ray's idle work is cut, none of what a
#: driver sees. Workers start when a task needs one (Ray prestarts one per CPU for the first
#: driver: ~3 CPU-seconds a job, then idle workers polling), and the dashboard agent samples
#: the node every 30 s, not 5 s (node stats, which nothing here reads).
QUIET_ENV = {
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "REPORTER_UPDATE_INTERVAL_MS": "30000",
}


#: Ray's worker ports (its --min/--max-worker-port defaults); fixed ports are chosen above them.
_RAY_WORKER_PORTS_END = 20000


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (32768 if it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


#: Where this user's sandboxes note the ports ``free_ports`` handed out, and for how long a port
#: noted there is not handed out again: long enough for the slowest server to bind it (kwok binds
#: its port ~30 s after the sandbox chose it on an idle machine; a head may wait for a start slot).
CLAIMS = Path("/tmp") / f"nrlsb-ports-{os.getuid()}"
CLAIM_S = 900.0


def free_ports(count: int, claims: Path = CLAIMS) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago, chosen below the kernel's
    ephemeral range: a port that is let go and bound later by its server cannot meanwhile become
    the source port of a connection or a port some process asked the kernel for (Ray's own
    metrics and agent servers do), which took a head's container port once.

    Each port is claimed for ``CLAIM_S`` (a file per port in a private directory), so no other
    sandbox of this user, nor this one, hands it out again before its server has bound it: a
    sandbox's kwok once found its port, chosen 28 s earlier, taken by another sandbox's choice."""
    _private_dir(claims)
    low, high = _RAY_WORKER_PORTS_END, _ephemeral_start()
    sockets: list[socket.socket] = []
    tries = 0
    try:
        while len(sockets) < count:
            tries += 1
            # the kernel's choice only if the range below the ephemeral one is missing or full
            port = random.randrange(low, high) if low < high and tries <= 64 * count else 0
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            if port and not _claim(claims / str(port)):
                sock.close()
                continue
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _claim(path: Path) -> bool:
    """Claim a port by creating ``path``; False if a claim younger than ``CLAIM_S`` holds it."""
    with contextlib.suppress(FileNotFoundError):
        if time.time() - path.stat().st_mtime < CLAIM_S:
            return False
        path.unlink()  # a stale claim: its server bound the port long ago, or never will
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False  # another sandbox claimed it just now
    return True


def temp_dir_for(sandbox_dir: Path) -> Path:
    """A short, per-sandbox Ray temp dir (socket paths must stay under ~107 bytes). Ray makes its
    temp and session dirs mode 0777, so it lives in a directory of ours, mode 0700."""
    digest = hashlib.sha1(str(sandbox_dir).encode()).hexdigest()[:10]
    return Path("/tmp") / f"nrlsb-{digest}" / "ray"


def _private_dir(path: Path) -> None:
    """Create ``path`` mode 0700, or make it 0700 — refusing anything but this user's own directory."""
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise SandboxError(f"{path} is not a directory of this user", hint="remove it, then start the sandbox again")
    path.chmod(0o700)


#: Where the start slots of every sandbox of this user are (``start_slot``), and how long a head
#: waiting for one sleeps between tries (the kubelet's retry pace).
SLOTS = Path("/tmp") / f"nrlsb-starts-{os.getuid()}"
SLOT_RETRY_S = 0.2


@contextlib.contextmanager
def start_slot(given_up: Callable[[], bool], directory: Path = SLOTS) -> Iterator[bool]:
    """Hold one of this machine's Ray head start slots, one per CPU this process may use
    (``cpus.py``: its affinity capped by its CPU quota), for the block; yield False instead when
    ``given_up()`` turns true while waiting for one.

    Ray aborts a head whose raylet has not registered within 30 s of its start (``node.py``,
    ``raylet_start_wait_time_s``), and a head's start is a burst of ~7 CPU-seconds in a dozen
    processes: heads started together on a busy machine starve one another past that, each retry
    adding to the load. So, as a kubelet pulls one image at a time, every sandbox of this user
    starts at most one head per CPU at once (a lock file per slot in a private directory: a slot
    is freed however its holder ends)."""
    _private_dir(directory)
    files = [os.open(directory / f"slot-{k}", os.O_RDWR | os.O_CREAT, 0o600) for k in range(start_slots())]
    try:
        while True:
            if any(_locked(fd) for fd in random.sample(files, len(files))):
                yield True
                return
            if given_up():
                yield False
                return
            time.sleep(SLOT_RETRY_S)
    finally:
        for fd in files:
            os.close(fd)  # closing releases the lock


def _locked(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class RayHead:
    """A ``ray start --head --block`` child process with its dashboard on 127.0.0.1."""

    def __init__(self, *, temp_dir: Path, log_path: Path, env: dict[str, str], num_cpus: int = NUM_CPUS):
        self.temp_dir = temp_dir
        self.log_path = log_path
        self.env = env
        self.num_cpus = num_cpus
        self.gcs_port, self.dashboard_port, self.agent_port = free_ports(3)
        self.process: subprocess.Popen | None = None

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "nrl_k8s_sandbox.ray_start", "start", "--head", "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={self.gcs_port}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--dashboard-agent-listen-port={self.agent_port}",
            f"--temp-dir={self.temp_dir}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--disable-usage-stats",
            "--no-monitor",  # the autoscaler's: nothing scales here (KubeRay's own autoscaler heads pass it too)
        ]  # fmt: skip

    def start(self, output: int | None = None) -> int:
        """Launch the head in its own process group, printing to ``output`` (a file descriptor)
        or else to its log file; return its pid (= process group id)."""
        _private_dir(self.temp_dir.parent)
        env = {**self.env, **QUIET_ENV, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        with contextlib.ExitStack() as stack:
            out = output if output is not None else stack.enter_context(open_private(self.log_path, "ab"))
            self.process = subprocess.Popen(
                self.command(), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
            )
        return self.process.pid

    def wait_ready(self, timeout: float) -> dict:
        """Block until the dashboard answers and lists this node ALIVE; return ``/api/version``.

        The dashboard answers before the raylet has registered, and the raylet registers only
        once its own agents are up (Ray aborts the head if they take too long): the node being
        ALIVE is what makes jobs runnable. Connection refused means not up yet; the head
        exiting or the deadline passing raise SandboxError with the tail of the head's log.
        """
        assert self.process is not None, "start() first"
        deadline = time.monotonic() + timeout
        pause = 0.05
        while True:
            if self.process.poll() is not None:
                raise SandboxError(f"the Ray head exited with code {self.process.returncode}",
                                   hint=log_tail(self.log_path))
            try:
                version = self._get("/api/version")
                nodes = ((self._get("/api/v0/nodes").get("data") or {}).get("result") or {}).get("result") or []
                if any(node.get("state") == "ALIVE" for node in nodes):
                    return version
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise SandboxError(f"the Ray head was not ready within {timeout:.0f}s", hint=log_tail(self.log_path))
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.dashboard_url}{path}", timeout=10) as response:
            return json.loads(response.read())

    def stop(self, grace: float = 5.0) -> None:
        """Stop the head as a kubelet stops a container: SIGTERM to its first process only (``ray
        start``, which stops Ray's processes in Ray's own order), then, once that has ended or
        ``grace`` has passed, SIGKILL to whatever is left of its process group, as the kernel does to
        a container's other processes when its first one ends. (Ray starts job drivers in sessions
        of their own: the kubelet ends them with the pod.)

        SIGTERM to the whole group at once stopped a head in the whole grace, and a head that had run a
        job spent ~3 CPU-seconds of it in Ray's dashboard agent: its error-listener thread polls
        the GCS, which stopped under it, in a loop until the agent exits."""
        if self.process is None:
            return
        pgid = self.process.pid
        members = group_members(pgid)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pgid, signal.SIGTERM)
            wait_gone([pgid], grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        wait_gone(members, grace)
        self.process.wait()
