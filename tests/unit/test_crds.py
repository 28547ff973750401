"""crds: which CRD versions a run needs, and what --parallel needs of the RayJob CRD's schema."""

from __future__ import annotations

import pytest

from nrl_k8s.kinds import crds
from nrl_k8s.kinds.crds import Gaps, needed_versions, parallel_gaps, served_versions

PRE_RUNNING = "spec.preRunningDeadlineSeconds"
INTERACTIVE = "spec.submissionMode InteractiveMode"
KUBERAY_MODE = {"type": "string", "default": "K8sJobMode"}  # as every KubeRay release declares it: no enum


def rayjob_crd(spec: dict | None, *, version: str = "v1", root: dict | None = None) -> dict:
    """A RayJob CRD whose ``version`` has ``spec`` as its spec schema (None: no spec schema at all)."""
    schema = root if root is not None else {"type": "object", "properties": {} if spec is None else {"spec": spec}}
    return {"spec": {"versions": [{"name": version, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def spec_with(**fields) -> dict:
    return {"type": "object", "properties": fields}


PARALLEL_CASES = {
    "kuberay-1.7": (
        rayjob_crd(spec_with(submissionMode=KUBERAY_MODE, preRunningDeadlineSeconds={"type": "integer"})),
        Gaps(),
    ),
    "kuberay-1.5": (
        rayjob_crd(spec_with(submissionMode=KUBERAY_MODE, entrypoint={"type": "string"})),
        Gaps(missing=(PRE_RUNNING,)),
    ),
    "enum-with-interactive": (
        rayjob_crd(
            spec_with(
                submissionMode={"type": "string", "enum": ["HTTPMode", "InteractiveMode"]},
                preRunningDeadlineSeconds={"type": "integer"},
            )
        ),
        Gaps(),
    ),
    "enum-without-interactive": (
        rayjob_crd(
            spec_with(
                submissionMode={"type": "string", "enum": ["K8sJobMode", "HTTPMode"]},
                preRunningDeadlineSeconds={"type": "integer"},
            )
        ),
        Gaps(missing=(INTERACTIVE,)),
    ),
    "no-submission-mode": (
        rayjob_crd(spec_with(entrypoint={"type": "string"})),
        Gaps(missing=(PRE_RUNNING, INTERACTIVE)),
    ),
    "open-root": (
        rayjob_crd(None, root={"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        Gaps(unverified=(PRE_RUNNING, INTERACTIVE)),
    ),
    "open-spec": (
        rayjob_crd({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        Gaps(unverified=(PRE_RUNNING, INTERACTIVE)),
    ),
    "open-spec-listing-some": (
        rayjob_crd({**spec_with(submissionMode=KUBERAY_MODE), "x-kubernetes-preserve-unknown-fields": True}),
        Gaps(unverified=(PRE_RUNNING,)),
    ),
    "open-spec-enum-still-binds": (
        rayjob_crd(
            {
                **spec_with(submissionMode={"type": "string", "enum": ["HTTPMode"]}),
                "x-kubernetes-preserve-unknown-fields": True,
            }
        ),
        Gaps(missing=(INTERACTIVE,), unverified=(PRE_RUNNING,)),
    ),
    "no-schema": (
        {"spec": {"versions": [{"name": "v1", "served": True}]}},
        Gaps(unverified=(PRE_RUNNING, INTERACTIVE)),
    ),
    "only-v1alpha1": (
        rayjob_crd(spec_with(submissionMode=KUBERAY_MODE, preRunningDeadlineSeconds={}), version="v1alpha1"),
        Gaps(unverified=(PRE_RUNNING, INTERACTIVE)),
    ),
}


@pytest.mark.parametrize(("crd", "gaps"), PARALLEL_CASES.values(), ids=PARALLEL_CASES.keys())
def test_parallel_gaps(crd, gaps):
    assert parallel_gaps(crd) == gaps


SERVED_CASES = {
    "one": ([{"name": "v1", "served": True}], ["v1"]),
    "both-dgd-versions": (
        [{"name": "v1alpha1", "served": True}, {"name": "v1beta1", "served": True, "storage": True}],
        ["v1alpha1", "v1beta1"],
    ),
    "unserved-version-left-out": (
        [{"name": "v1alpha1", "served": False}, {"name": "v1beta1", "served": True}],
        ["v1beta1"],
    ),
    "none": ([], []),
}


@pytest.mark.parametrize(("versions", "served"), SERVED_CASES.values(), ids=SERVED_CASES.keys())
def test_served_versions(versions, served):
    assert served_versions({"spec": {"versions": versions}}) == served


def dgd(version: str) -> dict:
    return {"apiVersion": f"nvidia.com/{version}", "kind": "DynamoGraphDeployment", "metadata": {"name": "x"}}


NEEDED_CASES = {
    "no-dgd": ([{"apiVersion": "ray.io/v1", "kind": "RayJob"}, {"apiVersion": "v1", "kind": "Secret"}],
               {crds.RAYJOB: {"v1"}, crds.RAYCLUSTER: {"v1"}}),
    "nothing-still-needs-kuberay": ([], {crds.RAYJOB: {"v1"}, crds.RAYCLUSTER: {"v1"}}),
    "v1alpha1-dgd": ([dgd("v1alpha1")], {crds.RAYJOB: {"v1"}, crds.RAYCLUSTER: {"v1"}, crds.DGD: {"v1alpha1"}}),
    "both-dgd-versions": ([dgd("v1beta1"), dgd("v1alpha1"), dgd("v1beta1")],
                          {crds.RAYJOB: {"v1"}, crds.RAYCLUSTER: {"v1"}, crds.DGD: {"v1alpha1", "v1beta1"}}),
}


@pytest.mark.parametrize(("manifests", "needed"), NEEDED_CASES.values(), ids=NEEDED_CASES.keys())
def test_needed_versions(manifests, needed):
    assert needed_versions(manifests) == needed
