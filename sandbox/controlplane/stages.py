"""kwok's Stages: how fake nodes come up and how pods become Running and Ready.

kwok plays a Stage on every object its selector matches, after the Stage's delay. Ours:

* ``node-ready``: a node of ours gets its addresses, kubelet port, conditions and node info;
* ``pod-ready-KIND``, one per kind, each with the delay the ``delay`` fault sets for that kind
  (``raycluster`` pods, ``dgd`` pods, ``deployment`` pods and any other): Running, an IP, every
  container ready. Pods whose work really happens as a local process (``LOCAL_PODS``) are left to
  the sandbox's local kubelet (``kubelet.py``), which writes their status from the process;
* ``pod-delete``: a pod being deleted goes at once (there is no container to stop).
"""

from __future__ import annotations

from .. import faults as fault_rules

#: Pods the local kubelet runs, as kwok selector terms (jq query, values): a Ray head, a Job's
#: pod (KubeRay's submitter), a DGD's pod, a pod of an nrl-k8s Deployment. kubelet.py
#: applies the same terms, so this is the one place that says which pods are local processes.
LOCAL_PODS = (
    ('.metadata.labels["ray.io/node-type"]', ("head",)),
    (".metadata.ownerReferences.[].kind", ("Job",)),
    ('.metadata.labels["nvidia.com/dynamo-graph-deployment-name"]', None),
    ('.metadata.labels["nrl-k8s.io/deployment"]', None),  # None: the label is present
)
#: A pod labelled so is played by kwok whatever it is, a Ray head or a DGD's pod too: for tests and
#: demos that place many pods and need none of them to run (``tests/integration/test_fit_matrix.py``).
PLAYED_LABEL = "sandbox.nrl-k8s.io/played"
_PLAYED = f'.metadata.labels["{PLAYED_LABEL}"]'
#: Which kind's delay a pod that is not local waits: the first term it matches.
KINDS = (
    ("raycluster", '.metadata.labels["ray.io/cluster"]'),
    ("dgd", '.metadata.labels["nvidia.com/dynamo-graph-deployment-name"]'),
    ("deployment", None),
)


def _term(query: str, values: tuple[str, ...] | None, *, negate: bool) -> dict:
    if values is None:
        return {"key": query, "operator": "DoesNotExist" if negate else "Exists"}
    return {"key": query, "operator": "NotIn" if negate else "In", "values": list(values)}


def _stage(name: str, kind: str, terms: list[dict], delay_s: float, next_: dict) -> dict:
    spec: dict = {"resourceRef": {"apiGroup": "v1", "kind": kind}, "selector": {"matchExpressions": terms},
                  "next": next_}
    if delay_s > 0:
        spec["delay"] = {"durationMilliseconds": int(delay_s * 1000)}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


_NODE_CONDITIONS = (
    ("Ready", "True", "KubeletReady"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID"),
)
_NODE_STATUS = "{{ $now := Now }}\nconditions:\n" + "".join(
    f"- type: {kind}\n  status: \"{status}\"\n  reason: {reason}\n  message: kwok node of the nrl-k8s sandbox\n"
    "  lastHeartbeatTime: {{ $now | Quote }}\n  lastTransitionTime: {{ $now | Quote }}\n"
    for kind, status, reason in _NODE_CONDITIONS) + """\
addresses:
- type: InternalIP
  address: {{ NodeIP | Quote }}
- type: Hostname
  address: {{ NodeName | Quote }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ NodePort }}
allocatable:
{{ YAML .status.allocatable 1 }}
capacity:
{{ YAML .status.capacity 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: nrl-k8s-sandbox
  kernelVersion: nrl-k8s-sandbox
  osImage: nrl-k8s-sandbox
  machineID: {{ NodeName | Quote }}
  systemUUID: {{ NodeName | Quote }}
  bootID: {{ NodeName | Quote }}
phase: Running
"""

_POD_READY = """\
{{ $now := Now }}
conditions:
""" + "".join(f"- type: {kind}\n  status: \"True\"\n  lastTransitionTime: {{{{ $now | Quote }}}}\n"
              for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")) + """\
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  imageID: {{ printf "sandbox://%s" .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ with PodIPsWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def stages(delays: dict[str, float]) -> list[dict]:
    """Every Stage, with ``delays`` (kind -> seconds, the ``delay`` fault) applied."""
    not_local = [_term(query, values, negate=True) for query, values in LOCAL_PODS]
    waiting = [{"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
               {"key": ".status.phase", "operator": "In", "values": ["Pending"]}]
    result = [_stage("node-ready", "Node", [{"key": '.status.conditions.[] | select(.type == "Ready") | .status',
                                             "operator": "NotIn", "values": ["True"]}],
                     0, {"statusTemplate": _NODE_STATUS})]
    result.append(_stage("pod-ready-played", "Pod", [*waiting, _term(_PLAYED, None, negate=False)], 0,
                         {"statusTemplate": _POD_READY}))
    earlier = [_term(_PLAYED, None, negate=True)]
    for kind, query in KINDS:
        own = [] if query is None else [{"key": query, "operator": "Exists"}]
        result.append(_stage(f"pod-ready-{kind}", "Pod", [*waiting, *not_local, *earlier, *own],
                             delays.get(kind, 0.0), {"statusTemplate": _POD_READY}))
        if query is not None:
            earlier.append({"key": query, "operator": "DoesNotExist"})
    result.append(_stage("pod-delete", "Pod", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
                         0, {"delete": True}))
    return result


#: What ``slow=FACTOR`` adds to every pod's readiness, per unit of FACTOR above 1.
SLOW_BASE_S = 1.0


def delays_of(active: dict[str, str]) -> dict[str, float]:
    """The per-kind readiness delays the active faults ask for: ``delay``'s seconds, plus
    ``(FACTOR - 1) * SLOW_BASE_S`` for every kind while ``slow=FACTOR`` is on."""
    chosen = fault_rules.delays(active["delay"]) if active.get("delay") else {}
    extra = (float(active["slow"]) - 1) * SLOW_BASE_S if active.get("slow") else 0.0
    if extra <= 0:
        return chosen
    return {kind: chosen.get(kind, 0.0) + extra for kind in fault_rules.DELAY_KINDS}


def local_kind(pod: dict) -> str:
    """The ``delay`` kind of a pod the local kubelet runs: a Ray head's is its RayCluster's, a
    submitter Job's pod is its RayJob's, a Dynamo frontend is its DGD's, others a Deployment's."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if "ray.io/cluster" in labels and labels.get("ray.io/node-type") == "head":
        return "raycluster"
    if any(o.get("kind") == "Job" for o in (pod.get("metadata") or {}).get("ownerReferences") or []):
        return "rayjob"
    if "nvidia.com/dynamo-graph-deployment-name" in labels:
        return "dgd"
    return "deployment"
