"""apps/v1 Deployment from ``infra.deployments.KEY``: descriptor, pure rendering, readiness.

The pod template is patched like the RayCluster pods (``raycluster.apply_identity``):
``infra.image`` on containers without one, ``imagePullSecrets`` appended, ``serviceAccountName``
where unset. The selector and the template labels always agree: without a selector the
Deployment selects ``nrl-k8s.io/deployment: NAME``. ``render_with_service`` adds the ClusterIP
Service for the pod's container ports (``kinds.service``).
"""

from __future__ import annotations

from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid
from nrl_k8s.kinds.names import validate_name

from ..errors import InfraError
from . import service
from .base import MANAGED_BY, Kind, label_template, object_metadata, without_nulls
from .pod_schema import check_pod_template
from .raycluster import apply_identity
from .readiness import Failed, Pending, Readiness, Ready, condition, describe_condition

KIND = Kind("apps", "v1", "deployments", "Deployment")
SELECTOR_LABEL = "nrl-k8s.io/deployment"
SPEC_FIELDS = frozenset({"minReadySeconds", "paused", "progressDeadlineSeconds", "replicas", "revisionHistoryLimit",
                         "selector", "strategy", "template"})  # apps/v1 DeploymentSpec


def render(infra: dict, key: str) -> dict:
    """The Deployment for ``infra.deployments.KEY`` (name defaults to KEY)."""
    entry = (infra.get("deployments") or {}).get(key)
    if not entry:
        raise InfraError(("deployments", key), "is not set", hint="declare it with a name and a Deployment spec")
    name = validate_name(entry.get("name") or key, what="Deployment name", key=("deployments", key, "name"),
                         letter_first=True)
    labels = [MANAGED_BY, infra.get("labels"), entry.get("labels")]
    try:
        spec = _render_spec(infra, entry, name)
    except Invalid as bad:
        raise InfraError(("deployments", key, "spec", *bad.path), bad.problem, bad.hint) from None
    label_template(spec["template"], labels)
    metadata = object_metadata(
        name,
        infra["namespace"],
        labels,
        [infra.get("annotations"), entry.get("annotations")],
        key=("deployments", key),
    )
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": metadata, "spec": spec}


def pod_selector(manifest: dict) -> str:
    """Label selector for the pods of a rendered Deployment (its ``matchLabels``)."""
    labels = ((manifest.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def render_with_service(infra: dict, key: str) -> list[dict]:
    """``[Deployment]``, or ``[Deployment, Service]`` when its pod template declares container ports."""
    manifest = render(infra, key)
    return [manifest, *filter(None, [service.render_for_deployment(manifest)])]


def _render_spec(infra: dict, entry: dict, name: str) -> dict:
    spec = without_nulls(rules.expect(entry.get("spec") or {}, dict))
    rules.known_fields(spec, SPEC_FIELDS, what="a Deployment spec")
    rules.no_inline_secrets(spec)
    if spec.get("replicas") is not None:
        rules.count(spec["replicas"], ("replicas",), what="a replica count")
    selector = rules.expect(spec.setdefault("selector", {}), dict, ("selector",))
    if "matchLabels" in selector:
        rules.labels(selector["matchLabels"], ("selector", "matchLabels"))
    template = rules.expect(spec.setdefault("template", {}), dict, ("template",))
    try:
        check_pod_template(template, rendered=False)
    except Invalid as bad:
        raise bad.within(("template",)) from None
    pod = template.setdefault("spec", {})
    containers = pod.get("containers") or []
    if not containers:
        raise Invalid(("template", "spec", "containers"), "is empty", "declare at least one container")

    match = selector.get("matchLabels")
    if not match and not selector.get("matchExpressions"):
        match = selector["matchLabels"] = {SELECTOR_LABEL: name}
    template_labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for label, value in (match or {}).items():
        if template_labels.setdefault(label, value) != value:
            raise Invalid(
                ("selector", "matchLabels", label),
                f"{label}={value} does not match the pod template's {template_labels[label]}",
                "make spec.selector.matchLabels and spec.template.metadata.labels agree",
            )

    apply_identity(infra, pod)
    try:
        check_pod_template(template, rendered=True)
    except Invalid as bad:
        raise bad.within(("template",)) from None
    return spec


def readiness(obj: dict) -> Readiness:
    """Ready when every desired replica is available on the current generation."""
    status = obj.get("status") or {}
    desired = (obj.get("spec") or {}).get("replicas", 1)
    available = status.get("availableReplicas") or 0
    progressing = condition(obj, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Failed(describe_condition(progressing))
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and (observed is None or observed < generation):
        return Pending(f"waiting for generation {generation} to be observed")
    if available == desired and (status.get("updatedReplicas") or 0) >= desired:
        return Ready()
    return Pending(f"{available}/{desired} replicas available")
