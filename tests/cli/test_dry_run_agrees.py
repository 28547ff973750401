"""`check`, `run --dry-run` and `run` refuse the same bad input alike, before anything is applied.

The run is pointed at an API server that is not there: a refusal decided from the input alone is
exit 2 with one error line; had the run got as far as the cluster it would be exit 1 (the server
unreachable, ``test_unreachable``), so nothing can have been applied.
"""

from __future__ import annotations

import pytest
from test_bad_inputs import INFRA, PORTED, RECIPE
from unreachable_servers import kubeconfig, run

GYM = "++infra.kuberay.gym={name: tester-rl, spec: {headGroupSpec: {template: {spec: {containers: [{name: h}]}}}}}"
CASES = {  # overrides, flow flag, words of the error line
    "rayUploadPaths: [/etc]": (["++infra.launch.rayUploadPaths=[/etc]"], "--raycluster", "launch.rayUploadPaths.0"),
    "two roles, one RayCluster name": ([GYM], "--raycluster", "kuberay.gym.name"),
    "a Deployment's Service named as a head Service": (
        ["++infra.deployments.reward.name=tester-rl-head-svc", PORTED],
        "--rayjob",
        "deployments.reward.name",
    ),
    "an inline secret in a DGD's envs": (
        ["++infra.dynamo.serving.overrides={services: {Frontend: {envs: [{name: API_TOKEN, value: t0k}]}}}"],
        "--rayjob",
        "Frontend.envs.0",
    ),
}
COMMANDS = {
    "check": lambda flow: ["check"],
    "run --dry-run": lambda flow: ["run", flow, "--dry-run"],
    "run": lambda flow: ["run", flow, "--no-wait"],
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
@pytest.mark.parametrize("overrides, flow, word", CASES.values(), ids=CASES)
def test_every_command_refuses_before_the_cluster(tmp_path, command, overrides, flow, word):
    (tmp_path / ".git").mkdir()  # a checkout to upload from (--repo-root's default) without "nope"
    argv = [*command(flow), str(RECIPE), "--infra", str(INFRA), *overrides]
    result = run(argv, kubeconfig(tmp_path), tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], result.stderr
    assert word in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["run --dry-run", "run"])
def test_a_missing_upload_path_is_refused_by_the_dry_run_as_by_the_run(tmp_path, command):
    """Checked against the checkout the run uploads from (`check` takes no --repo-root: it checks only
    what needs no checkout, as in the table above)."""
    (tmp_path / ".git").mkdir()
    argv = [
        *COMMANDS[command]("--raycluster"),
        str(RECIPE),
        "--infra",
        str(INFRA),
        "++infra.launch.rayUploadPaths=[nope]",
    ]
    result = run(argv, kubeconfig(tmp_path), tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 2 and "launch.rayUploadPaths.0: 'nope' does not exist" in result.stderr
