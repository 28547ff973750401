"""KubeRay RayCluster: descriptor, pure rendering from infra, readiness.

Every pod-describing infra field is applied to the head and to every worker group pod
template; explicit values in ``kuberay.ROLE.spec`` win unless stated otherwise:

- ``image``: every container (and init container) without one;
- ``imagePullSecrets``: appended to the pod's list, skipping names already present;
- ``serviceAccount`` → ``serviceAccountName`` and ``rayVersion`` where unset;
- ``placement``: nodeSelector merged (pod keys win), tolerations appended, affinity where unset;
- ``scheduler``: kai → pod label ``kai.scheduler/queue`` + ``schedulerName: kai-scheduler``;
  kueue → label ``kueue.x-k8s.io/queue-name`` on the object metadata (see ``scheduler_labels``);
- ``networking``: hostNetwork + ``dnsPolicy: ClusterFirstWithHostNet``; socket/NCCL settings
  and ``extra_env`` as env on every container, never duplicating a name already set;
- ``resources.ROLE.head|worker``: cpu/memory/gpu set as requests and limits of the Ray
  container (the first one) — these override the spec;
- ``workspace``/``hf_cache``/``checkpoints`` (kind pvc|lustre|hostPath|emptyDir): a volume,
  mounted in every container; ``hf_cache`` also sets ``HF_HOME``; other kinds mount nothing;
- ``kuberay.ROLE.segmentSize`` N: a worker group with more than N replicas becomes
  ``<group>-seg<i>`` groups of at most N replicas, pods labelled ``nrl-k8s.io/segment``;
- head ports: KubeRay's head Service lists the head container's ports, and its defaults (the
  dashboard among them) only when the container declares none. A head container that declares
  ports therefore also gets each of ``RAY_PORTS`` it lacks (by name and number), so the
  dashboard nrl-k8s drives stays reachable.
"""

from __future__ import annotations

import copy
import math

from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid
from nrl_k8s.kinds.names import MAX_RAYCLUSTER_NAME_LEN, validate_name

from ..config.schema import MOUNTED_KINDS, PVC_KINDS, ROLES
from ..errors import InfraError
from . import dra
from .base import MANAGED_BY, Kind, k8s_str, label_template, object_metadata, str_map, without_nulls
from .pod_schema import check_pod_template
from .readiness import Failed, Pending, Readiness, Ready, condition, condition_true, describe_condition

KIND = Kind("ray.io", "v1", "rayclusters", "RayCluster")
ROLE_LABEL = "nrl-k8s.io/role"
# The metadata of the Ray jobs nrl-k8s submits to a RayCluster: what the job is ("driver" or
# "daemon") and the run that submitted a driver (the key of its objects' run-id label).
KIND_METADATA = "nrl-k8s.io/kind"
RUN_METADATA = "nrl-k8s.io/run-id"
SEGMENT_LABEL = "nrl-k8s.io/segment"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_SCHEDULER_NAME = "kai-scheduler"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
DASHBOARD_PORT = 8265
#: KubeRay's default head ports that nrl-k8s and Ray clients rely on: (name, number).
RAY_PORTS = (("gcs-server", 6379), ("dashboard", DASHBOARD_PORT), ("client", 10001))

_NET_ENV = (
    ("gloo_socket_ifname", "GLOO_SOCKET_IFNAME"),
    ("nccl_socket_ifname", "NCCL_SOCKET_IFNAME"),
    ("nccl_ib_disable", "NCCL_IB_DISABLE"),
    ("nccl_net", "NCCL_NET"),
)
# The fields of a RayCluster spec, its head group and a worker group (KubeRay v1.6.1's CRD).
SPEC_FIELDS = frozenset({
    "authOptions", "autoscalerOptions", "enableInTreeAutoscaling", "gcsFaultToleranceOptions", "headGroupSpec",
    "headServiceAnnotations", "managedBy", "rayVersion", "suspend", "upgradeStrategy", "workerGroupSpecs",
})
HEAD_FIELDS = frozenset({"enableIngress", "headService", "labels", "rayStartParams", "resources", "serviceType",
                         "template"})
WORKER_FIELDS = frozenset({
    "groupName", "idleTimeoutSeconds", "labels", "maxReplicas", "minReplicas", "numOfHosts", "rayStartParams",
    "replicas", "resources", "scaleStrategy", "suspend", "template",
})  # fmt: skip
# (infra field, volume name); hf_cache also exports HF_HOME.
_STORAGE = (("workspace", "workspace"), ("hf_cache", "hf-cache"), ("checkpoints", "checkpoints"))


