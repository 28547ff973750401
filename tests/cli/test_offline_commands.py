"""CLI commands that need no cluster: check, run --dry-run, cluster up --dry-run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KIND = [str(EXAMPLES / "qwen3_0.6b_dynamo.yaml"), "--infra", str(EXAMPLES / "qwen3_0.6b_dynamo.kind.infra.yaml")]
LONG_LIVED = [str(EXAMPLES / "sandbox_longlived.yaml"), "--infra", str(EXAMPLES / "sandbox_longlived.infra.yaml")]
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))

COMMANDS = [[], ["check"], ["run"], ["cluster"], ["cluster", "up"], ["sandbox"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "root")
def test_every_command_has_help(cli, argv):
    result = cli(*argv, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.stdout


def test_version(cli):
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("nrl-k8s ")


INSTALLED_CLI_CASES = {  # argv: (exit code, text the output contains)
    "global options then the command": (
        ["-n", "team", "--context=nowhere", "-v", "check", "--help"],
        0,
        "nrl-k8s check",
    ),
    "a group's command": (["--namespace", "team", "cluster", "up", "--help"], 0, "nrl-k8s cluster up"),
    "a misspelt command is suggested": (["chek"], 2, "Did you mean 'check'?"),
    "the root lists every command": (["--help"], 0, "sandbox"),
}


@pytest.mark.parametrize("argv, code, text", INSTALLED_CLI_CASES.values(), ids=INSTALLED_CLI_CASES)
def test_the_installed_cli_finds_the_command_after_global_options(argv, code, text):
    """The console script builds only the invoked command (startup time); help and errors stay whole."""
    result = subprocess.run([EXE, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (result.returncode, text in result.stdout + result.stderr) == (code, True), result.stdout + result.stderr
    if argv == ["--help"]:
        assert all(name in result.stdout for name in ("check", "run", "status", "logs", "cluster", "job"))


def test_check_prints_summary_with_dynamo_section(cli):
    result = cli("check", *KIND)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for expected in (
        "namespace  nemo-rl (from infra)",
        "rayjob     tester-qwen3-0-6b",
        "DYNAMO",
        "dynamo.serving -> tester-qwen3-0-6b-dgd",
        "examples_dgd/qwen3_0.6b_kind_v1beta1.yaml  (nvidia.com/v1beta1)",
        "ready timeout  900s",
        "VllmDecodeWorker",
        "policy.generation.dynamo_cfg.dgd_name=tester-qwen3-0-6b-dgd",
    ):
        assert expected in out, expected


def test_check_with_two_dgds_says_recipe_is_left_alone(cli):
    result = cli(
        "check", str(EXAMPLES / "grpo_two_dgds.yaml"), "--infra", str(EXAMPLES / "grpo_two_dgds.kind.infra.yaml")
    )
    assert result.exit_code == 0, result.stderr
    assert "the recipe is left alone" in result.stdout


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_check_output_bundle_redacts_secrets(cli, tmp_path, monkeypatch, suffix):
    monkeypatch.setenv("HF_TOKEN", "hf_topsecret")
    target = tmp_path / f"bundle{suffix}"
    result = cli("check", *KIND, "-o", str(target))
    assert result.exit_code == 0, result.stderr
    text = target.read_text()
    data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    assert set(data) == {"infra", "recipe", "manifests", "long_lived"}
    assert [m["kind"] for m in data["manifests"]] == ["Job", "RayJob", "Secret", "DynamoGraphDeployment"]
    assert [m["kind"] for m in data["long_lived"]] == [
        "RayCluster",
        "Secret",
        "DynamoGraphDeployment",
    ]  # HF_TOKEN: its env Secret
    assert data["recipe"]["policy"]["generation"]["backend"] == "dynamo"
    assert "hf_topsecret" not in text and "hf_topsecret" not in result.stdout

    shown = cli("check", *KIND, "-o", str(target), "--show-secrets")
    assert shown.exit_code == 0
    assert "hf_topsecret" in target.read_text()


def test_run_dry_run_prints_dgd_then_secret_then_rayjob(cli):
    result = cli("run", "--rayjob", "--dry-run", *KIND)
    assert result.exit_code == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Job", "RayJob", "Secret", "DynamoGraphDeployment"]  # the lease first
    job = docs[1]
    assert job["spec"]["submissionMode"] == "HTTPMode"
    assert "NRL_K8S_RECIPE" in job["spec"]["entrypoint"]
    for doc in docs:
        assert not {"uid", "resourceVersion", "creationTimestamp"} & set(doc["metadata"])
        assert "status" not in doc and "ownerReferences" not in doc["metadata"]


def test_run_dry_run_flags_reach_the_rayjob(cli):
    result = cli("run", "--dry-run", *KIND, "--no-shutdown", "--active-deadline-seconds", "3600")
    job = next(d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "RayJob")
    assert job["spec"]["shutdownAfterJobFinishes"] is False
    assert "ttlSecondsAfterFinished" not in job["spec"]
    assert job["spec"]["activeDeadlineSeconds"] == 3600


# The training role's env values that look secret (HF_TOKEN) travel in its own Secret.
TARGETS = {
    "one dgd": (["--target", "dynamo.serving"], ["DynamoGraphDeployment"]),
    "one role": (["--target", "kuberay.training"], ["RayCluster", "Secret"]),
    "repeated": (["-t", "kuberay.training", "-t", "dynamo.serving"], ["RayCluster", "Secret", "DynamoGraphDeployment"]),
    "all": ([], ["RayCluster", "Secret", "DynamoGraphDeployment"]),
}


@pytest.mark.parametrize("flags,kinds", TARGETS.values(), ids=TARGETS)
def test_cluster_up_dry_run_targets(cli, flags, kinds):
    result = cli("cluster", "up", "--dry-run", *flags, *KIND)
    assert result.exit_code == 0, result.stderr
    assert [d["kind"] for d in yaml.safe_load_all(result.stdout)] == kinds


LONG_LIVED_TARGETS = {
    "all": (
        [],
        [
            "RayCluster",
            "RayCluster",
            "ComputeDomain",
            "ResourceClaimTemplate",
            "DynamoGraphDeployment",
            "Deployment",
            "Service",
        ],
    ),
    "training role and its DRA objects": (
        ["-t", "kuberay.training"],
        ["RayCluster", "ComputeDomain", "ResourceClaimTemplate"],
    ),
    "deployment and its Service": (["-t", "deployments.web"], ["Deployment", "Service"]),
}


@pytest.mark.parametrize("flags,kinds", LONG_LIVED_TARGETS.values(), ids=LONG_LIVED_TARGETS)
def test_cluster_up_dry_run_prints_companion_objects(cli, flags, kinds):
    result = cli("cluster", "up", "--dry-run", *flags, *LONG_LIVED)
    assert result.exit_code == 0, result.stderr
    assert [d["kind"] for d in yaml.safe_load_all(result.stdout)] == kinds


def test_run_dry_run_prints_every_object_in_apply_order(cli):
    result = cli("run", "--dry-run", *LONG_LIVED)
    assert result.exit_code == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "Job", "RayJob", "Secret", "ComputeDomain",
                                         "ResourceClaimTemplate", "DynamoGraphDeployment"]
    job = docs[3]["metadata"]["name"]
    claims = docs[3]["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["resourceClaims"]
    assert {c["resourceClaimTemplateName"] for c in claims} == {f"{job}-cd-channel", f"{job}-roce"}


def test_check_shows_daemons_deployments_and_code(cli):
    result = cli("check", *LONG_LIVED)
    assert result.exit_code == 0, result.stderr
    for expected in (
        "code        upload examples/sandbox_code",
        "dra         ComputeDomain tester-ll-train-cd (numNodes 1)",
        "daemon      python3 examples/sandbox_code/gym_server.py 18431",
        "id tester-ll-gym-server; code upload examples/sandbox_code; "
        "health http://tester-ll-gym-head-svc:18431/ within 120s",
        "deployments.web -> tester-ll-web  (replicas 1)",
        "service     port-8000 8000/TCP",
    ):
        assert expected in result.stdout, expected
    assert "ACCEPTED BUT NOT USED" not in result.stdout


FLOWS = {
    "launch.mode bringup: long-lived": (["+infra.launch.mode=bringup"], "RayCluster"),
    "launch.mode rayjob: RayJob": (["+infra.launch.mode=rayjob"], "RayJob"),
    "--rayjob wins over bringup": (["+infra.launch.mode=bringup", "--rayjob"], "RayJob"),
    "--raycluster wins over rayjob": (["+infra.launch.mode=rayjob", "--raycluster"], "RayCluster"),
    "bringup takes --raycluster's flags": (
        ["+infra.launch.mode=bringup", "--run-id", "r1", "--skip-daemons"],
        "RayCluster",
    ),
}


@pytest.mark.parametrize("args, training_kind", FLOWS.values(), ids=FLOWS)
def test_launch_mode_picks_the_flow_of_run(cli, args, training_kind):
    result = cli("run", "--dry-run", *LONG_LIVED, *args)
    assert result.exit_code == 0, result.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(result.stdout)]
    assert training_kind in kinds and ({"RayJob", "RayCluster"} - {training_kind}).isdisjoint(kinds), kinds


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["+infra.launch.mode=bringup", "--driver-grace", "5"],
            "--driver-grace cannot be used with --raycluster (chosen by launch.mode: bringup)",
        ),
        (["--replace"], "--replace cannot be used with --rayjob (the default without launch.mode: bringup)"),
    ],
    ids=["rayjob-flag-with-bringup", "raycluster-flag-by-default"],
)
def test_the_other_flows_flags_are_refused(cli, args, message):
    result = cli("run", "--dry-run", *LONG_LIVED, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "overrides launch.mode" in result.stderr


def test_check_shows_the_flow_and_warns_about_an_unstaged_recipe(cli):
    reads = "infra.launch.entrypoint=python3 driver.py --config nrl_k8s_run.yaml"
    result = cli("check", *LONG_LIVED, reads)
    assert result.exit_code == 0, result.stderr
    assert "run        --rayjob" in result.stdout
    lines = result.stderr.splitlines()
    assert lines[0] == ("warning: launch.entrypoint reads nrl_k8s_run.yaml, which only run --raycluster stages; "
                        "run --rayjob (what `nrl-k8s run` does unless launch.mode is bringup) does not")
    assert lines[1].startswith('hint: read the recipe from "$NRL_K8S_RECIPE" (its path in every flow)')
    bringup = cli("check", *LONG_LIVED, reads, "+infra.launch.mode=bringup")
    assert bringup.exit_code == 0, bringup.stderr
    assert "run        --raycluster (launch.mode: bringup)" in bringup.stdout
    assert "warning" not in bringup.stderr


def test_run_warns_about_an_unstaged_recipe_in_the_flow_it_takes(cli):
    reads = "infra.launch.entrypoint=python3 driver.py --config nrl_k8s_run.yaml"
    rayjob = cli("run", "--dry-run", *LONG_LIVED, reads)
    assert rayjob.exit_code == 0, rayjob.stderr
    assert rayjob.stderr.startswith(
        "warning: launch.entrypoint reads nrl_k8s_run.yaml, which only run --raycluster stages"
    )
    raycluster = cli("run", "--dry-run", "--raycluster", *LONG_LIVED, reads)
    assert raycluster.exit_code == 0, raycluster.stderr
    assert "warning" not in raycluster.stderr


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _bad_inputs(tmp_path):
    infra = (EXAMPLES / "qwen3_0.6b_dynamo.kind.infra.yaml").read_text()
    recipe = str(EXAMPLES / "qwen3_0.6b_dynamo.yaml")
    no_dgd = _write(tmp_path, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    return {
        "malformed yaml": (["check", _write(tmp_path, "r.yaml", "a: [1, 2\nb: 3\n"), "--infra", KIND[2]], "r.yaml:"),
        "missing recipe": (["check", str(tmp_path / "nope.yaml"), "--infra", KIND[2]], "nope.yaml"),
        "missing infra": (["check", recipe, "--infra", str(tmp_path / "none.yaml")], "none.yaml"),
        "bad override": (["check", *KIND, "policy..x=1"], "policy..x=1"),
        "unknown key": (["check", recipe, "--infra", _write(tmp_path, "i.yaml", infra + "colour: blue\n")], "colour"),
        "bad name": (["check", *KIND, "infra.kuberay.training.name=Bad_Name"], "Bad_Name"),
        "rayjob name too long": (["check", *KIND, f"infra.kuberay.training.name={'x' * 48}"], "47"),
        "rayjob name not rfc 1035": (["check", *KIND, "infra.kuberay.training.name=1run"], "must start with a letter"),
        "emoji code stays text": (["check", *KIND, "infra.kuberay.training.name=a:x:b"], "'a:x:b'"),
        "dgd file without dgd": (["check", *KIND, f"infra.dynamo.serving.manifest={no_dgd}"], "pod.yaml"),
        "unknown target": (["cluster", "up", "--dry-run", "-t", "dynamo.nope", *KIND], "dynamo.serving"),
        "bad output format": (["check", *KIND, "-o", str(tmp_path / "x.txt")], "x.txt"),
    }




@pytest.mark.parametrize(
    "case",
    [
        "malformed yaml",
        "missing recipe",
        "missing infra",
        "bad override",
        "unknown key",
        "bad name",
        "rayjob name too long",
        "rayjob name not rfc 1035",
        "emoji code stays text",
        "dgd file without dgd",
        "unknown target",
        "bad output format",
    ],
)
def test_bad_input_is_one_line_exit_2(cli, tmp_path, case):
    argv, mention = _bad_inputs(tmp_path)[case]
    result = cli(*argv)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and mention in result.stderr, lines
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


SUBPROCESS = {
    "check ok": (["check", *KIND], 0, "DYNAMO"),
    "dry run": (["run", "--dry-run", *KIND], 0, "kind: RayJob"),
    "missing file": (["check", "/nonexistent/recipe.yaml"], 2, None),
}


@pytest.mark.parametrize("argv,code,stdout", SUBPROCESS.values(), ids=SUBPROCESS)
def test_installed_console_script(argv, code, stdout, tmp_path):
    result = subprocess.run([EXE, *argv], cwd=ROOT, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "tester"})
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    if stdout:
        assert stdout in result.stdout
    else:
        assert result.stderr.startswith("error: ")


def test_emoji_codes_in_messages_print_as_they_are(cli, tmp_path):
    result = cli("check", str(tmp_path / "recipe:smile:.yaml"))
    assert result.exit_code == 2 and "recipe:smile:.yaml" in result.stderr, result.stderr


CORPUS = ROOT / "tests" / "cli" / "data" / "bad_inputs"  # a pair whose roles run no daemon


@pytest.mark.parametrize("argv", [
    ["run", "--raycluster", "--dry-run", "--code-source", "image", "--code-path", "/opt/code"],
    ["cluster", "up", "--dry-run"],
    ["cluster", "up", "--target", "kuberay.training", "--dry-run"],
], ids=["run --raycluster --code-source image", "cluster up", "cluster up --target kuberay.training"])
def test_nothing_uploaded_needs_no_git_checkout(argv, tmp_path):
    """Where nothing uploads code, no repository root is looked up: outside a git checkout the
    manifests print, as upstream's do."""
    result = subprocess.run([EXE, *argv, str(CORPUS / "recipe.yaml"), "--infra", str(CORPUS / "infra.yaml")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NRL_K8S_USER": "tester"})
    assert result.returncode == 0, result.stderr
    assert "kind: RayCluster" in result.stdout
