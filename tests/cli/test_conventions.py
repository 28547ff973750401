"""CLI conventions (issue 20): ``-h`` on every command, one ``-o table|json|yaml`` on every data
command, ``--verbose`` showing API requests, ``status --watch``, and hints that work when pasted.

The installed CLI runs as a subprocess against ``fake_api.FakeApi`` (empty collections, missing
objects, a Ray dashboard's job logs behind the service proxy) or an unreachable server.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import sys
from pathlib import Path

import httpx
import pytest
import typer
import yaml
from fake_api import FakeApi
from sandbox_harness import DEADLINE_S, interruptible, run_cli
from unreachable_servers import kubeconfig as unreachable_kubeconfig

from nrl_k8s.errors import ResourceFailed
from nrl_k8s.flows.plan import Code, Submission
from nrl_k8s.flows.raycluster import submit_daemon
from nrl_k8s.ray.dashboard import Dashboard
from nrl_k8s_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
DATA_COMMANDS = {  # each prints data: a table, or -o json|yaml
    "cluster list": ["cluster", "list"],
    "status": ["status", *PAIR],
    "job list --cluster": ["-n", "team", "job", "list", "--cluster", "c1"],
}


def command_paths() -> list[list[str]]:
    """Every command and group of the Typer app, hidden ones too, as argv prefixes."""
    paths: list[list[str]] = [[]]

    def walk(command, prefix: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(typer.main.get_command(app), [])
    return paths


@pytest.fixture
def fake(tmp_path):
    api = FakeApi()
    yield api
    api.close()


def env_for(config: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "NRL_K8S_USER": "tester",
        "KUBECONFIG": str(config),
    }


def cli(argv: list[str], config: Path, tmp_path: Path):
    return run_cli(argv, env=env_for(config, tmp_path), cwd=tmp_path)


def one_usage_error(result) -> None:
    """Exit 2, one error line and one hint line, nothing on stdout, no traceback."""
    lines = result.stderr.splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == "", result.stderr
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], lines


def test_the_walk_finds_every_command():
    paths = {" ".join(p) for p in command_paths()}
    assert {"check", "status", "cluster list", "job logs", "dev setup-secrets", "sandbox up"} <= paths


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "root")
def test_h_is_help_on_every_command(tmp_path, path):
    result = run_cli([*path, "-h"], env=env_for(tmp_path / "none", tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: nrl-k8s"), result.stdout
    assert "-h, --help" in result.stdout


@pytest.mark.parametrize("argv", DATA_COMMANDS.values(), ids=DATA_COMMANDS)
def test_data_commands_print_json_and_yaml(tmp_path, fake, argv):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    as_json = cli([*argv, "-o", "json"], config, tmp_path)
    as_yaml = cli([*argv, "--output", "yaml"], config, tmp_path)
    table = cli(argv, config, tmp_path)
    assert (as_json.returncode, as_yaml.returncode, table.returncode) == (0, 0, 0), as_json.stderr + as_yaml.stderr
    assert json.loads(as_json.stdout) == yaml.safe_load(as_yaml.stdout)
    assert as_yaml.stdout.startswith("---")
    assert table.stdout != as_json.stdout


@pytest.mark.parametrize("argv", DATA_COMMANDS.values(), ids=DATA_COMMANDS)
def test_a_bad_output_format_is_one_error(tmp_path, fake, argv):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    one_usage_error(cli([*argv, "-o", "bogus"], config, tmp_path))
    assert fake.requests == []  # refused before connecting


def test_status_watch_refuses_json_and_yaml(tmp_path, fake):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    for output in ("json", "yaml"):
        result = cli(["status", *PAIR, "-o", output, "--watch"], config, tmp_path)
        assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    result = cli(["status", *PAIR, "--interval", "1"], config, tmp_path)  # --interval without --watch
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


def test_verbose_shows_each_request_against_an_unreachable_server(tmp_path):
    config = unreachable_kubeconfig(tmp_path, user={"token": "planted-token-value"})
    result = cli(["--verbose", "cluster", "list"], config, tmp_path)
    assert result.returncode == 1, result.stderr
    requests = [line for line in result.stderr.splitlines() if line.startswith("api: GET /apis/ray.io/v1/")]
    assert requests and all(re.search(r" failed \(\w+\) \d+ ms$", line) for line in requests), result.stderr
    assert "planted-token-value" not in result.stderr
    quiet = cli(["cluster", "list"], config, tmp_path)
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("api: ")], quiet.stderr


def test_verbose_shows_status_codes(tmp_path, fake):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    result = cli(["-v", "status", *PAIR, "-o", "json"], config, tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("api: ")]
    assert len(lines) == len(fake.requests) > 0, result.stderr
    assert any(re.fullmatch(r"api: GET /\S+ 404 \d+ ms", line) for line in lines), lines
    assert any(re.fullmatch(r"api: GET /\S+ 200 \d+ ms", line) for line in lines), lines
    json.loads(result.stdout)  # stdout holds only the data
    assert "fake-token" not in result.stderr


def test_status_watch_renders_until_ctrl_c(tmp_path, fake):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    proc = interruptible([EXE, "status", *PAIR, "--watch", "--interval", "0.1"], env_for(config, tmp_path))
    try:
        views = 0
        for line in proc.stdout:  # blocks until the CLI prints: no sleeps
            views += line.startswith("status at ")
            if views == 2:
                break
        assert views == 2, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        rest, errors = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, errors
    assert "Traceback" not in errors


def daemon_hint() -> str:
    """The command in the hint `cluster up` prints for a failed daemon (its `job logs` line)."""
    failed = [{"submission_id": "gym-server", "job_id": None, "status": "FAILED", "start_time": 1, "entrypoint": "x"}]
    dash = Dashboard("http://dash", transport=httpx.MockTransport(lambda request: httpx.Response(200, json=failed)),
                     backoff_s=0)
    daemon = Submission(role="gym", cluster="tester-gym", submission_id="gym-server", entrypoint="python serve.py",
                        env={}, code=Code("image", None, None))
    with pytest.raises(ResourceFailed) as err:
        submit_daemon(dash, daemon, None, namespace="team", replace=False, emit=lambda event: None)
    commands = re.findall(r"`(nrl-k8s [^`]+)`", err.value.hint)
    assert commands, err.value.hint
    return commands[0]


def test_the_job_logs_hint_works_pasted_after_another_run(tmp_path):
    hint = daemon_hint()
    argv = shlex.split(hint)
    assert argv[0] == "nrl-k8s" and "logs" in argv, hint
    api = FakeApi({"gym-server": "gym server log line\n"})
    try:
        config = api.kubeconfig(tmp_path / "kubeconfig", namespace="default")  # the hint must name its namespace
        runs = tmp_path / "home" / ".cache" / "nrl-k8s" / "runs"  # the latest run record: another run's
        runs.mkdir(parents=True)
        (runs / "other-run.json").write_text(json.dumps({
            "run_id": "other-run", "namespace": "elsewhere", "job_id": "other-run", "created": "2026-01-01T00:00:00Z",
            "infra": {"namespace": "elsewhere", "kuberay": {"training": {}}}}))
        (runs / "latest").write_text("other-run")
        result = cli(argv[1:], config, tmp_path)
    finally:
        api.close()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "gym server log line\n"
    assert any("/namespaces/team/services/tester-gym-head-svc:8265/proxy/api/jobs/gym-server/logs" in path
               for _, path in api.requests), api.requests


@pytest.mark.parametrize("extra", [["--role", "gym"], ["--run", "r1"], PAIR[:1]], ids=["role", "run", "recipe"])
def test_job_cluster_refuses_a_run_config(tmp_path, fake, extra):
    config = fake.kubeconfig(tmp_path / "kubeconfig")
    result = cli(["job", "logs", "--cluster", "c1", *extra], config, tmp_path)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    assert fake.requests == []
