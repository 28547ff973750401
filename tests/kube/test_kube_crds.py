"""What `check` reads of the installed operator CRDs, and the run's DGD version preflight, on the sandbox,
through the code and through the CLI.

The session sandbox serves the current KubeRay CRDs. The rest runs on one sandbox of this module's
own, started without the DGD CRD and with KubeRay 1.5's RayJob CRD (``no-dgd-crd``,
``old-rayjob-crd``), in the folder of a sandbox that went down before it (``sandbox up`` again):
each DGD case installs the DGD CRD serving the versions it needs and removes it. Every test of such
a sandbox is here, so that it is started once, in one worker.
"""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FAST, delete_namespace, make_namespace
from kubernetes import client
from sandbox_harness import DEADLINE_S, Sandbox, eventually, run_cli, separate_sandbox, start_sandbox, stop_sandbox

from nrl_k8s.errors import NotFoundError
from nrl_k8s.flows.steps import BringUp
from nrl_k8s.kinds import crds, dgd
from nrl_k8s.kinds.core import CRD
from nrl_k8s.kube.client import Kube
from nrl_k8s.ops.probe import crd_probes
from nrl_k8s_sandbox.controlplane.crds import dgd_crd as sandbox_dgd_crd

PARALLEL = "RayJob fields needed for --parallel"
ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
EXAMPLE_DGD = "v1alpha1"  # the apiVersion of the example's DGD manifest


def dgd_crd(*versions: str) -> dict:
    """The sandbox's DGD CRD serving exactly ``versions`` (the last one stored), without its
    conversion webhook (none runs on this sandbox)."""
    crd = copy.deepcopy(sandbox_dgd_crd("https://127.0.0.1:1/unused", b""))
    schemas = {v["name"]: v for v in crd["spec"]["versions"]}
    crd["spec"]["versions"] = [
        {**schemas[v], "name": v, "served": True, "storage": v == versions[-1]} for v in versions
    ]
    crd["spec"]["conversion"] = {"strategy": "None"}
    return crd


@pytest.fixture(scope="module")
def old_box(tmp_path_factory) -> Iterator[Sandbox]:
    """A sandbox without the DGD CRD and with KubeRay 1.5's RayJob CRD, started in the folder of
    an earlier sandbox that made ConfigMap ``from-before`` and went down (``sandbox up`` again in
    the same dir: ``test_up_again_in_the_same_dir_starts_a_fresh_cluster``)."""
    directory = tmp_path_factory.mktemp("crds") / "sandbox"
    box = start_sandbox(directory)
    try:
        box.kubectl("create", "configmap", "from-before", "-n", "default")
    finally:
        stop_sandbox(box)
    with separate_sandbox(directory, "no-dgd-crd", "old-rayjob-crd") as box:
        yield box


def test_up_again_in_the_same_dir_starts_a_fresh_cluster(old_box):
    """Certificates, ports and kwok's kubelet port are new on every `up`: nothing of an earlier
    sandbox's etcd may outlive it (its nodes would point at a kubelet port no longer served)."""
    assert old_box.kubectl("get", "configmap", "from-before", "-n", "default", check=False).returncode != 0


def test_no_dgd_crd_fault_serves_no_dgd_path(old_box):
    with old_box.api_client() as api:
        custom = client.CustomObjectsApi(api)
        with pytest.raises(client.ApiException) as missing:
            custom.list_namespaced_custom_object("nvidia.com", "v1alpha1", "default", "dynamographdeployments")
        assert missing.value.status == 404
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "nvidia.com" not in groups and "ray.io" in groups
        assert custom.list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")["items"] == []


@pytest.fixture
def old(old_box) -> Iterator[Kube]:
    """A Kube (the user's kubeconfig) on ``old_box``, in a fresh namespace."""
    name = make_namespace(old_box)
    try:
        with Kube.connect(kubeconfig=str(old_box.kubeconfig), namespace=name, tuning=FAST) as kube:
            yield kube
    finally:
        delete_namespace(old_box, name)


@pytest.fixture
def old_fault(old_box) -> Iterator:
    """``old_fault(name, value)``: a fault on ``old_box`` for the rest of the test."""
    changed: list[str] = []

    def turn_on(name: str, value: str | None = None) -> None:
        changed.append(name)
        old_box.set_fault(name, value)

    yield turn_on
    for name in reversed(list(dict.fromkeys(changed))):
        old_box.clear_fault(name)


