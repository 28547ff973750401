"""Infra fields that are accepted but have no effect (``check`` lists them).

Derived from what the renderers consume: ``kinds.raycluster``, ``kinds.rayjob``,
``kinds.dgd``, ``kinds.deployment`` and ``recipe`` (driver entrypoint, launch env), and from
what the long-lived flow (`run --raycluster`) reads: every role's ``daemon``, the Deployments'
health checks, the driver's code source (which ``workspace.kind`` rayUpload / lustre sets when
``launch.codeSource`` is not) and how it starts (``workflow``: ``launch.runMode``,
``submit.submitter``, ``submit.execTmpDir`` with the exec submitter), and from the flow `run`
takes (``launch.mode`` rayjob / bringup).
A field counts as set when present and neither None nor an empty mapping (a block of nulls, as
the earlier launcher's defaults file writes them, sets nothing).
"""

from __future__ import annotations

from nrl_k8s.config.schema import CODE_SOURCE_OF_WORKSPACE
from nrl_k8s.kinds.raycluster import ROLES

from . import workflow

# Keys of blocks no implemented flow reads (reported per set key).
_UNUSED_SUBMIT = ("kind", "portForward", "devPod", "localDashboardPort")
_UNUSED_LAUNCH = ("attach", "peerWatcher")
_FLOW_MODES = ("rayjob", "bringup")  # launch.mode values `run` reads (plan.default_flow)
# Storage blocks: which fields each volume kind reads.
_STORAGE_FIELDS = {
    "workspace": ("kind", "pvcName", "mountPath", "hostPath", "size", "repoSubdir"),
    "hf_cache": ("kind", "pvcName", "mountPath"),
    "checkpoints": ("kind", "pvcName", "mountPath"),
}
_READ_BY_KIND = {
    "pvc": {"kind", "pvcName", "mountPath"},
    "lustre": {"kind", "pvcName", "mountPath"},
    "hostPath": {"kind", "mountPath", "hostPath"},
    "emptyDir": {"kind", "mountPath", "size"},
}


def unused_fields(infra: dict) -> list[str]:
    """Dotted paths of fields set in ``infra`` that change nothing in what nrl-k8s renders or runs."""
    out: list[str] = []
    submit = infra.get("submit") or {}
    out += [f"submit.{k}" for k in _UNUSED_SUBMIT if _set(submit.get(k))]
    if _set(submit.get("execTmpDir")) and workflow.submitter(infra) != "exec":
        out.append("submit.execTmpDir")
    launch = infra.get("launch") or {}
    if _set(launch.get("mode")) and launch["mode"] not in _FLOW_MODES:
        out.append("launch.mode")
    out += [f"launch.{k}" for k in _UNUSED_LAUNCH if _set(launch.get(k))]
    # upload (the default) packages rayUploadPaths; image and lustre start the driver in codePath.
    source = workflow.code_source(infra)
    ignored = "codePath" if source == "upload" else "rayUploadPaths"
    if _set(launch.get(ignored)):
        out.append(f"launch.{ignored}")

    for field, known in _STORAGE_FIELDS.items():
        cfg = infra.get(field) or {}
        read = _READ_BY_KIND.get(cfg.get("kind") or "", set())
        out += [f"{field}.{k}" for k in known if _set(cfg.get(k)) and k not in read and k != "kind"]
    # workspace.kind auto mounts nothing and picks nothing; rayUpload stands for launch.codeSource
    # upload, so it has no effect when launch.codeSource says otherwise.
    kind = (infra.get("workspace") or {}).get("kind")
    if kind == "auto" or (kind == "rayUpload" and source != CODE_SOURCE_OF_WORKSPACE[kind]):
        out.append("workspace.kind")

    scheduler = infra.get("scheduler") or {}
    if _set(scheduler.get("queue")) and (scheduler.get("kind") or "default") == "default":
        out.append("scheduler.queue")

    kuberay = infra.get("kuberay") or {}
    resources = infra.get("resources") or {}
    for role in ROLES:
        entry = kuberay.get(role) or {}
        out += _timeout_without_url(entry.get("daemon"), f"kuberay.{role}.daemon")
        groups = (entry.get("spec") or {}).get("workerGroupSpecs") or []
        size = entry.get("segmentSize")
        if size is not None and not any((g.get("replicas") or 0) > size for g in groups):
            out.append(f"kuberay.{role}.segmentSize")
        sizing = resources.get(role) or {}
        if not entry:
            out += [f"resources.{role}.{part}" for part in ("head", "worker") if _set(sizing.get(part))]
        elif _set(sizing.get("worker")) and not groups:
            out.append(f"resources.{role}.worker")

    for key, entry in (infra.get("deployments") or {}).items():
        out += _timeout_without_url(entry, f"deployments.{key}")
    return out


def _timeout_without_url(block: dict | None, prefix: str) -> list[str]:
    """``healthCheckTimeoutS`` bounds the wait for ``healthCheckUrl``: without a URL nothing waits."""
    block = block or {}
    unused = _set(block.get("healthCheckTimeoutS")) and block.get("healthCheckUrl") is None
    return [f"{prefix}.healthCheckTimeoutS"] if unused else []


def _set(value) -> bool:
    return value is not None and value != {}
