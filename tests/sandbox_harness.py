"""The sandbox test harness: start/stop a real ``nrl-k8s sandbox`` through the installed CLI,
and the helpers that keep tests deterministic on any machine:

* ``History``/``observe``: list, then watch from the list's resourceVersion in a background
  thread, recording every event; tests wait on and assert over what was recorded, so an object
  that comes and goes (a job that finishes, a DGD that GC removes) is never missed;
* ``Gate``: a Ray job driver that waits for a signal file the test creates, so a job cannot end
  before the test has looked at it;
* ``DEADLINE_S``: the one generous deadline for every wait (never a timing assertion);
* ``eventually``: backoff polling for what has no watch (HTTP endpoints, files, counters).

Fixtures built on it live in ``tests/conftest.py``; test modules may import from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))
#: Set in the environment of every sandbox the fixtures start: tests read it back from Ray
#: job drivers to prove that they inherit the environment of ``sandbox up``.
INHERITED_ENV = ("NRL_K8S_TEST_INHERITED", "from-sandbox-up")
#: How long any wait in a test may take before the test fails. Every step waited on takes
#: seconds at most on a 2-core machine, so this leaves room for one many times slower.
DEADLINE_S = 300.0
#: How long a Gate's driver waits for its signal before it gives up (exit 3).
GATE_LIMIT_S = 900


def run_cli(args: list[str], *, env: dict[str, str], timeout: float = DEADLINE_S,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the installed ``nrl-k8s`` CLI with exactly ``env``; past ``timeout`` fail the test with
    everything it printed (a TimeoutExpired's own message shows only the command)."""
    try:
        return subprocess.run([NRL_K8S, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        printed = {name: (data.decode(errors="replace") if isinstance(data, bytes) else data or "")
                   for name, data in (("stdout", exc.stdout), ("stderr", exc.stderr))}
        pytest.fail(f"nrl-k8s {' '.join(args)} still ran after {timeout:.0f} s\n"
                    f"stdout:\n{printed['stdout']}\nstderr:\n{printed['stderr']}")


def nrl_k8s(
    *args: str, check: bool = True, timeout: float = DEADLINE_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the installed ``nrl-k8s`` CLI (``env`` added to this process's); fail the test with
    its output when ``check`` fails."""
    env = {**os.environ, INHERITED_ENV[0]: INHERITED_ENV[1], **(env or {})}
    result = run_cli(list(args), env=env, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"nrl-k8s {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def interruptible(argv: list[str], env: dict) -> subprocess.Popen:
    """Start the CLI as a user's terminal would: Ctrl-C (SIGINT) reaches Python's handler even when
    the tests themselves run with SIGINT ignored (a background job of a non-interactive shell,
    `nohup`), which the child would otherwise inherit and so never see the test's Ctrl-C."""
    return subprocess.Popen(argv, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def played(*, heads: tuple[str, ...] = (), services: tuple[str, ...] = ()) -> list[str]:
    """Overrides that have kwok play the head pods of these kuberay roles and the pods of these DGD
    services of ``dynamo.serving`` (the sandbox's ``played`` label): for a test that needs them
    placed or present, never running, no Ray head or Dynamo process starts for them."""
    from nrl_k8s_sandbox.controlplane.stages import PLAYED_LABEL

    labels = f"{{labels: {{{PLAYED_LABEL}: 'true'}}}}"
    return [*(f"++infra.kuberay.{role}.spec.headGroupSpec.template.metadata={labels}" for role in heads),
            *(f"+infra.dynamo.serving.overrides.services.{name}.extraPodMetadata={labels}" for name in services)]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass
class Sandbox:
    """A running sandbox started by ``nrl-k8s sandbox up``."""

    dir: Path
    kubeconfig: Path
    info: dict = field(repr=False)
    faults: dict[str, str] = field(default_factory=dict)  # the faults it was started with

    @property
    def api_url(self) -> str:
        """The kubeconfig's server (https, self-signed CA in the kubeconfig)."""
        return self.info["api_url"]

    def api_client(self, admin: bool = False):
        """A fresh official-client ApiClient: the user's kubeconfig, or the operators'."""
        from kubernetes import config

        path = self.info["admin_kubeconfig"] if admin else self.kubeconfig
        return config.new_client_from_config(config_file=str(path))

    def set_fault(self, name: str, value: str | None = None) -> dict[str, str]:
        from nrl_k8s_sandbox import process

        return process.set_fault(self.dir, f"{name}={value}" if value is not None else name)

    def clear_fault(self, name: str) -> dict[str, str]:
        from nrl_k8s_sandbox import process

        return process.clear_fault(self.dir, name)

    def request_counts(self, *, reset: bool = False) -> dict[str, int]:
        """API requests made with the user token since the last reset, as ``{"VERB RESOURCE": n}``."""
        from nrl_k8s_sandbox import process

        paths = process.Paths.of(self.dir)
        counts = process._admin(paths, "GET", "/sandbox/stats")
        if reset:
            process._admin(paths, "DELETE", "/sandbox/stats")
        return counts

    def active_faults(self) -> dict[str, str]:
        from nrl_k8s_sandbox import process

        return process._admin(process.Paths.of(self.dir), "GET", "/sandbox/faults")

    @contextlib.contextmanager
    def fault(self, name: str, value: str | None = None) -> Iterator[None]:
        """Turn a fault on for the duration of a ``with`` block, then back to how it was started."""
        self.set_fault(name, value)
        try:
            yield
        finally:
            if name in self.faults:
                self.set_fault(name, self.faults[name] or None)
            else:
                self.clear_fault(name)

    def driver_log(self, job_id: str) -> str:
        """A Ray job's log as its Ray head wrote it, from the head's own log folder (kept after
        KubeRay deleted the cluster)."""
        found = sorted(Path(self.info["scratch"]).glob(f"*/ray/session_*/logs/job-driver-{job_id}.log"))
        assert found, f"no Ray head of this sandbox ran job {job_id}"
        return found[-1].read_text()

    def kubectl(self, *args: str, check: bool = True, timeout: float = DEADLINE_S,
                stdin: str | None = None) -> subprocess.CompletedProcess:
        """The kubectl built with the sandbox (its version matches the server's)."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        kubectl = str(Path(self.info["bin"]) / "kubectl")
        result = subprocess.run([kubectl, *args], capture_output=True, text=True, env=env, timeout=timeout, input=stdin)
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
        return result


_WATCHER = """import select, subprocess, sys
select.select([int(sys.argv[1])], [], [])
subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def when_this_process_ends(command: list[str]) -> None:
    """Run ``command`` once this test process is gone, however it ended. A test run that is
    killed (Ctrl-C twice, kill -9, a timeout) otherwise leaves its sandboxes and Ray heads
    running, and every run after it is slowed by them, or fails. A detached watcher waits on a
    pidfd of this process, opened here so that it is valid however soon this process dies (no
    polling); after a clean end the command finds nothing to stop."""
    if not hasattr(os, "pidfd_open"):  # Linux only; elsewhere a killed run is cleaned up by hand
        return
    pidfd = os.pidfd_open(os.getpid())
    try:
        subprocess.Popen([sys.executable, "-c", _WATCHER, str(pidfd), *command], pass_fds=(pidfd,),
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    finally:
        os.close(pidfd)


def start_sandbox(
    directory: Path, *faults: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()
) -> Sandbox:
    """``sandbox up`` with ``--fault`` per fault and ``flags`` as they are (``Sandbox.faults``
    lists the ``faults`` only); stopped when this process ends, if nothing stopped it before."""
    args = ["sandbox", "up", "--dir", str(directory), *flags]
    for fault in faults:
        args += ["--fault", fault]
    when_this_process_ends([NRL_K8S, "sandbox", "down", "--dir", str(directory)])
    result = nrl_k8s(*args, env=env)
    assert result.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}", result.stdout
    info = json.loads((directory / "sandbox.json").read_text())
    from nrl_k8s_sandbox.process import parse_faults

    return Sandbox(directory, directory / "kubeconfig", info, parse_faults(faults))


def stop_sandbox(box: Sandbox) -> subprocess.CompletedProcess:
    return nrl_k8s("sandbox", "down", "--dir", str(box.dir))


@contextlib.contextmanager
def separate_sandbox(directory: Path, *faults: str, env: dict[str, str] | None = None,
                     flags: tuple[str, ...] = ()) -> Iterator[Sandbox]:
    """Start a sandbox of its own in ``directory`` (with ``faults``, ``env`` and ``flags``) and always stop it."""
    box = start_sandbox(directory, *faults, env=env, flags=flags)
    try:
        yield box
    finally:
        stop_sandbox(box)


# -- waiting without racing ---------------------------------------------------------------
class History:
    """Every watch event of what one list call selects, recorded from the moment it is made.

    ``list_fn(*args, **selectors)`` is an official-client list call (``core.list_namespaced_pod``,
    ``custom.list_namespaced_custom_object`` with group, version, namespace, plural). The list
    gives the objects as they were (``initial``) and a resourceVersion; a background thread
    watches from it and appends every ``(type, object)`` to ``log``, so nothing that happens
    after construction is missed, however quickly it comes and goes. Use it as a context
    manager (the watch stops on exit); ``wait(until)`` blocks until ``until(history)`` holds.
    """

    def __init__(self, list_fn: Callable, *args, **selectors):
        self._call = partial(list_fn, *args, **selectors)
        listing = json.loads(self._call(_preload_content=False).data)
        self.initial: dict[str, dict] = {item["metadata"]["name"]: item for item in listing["items"]}
        self.log: list[tuple[str, dict]] = []
        self._version = listing["metadata"]["resourceVersion"]
        self._watches: list[str] = []  # each watch's start and end, for a failure's message
        self._changed = threading.Condition()
        self._stopping = False
        self._failure: str | None = None
        self._response = None
        self._thread = threading.Thread(target=self._record, name="history", daemon=True)
        self._thread.start()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _record(self) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        try:
            while not self._stopping:
                response = self._call(watch=True, resource_version=self._version, timeout_seconds=int(DEADLINE_S),
                                      _preload_content=False)
                with self._changed:
                    if self._stopping:
                        response.close()
                        return
                    self._response = response
                    self._watches.append(f"{time.strftime('%H:%M:%S')} watch from resourceVersion {self._version}")
                for line in iter_resp_lines(response):
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # e.g. 410: the history no longer reaches back
                        raise RuntimeError(f"the watch failed: {event['object'].get('message')}")
                    with self._changed:
                        self._version = event["object"]["metadata"]["resourceVersion"]
                        self.log.append((event["type"], event["object"]))
                        self._changed.notify_all()
                with self._changed:
                    self._watches.append(f"{time.strftime('%H:%M:%S')} watch ended at resourceVersion {self._version}")
        except Exception as err:  # the recorder's thread: handed to wait(), which fails the test
            if not self._stopping:
                with self._changed:
                    self._failure = f"{type(err).__name__}: {err}"
                    self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            response = self._response
        if response is not None:
            # interrupts the thread's blocking read; a stream that already ended went back to the
            # pool (urllib3 then refuses the shutdown: RuntimeError) or closed its socket (EBADF):
            # nothing is left to interrupt
            with contextlib.suppress(RuntimeError, OSError):
                response.shutdown()
        self._thread.join(DEADLINE_S)

    def wait(
        self, until: Callable[[History], bool], *, what: str = "the condition", timeout_s: float = DEADLINE_S
    ) -> History:
        """Block until ``until(self)`` holds; fail the test at the deadline with what was seen, and at
        once when the watch has stopped (the context manager's exit): nothing more can come then."""
        with self._changed:
            if self._stopping and not until(self):
                pytest.fail(f"{what} not seen before the watch stopped: wait inside the History's with block")
            held = self._changed.wait_for(lambda: self._failure is not None or until(self), timeout_s)
        if self._failure is not None:
            pytest.fail(f"watching for {what}: {self._failure}")
        if not held:
            versions = [(kind, obj["metadata"]["resourceVersion"]) for kind, obj in self.events()][-30:]
            pytest.fail(
                f"{what} not seen within {timeout_s:.0f}s; the watches: {'; '.join(self._watches)}; "
                f"the last events: {versions}; last seen:\n{self._shown()}"
            )
        return self

    def holds(self, invariant: Callable[[dict[str, dict]], bool], *, seconds: float) -> None:
        """Fail as soon as ``invariant(objects)`` is false within the next ``seconds`` ("X stays Y")."""
        with self._changed:
            broke = self._changed.wait_for(lambda: self._failure is not None or not invariant(self.objects()), seconds)
        assert not broke, self._failure or self._shown()

    def _shown(self) -> str:
        """The objects for a failure's message, without their managedFields (which alone filled it)."""
        brief = {name: {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
                 for name, obj in self.objects().items()}
        return json.dumps(brief, indent=1)[:4000]

    def events(self, name: str | None = None) -> list[tuple[str, dict]]:
        """The recorded events, in order (of the object called ``name`` only, if given)."""
        with self._changed:
            return [(kind, obj) for kind, obj in self.log if name is None or obj["metadata"]["name"] == name]

    def objects(self) -> dict[str, dict]:
        """``{name: object}`` as of the last recorded event."""
        current = dict(self.initial)
        for kind, obj in self.events():
            if kind == "DELETED":
                current.pop(obj["metadata"]["name"], None)
            else:
                current[obj["metadata"]["name"]] = obj
        return current


def observe(list_fn: Callable, *args, until: Callable[[dict[str, dict]], bool], timeout_s: float = DEADLINE_S,
            **selectors) -> dict[str, dict]:
    """List then watch (``History``) until ``until({name: object})`` holds; return those objects."""
    with History(list_fn, *args, **selectors) as history:
        return history.wait(lambda h: until(h.objects()), timeout_s=timeout_s).objects()


def status_of(obj: dict | None, field: str):
    """``obj.status.field``, or None while the object or its status does not exist yet (a
    controller writes status after the object is created, and not at all if it was killed)."""
    return ((obj or {}).get("status") or {}).get(field)


def status_is(field: str, *values: str) -> Callable[[dict | None], bool]:
    """A predicate for ``wait_for``: the object's ``status.field`` is one of ``values``."""
    return lambda obj: status_of(obj, field) in values


def find_custom(custom, group_version: tuple[str, str], namespace: str, plural: str, name: str) -> dict | None:
    """A custom object through the official client's CustomObjectsApi, or None when it does not exist."""
    from kubernetes import client

    try:
        return custom.get_namespaced_custom_object(*group_version, namespace, plural, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def eventually(probe: Callable[[], object], *, timeout_s: float = DEADLINE_S, what: str = "condition"):
    """Retry ``probe`` with backoff until it returns something truthy, and return that; for what
    has no watch (HTTP endpoints, files, request counters). Fails at the deadline."""
    deadline = time.monotonic() + timeout_s
    pause = 0.02
    while not (value := probe()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {timeout_s:.0f}s (last: {value!r})")
        time.sleep(pause)  # the poll interval, bounded by the deadline above
        pause = min(pause * 2, 0.5)
    return value


class Gate:
    """A signal file the test creates to let a waiting Ray job driver finish.

    The sandbox runs job drivers as shell processes on its local Ray head, so a file under the
    test's tmp dir is visible to them. ``entrypoint(then)`` waits until the file exists, then
    runs ``then``: the job cannot end before the test has looked at it. A driver never released
    gives up after ``GATE_LIMIT_S`` with exit code 3 (never a success).
    """

    def __init__(self, directory: Path):
        self.path = Path(directory) / unique("gate")

    def entrypoint(self, then: str = "true") -> str:
        path = shlex.quote(str(self.path))
        wait = (f"i=0; while [ ! -e {path} ]; do i=$((i+1)); "
                f"if [ $i -gt {GATE_LIMIT_S * 10} ]; then exit 3; fi; sleep 0.1; done")
        return f"{wait}; {then}"

    def override(self, then: str = "true") -> str:
        """``infra.launch.entrypoint=...`` for ``nrl-k8s run`` (JSON is a quoted YAML string)."""
        return "infra.launch.entrypoint=" + json.dumps(self.entrypoint(then))

    def open(self) -> None:
        self.path.touch()
