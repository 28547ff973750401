"""What `check` reads of the installed operator CRDs, and the run's DGD version preflight, on the sandbox."""

from __future__ import annotations

import copy

import pytest

from nrl_k8s import crds
from nrl_k8s.bringup import BringUp
from nrl_k8s.errors import NotFoundError
from nrl_k8s.kinds.core import CRD
from nrl_k8s.probe import crd_probes
from nrl_k8s.sandbox.crds import DGD_CRD, RAYJOB_CRD, RAYJOB_CRD_1_5

PARALLEL = "RayJob fields needed for --parallel"


def dgd_crd(*versions: str) -> dict:
    """The sandbox's DGD CRD serving exactly ``versions`` (the last one stored)."""
    crd = copy.deepcopy(DGD_CRD)
    template = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [{**template, "name": v, "served": True, "storage": v == versions[-1]} for v in versions]
    return crd


@pytest.fixture
def installed_dgd(kube):
    """``installed_dgd(*versions)`` installs the DGD CRD serving those versions; removed after the test."""
    def install(*versions: str) -> None:
        if versions:
            kube.create(CRD, dgd_crd(*versions))

    yield install
    if kube.find(CRD, crds.DGD) is not None:
        kube.delete(CRD, crds.DGD)


@pytest.fixture
def kuberay_1_5(sandbox):
    sandbox.server.install_crd(RAYJOB_CRD_1_5)
    yield
    sandbox.server.install_crd(RAYJOB_CRD)


def test_current_kuberay_passes_with_the_parallel_fields(kube):
    rows = crd_probes(kube, crds.RAYJOB, {"v1"})
    assert [(r.name, r.ok) for r in rows] == [
        ("CRD rayjobs.ray.io (v1)", True),
        (f"{PARALLEL} (spec.preRunningDeadlineSeconds, submissionMode InteractiveMode)", True),
    ]


def test_kuberay_1_5_is_a_warning_for_parallel_only(kube, kuberay_1_5):
    served, parallel = crd_probes(kube, crds.RAYJOB, {"v1"})
    assert served.ok
    assert (parallel.name, parallel.ok, parallel.warn) == (PARALLEL, False, True)
    assert parallel.detail == "the installed RayJob CRD lacks spec.preRunningDeadlineSeconds"
    assert crds.HELMFILE_HINT in parallel.hint and "KubeRay >= 1.6" in parallel.hint


def test_no_permission_to_read_crds_falls_back_to_discovery_never_failing(kube, sandbox, kuberay_1_5):
    sandbox.server.faults.set("rbac-deny", "get:customresourcedefinitions")
    served, parallel = crd_probes(kube, crds.RAYJOB, {"v1"})
    assert served.ok and "served versions from discovery; fields not verified" in served.name
    assert parallel.ok and "not verified: no permission to read CRDs" in parallel.name
    (cluster,) = crd_probes(kube, crds.RAYCLUSTER, {"v1"})
    assert cluster.ok


def test_no_permission_to_read_crds_still_reports_a_missing_crd(kube, sandbox):
    sandbox.server.faults.set("rbac-deny", "get:customresourcedefinitions")
    (row,) = crd_probes(kube, crds.DGD, {"v1alpha1"})
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
def test_dgd_crd_serves_the_manifests_versions(kube, installed_dgd, installed, needed, ok, detail):
    installed_dgd(*installed)
    (row,) = crd_probes(kube, crds.DGD, needed)
    assert row.name == f"CRD {crds.DGD} ({', '.join(sorted(needed))})"
    assert row.ok is ok and row.warn is False
    if not ok:
        assert row.detail == detail and row.hint.startswith(crds.HELMFILE_HINT)


def dgd_manifests(*versions: str) -> dict[str, dict]:
    return {f"g{i}": {"apiVersion": f"nvidia.com/{v}", "kind": "DynamoGraphDeployment", "metadata": {"name": f"g{i}"}}
            for i, v in enumerate(versions)}


PREFLIGHT_CASES = {
    "not-installed": ((), ("v1alpha1",), "DynamoGraphDeployment nvidia.com/v1alpha1 (its CRD is not installed)"),
    "old-operator": (("v1alpha1",), ("v1beta1", "v1alpha1"), "DynamoGraphDeployment nvidia.com/v1beta1 (it serves v1alpha1)"),
    "served": (("v1alpha1", "v1beta1"), ("v1beta1", "v1alpha1"), None),
    "no-dgd-no-question": ((), (), None),
}


@pytest.mark.parametrize(("installed", "manifests", "refused"), PREFLIGHT_CASES.values(), ids=PREFLIGHT_CASES.keys())
def test_run_preflight_refuses_an_unserved_dgd_version(kube, installed_dgd, installed, manifests, refused):
    installed_dgd(*installed)
    bringup = BringUp(kube, kube.namespace, "preflight-test", lambda event: None)
    if refused is None:
        bringup.check_dgd_versions(dgd_manifests(*manifests))
        return
    with pytest.raises(NotFoundError) as caught:
        bringup.check_dgd_versions(dgd_manifests(*manifests))
    assert caught.value.message == f"the API server does not serve {refused}; nothing was created"
    assert caught.value.hint.startswith(crds.HELMFILE_HINT)
