"""Kueue in the sandbox, on request (``sandbox up --kueue SETTINGS``): the real manager.

Built like the other binaries (``binaries``: ``sigs.k8s.io/kueue`` ``cmd/kueue``, its CRDs and
webhook manifests from the same module) and started last by ``serve.kueue``, admin credentials,
on loopback: its webhooks are the module's own, for the integrations it runs (batch Jobs, RayJobs,
RayClusters) and its own kinds, called by the API server at ``https://127.0.0.1:PORT`` with a
certificate of the sandbox's CA (Kueue's internal certificates name a Service). Then one
ResourceFlavor, a ClusterQueue ``sandbox`` for every namespace, and a LocalQueue ``sandbox`` in
``default``; a test makes its own LocalQueue (``local_queue``) in its namespace.

SETTINGS is ``queued`` (Kueue manages the jobs that name a queue) or ``all``
(``manageJobsWithoutQueueName: true``: it suspends every Job, RayJob and RayCluster without a
``kueue.x-k8s.io/queue-name`` label until it admits it, which with no queue is never), then
``,RESOURCE=QUANTITY`` for each nominal quota of the ClusterQueue to set (default: the
sandbox's whole capacity).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from . import nodes

NAMESPACE = "kueue-system"
QUEUE = "sandbox"  # the ResourceFlavor's, the ClusterQueue's and default's LocalQueue's name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
API = "kueue.x-k8s.io/v1beta2"
CRDS = ("admissionchecks", "clusterqueues", "cohorts", "localqueues", "resourceflavors", "workloadpriorityclasses",
        "workloads", "topologies", "provisioningrequestconfigs", "multikueueclusters", "multikueueconfigs")
WEBHOOKS = "manifests.yaml"  # the module's config/components/webhook/manifests.yaml
FILES = frozenset([*(f"kueue.x-k8s.io_{name}.yaml" for name in CRDS), WEBHOOKS])  # kept out of every sandbox
FRAMEWORKS = ("batch/job", "ray.io/rayjob", "ray.io/raycluster")
_SERVED = {("batch", "jobs"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters")}  # Kueue's own group besides
#: The default sandbox's capacity: what the ClusterQueue admits unless told otherwise (``parse``'s
#: ``capacity``, that of the ``--nodes`` pools when they are given).
QUOTA = nodes.capacity(nodes.DEFAULT)


@dataclass(frozen=True)
class Settings:
    all_jobs: bool  # manageJobsWithoutQueueName
    quota: dict[str, str] = field(default_factory=dict)


def parse(value: str, capacity: dict[str, str] = QUOTA) -> Settings:
    """``queued|all[,RESOURCE=QUANTITY...]``, the quota ``capacity`` unless given; ValueError naming what is wrong."""
    mode, *quotas = [part.strip() for part in value.split(",")]
    if mode not in ("queued", "all"):
        raise ValueError(f"kueue: {mode!r} is neither 'queued' nor 'all' (manageJobsWithoutQueueName: true)")
    quota = dict(capacity)
    for item in quotas:
        name, sep, amount = item.partition("=")
        if not (sep and name.strip() and amount.strip()):
            raise ValueError(f"kueue: {item!r} is not RESOURCE=QUANTITY (e.g. nvidia.com/gpu=8)")
        quota[name.strip()] = amount.strip()
    return Settings(mode == "all", quota)


def configuration(settings: Settings, *, port: int, probe: int, cert_dir: str) -> dict:
    """Kueue's own configuration file: loopback ports, our certificates, no leader election, no metrics
    (its metrics certificate is read from ``cert_dir``: ``binaries.PATCHES``)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"}, "metrics": {"bindAddress": "0"},
        "webhook": {"port": port, "host": "127.0.0.1", "certDir": cert_dir},
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": settings.all_jobs, "integrations": {"frameworks": list(FRAMEWORKS)},
    }


def argv(binary: str, config: str) -> list[str]:
    # the visibility API server would bind a fixed port (8082) and needs an APIService: not served here
    return [binary, f"--config={config}", "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"]


def webhooks(docs: list[dict], url: str, ca_pem: bytes) -> list[dict]:
    """The module's webhook configurations, for what this Kueue serves, calling ``url`` (+ each path)."""
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in docs:
        kept = []
        for hook in doc["webhooks"]:
            rule = hook["rules"][0]
            if rule["apiGroups"][0] == "kueue.x-k8s.io" or (rule["apiGroups"][0], rule["resources"][0]) in _SERVED:
                path = hook["clientConfig"]["service"]["path"]
                kept.append({**hook, "clientConfig": {"url": url + path, "caBundle": bundle}})
        out.append({**doc, "metadata": {"name": f"kueue-{doc['metadata']['name']}"}, "webhooks": kept})
    return out


def queues(settings: Settings) -> list[dict]:
    """The flavor, the ClusterQueue (every namespace) with its quota, and ``default``'s LocalQueue."""
    resources = [{"name": name, "nominalQuota": amount} for name, amount in settings.quota.items()]
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": QUEUE}, "spec": {}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": list(settings.quota), "flavors": [{"name": QUEUE, "resources": resources}]}]}},
        local_queue("default"),
    ]


def local_queue(namespace: str, name: str = QUEUE) -> dict:
    """A LocalQueue ``name`` in ``namespace`` feeding the sandbox's ClusterQueue."""
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": QUEUE}}
