"""The exec submitter's launcher, run for real: its scripts execute in this machine's ``sh`` (as
they do on a head pod), through a stand-in for the one seam, ``PodExec`` (``LocalExec`` runs
each command as a local process and records its command line)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sandbox_harness import eventually

from nrl_k8s.kube.podexec import Finished
from nrl_k8s.ray import execdriver
from nrl_k8s.ray.dashboard import JobInfo
from nrl_k8s.ray.execdriver import ExecDrivers, driver_script, parse_state, run_dir

NASTY = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "$HOME and ${HOME}",
    "`id` and $(touch pwned)",
    "back\\slash",
    "line one\nline two",
    "-n",
    "",
    "ünïcode ✓",
    "*.yaml ?",
    "; rm -rf / #",
]


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_driver_script_exports_each_value_exactly(tmp_path, value):
    script = driver_script('printf "%s" "$V"', {"V": value, "NRL_K8S_RUN_ID": "r-1"})
    (tmp_path / "driver.sh").write_text(script)
    out = subprocess.run(["sh", "driver.sh"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out == value
    assert not (tmp_path / "pwned").exists()


def test_driver_script_enters_the_code_path_before_the_entrypoint(tmp_path):
    code = tmp_path / "my code"
    code.mkdir()
    (tmp_path / "driver.sh").write_text(driver_script(f"cd '{code}' && pwd", {}))
    out = subprocess.run(["sh", "driver.sh"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(code)


@pytest.mark.parametrize("line, expected", [
    ("RUNNING -", ("RUNNING", None)), ("EXITED 0", ("SUCCEEDED", 0)), ("EXITED 3", ("FAILED", 3)),
    ("EXITED 143\n", ("FAILED", 143)), ("STOPPED -", ("STOPPED", None)), ("MISSING -", ("MISSING", None)),
    ("EXITED x", ("FAILED", None)), ("", ("STOPPED", None)),
])
def test_parse_state(line, expected):
    assert parse_state(line) == expected


class LocalExec:
    """``PodExec`` on this machine: each command runs as a local process; every argv is recorded."""

    def __init__(self):
        self.argvs: list[list[str]] = []

    def run(self, pod, argv, *, container=None, stdin=None, timeout_s=120.0):
        self.argvs.append(argv)
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout_s)
        return Finished(done.returncode, done.stdout, done.stderr)

    def stream(self, pod, argv, *, container=None, idle_s=5.0):
        self.argvs.append(argv)
        with subprocess.Popen(argv, stdout=subprocess.PIPE) as proc:
            while chunk := proc.stdout.read1(65536):
                yield chunk

    def close(self):
        pass


@pytest.fixture
def make_drivers():
    """``make(tmp_dirs, runner=LocalExec())``: ExecDrivers on this machine; a driver a failed test left
    running is killed at the end."""
    made = []

    def make(tmp_dirs: list[str], runner=None) -> ExecDrivers:
        made.append(ExecDrivers(None, "ns", "train", tmp_dirs, pod="train-head", container="ray-head",
                                runner=runner or LocalExec()))
        return made[-1]

    yield make
    for found in made:
        for job in found.list_jobs():
            if job.status == "RUNNING":
                found.stop(job.submission_id, force=True)


@pytest.fixture
def drivers(make_drivers, tmp_path):
    return make_drivers([str(tmp_path / "exec")])


def _start(drivers, tmp_path, run_id: str, entrypoint: str, env: dict[str, str] | None = None) -> str:
    directory = run_dir(str(tmp_path / "exec"), run_id)
    drivers.prepare(directory, driver_script(entrypoint, env or {}), "policy: {token: hf_recipe_secret}\n")
    drivers.start(directory)
    return directory


def test_a_driver_runs_detached_keeps_its_log_and_exit_code(drivers, tmp_path):
    gate = tmp_path / "gate"
    entrypoint = (f'echo "mode=$MODE recipe=$(cat "$NRL_K8S_RECIPE")"; '
                  f"while [ ! -e '{gate}' ]; do sleep 0.05; done; echo done; exit 3")
    directory = _start(drivers, tmp_path, "r1", entrypoint,
                       {"MODE": "it's $x", "NRL_K8S_RECIPE": f"{tmp_path}/exec/nrl-r1/recipe.yaml"})
    assert drivers.get_job("r1").status == "RUNNING"
    gate.touch()
    log = "".join(drivers.follow_logs("r1"))  # returns once the driver's process group is gone
    assert log == "mode=it's $x recipe=policy: {token: hf_recipe_secret}\ndone\n"
    job = drivers.get_job("r1")
    assert (job.status, job.driver_exit_code) == ("FAILED", 3)
    assert drivers.logs("r1") == log and drivers.logs("r1", tail=1) == "done\n"
    assert [j.submission_id for j in drivers.list_jobs()] == ["r1"]
    assert drivers.get_job("other") is None
    # Private files; the value of an env var or of the recipe is never on a command line.
    mode = oct((tmp_path / "exec/nrl-r1").stat().st_mode & 0o777)
    assert mode == "0o700", mode
    assert all(not (p.stat().st_mode & 0o077) for p in (tmp_path / "exec/nrl-r1").iterdir())
    for argv in drivers._exec.argvs:
        assert not any("it's $x" in word or "hf_recipe_secret" in word for word in argv), argv
        assert argv[:2] == ["sh", "-c"] and argv[2] in vars(execdriver).values()  # one of the fixed scripts
    assert directory.endswith("/nrl-r1")


def test_a_run_id_is_used_once(drivers, tmp_path):
    _start(drivers, tmp_path, "r1", "true")
    with pytest.raises(execdriver.ConfigError, match="a run id is used once"):
        _start(drivers, tmp_path, "r1", "true")


def test_stop_terms_the_process_group_and_force_kills_it(drivers, tmp_path):
    # The driver's child ignores TERM (as a busy trainer may): TERM leaves it running, KILL does not.
    _start(drivers, tmp_path, "r2", f"trap '' TERM; echo armed; {sys.executable} -c 'import signal; signal.pause()'")
    eventually(lambda: "armed" in drivers.logs("r2"), what="the driver ignoring TERM")  # not before its trap
    assert drivers.stop("r2") is True
    directory = run_dir(str(tmp_path / "exec"), "r2")
    assert drivers._run(execdriver.WAIT_GONE, directory, "1").strip() == "RUNNING -"
    assert drivers.stop("r2", force=True) is True
    assert drivers._run(execdriver.WAIT_GONE, directory, "60").strip() == "STOPPED -"
    assert drivers.get_job("r2").status == "STOPPED"
    assert drivers.stop("r2") is False  # not running any more


def test_follow_from_the_last_lines(drivers, tmp_path):
    _start(drivers, tmp_path, "r3", "printf 'a\\nb\\nc\\n'")
    "".join(drivers.follow_logs("r3"))  # until it ended
    assert "".join(drivers.follow_logs("r3", tail=2)) == "b\nc\n"


def test_list_reads_every_tmp_dir(make_drivers, tmp_path):
    found = make_drivers([str(tmp_path / "a"), str(tmp_path / "b")])
    for tmp, run_id in (("a", "x"), ("b", "y")):
        directory = run_dir(str(tmp_path / tmp), run_id)
        found.prepare(directory, driver_script("true", {}), "")
        found.start(directory)
    listed = found.list_jobs()
    assert sorted(j.submission_id for j in listed) == ["x", "y"]
    assert all(isinstance(j, JobInfo) and j.metadata["nrl-k8s.io/submitter"] == "exec" for j in listed)


def test_a_dropped_log_stream_is_reopened_where_it_stopped(make_drivers, tmp_path):
    """The first stream breaks after its first chunk (and only then lets the driver go on):
    following resumes at the byte it reached, so nothing is repeated or lost."""
    from nrl_k8s.kube.podexec import ExecDropped

    gate = tmp_path / "gate"

    class DroppingExec(LocalExec):
        dropped = False

        def stream(self, pod, argv, *, container=None, idle_s=5.0):
            if self.dropped:
                yield from super().stream(pod, argv, container=container, idle_s=idle_s)
                return
            self.dropped = True
            yield from super().stream(pod, [*argv[:-2], "lines", "1"], container=container)  # the log so far
            gate.touch()
            raise ExecDropped("the connection broke")

    found = make_drivers([str(tmp_path / "exec")], DroppingExec())
    _start(found, tmp_path, "r4", f"echo first; while [ ! -e '{gate}' ]; do sleep 0.05; done; echo second")
    while found.logs("r4") == "":  # until its first line is written
        pass
    assert "".join(found.follow_logs("r4")) == "first\nsecond\n"
    assert found._exec.argvs[-1][-2:] == ["follow", str(len("first\n") + 1)]
