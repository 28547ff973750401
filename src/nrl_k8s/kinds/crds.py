"""The operator CRDs a run needs and what it needs of them: pure checks over CRD objects.

A run needs RayJob and RayCluster served at ``ray.io/v1`` and the DGD CRD serving every version
its DGD manifests are written in (``nvidia.com/v1alpha1`` and/or ``v1beta1``). ``run --parallel``
also needs, in the RayJob CRD's ``v1`` schema, ``spec.preRunningDeadlineSeconds`` (KubeRay >= 1.6)
and a ``spec.submissionMode`` that admits ``InteractiveMode``. Upstream KubeRay declares
``submissionMode`` a free string, so an enum is checked only where a CRD has one; a schema that
does not list ``spec``'s fields (open, ``x-kubernetes-preserve-unknown-fields``) verifies nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rayjob import INTERACTIVE_MODE as PARALLEL_MODE  # the submissionMode of a parallel run's RayJob

RAYJOB = "rayjobs.ray.io"
RAYCLUSTER = "rayclusters.ray.io"
DGD = "dynamographdeployments.nvidia.com"
_BY_KIND = {"RayJob": RAYJOB, "RayCluster": RAYCLUSTER, "DynamoGraphDeployment": DGD}

HELMFILE_HINT = (
    "install or upgrade the operators: helmfile -f helm/helmfile.yaml.gotmpl -e prod apply (-e kind on kind)"
)
UPGRADE = {
    RAYJOB: "KubeRay >= 1.6",
    RAYCLUSTER: "KubeRay >= 1.6",
    DGD: "dynamo-platform >= 1.2 serves v1alpha1 and v1beta1",
}


def needed_versions(manifests: list[dict]) -> dict[str, set[str]]:
    """CRD name -> the versions ``manifests`` are written in; RayJob and RayCluster always at ``v1``."""
    needed = {RAYJOB: {"v1"}, RAYCLUSTER: {"v1"}}
    for manifest in manifests:
        crd = _BY_KIND.get(manifest.get("kind") or "")
        if crd is not None:
            needed.setdefault(crd, set()).add(manifest["apiVersion"].rpartition("/")[2])
    return needed


def served_versions(crd: dict) -> list[str]:
    """The versions a CustomResourceDefinition object serves."""
    return [v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]


@dataclass(frozen=True)
class Gaps:
    """What a CRD schema lacks (``missing``) and what it leaves open (``unverified``)."""

    missing: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()


def parallel_gaps(rayjob_crd: dict) -> Gaps:
    """What ``run --parallel`` needs that the RayJob CRD's ``v1`` schema lacks."""
    version: dict = next((v for v in (rayjob_crd.get("spec") or {}).get("versions") or [] if v.get("name") == "v1"), {})
    root = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
    spec = (root.get("properties") or {}).get("spec") or {}
    fields = spec.get("properties") or {}
    open_schema = not fields or bool(spec.get("x-kubernetes-preserve-unknown-fields"))
    missing: list[str] = []
    unverified: list[str] = []
    absent = (
        unverified if open_schema else missing
    )  # an open schema accepts the field; nothing says the operator knows it
    if "preRunningDeadlineSeconds" not in fields:
        absent.append("spec.preRunningDeadlineSeconds")
    mode = fields.get("submissionMode")
    if mode is None:
        absent.append(f"spec.submissionMode {PARALLEL_MODE}")
    elif PARALLEL_MODE not in mode.get("enum", [PARALLEL_MODE]):
        missing.append(f"spec.submissionMode {PARALLEL_MODE}")
    return Gaps(tuple(missing), tuple(unverified))
