"""The dashboard client against a real local Ray dashboard (real Job REST API, real jobs)."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid

import httpx
import pytest
from interrupts import at_every_point, in_thread
from sandbox_harness import DEADLINE_S, Gate

from nrl_k8s.errors import DashboardError, SubmissionExists
from nrl_k8s.ray.dashboard import Dashboard, JobInfo
from nrl_k8s.ray.package import RECIPE_FILE, stage, upload_paths


@pytest.fixture(scope="module")
def dash(ray_dashboard_url):
    with Dashboard(ray_dashboard_url, timeout_s=30) as client:
        yield client


@pytest.fixture(scope="module")
def run_id():
    return uuid.uuid4().hex[:8]


def wait_terminal(dash: Dashboard, submission_id: str) -> tuple[str, JobInfo]:
    """Follow the job's logs to its end; return the whole log and the final job."""
    text = "".join(dash.follow_logs(submission_id, deadline_s=DEADLINE_S))
    return text, dash.get_job(submission_id)


def test_version(dash):
    assert dash.version()["ray_version"]


def test_unknown_job_is_none(dash):
    assert dash.get_job("never-submitted") is None


def test_successful_job_logs_and_status(dash, run_id):
    submission_id = f"hello-{run_id}"
    assert (
        dash.submit("echo hello; exit 0", submission_id=submission_id, metadata={"owner": "nrl-k8s"}) == submission_id
    )
    text, job = wait_terminal(dash, submission_id)
    assert "hello" in text
    assert (job.status, job.submission_id, job.entrypoint) == ("SUCCEEDED", submission_id, "echo hello; exit 0")
    assert job.metadata == {"owner": "nrl-k8s"}
    assert job.start_time and job.end_time and job.end_time >= job.start_time
    assert job.driver_exit_code == 0


def test_failing_job(dash, run_id):
    submission_id = f"fail-{run_id}"
    dash.submit("echo about to fail; exit 3", submission_id=submission_id)
    text, job = wait_terminal(dash, submission_id)
    assert "about to fail" in text
    assert job.status == "FAILED"
    assert job.driver_exit_code == 3


def test_resubmitting_an_id_raises_submission_exists(dash, run_id):
    submission_id = f"dup-{run_id}"
    dash.submit("exit 0", submission_id=submission_id)
    with pytest.raises(SubmissionExists, match=f"{submission_id} already exists"):
        dash.submit("exit 0", submission_id=submission_id)
    wait_terminal(dash, submission_id)
    with pytest.raises(SubmissionExists):  # Ray never reuses an id, even after the job ended
        dash.submit("exit 0", submission_id=submission_id)


def test_generated_submission_id(dash):
    submission_id = dash.submit("exit 0")
    assert submission_id.startswith("raysubmit_")
    assert wait_terminal(dash, submission_id)[1].status == "SUCCEEDED"


def test_stop_a_running_job(dash, run_id, tmp_path):
    submission_id = f"sleep-{run_id}"
    dash.submit(f"echo started; {Gate(tmp_path).entrypoint()}", submission_id=submission_id)  # never released
    for chunk in dash.follow_logs(submission_id, deadline_s=DEADLINE_S):
        if "started" in chunk:
            break
    assert dash.stop(submission_id) is True
    _, job = wait_terminal(dash, submission_id)
    assert job.status == "STOPPED"
    assert dash.stop(submission_id) is False


# A driver printing LINES numbered lines, waiting for its gate, then one last line.
LINES = 4000
PRINTER = "python3 -c 'for i in range({n}): print(\"line %05d \" % i + \"x\" * 80)'"


def test_follow_streams_the_whole_log_of_a_running_job(dash, run_id, tmp_path):
    submission_id = f"stream-{run_id}"
    gate = Gate(tmp_path)
    dash.submit(f"{PRINTER.format(n=LINES)}; {gate.entrypoint('echo after the gate')}", submission_id=submission_id)
    chunks = []
    for chunk in dash.follow_logs(submission_id, deadline_s=DEADLINE_S):
        chunks.append(chunk)
        if f"line {LINES - 1:05d}" in chunk:
            gate.open()  # the job is still running: what follows is streamed as it is written
    text = "".join(chunks)
    assert text == dash.logs(submission_id)
    assert text.count("\nline ") + text.startswith("line ") == LINES and text.endswith("after the gate\n")