def role_entry(infra: dict, role: str) -> dict:
    """``infra.kuberay.ROLE``, or ConfigError when it is not declared."""
    entry = (infra.get("kuberay") or {}).get(role)
    if not entry:
        raise InfraError(
            ("kuberay", role), "is not set", hint=f"declare kuberay.{role} with a name and a RayCluster spec"
        )
    return entry


def cluster_name(infra: dict, role: str) -> str:
    """The validated RayCluster name of ``role``."""
    return validate_name(
        role_entry(infra, role).get("name"),
        what="RayCluster name",
        key=("kuberay", role, "name"),
        max_len=MAX_RAYCLUSTER_NAME_LEN,
        letter_first=True,
    )


def head_service(cluster: str) -> str:
    """The head Service KubeRay creates for ``cluster`` (dashboard on port 8265)."""
    return f"{cluster}-head-svc"


def pod_selector(cluster: str) -> str:
    """Label selector for the pods of RayCluster ``cluster`` (head and workers)."""
    return f"ray.io/cluster={cluster}"


def custom_head_service(spec: dict) -> str | None:
    """The head Service name a RayCluster spec sets (``headGroupSpec.headService.metadata.name``), if any."""
    head = (spec.get("headGroupSpec") or {}).get("headService") or {}
    return (head.get("metadata") or {}).get("name") or None


def head_service_of(cluster: dict) -> str:
    """The head Service of a RayCluster (live or manifest): the name KubeRay reports in
    ``status.head.serviceName``, else the one its spec sets, else ``<cluster>-head-svc``."""
    reported = (((cluster.get("status") or {}).get("head") or {}).get("serviceName"))
    return reported or custom_head_service(cluster.get("spec") or {}) or head_service(cluster["metadata"]["name"])


def daemon_submission_id(infra: dict, role: str, cluster: str | None = None) -> str:
    """The Ray submission id of the role's ``daemon``: its ``submissionId``, else ``<cluster>-daemon``
    (``cluster``: the RayCluster it runs on, by default the role's own name)."""
    daemon = role_entry(infra, role).get("daemon") or {}
    return daemon.get("submissionId") or f"{cluster or cluster_name(infra, role)}-daemon"


def scheduler_labels(infra: dict) -> dict:
    """Labels the scheduler needs on the top-level object (kueue queue), else {}."""
    kind, queue = _scheduler(infra)
    return {KUEUE_QUEUE_LABEL: queue} if kind == "kueue" else {}


def pod_labels(infra: dict, role: str) -> list[dict | None]:
    """The label layers of ``role``'s pod templates, low to high. Not Kueue's queue label: on a
    pod it would make Kueue admit that pod on its own, besides the RayCluster or RayJob."""
    return [MANAGED_BY, infra.get("labels"), role_entry(infra, role).get("labels"), {ROLE_LABEL: role}]


def render(infra: dict, role: str) -> dict:
    """The full RayCluster object for ``role`` (training, generation or gym)."""
    entry = role_entry(infra, role)
    metadata = object_metadata(
        cluster_name(infra, role),
        infra["namespace"],
        [*pod_labels(infra, role), scheduler_labels(infra)],
        [infra.get("annotations"), entry.get("annotations")],
        key=("kuberay", role),
    )
    return {"apiVersion": KIND.api_version, "kind": KIND.kind, "metadata": metadata, "spec": render_spec(infra, role)}


def render_with_dra(infra: dict, role: str) -> tuple[dict, list[dict]]:
    """The RayCluster of ``role`` with its DRA claims rewritten, and the DRA objects it owns (``kinds.dra``)."""
    cluster = render(infra, role)
    return cluster, dra.render_for_pods(pod_specs(cluster["spec"]), cluster["metadata"]["name"], infra)


def foreign_images(infra: dict) -> list[tuple[str, str]]:
    """(warning, hint) per Ray pod container that keeps an image other than ``infra.image``:
    nrl-k8s fills the image only where a container has none (upstream overwrites every one)."""
    image, found = infra.get("image"), []
    for role in ROLES:
        if not image or role not in (infra.get("kuberay") or {}):
            continue
        spec = render_spec(infra, role)
        groups = [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec.get("workerGroupSpecs") or []]
        for group, piece in groups:
            for container in piece["template"]["spec"]["containers"]:
                if container.get("image", image) != image:
                    found.append((f"kuberay.{role} {group} container {container['name']} runs {container['image']}, "
                                  f"not infra.image {image}",
                                  "nrl-k8s keeps an image a container sets (upstream overwrites it): remove it there "
                                  "to run infra.image"))
    return found


