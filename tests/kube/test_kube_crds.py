"""What `check` reads of the installed operator CRDs, and the run's DGD version preflight, on the sandbox.

The session sandbox serves the current KubeRay CRDs. The rest runs on one sandbox of this module's
own, started without the DGD CRD and with KubeRay 1.5's RayJob CRD (``no-dgd-crd``,
``old-rayjob-crd``): each DGD case installs the DGD CRD serving the versions it needs and removes it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from conftest import FAST, delete_namespace, make_namespace
from sandbox_harness import DEADLINE_S, Sandbox, eventually, separate_sandbox

from nrl_k8s.errors import NotFoundError
from nrl_k8s.flows.steps import BringUp
from nrl_k8s.kinds import crds
from nrl_k8s.kinds.core import CRD
from nrl_k8s.kube.client import Kube
from nrl_k8s.ops.probe import crd_probes
from nrl_k8s_sandbox.controlplane.crds import dgd_crd as sandbox_dgd_crd

PARALLEL = "RayJob fields needed for --parallel"


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
    """A sandbox without the DGD CRD and with KubeRay 1.5's RayJob CRD."""
    with separate_sandbox(tmp_path_factory.mktemp("crds") / "sandbox", "no-dgd-crd", "old-rayjob-crd") as box:
        yield box


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
        old.delete(CRD, crds.DGD)
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
