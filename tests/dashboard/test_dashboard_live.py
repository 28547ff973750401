"""The dashboard client against a real local Ray dashboard (real Job REST API, real jobs)."""

from __future__ import annotations

import uuid

import pytest
from sandbox_harness import DEADLINE_S, Gate

from nrl_k8s.dashboard import Dashboard, JobInfo
from nrl_k8s.errors import DashboardError, SubmissionExists
from nrl_k8s.package import RECIPE_FILE, stage, upload_paths



@pytest.fixture(scope="module")
def dash(ray_dashboard_url):
    with Dashboard(ray_dashboard_url, timeout_s=30) as client:
        yield client


@pytest.fixture(scope="module")
def run_id():
    return uuid.uuid4().hex[:8]


def wait_terminal(dash: Dashboard, submission_id: str) -> tuple[str, JobInfo]:
    """Follow the job's logs to its end; return the whole log and the final job."""
    text = "".join(dash.follow_logs(submission_id, poll_s=0.2, deadline_s=DEADLINE_S))
    return text, dash.get_job(submission_id)


def test_version(dash):
    assert dash.version()["ray_version"]


def test_unknown_job_is_none(dash):
    assert dash.get_job("never-submitted") is None


def test_successful_job_logs_and_status(dash, run_id):
    submission_id = f"hello-{run_id}"
    assert dash.submit("echo hello; exit 0", submission_id=submission_id, metadata={"owner": "nrl-k8s"}) == submission_id
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
    for chunk in dash.follow_logs(submission_id, poll_s=0.2, deadline_s=DEADLINE_S):
        if "started" in chunk:
            break
    assert dash.stop(submission_id) is True
    _, job = wait_terminal(dash, submission_id)
    assert job.status == "STOPPED"
    assert dash.stop(submission_id) is False


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