def pod_specs(spec: dict) -> list[dict]:
    """The pod spec of every pod a RayCluster ``spec`` makes: the head's, then each worker
    group's once per pod (``replicas`` x ``numOfHosts``); repeats are the same dict."""
    pods = [spec["headGroupSpec"]["template"]["spec"]]
    for group in spec.get("workerGroupSpecs") or []:
        pods += [group["template"]["spec"]] * (group.get("replicas", 1) * group.get("numOfHosts", 1))
    return pods


def render_spec(infra: dict, role: str) -> dict:
    """The RayCluster ``.spec`` for ``role`` with every infra field applied (also used by RayJob).

    The fields read here are type-checked first and every pod template is checked against
    Kubernetes before and after decorating; problems name the key under ``kuberay.ROLE.spec``.
    """
    entry = role_entry(infra, role)
    try:
        spec = without_nulls(_check_spec(entry.get("spec") or {}))
        if infra.get("rayVersion"):
            spec.setdefault("rayVersion", str(infra["rayVersion"]))
        sizes = (infra.get("resources") or {}).get(role) or {}
        head = spec.setdefault("headGroupSpec", {})
        head.setdefault("rayStartParams", {})
        labels = pod_labels(infra, role)
        _decorated(infra, head, sizes.get("head"), "ray-head", ("headGroupSpec",), labels)
        _keep_ray_ports(head["template"]["spec"]["containers"][0])
        if "workerGroupSpecs" in spec:
            segment_size = _segment_size(entry, role)
            groups = []
            for index, group in enumerate(spec["workerGroupSpecs"] or []):
                for piece in _segments(group, segment_size, role, index):
                    _decorated(infra, piece, sizes.get("worker"), "ray-worker", ("workerGroupSpecs", index), labels)
                    groups.append(piece)
            spec["workerGroupSpecs"] = groups
    except Invalid as bad:
        raise InfraError(("kuberay", role, "spec", *bad.path), bad.problem, bad.hint) from None
    return spec


def _keep_ray_ports(container: dict) -> None:
    ports = container.get("ports")
    if not ports:
        return  # KubeRay serves its defaults
    names = {p.get("name") for p in ports}
    numbers = {p.get("containerPort") for p in ports}
    ports += [{"name": name, "containerPort": number} for name, number in RAY_PORTS
              if name not in names and number not in numbers]


def _check_spec(spec: object) -> dict:
    """``spec`` if its fields are KubeRay's (an unknown one would do nothing), those nrl-k8s reads
    have their CRD types, and no env anywhere (a container's, the autoscaler's) holds a secret inline."""
    spec = rules.expect(spec, dict)
    rules.known_fields(spec, SPEC_FIELDS, what="a RayCluster spec")
    if spec.get("rayVersion") is not None:
        rules.expect(spec["rayVersion"], str, ("rayVersion",))
    if "headGroupSpec" in spec:
        _check_group(spec["headGroupSpec"], ("headGroupSpec",), HEAD_FIELDS)
    groups, names = spec.get("workerGroupSpecs"), set()
    for index, group in enumerate(rules.expect(groups, list, ("workerGroupSpecs",)) if groups is not None else []):
        path = ("workerGroupSpecs", index)
        _check_group(group, path, WORKER_FIELDS)
        if group.get("groupName") is None:  # KubeRay's CRD requires it
            raise Invalid((*path, "groupName"), "is missing", "name the worker group (groupName: workers)")
        rules.dns_name(group["groupName"], (*path, "groupName"), what="group name")
        if group["groupName"] in names:
            raise Invalid((*path, "groupName"), f"{group['groupName']!r} names another worker group too",
                          "give every worker group its own groupName")
        names.add(group["groupName"])
        for field in ("replicas", "minReplicas", "maxReplicas"):
            if group.get(field) is not None:
                rules.count(group[field], (*path, field), what="a replica count")
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if low is not None and high is not None and low > high:  # KubeRay refuses the RayCluster
            raise Invalid((*path, "minReplicas"), f"{low} is more than maxReplicas {high}",
                          "make minReplicas at most maxReplicas")
    rules.no_inline_secrets(spec)
    return spec


