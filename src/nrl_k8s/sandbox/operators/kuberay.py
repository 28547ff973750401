"""Simulated KubeRay operator: RayJob and RayCluster reconcilers over the one real Ray head.

RayCluster (from a RayJob or applied directly) → head pod + one pod per worker replica
(× ``numOfHosts``), the head Service (``<cluster>-head-svc``, or the name
``headGroupSpec.headService`` sets) whose dashboard port (8265) is backed by the REAL Ray
dashboard (seen through ``head_proxy``: only this cluster's jobs and packages) and whose
other head container ports reach ``127.0.0.1:<same port>``, pods Ready
after a delay, then ``state: ready`` with ``HeadPodReady`` and ``RayClusterProvisioned``.
Several RayClusters at once all share the one Ray head.

RayJob, step by step as KubeRay's RayJob controller: New → Initializing (``rayClusterName``,
``startTime``, ``jobId`` = ``spec.jobId`` or generated — not in InteractiveMode), a
controller-owned RayCluster (or the one ``clusterSelector`` names, never deleted); once it is
ready ``dashboardURL`` and then:

* K8sJobMode/HTTPMode/SidecarMode → Running (with KubeRay's Service ``<rayjob>-head-svc`` to
  the cluster's head, owned by the RayJob — one of that name selecting another cluster is taken
  over, ``UpdatedService`` — unless ``clusterSelector``), and — like KubeRay in HTTPMode —
  ``GET /api/jobs/<jobId>`` and ``POST /api/jobs/`` on 404, the driver given what its head
  container would give it (``driver_env``); no submitter pod is simulated;
* InteractiveMode → Waiting: nothing is submitted; once ``spec.jobId`` is set (a patch),
  ``status.jobId`` = it and Running (its ``<rayjob>-head-svc`` too), tracking whatever job was
  submitted under that id.

The job's status is mirrored from the dashboard about once a second (the dashboard has no
watch; real KubeRay polls too), with ``rayJobInfo``; SUCCEEDED or STOPPED → Complete, FAILED →
Failed (``AppFailed``), ``endTime``, the counters ``succeeded`` (a Complete SUCCEEDED job) and
``failed``; ``shutdownAfterJobFinishes`` deletes the cluster after ``ttlSecondsAfterFinished``.
``suspend: true`` (Initializing, Running) → Suspending: the cluster is deleted (its Ray job
stops), the status reset → Suspended; ``suspend: false`` → New again, on a new cluster with a
new job id. Every reconcile first runs KubeRay's validation (``kuberay_rules``): a broken rule
ends the RayJob ``ValidationFailed`` (reason ``ValidationFailed``, KubeRay's message), and a
RayCluster breaking one is left alone. ``spec.managedBy`` naming another controller: ignored.
Generated names (cluster, job id, pods) end in 5 characters of apimachinery's ``rand.String``.
Events, with KubeRay's reasons and messages: on the RayJob (``rayjob-controller``)
``CreatedRayCluster``, ``DeletedRayCluster``, ``CreatedService``, ``UpdatedService``, ``InvalidRayJob{Metadata,Spec,Status}``,
``RayClusterNotFound``; on the RayCluster (``raycluster-controller``) ``CreatedService``,
``CreatedHeadPod``, ``CreatedWorkerPod``, ``InvalidRayCluster{Metadata,Spec}``; pods get the
scheduler's and kubelet's (``pods``). ``activeDeadlineSeconds``
(Initializing, Running) fails it with ``DeadlineExceeded``, ``preRunningDeadlineSeconds``
(Initializing, Waiting) with ``PreRunningDeadlineExceeded`` — timers, with KubeRay's messages —
and stops its Ray job. A RayJob deleted while its job runs stops that Ray job; a RayCluster
deleted stops every running Ray job submitted for it (its RayJobs', and those submitted through
its head Service, daemons included).
Faults: ``miss-driver-submission`` (never submit, but keep mirroring a job that someone else
submits under the same id); ``delay=rayjob:S`` (a new RayJob is first reconciled S seconds after
its creation), ``delay=raycluster:S`` (pods Ready and the cluster ``ready`` after S seconds);
``old-rayjob-crd`` (KubeRay 1.5: ``preRunningDeadlineSeconds`` is ignored). Not simulated:
retries (``backoffLimit``), ``deletionStrategy`` (validated, not applied), autoscaling, a
RayCluster deleted under a Running RayJob being created again (here its Ray job stops, so the
RayJob ends Complete with STOPPED).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time

import httpx
import kubernetes
import yaml

from nrl_k8s.redact import redact_text
from nrl_k8s.sandbox.driver_env import DriverEnv
from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.head_proxy import cluster_submission, job_cluster, scoped

from . import pods
from .kuberay_rules import raycluster_problem, rayjob_problem
from .base import ENDPOINTS_ANNOTATION, MERGE_PATCH, Controller, Resource, Timing, controller_ref, now, parse_time, suffix

log = logging.getLogger("nrl_k8s.sandbox.operators.kuberay")

RAYJOB = Resource("ray.io", "v1", "rayjobs")
RAYCLUSTER = Resource("ray.io", "v1", "rayclusters")
POD_READY_S = 0.5
POLL_S = 1.0
JOB_CONTROLLER, CLUSTER_CONTROLLER = "rayjob-controller", "raycluster-controller"  # their event sources
REQUEUE_S = 3.0  # KubeRay's RayJobDefaultRequeueDuration
INTERACTIVE = "InteractiveMode"
TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")
HEAD_PORTS = (("dashboard", 8265), ("client", 10001), ("gcs-server", 6379))
DEFAULT_CONTAINER = {"name": "ray", "image": "rayproject/ray"}


def _pod_spec(template: dict) -> dict:
    spec = dict(template.get("spec") or {})
    spec.setdefault("containers", [dict(DEFAULT_CONTAINER)])
    return spec


def _worker_count(group: dict) -> int:
    replicas = group.get("replicas", group.get("minReplicas", 0)) or 0
    return int(replicas) * int(group.get("numOfHosts", 1) or 1)


def submission_body(spec: dict, job_id: str) -> dict:
    """The ``POST /api/jobs/`` body KubeRay sends for a RayJob spec."""
    body: dict = {"entrypoint": spec.get("entrypoint", ""), "submission_id": job_id}
    if spec.get("runtimeEnvYAML"):
        body["runtime_env"] = yaml.safe_load(spec["runtimeEnvYAML"])
    if spec.get("metadata"):
        body["metadata"] = {str(k): str(v) for k, v in spec["metadata"].items()}
    if spec.get("entrypointNumCpus") is not None:
        body["entrypoint_num_cpus"] = spec["entrypointNumCpus"]
    if spec.get("entrypointNumGpus") is not None:
        body["entrypoint_num_gpus"] = spec["entrypointNumGpus"]
    if spec.get("entrypointResources"):
        body["entrypoint_resources"] = json.loads(spec["entrypointResources"])
    return body


def head_service_name(cluster: dict) -> str:
    """KubeRay's ``GenerateHeadServiceName``: ``headGroupSpec.headService.metadata.name`` when
    the spec sets it, else ``<cluster>-head-svc``."""
    head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("headService") or {}
    return (head.get("metadata") or {}).get("name") or f"{cluster['metadata']['name']}-head-svc"


class KubeRay(Controller):
    name = "kuberay"

    def __init__(self, api: kubernetes.client.ApiClient, timing: Timing, faults: Faults, dashboard_url: str,
                 drivers: DriverEnv, *, pre_running_deadline: bool = True):
        super().__init__(api, timing, faults)
        self.dashboard_url = dashboard_url
        self.drivers = drivers
        self.pre_running_deadline = pre_running_deadline  # False: KubeRay 1.5, which has no preRunningDeadlineSeconds
        self.dashboard = httpx.Client(base_url=dashboard_url, timeout=10.0, trust_env=False)
        self._seen: set[str] = set()
        self._job_services: set[tuple[str, str]] = set()  # (RayJob uid, RayCluster) whose head-svc is in place

    def watches(self):
        return [(RAYJOB, self._on_rayjob), (RAYCLUSTER, self._on_raycluster)]

    # -- events ----------------------------------------------------------------------------
    def _on_rayjob(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._rayjob_deleted(obj))
        else:
            self.enqueue("sync_rayjob", meta["namespace"], meta["name"])

    def _rayjob_deleted(self, job: dict) -> None:
        self._job_services = {k for k in self._job_services if k[0] != job["metadata"]["uid"]}
        self._stop_ray_job(job)

    def _on_raycluster(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self._seen.discard(meta["uid"])
            self.call(lambda: self._cluster_deleted(meta["namespace"], meta["name"], meta["uid"]))
            return
        self.enqueue("sync_raycluster", meta["namespace"], meta["name"])
        self.enqueue("wake_rayjobs", meta["namespace"], meta["name"])

    def wake_rayjobs(self, namespace: str, cluster: str) -> None:
        """A RayCluster changed: reconcile the RayJobs that run on it."""
        for job in self._rayjobs_using(namespace, cluster):
            self.enqueue("sync_rayjob", namespace, job["metadata"]["name"])

    def _rayjobs_using(self, namespace: str, cluster: str) -> list[dict]:
        listing = self.custom.list_namespaced_custom_object(RAYJOB.group, RAYJOB.version, namespace, RAYJOB.plural)
        return [j for j in listing["items"] if (j.get("status") or {}).get("rayClusterName") == cluster]

    def _cluster_deleted(self, namespace: str, cluster: str, uid: str) -> None:
        """Stop the cluster's Ray jobs: its RayJobs', and those submitted through its head Service."""
        for job in self._rayjobs_using(namespace, cluster):
            self._stop_ray_job(job)
            self.enqueue("sync_rayjob", namespace, job["metadata"]["name"])  # e.g. one Suspending
        response = self.dashboard.get("/api/jobs/")
        response.raise_for_status()
        for info in response.json():
            if job_cluster(info) == uid and info.get("status") not in TERMINAL_JOB and info.get("submission_id"):
                stopped = self.dashboard.post(f"/api/jobs/{info['submission_id']}/stop")
                log.info("stopped Ray job %s of deleted RayCluster %s/%s: HTTP %s",
                         info["submission_id"], namespace, cluster, stopped.status_code)  # fmt: skip
        self.drivers.forget(namespace, cluster)

    def _ray_id(self, job: dict) -> str:
        """The id the shared head stores a RayJob's ``jobId`` under: scoped to its RayCluster, as a
        submission through that cluster's head Service is (``head_proxy``), so both see one job."""
        status = job.get("status") or {}
        name = status.get("rayClusterName")
        cluster = self.get(RAYCLUSTER, job["metadata"]["namespace"], name) if name else None
        if cluster is not None:
            return scoped(cluster["metadata"]["uid"], status["jobId"])
        response = self.dashboard.get("/api/jobs/")  # the cluster is gone: find what was stored for it
        response.raise_for_status()
        ids = [j.get("submission_id") or "" for j in response.json()]
        return next((i for i in ids if i.endswith(f"--{status['jobId']}")), status["jobId"])

    def _stop_ray_job(self, job: dict) -> None:
        status = job.get("status") or {}
        if status.get("jobId") and status.get("jobStatus") not in TERMINAL_JOB:
            response = self.dashboard.post(f"/api/jobs/{self._ray_id(job)}/stop")
            log.info("stopped Ray job %s: HTTP %s", status["jobId"], response.status_code)

    # -- RayCluster ------------------------------------------------------------------------
    def sync_raycluster(self, namespace: str, name: str) -> None:
        cluster = self.get(RAYCLUSTER, namespace, name)
        if cluster is None or cluster["metadata"]["uid"] in self._seen:
            return
        problem = raycluster_problem(cluster)
        if problem is not None:  # KubeRay leaves it alone (checked again when it changes)
            self.record(cluster, "Warning", *problem, component=CLUSTER_CONTROLLER, action="Validate")
            return
        # Also for clusters restored from --state: their Service must point at this Ray head.
        self._ensure_head_service(cluster)
        if (cluster.get("status") or {}).get("state") != "ready":
            self._provision(cluster)
        self._seen.add(cluster["metadata"]["uid"])

    def _provision(self, cluster: dict) -> None:
        """Create the missing pods, mark the cluster provisioning, and time the pods' readiness."""
        namespace, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        spec = cluster.get("spec") or {}
        existing = self.list_pods(namespace, f"ray.io/cluster={name}")
        have: dict[str, int] = {}
        for pod in existing:
            group = pod["metadata"].get("labels", {}).get("ray.io/group", "")
            have[group] = have.get(group, 0) + 1
        head = spec.get("headGroupSpec") or {}
        wanted = [("headgroup", "head", head, 1)]
        wanted += [
            (g.get("groupName", "workergroup"), "worker", g, _worker_count(g)) for g in spec.get("workerGroupSpecs") or []
        ]
        for group, node_type, group_spec, count in wanted:
            for _ in range(count - have.get(group, 0)):
                self._create_ray_pod(cluster, group, node_type, group_spec)
        desired = sum(count for _, node_type, _, count in wanted if node_type == "worker")
        self.patch_status(RAYCLUSTER, namespace, name, {
            "desiredWorkerReplicas": desired,
            "readyWorkerReplicas": 0,
            "availableWorkerReplicas": 0,
            "conditions": [
                _condition("HeadPodReady", "False", "HeadPodNotReady", "the head pod is not ready yet"),
                _condition("RayClusterProvisioned", "False", "RayClusterPodsProvisioning", "pods are starting"),
            ],
        })  # fmt: skip
        self.later(self.timing.ready("raycluster", POD_READY_S), "ready_raycluster", namespace, name)

    def _create_ray_pod(self, cluster: dict, group: str, node_type: str, group_spec: dict) -> None:
        meta = cluster["metadata"]
        template = group_spec.get("template") or {}
        template_meta = template.get("metadata") or {}
        name = f"{meta['name']}-head-{suffix()}" if node_type == "head" else f"{meta['name']}-{group}-worker-{suffix()}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {
                    **(template_meta.get("labels") or {}),
                    "ray.io/cluster": meta["name"],
                    "ray.io/node-type": node_type,
                    "ray.io/group": group,
                    "ray.io/is-ray-node": "yes",
                    "app.kubernetes.io/created-by": "kuberay-operator",
                    "app.kubernetes.io/name": "kuberay",
                },
                "annotations": template_meta.get("annotations") or {},
                "ownerReferences": [controller_ref(cluster)],
            },
            "spec": _pod_spec(template),
        }
        if pods.create(self, pod) is not None:
            kind = "Head" if node_type == "head" else "Worker"
            self.record(cluster, "Normal", f"Created{kind}Pod", f"Created {kind.lower()} Pod {meta['namespace']}/{name}",
                        component=CLUSTER_CONTROLLER, action="Create")  # fmt: skip

    def _ensure_head_service(self, cluster: dict) -> None:
        """The head Service: the default Ray ports plus every port the head container declares
        (unnamed ones as ``PORT-port``, as KubeRay names them); the dashboard port is the real
        dashboard, any other declared port ``127.0.0.1:<same port>`` (where a daemon the user
        runs on the head would listen)."""
        meta = cluster["metadata"]
        endpoints = {"8265": self.dashboard_url, "dashboard": self.dashboard_url}
        ports = [{"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in HEAD_PORTS]
        template = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
        head = (_pod_spec(template)["containers"] or [{}])[0]
        for declared in head.get("ports") or []:
            number = declared.get("containerPort")
            if not number or any(number == p["port"] for p in ports):
                continue
            name = declared.get("name") or f"{number}-port"
            ports.append({"name": name, "port": number, "targetPort": number, "protocol": declared.get("protocol", "TCP")})
            endpoints[str(number)] = endpoints[name] = f"http://127.0.0.1:{number}"
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": head_service_name(cluster),
                "namespace": meta["namespace"],
                "labels": {"ray.io/cluster": meta["name"], "ray.io/node-type": "head"},
                "annotations": {ENDPOINTS_ANNOTATION: json.dumps(endpoints)},
                "ownerReferences": [controller_ref(cluster)],
            },
            "spec": {
                "type": "ClusterIP",
                "selector": {"ray.io/cluster": meta["name"], "ray.io/node-type": "head"},
                "ports": ports,
            },
        }
        if self.ensure_service(service):
            self.record(cluster, "Normal", "CreatedService", f"Created service {meta['namespace']}/{head_service_name(cluster)}",
                        component=CLUSTER_CONTROLLER, action="Create")  # fmt: skip

    def ready_raycluster(self, namespace: str, name: str) -> None:
        cluster = self.get(RAYCLUSTER, namespace, name)
        if cluster is None:
            return
        head_pod = ""
        workers = 0
        for pod in self.list_pods(namespace, f"ray.io/cluster={name}"):
            if (pod.get("status") or {}).get("phase") != "Running":
                pods.start(self, pod)
            if pod["metadata"]["labels"].get("ray.io/node-type") == "head":
                head_pod = pod["metadata"]["name"]
            else:
                workers += 1
        self.patch_status(RAYCLUSTER, namespace, name, {
            "state": "ready",
            "reason": "",
            "head": {"podName": head_pod, "podIP": "127.0.0.1", "serviceName": head_service_name(cluster), "serviceIP": "127.0.0.1"},
            "endpoints": {n: str(p) for n, p in HEAD_PORTS},
            "desiredWorkerReplicas": workers,
            "readyWorkerReplicas": workers,
            "availableWorkerReplicas": workers,
            "observedGeneration": cluster["metadata"].get("generation", 1),
            "lastUpdateTime": now(),
            "conditions": [
                _condition("HeadPodReady", "True", "HeadPodRunningAndReady", ""),
                _condition("RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime", "all Ray pods are ready"),
            ],
        })  # fmt: skip

    # -- RayJob ----------------------------------------------------------------------------
    def sync_rayjob(self, namespace: str, name: str) -> None:
        """One reconcile of the RayJob state machine, step by step as KubeRay's controller."""
        job = self.get(RAYJOB, namespace, name)
        if job is None or (job.get("spec") or {}).get("managedBy") not in (None, "ray.io/kuberay-operator"):
            return
        problem = rayjob_problem(job, _mode(job.get("spec") or {}), pre_running_deadline=self.pre_running_deadline)
        if problem is not None:
            self._validation_failed(job, *problem)
            return
        phase = (job.get("status") or {}).get("jobDeploymentStatus") or ""
        if phase in ("Complete", "Failed"):
            self._shutdown(job)
            return
        step = {"": self._new, "Initializing": self._initializing, "Waiting": self._waiting, "Running": self._running,
                "Suspending": self._suspending, "Suspended": self._suspended}.get(phase)
        if step is not None:
            step(job)
            self._arm_deadlines(job)

    def _validation_failed(self, job: dict, reason: str, message: str) -> None:
        """KubeRay checks every RayJob on every reconcile: a broken rule ends it ``ValidationFailed``."""
        meta, status = job["metadata"], job.get("status") or {}
        self.record(job, "Warning", reason, f"{meta['namespace']}/{meta['name']}: {message}", component=JOB_CONTROLLER,
                    action="Validate")  # fmt: skip
        update = {"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed", "message": message}
        if any(status.get(k) != v for k, v in update.items()):
            self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _new(self, job: dict) -> None:
        """New → Initializing: ``jobId`` (not in InteractiveMode), ``rayClusterName``, ``startTime``."""
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        due = parse_time(meta["creationTimestamp"]) + self.timing.ready("rayjob", 0.0)
        if time.time() < due:  # the ``delay`` fault: the operator has not got to it yet
            self.later(due - time.time(), "sync_rayjob", meta["namespace"], meta["name"])
            return
        update = {
            "rayClusterName": status.get("rayClusterName")
            or (spec.get("clusterSelector") or {}).get("ray.io/cluster")
            or f"{meta['name']}-{suffix()}",
            "jobDeploymentStatus": "Initializing",
            "jobStatus": "",
            "startTime": now(),
            "succeeded": int(status.get("succeeded") or 0),
            "failed": int(status.get("failed") or 0),
        }
        if _mode(spec) != INTERACTIVE:
            update["jobId"] = status.get("jobId") or spec.get("jobId") or f"{meta['name']}-{suffix()}"
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _initializing(self, job: dict) -> None:
        """Suspend; deadlines; the RayCluster (created unless ``clusterSelector`` names one); once
        it is ready its dashboard URL, then Waiting (InteractiveMode) or Running."""
        meta, spec, status = job["metadata"], job.get("spec") or {}, job["status"]
        if self._suspend_requested(job) or self._deadline_failure(job, ("activeDeadlineSeconds", "preRunningDeadlineSeconds")):
            return
        cluster = self._cluster_for(job)
        if cluster is None:
            return
        ready = (cluster.get("status") or {}).get("state") == "ready"
        if not status.get("dashboardURL") and not ready:
            if status.get("rayClusterStatus") != cluster.get("status"):
                self.patch_status(RAYJOB, meta["namespace"], meta["name"], {"rayClusterStatus": cluster.get("status") or {}})
            return
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], {
            "jobDeploymentStatus": "Waiting" if _mode(spec) == INTERACTIVE else "Running",
            "dashboardURL": status.get("dashboardURL") or f"{head_service_name(cluster)}.{meta['namespace']}.svc.cluster.local:8265",
            "rayClusterStatus": cluster.get("status") or {},
        })  # fmt: skip

    def _cluster_for(self, job: dict) -> dict | None:
        """The RayJob's RayCluster, created from ``rayClusterSpec`` when missing (None: a
        ``clusterSelector`` names one that does not exist; retried)."""
        meta, spec, name = job["metadata"], job.get("spec") or {}, job["status"]["rayClusterName"]
        cluster = self.get(RAYCLUSTER, meta["namespace"], name)
        if cluster is not None:
            return cluster
        if (spec.get("clusterSelector") or {}).get("ray.io/cluster"):
            self.record(job, "Warning", "RayClusterNotFound", f"RayCluster {meta['namespace']}/{name} set in the "
                        "clusterSelector is not found. It must be created manually", component=JOB_CONTROLLER, action="Validate")
            self.later(REQUEUE_S, "sync_rayjob", meta["namespace"], meta["name"])
            return None
        cluster = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {
                    **(meta.get("labels") or {}),
                    "ray.io/originated-from-crd": "RayJob",
                    "ray.io/originated-from-cr-name": meta["name"],
                    "ray.io/job-submission-mode": _mode(spec),
                },
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [controller_ref(job)],
            },
            "spec": spec.get("rayClusterSpec") or {},
        }
        try:
            created = self.custom.create_namespaced_custom_object(
                RAYCLUSTER.group, RAYCLUSTER.version, meta["namespace"], RAYCLUSTER.plural, cluster
            )
        except kubernetes.client.exceptions.ApiException as err:
            if err.status != 409:
                raise
            return self.get(RAYCLUSTER, meta["namespace"], name)
        self.record(job, "Normal", "CreatedRayCluster", f"Created RayCluster {meta['namespace']}/{name}",
                    component=JOB_CONTROLLER, action="Create")  # fmt: skip
        return created

    def _waiting(self, job: dict) -> None:
        """InteractiveMode: nothing is submitted; once ``spec.jobId`` is set, track that job."""
        meta, spec = job["metadata"], job.get("spec") or {}
        if self._deadline_failure(job, ("preRunningDeadlineSeconds",)) or not spec.get("jobId"):
            return
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], {"jobId": spec["jobId"], "jobDeploymentStatus": "Running"})

    def _running(self, job: dict) -> None:
        meta = job["metadata"]
        if self._suspend_requested(job) or self._deadline_failure(job, ("activeDeadlineSeconds",)):
            return
        self._ensure_job_service(job)
        self._mirror(job)
        self.later(POLL_S, "sync_rayjob", meta["namespace"], meta["name"])

    def _ensure_job_service(self, job: dict) -> None:
        """KubeRay's Service ``<rayjob>-head-svc`` (owned by the RayJob) to its cluster's head, not
        with ``clusterSelector``; a Service of that name selecting another cluster is taken over,
        as KubeRay updates it. Checked once per RayJob and cluster."""
        meta, status = job["metadata"], job["status"]
        namespace, name, cluster = meta["namespace"], f"{meta['name']}-head-svc", status["rayClusterName"]
        if ((job.get("spec") or {}).get("clusterSelector") or {}) or (meta["uid"], cluster) in self._job_services:
            return
        existing = self.read_core(self.core.read_namespaced_service, namespace, name)
        live = self.get(RAYCLUSTER, namespace, cluster)
        head = live and self.read_core(self.core.read_namespaced_service, namespace, head_service_name(live))
        if head is None:
            return  # the cluster's own is not there yet: the next poll
        if ((existing or {}).get("spec") or {}).get("selector", {}).get("ray.io/cluster") != cluster:
            labels = {"ray.io/originated-from-cr-name": meta["name"], "ray.io/originated-from-crd": "RayJob",
                      "ray.io/node-type": "head", "ray.io/identifier": f"{meta['name']}-head"}
            annotations = {ENDPOINTS_ANNOTATION: (head["metadata"].get("annotations") or {}).get(ENDPOINTS_ANNOTATION)}
            spec = {"type": "ClusterIP", "selector": head["spec"]["selector"], "ports": head["spec"]["ports"]}
            if existing is None:
                self.core.create_namespaced_service(namespace, {
                    "apiVersion": "v1", "kind": "Service", "spec": spec, "metadata": {
                        "name": name, "namespace": namespace, "labels": labels, "annotations": annotations,
                        "ownerReferences": [controller_ref(job)]}}, _preload_content=False)  # fmt: skip
                self.record(job, "Normal", "CreatedService", f"Created the service {namespace}/{name}",
                            component=JOB_CONTROLLER, action="Create")  # fmt: skip
            else:
                patch = {"metadata": {"annotations": annotations}, "spec": spec}
                self.core.patch_namespaced_service(name, namespace, patch, _content_type=MERGE_PATCH, _preload_content=False)
                self.record(job, "Normal", "UpdatedService", f"Updated the service {namespace}/{name}",
                            component=JOB_CONTROLLER, action="Update")  # fmt: skip
        self._job_services.add((meta["uid"], cluster))

    def _suspend_requested(self, job: dict) -> bool:
        """``spec.suspend`` in Initializing or Running: → Suspending (True)."""
        if not (job.get("spec") or {}).get("suspend"):
            return False
        self.patch_status(RAYJOB, job["metadata"]["namespace"], job["metadata"]["name"], {"jobDeploymentStatus": "Suspending"})
        return True

    def _suspending(self, job: dict) -> None:
        """Delete the RayCluster (its Ray job stops with it), then reset the status → Suspended,
        whatever ``suspend`` says by now (KubeRay keeps the operation atomic)."""
        meta = job["metadata"]
        self._stop_ray_job(job)  # what deleting the cluster does to its job; here the head is shared
        if not self._delete_cluster(job):
            return  # its DELETED event wakes this RayJob again
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], {
            "jobDeploymentStatus": "Suspended", "jobStatus": "", "rayClusterName": "", "dashboardURL": "", "jobId": "",
            "reason": "", "message": "", "rayClusterStatus": None, "rayJobInfo": None,
        })  # fmt: skip

    def _suspended(self, job: dict) -> None:
        """``suspend`` false again: back to New, which creates a new RayCluster and job id."""
        if not (job.get("spec") or {}).get("suspend"):
            self.patch_status(RAYJOB, job["metadata"]["namespace"], job["metadata"]["name"],
                              {"jobDeploymentStatus": "", "jobStatus": ""})  # fmt: skip

    def _deadline_failure(self, job: dict, fields: tuple[str, ...]) -> bool:
        """Fail the RayJob when one of ``fields`` (a number of seconds since ``startTime``) has
        passed, with KubeRay's reason and message; True when it did."""
        spec, start = job.get("spec") or {}, job["status"]["startTime"]
        for field in fields:
            if not self._deadline_known(field) or spec.get(field) is None or time.time() < parse_time(start) + float(spec[field]):
                continue
            self._stop_ray_job(job)  # real KubeRay leaves that to the cluster's deletion; here the head is shared
            reason = "DeadlineExceeded" if field == "activeDeadlineSeconds" else "PreRunningDeadlineExceeded"
            name = field[0].upper() + field[1:]
            self._finish(job, "Failed", reason=reason, message=(
                f"The RayJob has passed the {field}. StartTime: {_go_time(start)}. {name}: {int(spec[field])}"))
            return True
        return False

    def _deadline_known(self, field: str) -> bool:
        return field != "preRunningDeadlineSeconds" or self.pre_running_deadline

    def _arm_deadlines(self, job: dict) -> None:
        """A timer for each deadline still ahead (the earliest pending one per RayJob wins; every
        reconcile arms the next)."""
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        if not status.get("startTime"):
            return
        for field in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
            if spec.get(field) is not None and self._deadline_known(field):
                due = parse_time(status["startTime"]) + float(spec[field])
                if due > time.time():
                    self.later(due - time.time(), "sync_rayjob", meta["namespace"], meta["name"])

    def _mirror(self, job: dict) -> None:
        """Read the Ray job; on 404 submit it (not in InteractiveMode, nor with the fault
        ``miss-driver-submission``); copy its status."""
        meta, status = job["metadata"], job["status"]
        response = self.dashboard.get(f"/api/jobs/{self._ray_id(job)}")
        if response.status_code == 404:
            if _mode(job.get("spec") or {}) != INTERACTIVE and self.faults.get("miss-driver-submission") is None:
                self._submit(job)
            return
        response.raise_for_status()
        info = response.json()
        ray_status, message = info.get("status", ""), info.get("message") or ""
        if ray_status == "FAILED":
            self._finish(job, "Failed", job_status=ray_status, reason="AppFailed", message=message, info=info)
        elif ray_status in TERMINAL_JOB:  # SUCCEEDED, and STOPPED too: KubeRay ends both Complete
            self._finish(job, "Complete", job_status=ray_status, message=message, info=info)
        elif ray_status != status.get("jobStatus"):
            update = {"jobStatus": ray_status, "message": message, "rayJobInfo": _job_info(info)}
            self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _submit(self, job: dict) -> None:
        meta, spec, job_id = job["metadata"], job.get("spec") or {}, job["status"]["jobId"]
        body = submission_body(spec, job_id)
        cluster = self.get(RAYCLUSTER, meta["namespace"], job["status"]["rayClusterName"])
        if cluster is not None:
            body = cluster_submission(self.drivers, body, cluster, lambda name: self.read_core(self.core.read_namespaced_secret, meta["namespace"], name))
            body["submission_id"] = scoped(cluster["metadata"]["uid"], job_id)
        response = self.dashboard.post("/api/jobs/", json=body)
        text = redact_text(response.text)  # Ray may echo the runtime_env, which holds the container env
        if response.is_success or "already exists" in text:
            log.info("submitted %s/%s as Ray job %s", meta["namespace"], meta["name"], job_id)
        elif response.status_code < 500:
            self._finish(job, "Failed", reason="SubmissionFailed", message=text[:500])
        else:
            log.warning("submitting %s failed (HTTP %s), retrying: %s", job_id, response.status_code, text[:200])

    def _finish(self, job: dict, phase: str, *, job_status: str | None = None, reason: str = "", message: str = "",
                info: dict | None = None) -> None:
        """A terminal ``phase``, ``endTime``, and the counters: ``succeeded`` counts a Complete
        SUCCEEDED job only, ``failed`` every Failed."""
        meta, status = job["metadata"], job.get("status") or {}
        final = job_status if job_status is not None else status.get("jobStatus")
        update = {
            "jobDeploymentStatus": phase,
            "endTime": now(),
            "reason": reason,
            "message": message,
            "succeeded": int(status.get("succeeded") or 0) + (phase == "Complete" and final == "SUCCEEDED"),
            "failed": int(status.get("failed") or 0) + (phase == "Failed"),
        }
        if job_status is not None:
            update["jobStatus"] = job_status
        if info is not None:
            update["rayJobInfo"] = _job_info(info)
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _shutdown(self, job: dict) -> None:
        """After Complete/Failed, ``shutdownAfterJobFinishes``: delete its own RayCluster once
        ``ttlSecondsAfterFinished`` has passed."""
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        if not spec.get("shutdownAfterJobFinishes") or (spec.get("clusterSelector") or {}).get("ray.io/cluster"):
            return
        due = parse_time(status.get("endTime") or now()) + float(spec.get("ttlSecondsAfterFinished") or 0)
        if time.time() < due:
            self.later(due - time.time(), "sync_rayjob", meta["namespace"], meta["name"])
            return
        self._delete_cluster(job)

    def _delete_cluster(self, job: dict) -> bool:
        """Delete the RayJob's own RayCluster (never a selected one); True once it is gone."""
        meta, status = job["metadata"], job.get("status") or {}
        name = status.get("rayClusterName")
        if not name or ((job.get("spec") or {}).get("clusterSelector") or {}).get("ray.io/cluster"):
            return True
        try:
            self.custom.delete_namespaced_custom_object(
                RAYCLUSTER.group, RAYCLUSTER.version, meta["namespace"], RAYCLUSTER.plural, name,
                propagation_policy="Background",
            )  # fmt: skip
        except kubernetes.client.exceptions.ApiException as err:
            if err.status != 404:
                raise
            return True
        self.record(job, "Normal", "DeletedRayCluster", f"Deleted cluster {meta['namespace']}/{name}",
                    component=JOB_CONTROLLER, action="Delete")  # fmt: skip
        return self.get(RAYCLUSTER, meta["namespace"], name) is None


def _mode(spec: dict) -> str:
    return spec.get("submissionMode") or "K8sJobMode"  # the CRD's default


def _job_info(info: dict) -> dict:
    """``status.rayJobInfo``: the Ray job's start and end (milliseconds on the dashboard)."""
    return {key: dt.datetime.fromtimestamp(info[field] / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            for key, field in (("startTime", "start_time"), ("endTime", "end_time")) if info.get(field)}


def _go_time(stamp: str) -> str:
    """An RFC 3339 timestamp as Go prints a ``metav1.Time`` (``%v``): ``2026-01-02 15:04:05 +0000 UTC``."""
    return stamp.replace("T", " ").replace("Z", " +0000 UTC")


def _condition(kind: str, status: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}