@pytest.fixture
def installed_dgd(old):
    """``installed_dgd(*versions)`` installs the DGD CRD serving those versions (once discovery
    serves them); it is removed after the test (once discovery no longer serves it)."""
    def install(*versions: str) -> None:
        if versions:
            old.create(CRD, dgd_crd(*versions))
            eventually(lambda: set(old.served_versions(crds.DGD)) == set(versions), what="discovery serving the DGD")

    yield install
    if old.find(CRD, crds.DGD) is not None:
        # kube-apiserver deletes a CRD once its finalizer has deleted the CRD's objects; that lists
        # them, and while their storage restarts it fails and retries with a back-off that doubles
        # (a teardown once waited 274 s). No test here makes a DGD (asserted): the finalizer has
        # nothing to do, and the test takes it off, as an admin would.
        served = old.served_versions(crds.DGD) or []
        for kind in [k for k in dgd.KINDS if k.version in served]:
            assert old.snapshot(kind, all_namespaces=True)[0] == []
        old.delete(CRD, crds.DGD)
        with contextlib.suppress(NotFoundError):
            old.patch(CRD, crds.DGD, {"metadata": {"finalizers": None}})
        old.wait_gone(CRD, crds.DGD, timeout_s=DEADLINE_S)
        eventually(lambda: old.served_versions(crds.DGD) == [], what="discovery forgetting the DGD")


def test_current_kuberay_passes_with_the_parallel_fields(kube):
    rows = crd_probes(kube, crds.RAYJOB, {"v1"})
    assert [(r.name, r.ok) for r in rows] == [
        ("CRD rayjobs.ray.io (v1)", True),
        (f"{PARALLEL} (spec.preRunningDeadlineSeconds, submissionMode InteractiveMode)", True),
    ]


def test_kuberay_1_5_is_a_warning_for_parallel_only(old):
    served, parallel = crd_probes(old, crds.RAYJOB, {"v1"})
    assert served.ok
    assert (parallel.name, parallel.ok, parallel.warn) == (PARALLEL, False, True)
    assert parallel.detail == "the installed RayJob CRD lacks spec.preRunningDeadlineSeconds"
    assert crds.HELMFILE_HINT in parallel.hint and "KubeRay >= 1.6" in parallel.hint


def test_no_permission_to_read_crds_falls_back_to_discovery_never_failing(old, old_fault):
    old_fault("rbac-deny", "get:customresourcedefinitions")
    served, parallel = crd_probes(old, crds.RAYJOB, {"v1"})
    assert served.ok and "served versions from discovery; fields not verified" in served.name
    assert parallel.ok and "not verified: no permission to read CRDs" in parallel.name
    (cluster,) = crd_probes(old, crds.RAYCLUSTER, {"v1"})
    assert cluster.ok


def test_no_permission_to_read_crds_still_reports_a_missing_crd(old, old_fault):
    old_fault("rbac-deny", "get:customresourcedefinitions")
    (row,) = crd_probes(old, crds.DGD, {"v1alpha1"})
    assert (row.ok, row.detail) == (False, "not installed")


DGD_CASES = {
    "not-installed": ((), {"v1alpha1"}, False, "not installed"),
    "old-operator-v1beta1-manifest": (("v1alpha1",), {"v1beta1"}, False, "does not serve v1beta1 (serves v1alpha1)"),
    "old-operator-mixed-manifests": (("v1alpha1",), {"v1alpha1", "v1beta1"}, False,
                                     "does not serve v1beta1 (serves v1alpha1)"),
    "current-operator-both": (("v1alpha1", "v1beta1"), {"v1alpha1", "v1beta1"}, True, ""),
    "current-operator-v1alpha1-manifest": (("v1alpha1", "v1beta1"), {"v1alpha1"}, True, ""),
    "v1beta1-only": (("v1beta1",), {"v1beta1"}, True, ""),
}


@pytest.mark.parametrize(("installed", "needed", "ok", "detail"), DGD_CASES.values(), ids=DGD_CASES.keys())
def test_dgd_crd_serves_the_manifests_versions(old, installed_dgd, installed, needed, ok, detail):
    installed_dgd(*installed)
    (row,) = crd_probes(old, crds.DGD, needed)
    assert row.name == f"CRD {crds.DGD} ({', '.join(sorted(needed))})"
    assert row.ok is ok and row.warn is False
    if not ok:
        assert row.detail == detail and row.hint.startswith(crds.HELMFILE_HINT)


def dgd_manifests(*versions: str) -> dict[str, dict]:
    return {f"g{i}": {"apiVersion": f"nvidia.com/{v}", "kind": "DynamoGraphDeployment", "metadata": {"name": f"g{i}"}}
            for i, v in enumerate(versions)}