def _check_group(group: object, path: tuple, fields: frozenset) -> None:
    group = rules.expect(group, dict, path)
    rules.known_fields(group, fields, path, what="a RayCluster " + ("head group" if fields is HEAD_FIELDS
                                                                    else "worker group"))
    params = group.get("rayStartParams")
    for key, value in (rules.expect(params, dict, (*path, "rayStartParams")) if params is not None else {}).items():
        rules.expect(
            value,
            str,
            (*path, "rayStartParams", key),
            what='a string (KubeRay passes them to `ray start`; quote numbers: "0")',
        )
    if "template" in group:
        rules.expect(group["template"], dict, (*path, "template"))


def _decorated(infra: dict, group: dict, size: dict | None, default_container: str, path: tuple,
               labels: list[dict | None]) -> None:
    """Apply the infra to ``group.template``, checking the template as written and as rendered."""
    template = group.setdefault("template", {})
    try:
        check_pod_template(template, rendered=False)
        label_template(template, labels)
        _decorate_pod(infra, template, size, default_container)
        check_pod_template(template, rendered=True)
    except Invalid as bad:
        raise bad.within((*path, "template")) from None


def provisioned(obj: dict) -> bool:
    """True once KubeRay reports ``RayClusterProvisioned`` (all pods were ready once)."""
    return condition_true(obj, "RayClusterProvisioned")