class CuttingRelay:
    """A loopback TCP relay to the dashboard that cuts its first connection carrying more than
    ``limit`` bytes to the client (a dropped log stream); later connections pass untouched."""

    def __init__(self, upstream: str, limit: int):
        target = httpx.URL(upstream)
        self.upstream, self.limit, self.cut, self.connections = (target.host, target.port), limit, False, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # closed
                return
            self.connections += 1
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._copy, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._copy, args=(server, client, True), daemon=True).start()

    def _copy(self, src: socket.socket, dst: socket.socket, downstream: bool) -> None:
        sent = 0
        try:
            while data := src.recv(4096):
                dst.sendall(data)
                sent += len(data)
                if downstream and not self.cut and sent > self.limit:
                    self.cut = True
                    break
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def test_follow_resumes_a_dropped_stream_without_repeating_or_losing_lines(ray_dashboard_url, run_id, tmp_path):
    relay = CuttingRelay(ray_dashboard_url, limit=100_000)  # the log is ~340 kB
    submission_id = f"resume-{run_id}"
    gate = Gate(tmp_path)
    with Dashboard(relay.url, timeout_s=30) as dash:
        dash.submit(f"{PRINTER.format(n=LINES)}; {gate.entrypoint('echo after the gate')}", submission_id=submission_id)
        chunks = []
        for chunk in dash.follow_logs(submission_id, deadline_s=DEADLINE_S):
            chunks.append(chunk)
            if f"line {LINES - 1:05d}" in chunk:
                gate.open()
        assert relay.cut
        assert "".join(chunks) == dash.logs(submission_id)
    relay.server.close()


def test_stop_unknown_job_is_an_error(dash):
    with pytest.raises(DashboardError, match="404"):
        dash.stop("never-submitted")


def test_a_driver_runs_in_its_uploaded_package(dash, run_id, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "repo"
    (root / "nemo_rl").mkdir(parents=True)
    (root / "nemo_rl/marker.txt").write_text(f"uploaded file of {run_id}\n")
    (root / "nemo_rl/run.sh").write_text(f"#!/bin/sh\ncat {RECIPE_FILE} nemo_rl/marker.txt\n")
    (root / "nemo_rl/run.sh").chmod(0o755)
    package = stage(root, upload_paths(None, root, where="launch.rayUploadPaths"), f"dgd_name: dgd-{run_id}\n")

    assert dash.has_package(package.name) is False
    assert dash.ensure_package(package) == len(package.zip_bytes()) > 0
    assert dash.has_package(package.name) is True
    assert dash.ensure_package(package) == 0

    submission_id = f"pkg-{run_id}"
    dash.submit("./nemo_rl/run.sh", submission_id=submission_id, runtime_env={"working_dir": package.uri})
    text, job = wait_terminal(dash, submission_id)
    assert job.status == "SUCCEEDED", text
    assert f"dgd_name: dgd-{run_id}" in text and f"uploaded file of {run_id}" in text


def test_list_jobs_contains_them(dash, run_id):
    listed = {job.submission_id: job.status for job in dash.list_jobs()}
    expected = {f"hello-{run_id}": "SUCCEEDED", f"fail-{run_id}": "FAILED", f"sleep-{run_id}": "STOPPED"}
    assert {key: listed.get(key) for key in expected} == expected


def test_a_ctrl_c_anywhere_in_a_request_leaves_the_client_usable(ray_dashboard_url):
    """A Ctrl-C raised inside httpx's connection pool can leave its lock held (httpcore takes it in
    Python code): httpcore's clean-up, the next request and closing the client would wait on it
    forever. Here a Ctrl-C comes at every point of a request in turn: it is held back until the
    request ends, then raised; after each, the client still reads jobs and logs from another
    thread, and closing it ends."""
    files = ("/threading.py",) + tuple(f"/httpcore/{name}" for name in (
        "_synchronization.py", "_sync/connection_pool.py", "_sync/connection.py", "_sync/http11.py"))
    dash = Dashboard(ray_dashboard_url, timeout_s=30)
    job = dash.submit("echo one line")
    log = wait_terminal(dash, job)[0]
    assert "one line\n" in log

    def usable() -> None:
        assert dash.get_job(job).status == "SUCCEEDED"
        assert "".join(dash.follow_logs(job, deadline_s=DEADLINE_S)) == log  # the job is over: one read

    points = 0
    for points in at_every_point(lambda: dash.get_job(job), files):
        in_thread(usable, f"the client after a Ctrl-C at point {points}")
    assert points > 20  # the trace saw the HTTP stack
    in_thread(dash.close, "closing the client")
