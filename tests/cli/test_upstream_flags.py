"""Upstream's flags acting, through the installed CLI with no cluster: `check --manifests-only` and
`--format`, the hidden `validate` alias, `run --ttl`, and the bad input of `logs --source auto|daemon`
and `cluster dashboard` (refused before any request; the live half is in
tests/integration/test_upstream_flags_live.py)."""

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
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
KIND = [str(EXAMPLES / "qwen3_0.6b_dynamo.yaml"), "--infra", str(EXAMPLES / "qwen3_0.6b_dynamo.kind.infra.yaml")]
LONG_LIVED = [str(EXAMPLES / "sandbox_longlived.yaml"), "--infra", str(EXAMPLES / "sandbox_longlived.infra.yaml")]
BRINGUP = [*LONG_LIVED, "+infra.launch.mode=bringup"]  # `run` takes the long-lived flow
SECRET = "hf_not_for_stdout"


@pytest.fixture
def nrl(tmp_path):
    """The installed CLI with no kubeconfig (or ``kubeconfig``), a fixed user, HF_TOKEN set."""

    def invoke(*argv: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "NRL_K8S_USER": "tester",
               "KUBECONFIG": str(kubeconfig or tmp_path / "no-kubeconfig"), "HF_TOKEN": SECRET}
        result = subprocess.run([EXE, *argv], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert "Traceback" not in result.stderr, result.stderr
        return result

    return invoke


@pytest.fixture
def unreachable(tmp_path) -> Path:
    """A kubeconfig whose API server does not exist: a command that sent a request would fail (exit 1)."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "team"}}]}))
    return path


def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2 with one error line naming ``words`` and one hint line; nothing on stdout."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stdout, result.stderr)
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    assert all(word in lines[0] for word in words), lines


# -- check --manifests-only -------------------------------------------------------------------------

NO_DGD = [*KIND, "~infra.dynamo"]  # a RayJob run a stream can carry whole


def test_manifests_only_is_a_run_kubectl_can_apply(nrl):
    """The RayJob flow's stream is `run --dry-run --no-wait`'s objects as kubectl makes a run of them:
    the RayJob not suspended (nothing would resume it) and no start lease (nothing to hold); no
    summary, no cluster section."""
    streamed = nrl("check", *NO_DGD, "--manifests-only", "--show-secrets")
    assert streamed.returncode == 0 and streamed.stderr == "", streamed.stderr
    docs = list(yaml.safe_load_all(streamed.stdout))
    assert [d["kind"] for d in docs] == ["RayJob", "Secret"]
    dry = list(yaml.safe_load_all(nrl("run", "--dry-run", "--no-wait", *NO_DGD, "--show-secrets").stdout))
    assert [d["kind"] for d in dry] == ["Job", "RayJob", "Secret"]
    held = dry[1]["spec"].pop("suspend")
    assert held is True and docs == dry[1:]
    assert docs[0]["spec"]["ttlSecondsAfterFinished"] == 0 and docs[0]["spec"]["submissionMode"] == "HTTPMode"
    assert "CLUSTER" not in streamed.stdout and "config OK" not in streamed.stdout


def test_manifests_only_of_the_long_lived_flow_is_what_run_applies(nrl):
    streamed = nrl("check", *BRINGUP, "--manifests-only")
    assert streamed.returncode == 0, streamed.stderr
    assert streamed.stdout == nrl("run", "--dry-run", *BRINGUP).stdout
    assert [d["kind"] for d in yaml.safe_load_all(streamed.stdout)] == [
        "Deployment", "Service", "RayCluster", "ComputeDomain", "ResourceClaimTemplate", "RayCluster",
        "DynamoGraphDeployment"]


def test_manifests_only_refuses_dgds_no_stream_can_give_an_owner(nrl):
    refused(nrl("check", *KIND, "--manifests-only", "--show-secrets"),
            "qwen3_0.6b_dynamo.kind.infra.yaml: dynamo.serving", "kubectl cannot make DGD", "owned by the RayJob")


def test_manifests_only_to_a_file(nrl, tmp_path):
    target = tmp_path / "run.yaml"
    written = nrl("check", *NO_DGD, "--manifests-only", "--show-secrets", "-o", str(target))
    assert written.returncode == 0 and written.stdout == "", written.stderr
    assert f"wrote 2 manifest(s) to {target}" in written.stderr
    assert target.read_text() == nrl("check", *NO_DGD, "--manifests-only", "--show-secrets").stdout
    assert target.stat().st_mode & 0o777 == 0o600


def test_manifests_only_refuses_to_stream_redacted_secrets_unless_asked(nrl, tmp_path):
    """kubectl would apply ``<redacted>`` as the recipe and the launch.env value: refused, nothing written."""
    refused(nrl("check", *NO_DGD, "--manifests-only"), "--manifests-only", "<redacted>", "Secret ")
    refused(nrl("check", *NO_DGD, "--manifests-only", "-o", str(tmp_path / "run.yaml")), "<redacted>")
    assert not (tmp_path / "run.yaml").exists()
    shown = nrl("check", *NO_DGD, "--manifests-only", "--show-secrets")
    secret = next(d for d in yaml.safe_load_all(shown.stdout) if d["kind"] == "Secret")
    assert secret["stringData"]["HF_TOKEN"] == SECRET and "grpo:" in secret["stringData"]["recipe.yaml"]


# -- check --format ---------------------------------------------------------------------------------

def test_format_without_output_prints_only_the_bundle(nrl, tmp_path):
    as_json = nrl("check", *KIND, "--format", "json")
    as_yaml = nrl("check", *KIND, "--format", "yaml")
    assert as_json.returncode == 0 and as_yaml.returncode == 0, as_json.stderr + as_yaml.stderr
    bundle = json.loads(as_json.stdout)
    assert set(bundle) == {"infra", "recipe", "manifests", "long_lived"}
    assert yaml.safe_load(as_yaml.stdout) == bundle
    nrl("check", *KIND, "-o", str(tmp_path / "bundle.json"))
    assert json.loads((tmp_path / "bundle.json").read_text()) == bundle
    assert SECRET not in as_json.stdout


@pytest.mark.parametrize("name, fmt", [("bundle.txt", "json"), ("bundle.json", "yaml"), ("bundle.yaml", "json")])
def test_format_wins_over_the_extension(nrl, tmp_path, name, fmt):
    target = tmp_path / name
    written = nrl("check", *KIND, "-o", str(target), "--format", fmt)
    assert written.returncode == 0 and f"wrote {target}" in written.stderr, written.stderr
    assert "config OK" in written.stdout  # -o keeps the summary
    text = target.read_text()
    parsed = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    assert set(parsed) == {"infra", "recipe", "manifests", "long_lived"}
    assert text.startswith("{") == (fmt == "json")


BAD_CHECK = {
    "unknown format": (["--format", "xml"], ("--format 'xml'", "yaml or json")),
    "format is lower case": (["--format", "JSON"], ("--format 'JSON'",)),
    "json stream": (["--manifests-only", "--format", "json"], ("--format json", "--manifests-only")),
    "unknown extension": (["-o", "bundle.txt"], ("bundle.txt", "'.txt'")),
}


@pytest.mark.parametrize("flags, words", BAD_CHECK.values(), ids=BAD_CHECK)
def test_bad_check_flags_exit_2_and_write_nothing(nrl, tmp_path, flags, words):
    flags = [str(tmp_path / f) if f.startswith("bundle") else f for f in flags]
    refused(nrl("check", *KIND, *flags), *words)
    assert list(tmp_path.glob("bundle*")) == []


# -- validate ---------------------------------------------------------------------------------------

def test_validate_is_a_hidden_deprecated_check(nrl, tmp_path):
    validated, checked = nrl("validate", *KIND), nrl("check", *KIND)
    assert validated.returncode == checked.returncode == 0, validated.stderr
    assert validated.stdout == checked.stdout
    note, *rest = validated.stderr.splitlines()
    assert note.startswith("note: ") and "`validate` is deprecated" in note and "check" in note
    assert rest == checked.stderr.splitlines()
    streams = [nrl(command, *NO_DGD, "--manifests-only", "--show-secrets").stdout for command in ("validate", "check")]
    assert streams[0] == streams[1] and "kind: RayJob" in streams[0]
    bad = nrl("validate", str(tmp_path / "nope.yaml"))
    assert bad.returncode == 2 and "nope.yaml" in bad.stderr
    assert "validate" not in nrl("--help").stdout


# -- run --ttl --------------------------------------------------------------------------------------

def _ttl(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    job = next(d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "RayJob")
    return job["spec"].get("ttlSecondsAfterFinished")


def test_ttl_is_ttl_seconds(nrl):
    assert _ttl(nrl("run", "--dry-run", *KIND, "--ttl", "120")) == 120
    assert _ttl(nrl("run", "--dry-run", *KIND, "--ttl-seconds", "120")) == 120
    assert _ttl(nrl("run", "--dry-run", "--wait", *KIND, "--ttl", "0")) == 0


def test_the_default_ttl_frees_the_gpus_as_the_job_ends_or_once_run_wait_has_its_log(nrl):
    assert _ttl(nrl("run", "--dry-run", "--no-wait", *KIND)) == 0  # KubeRay frees the GPUs as the job ends
    # run --wait deletes the cluster itself once the driver's log is in; the TTL is for a run that died
    assert _ttl(nrl("run", "--dry-run", *KIND)) == 30
    assert _ttl(nrl("run", "--dry-run", "--no-shutdown", *KIND)) is None  # KubeRay keeps the cluster


@pytest.mark.parametrize("flags, words", [
    (["--raycluster", "--ttl", "60"], ("--ttl-seconds/--ttl", "--raycluster")),
    (["--no-shutdown", "--ttl", "60"], ("--ttl-seconds/--ttl", "--no-shutdown")),
], ids=["other flow", "no shutdown"])
def test_ttl_that_would_do_nothing_is_refused(nrl, flags, words):
    refused(nrl("run", "--dry-run", *KIND, *flags), *words)


# -- logs --source auto|daemon, cluster dashboard: bad input, before any request ---------------------

BAD_LOGS = {
    "unknown source": (["--source", "deamon"], ("--source deamon", "auto", "daemon")),
    "a role without a daemon": (["--source", "daemon"], ("--source daemon", "infra.kuberay.training.daemon")),
    "an undeclared role": (["--source", "auto", "--role", "generation"], ("kuberay.generation",)),
    "dashboard url for pod logs": (["--source", "head", "--dashboard-url", "http://127.0.0.1:9"], ("--dashboard-url",)),
}


@pytest.mark.parametrize("flags, words", BAD_LOGS.values(), ids=BAD_LOGS)
def test_bad_logs_source_exits_2_before_any_request(nrl, unreachable, flags, words):
    refused(nrl("logs", *LONG_LIVED, *flags, kubeconfig=unreachable), *words)


@pytest.mark.parametrize("argv, words", [
    (["cluster", "dashboard", "Bad_Name"], ("NAME", "'Bad_Name'")),
    (["cluster", "dashboard", "ok", "-n", "no spaces"], ("--namespace", "'no spaces'")),
], ids=["name", "namespace"])
def test_bad_cluster_dashboard_input_exits_2_before_any_request(nrl, unreachable, argv, words):
    refused(nrl(*argv, kubeconfig=unreachable), *words)