def readiness(obj: dict) -> Readiness:
    status = obj.get("status") or {}
    if provisioned(obj) or status.get("state") == "ready":
        return Ready()
    failure = condition(obj, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return Failed(describe_condition(failure))
    parts = [f"state={status.get('state') or 'unknown'}"]
    if status.get("reason"):
        parts.append(str(status["reason"]))
    head = condition(obj, "HeadPodReady")
    if head is not None and head.get("status") != "True":
        parts.append(describe_condition(head))
    return Pending("; ".join(parts))


def _scheduler(infra: dict) -> tuple[str, str | None]:
    sched = infra.get("scheduler") or {}
    kind = sched.get("kind") or "default"
    if kind not in ("default", "kai", "kueue"):
        raise InfraError(("scheduler", "kind"), f"unknown scheduler {kind!r}", hint="use default, kai or kueue")
    queue = sched.get("queue")
    if kind != "default" and not queue:
        raise InfraError(("scheduler", "queue"), f"is required with scheduler kind {kind}", hint="set scheduler.queue")
    return kind, queue


def _segment_size(entry: dict, role: str) -> int | None:
    size = entry.get("segmentSize")
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InfraError(
            ("kuberay", role, "segmentSize"), f"must be a positive integer, got {size!r}", hint="e.g. segmentSize: 8"
        )
    return size


def _segments(group: dict, size: int | None, role: str, index: int) -> list[dict]:
    replicas = group.get("replicas")
    if size is None or replicas is None or replicas <= size:
        return [group]
    base = group.get("groupName")
    if not base:
        raise Invalid(("workerGroupSpecs", index, "groupName"), "is required to split the group into segments",
                      "name the worker group")
    pieces = []
    for i in range(math.ceil(replicas / size)):
        count = min(size, replicas - i * size)
        piece = copy.deepcopy(group)
        piece["groupName"] = f"{base}-seg{i}"
        piece["replicas"] = count
        piece["maxReplicas"] = count
        if "minReplicas" in group:
            piece["minReplicas"] = min(group["minReplicas"], count)
        labels = piece.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
        labels[SEGMENT_LABEL] = str(i)
        pieces.append(piece)
    return pieces


def _decorate_pod(infra: dict, template: dict, size: dict | None, default_container: str) -> None:
    pod = template.setdefault("spec", {})
    containers = pod.setdefault("containers", [])
    if not containers:
        containers.append({"name": default_container})
    apply_identity(infra, pod)
    _apply_placement(pod, infra.get("placement") or {})
    kind, queue = _scheduler(infra)
    if kind == "kai":
        template.setdefault("metadata", {}).setdefault("labels", {}).setdefault(KAI_QUEUE_LABEL, str(queue))
        pod.setdefault("schedulerName", KAI_SCHEDULER_NAME)
    _apply_networking(pod, containers, infra.get("networking") or {})
    _apply_storage(pod, containers, infra)
    if size:
        _apply_size(containers[0], size)


def apply_identity(infra: dict, pod: dict) -> None:
    """What a pod runs as: ``infra.image`` on every container (and init container) without one,
    ``imagePullSecrets`` appended (names already present skipped), ``serviceAccountName`` where unset.

    Shared by every pod nrl-k8s renders from ``kuberay`` and ``deployments``.
    """
    if infra.get("image"):
        for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
            if not container.get("image"):
                container["image"] = infra["image"]
    _add_pull_secrets(pod, infra.get("imagePullSecrets") or [])
    if infra.get("serviceAccount"):
        pod.setdefault("serviceAccountName", infra["serviceAccount"])


def pull_secret_refs(secrets: list) -> list[dict]:
    """``imagePullSecrets`` entries (names or ``{name}``) as LocalObjectReferences."""
    return [{"name": s} if isinstance(s, str) else dict(s) for s in secrets]


def _add_pull_secrets(pod: dict, secrets: list) -> None:
    if not secrets:
        return
    current = pod.setdefault("imagePullSecrets", [])
    present = {ref.get("name") for ref in current}
    current.extend(ref for ref in pull_secret_refs(secrets) if ref["name"] not in present)


def _apply_placement(pod: dict, placement: dict) -> None:
    if placement.get("nodeSelector"):
        pod["nodeSelector"] = str_map({**placement["nodeSelector"], **(pod.get("nodeSelector") or {})})
    for toleration in placement.get("tolerations") or []:
        current = pod.setdefault("tolerations", [])
        if toleration not in current:
            current.append(copy.deepcopy(toleration))
    if placement.get("affinity"):
        pod.setdefault("affinity", copy.deepcopy(placement["affinity"]))


def _apply_networking(pod: dict, containers: list[dict], net: dict) -> None:
    if net.get("hostNetwork"):
        pod.setdefault("hostNetwork", True)
        pod.setdefault("dnsPolicy", "ClusterFirstWithHostNet")
    env = []
    for field, name in _NET_ENV:
        value = net.get(field)
        if value is None:
            continue
        if field == "nccl_ib_disable" and isinstance(value, bool):
            value = "1" if value else "0"
        env.append((name, k8s_str(value)))
    extra = net.get("extra_env") or {}
    items = extra.items() if isinstance(extra, dict) else ((e["name"], e.get("value", "")) for e in extra)
    env.extend((str(name), k8s_str(value)) for name, value in items)
    for container in containers:
        for name, value in env:
            _add_env(container, name, value)


def _add_env(container: dict, name: str, value: str) -> None:
    env = container.setdefault("env", [])
    if all(item.get("name") != name for item in env):
        env.append({"name": name, "value": value})


def storage_volume(infra: dict, field: str, volume_name: str) -> tuple[dict, str] | None:
    """(volume, mountPath) for ``infra.FIELD`` (kind pvc|lustre|hostPath|emptyDir), None when it
    mounts nothing (not set, none, rayUpload, auto).

    ``size`` (workspace only in the schema) becomes the emptyDir ``sizeLimit``.
    """
    cfg = infra.get(field) or {}
    kind = cfg.get("kind")
    if kind not in MOUNTED_KINDS:
        return None
    mount_path = cfg.get("mountPath")
    if not mount_path:
        raise InfraError((field, "mountPath"), f"is required with kind {kind}", hint=f"set {field}.mountPath")
    if kind in PVC_KINDS:
        if not cfg.get("pvcName"):
            raise InfraError((field, "pvcName"), f"is required with kind {kind}", hint=f"set {field}.pvcName")
        return {"name": volume_name, "persistentVolumeClaim": {"claimName": cfg["pvcName"]}}, mount_path
    if kind == "hostPath":
        path = cfg.get("hostPath") or mount_path
        return {"name": volume_name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}, mount_path
    empty = {"sizeLimit": str(cfg["size"])} if cfg.get("size") is not None else {}  # emptyDir
    return {"name": volume_name, "emptyDir": empty}, mount_path


def _apply_storage(pod: dict, containers: list[dict], infra: dict) -> None:
    for field, volume_name in _STORAGE:
        found = storage_volume(infra, field, volume_name)
        if found is None:
            continue
        volume, mount_path = found
        volumes = pod.setdefault("volumes", [])
        if all(v.get("name") != volume_name for v in volumes):
            volumes.append(volume)
        for container in containers:
            mounts = container.setdefault("volumeMounts", [])
            if all(m.get("mountPath") != mount_path for m in mounts):
                mounts.append({"name": volume_name, "mountPath": mount_path})
            if field == "hf_cache":
                _add_env(container, "HF_HOME", mount_path)


def _apply_size(container: dict, size: dict) -> None:
    quantities = {}
    for field, resource in (("cpu", "cpu"), ("memory", "memory"), ("gpu", dra.GPU_RESOURCE)):
        if size.get(field) is not None:
            quantities[resource] = str(size[field])
    if not quantities:
        return
    resources = container.setdefault("resources", {})
    for section in ("requests", "limits"):
        resources.setdefault(section, {}).update(quantities)