PREFLIGHT_CASES = {
    "not-installed": ((), ("v1alpha1",), "DynamoGraphDeployment nvidia.com/v1alpha1 (its CRD is not installed)"),
    "old-operator": (
        ("v1alpha1",),
        ("v1beta1", "v1alpha1"),
        "DynamoGraphDeployment nvidia.com/v1beta1 (it serves v1alpha1)",
    ),
    "served": (("v1alpha1", "v1beta1"), ("v1beta1", "v1alpha1"), None),
    "no-dgd-no-question": ((), (), None),
}


@pytest.mark.parametrize(("installed", "manifests", "refused"), PREFLIGHT_CASES.values(), ids=PREFLIGHT_CASES.keys())
def test_run_preflight_refuses_an_unserved_dgd_version(old, installed_dgd, installed, manifests, refused):
    installed_dgd(*installed)
    bringup = BringUp(old, old.namespace, "preflight-test", lambda event: None)
    if refused is None:
        bringup.check_dgd_versions(dgd_manifests(*manifests))
        return
    with pytest.raises(NotFoundError) as caught:
        bringup.check_dgd_versions(dgd_manifests(*manifests))
    assert caught.value.message == f"the API server does not serve {refused}; nothing was created"
    assert caught.value.hint.startswith(crds.HELMFILE_HINT)


def cli(box: Sandbox, *args: str) -> subprocess.CompletedProcess:
    """The installed CLI on ``box``, with the example pair (namespace ``default``)."""
    env = {**os.environ, "KUBECONFIG": str(box.kubeconfig), "NRL_K8S_USER": "it"}
    return run_cli([*args, *PAIR], env=env, timeout=DEADLINE_S)


def test_check_passes_the_parallel_fields_on_the_current_sandbox(sandbox):
    result = cli(sandbox, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "  ok   RayJob fields needed for --parallel (spec.preRunningDeadlineSeconds, submissionMode InteractiveMode)"
        in result.stdout.splitlines()
    )


def test_check_waits_for_a_loaded_api_server_that_answers_late(sandbox):
    """A server that has answered once is up: a later answer slower than the budget of a first
    contact (a loaded API server, as a slow machine's suite makes it) is waited for, as in every
    other command, not reported as a cluster that did not answer."""
    with sandbox.fault("api-latency", "get:customresourcedefinitions:8:1"):
        result = cli(sandbox, "check")
        assert "api-latency" not in sandbox.active_faults()  # check's CRD read was the one held 8 s
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  ok   CRD rayjobs.ray.io (v1)" in result.stdout.splitlines()


def test_check_warns_that_kuberay_1_5_lacks_what_parallel_needs(old_box, installed_dgd):
    installed_dgd(EXAMPLE_DGD)
    result = cli(old_box, "check")
    assert result.returncode == 0, result.stdout + result.stderr  # a warning: run --rayjob still works
    lines = result.stdout.splitlines()
    assert "  ok   CRD rayjobs.ray.io (v1)" in lines
    warning = f"  WARN {PARALLEL}  the installed RayJob CRD lacks spec.preRunningDeadlineSeconds"
    assert warning in lines
    assert lines[lines.index(warning) + 1] == (
        "         hint: install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl -e prod apply "
        "(-e kind on kind); KubeRay >= 1.6"
    )
    assert "FAIL" not in result.stdout


def test_check_reports_missing_dgd_crd(old_box):
    result = cli(old_box, "check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL CRD dynamographdeployments.nvidia.com" in result.stdout
    assert "helmfile -f helm/helmfile.yaml.gotmpl -e prod apply" in result.stdout


def test_run_refuses_a_dgd_version_the_cluster_does_not_serve_before_creating_anything(old_box):
    result = cli(old_box, "run", "--rayjob", "--no-wait")
    with old_box.api_client() as api:
        jobs = client.CustomObjectsApi(api).list_namespaced_custom_object("ray.io", "v1", "default", "rayjobs")
        secrets = client.CoreV1Api(api).list_namespaced_secret("default")
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("error: the API server does not serve DynamoGraphDeployment nvidia.com/v1alpha1 (its CRD is not "
            "installed); nothing was created") in result.stderr
    assert "hint: install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl" in result.stderr
    assert jobs["items"] == [] and secrets.items == []


def test_parallel_is_refused_when_kuberay_lacks_interactive_mode(old_box, installed_dgd):
    installed_dgd(EXAMPLE_DGD)
    result = cli(old_box, "run", "--parallel")
    assert result.returncode == 2, result.stderr
    assert "--parallel needs spec.preRunningDeadlineSeconds" in result.stderr and "nothing was created" in result.stderr
    assert "Traceback" not in result.stderr
    with old_box.api_client() as api:
        dgds = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "nvidia.com", EXAMPLE_DGD, "default", "dynamographdeployments")
    assert dgds["items"] == []
