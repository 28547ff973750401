"""helm/: the pinned operator releases meet what nrl-k8s needs, in both environments."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrl_k8s.config import safe_yaml

HELM = Path(__file__).resolve().parents[2] / "helm"
HELMFILE = HELM / "helmfile.yaml.gotmpl"
ENVIRONMENTS = ("kind", "prod")

# release -> (chart, repository URL, minimum version, why)
MINIMUMS = {
    "kuberay-operator": ("kuberay/kuberay-operator", "https://ray-project.github.io/kuberay-helm/", (1, 6, 0),
                         "RayJob spec.preRunningDeadlineSeconds and InteractiveMode (run --parallel)"),
    "dynamo-platform": ("nvidia-ai-dynamo/dynamo-platform", "https://helm.ngc.nvidia.com/nvidia/ai-dynamo", (1, 2, 0),
                        "DGDs in nvidia.com/v1beta1"),
    "kai-scheduler": ("kai-scheduler/kai-scheduler", "ghcr.io/kai-scheduler/kai-scheduler", (0, 9, 0),
                      "queues for scheduler.kind: kai"),
}


def version_tuple(text: str) -> tuple[int, ...]:
    """``1.7.0`` / ``v0.17.0`` -> (1, 7, 0); a pre-release or other suffix is refused."""
    parts = str(text).removeprefix("v").split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts), f"{text!r} is not a released X.Y.Z version"
    return tuple(int(p) for p in parts)


def environment_values(release: dict, env: str) -> list[Path]:
    return [HELM / v.replace("{{ .Environment.Name }}", env) for v in release["values"]]


@pytest.fixture(scope="module")
def helmfile() -> dict:
    environments, body = safe_yaml.load_documents(HELMFILE)  # helmfile v1: environments in their own part
    return {**environments, **body}


def test_environments_are_kind_and_prod(helmfile):
    assert tuple(helmfile["environments"]) == ENVIRONMENTS


@pytest.mark.parametrize("name", MINIMUMS)
def test_release_is_pinned_at_or_above_the_minimum(helmfile, name):
    chart, url, minimum, why = MINIMUMS[name]
    (release,) = [r for r in helmfile["releases"] if r["name"] == name]
    assert release["chart"] == chart
    repos = {r["name"]: r for r in helmfile["repositories"]}
    assert repos[chart.split("/")[0]]["url"] == url
    assert version_tuple(release["version"]) >= minimum, f"{name} {release['version']} is too old: {why}"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_values_file_exists_and_parses(helmfile, env):
    for release in helmfile["releases"]:
        files = environment_values(release, env)
        assert [f.parent.name for f in files] == ["values", env], release["name"]
        for path in files:
            assert isinstance(safe_yaml.load_file(path), dict), path


def test_dynamo_schedules_through_the_standalone_kai(helmfile):
    values = safe_yaml.load_file(HELM / "values" / "dynamo-platform.yaml")
    assert values["global"]["kai-scheduler"] == {"install": False, "enabled": True}
    needs = {r["name"]: r.get("needs", []) for r in helmfile["releases"]}
    assert "kai-scheduler/kai-scheduler" in needs["dynamo-platform"]


@pytest.mark.parametrize(("text", "parsed"), [("1.7.0", (1, 7, 0)), ("v0.17.0", (0, 17, 0)), ("1.10.2", (1, 10, 2))])
def test_version_tuple(text, parsed):
    assert version_tuple(text) == parsed


@pytest.mark.parametrize("text", ["1.7.0-rc.0", "1.7", "latest"])
def test_version_tuple_refuses_unreleased(text):
    with pytest.raises(AssertionError):
        version_tuple(text)


def test_the_kind_cluster_has_a_worker_that_is_given_the_gpus():
    config = safe_yaml.load_file(HELM / "kind-cluster.yaml")
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    workers = [node for node in config["nodes"] if node["role"] == "worker"]
    assert [m["containerPath"] for w in workers for m in w["extraMounts"]] == ["/var/run/nvidia-container-devices/all"]
