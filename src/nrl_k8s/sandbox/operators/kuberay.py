"""Simulated KubeRay operator: RayJob and RayCluster reconcilers over the one real Ray head.

RayCluster (from a RayJob or applied directly) → head pod + one pod per worker replica
(× ``numOfHosts``), the head Service ``<cluster>-head-svc`` whose dashboard port (8265) is
backed by the REAL Ray dashboard (seen through ``head_proxy``: only this cluster's jobs and
packages) and whose other head container ports reach ``127.0.0.1:<same port>``, pods Ready
after a delay, then ``state: ready`` with ``HeadPodReady`` and ``RayClusterProvisioned``.
Several RayClusters at once all share the one Ray head.

RayJob → ``jobId``/``rayClusterName``/Initializing, a controller-owned RayCluster (or the one
``clusterSelector`` names, never deleted), Running once the cluster is ready, then — like
KubeRay in HTTPMode — ``GET /api/jobs/<jobId>`` and ``POST /api/jobs/`` on 404, the driver given
what its head container would give it (``driver_env``). Every
``submissionMode`` is handled as HTTPMode (no submitter pod is simulated). The job's status is
mirrored from the dashboard about once a second (the dashboard has no watch; real KubeRay polls
too); terminal → Complete/Failed, ``endTime``, ``shutdownAfterJobFinishes`` after
``ttlSecondsAfterFinished``; ``activeDeadlineSeconds`` stops the job (Failed,
``DeadlineExceeded``). A RayJob deleted while its job runs stops that Ray job; a RayCluster
deleted stops every running Ray job submitted for it (its RayJobs', and those submitted
through its head Service, daemons included).
Fault ``miss-driver-submission``: never submit, but keep mirroring a job that someone else
submits under the same id. Not simulated: suspend, retries (``backoffLimit``), autoscaling,
``preRunningDeadlineSeconds``.
"""

from __future__ import annotations

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
from .base import ENDPOINTS_ANNOTATION, Controller, Resource, Timing, controller_ref, json_body, now, parse_time, suffix

log = logging.getLogger("nrl_k8s.sandbox.operators.kuberay")

RAYJOB = Resource("ray.io", "v1", "rayjobs")
RAYCLUSTER = Resource("ray.io", "v1", "rayclusters")
POD_READY_S = 0.5
POLL_S = 1.0
TERMINAL_DEPLOYMENT = ("Complete", "Failed", "ValidationFailed")
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


class KubeRay(Controller):
    name = "kuberay"

    def __init__(self, api: kubernetes.client.ApiClient, timing: Timing, faults: Faults, dashboard_url: str,
                 drivers: DriverEnv):
        super().__init__(api, timing, faults)
        self.dashboard_url = dashboard_url
        self.drivers = drivers
        self.dashboard = httpx.Client(base_url=dashboard_url, timeout=10.0, trust_env=False)
        self._seen: set[str] = set()

    def watches(self):
        return [(RAYJOB, self._on_rayjob), (RAYCLUSTER, self._on_raycluster)]

    # -- events ----------------------------------------------------------------------------
    def _on_rayjob(self, kind: str, obj: dict) -> None:
        meta = obj["metadata"]
        if kind == "DELETED":
            self.call(lambda: self._stop_ray_job(obj))
        else:
            self.enqueue("sync_rayjob", meta["namespace"], meta["name"])

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
        if status.get("jobId") and status.get("jobDeploymentStatus") not in TERMINAL_DEPLOYMENT:
            response = self.dashboard.post(f"/api/jobs/{self._ray_id(job)}/stop")
            log.info("stopped Ray job %s: HTTP %s", status["jobId"], response.status_code)

    # -- RayCluster ------------------------------------------------------------------------
    def sync_raycluster(self, namespace: str, name: str) -> None:
        cluster = self.get(RAYCLUSTER, namespace, name)
        if cluster is None or cluster["metadata"]["uid"] in self._seen:
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
        self.later(self.timing.delay(POD_READY_S), "ready_raycluster", namespace, name)

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
        self.create_core(self.core.create_namespaced_pod, meta["namespace"], pod)
        self.patch_pod_status(meta["namespace"], name, pods.creating(pod))

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
                "name": f"{meta['name']}-head-svc",
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
        self.ensure_service(service)

    def ready_raycluster(self, namespace: str, name: str) -> None:
        cluster = self.get(RAYCLUSTER, namespace, name)
        if cluster is None:
            return
        head_pod = ""
        workers = 0
        for pod in self.list_pods(namespace, f"ray.io/cluster={name}"):
            self.patch_pod_status(namespace, pod["metadata"]["name"], pods.running(pod))
            if pod["metadata"]["labels"].get("ray.io/node-type") == "head":
                head_pod = pod["metadata"]["name"]
            else:
                workers += 1
        self.patch_status(RAYCLUSTER, namespace, name, {
            "state": "ready",
            "reason": "",
            "head": {"podName": head_pod, "podIP": "127.0.0.1", "serviceName": f"{name}-head-svc", "serviceIP": "127.0.0.1"},
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
        job = self.get(RAYJOB, namespace, name)
        if job is None:
            return
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        phase = status.get("jobDeploymentStatus") or ""
        if not phase:
            self._initialize(job)
        elif phase in TERMINAL_DEPLOYMENT:
            self._shutdown(job)
        elif self._deadline_passed(job):
            self._stop_ray_job(job)
            self._finish(job, "Failed", reason="DeadlineExceeded",
                         message=f"the RayJob ran longer than activeDeadlineSeconds={spec['activeDeadlineSeconds']}")  # fmt: skip
        elif phase == "Initializing":
            cluster = self.get(RAYCLUSTER, namespace, status["rayClusterName"])
            if cluster is not None and (cluster.get("status") or {}).get("state") == "ready":
                self.patch_status(RAYJOB, namespace, name, {
                    "jobDeploymentStatus": "Running",
                    "dashboardURL": f"{status['rayClusterName']}-head-svc.{namespace}.svc.cluster.local:8265",
                    "rayClusterStatus": cluster["status"],
                })  # fmt: skip
        elif phase == "Running":
            self._mirror(job)
            self.later(POLL_S, "sync_rayjob", namespace, name)

    def _initialize(self, job: dict) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        selected = (spec.get("clusterSelector") or {}).get("ray.io/cluster")
        cluster_name = selected or f"{meta['name']}-{suffix()}"
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], {
            "jobId": spec.get("jobId") or f"{meta['name']}-{suffix()}",
            "rayClusterName": cluster_name,
            "jobDeploymentStatus": "Initializing",
            "jobStatus": "",
            "startTime": now(),
        })  # fmt: skip
        if not selected:
            cluster = {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {
                    "name": cluster_name,
                    "namespace": meta["namespace"],
                    "labels": {
                        **(meta.get("labels") or {}),
                        "ray.io/originated-from-crd": "RayJob",
                        "ray.io/originated-from-cr-name": meta["name"],
                    },
                    "ownerReferences": [controller_ref(job)],
                },
                "spec": spec.get("rayClusterSpec") or {},
            }
            try:
                self.custom.create_namespaced_custom_object(
                    RAYCLUSTER.group, RAYCLUSTER.version, meta["namespace"], RAYCLUSTER.plural, cluster
                )
            except kubernetes.client.exceptions.ApiException as err:
                if err.status != 409:
                    raise
        if spec.get("activeDeadlineSeconds") is not None:
            self.later(float(spec["activeDeadlineSeconds"]), "sync_rayjob", meta["namespace"], meta["name"])

    def _deadline_passed(self, job: dict) -> bool:
        limit = (job.get("spec") or {}).get("activeDeadlineSeconds")
        start = (job.get("status") or {}).get("startTime")
        return limit is not None and start is not None and time.time() >= parse_time(start) + float(limit)

    def _mirror(self, job: dict) -> None:
        """Read the Ray job; submit it on 404 (unless the fault says not to); copy its status."""
        meta, status = job["metadata"], job["status"]
        response = self.dashboard.get(f"/api/jobs/{self._ray_id(job)}")
        if response.status_code == 404:
            if self.faults.get("miss-driver-submission") is None:
                self._submit(job)
            return
        response.raise_for_status()
        info = response.json()
        ray_status = info.get("status", "")
        if ray_status in TERMINAL_JOB:
            if ray_status == "SUCCEEDED":
                self._finish(job, "Complete", job_status=ray_status)
            else:
                reason = "AppFailed" if ray_status == "FAILED" else "JobStopped"
                self._finish(job, "Failed", job_status=ray_status, reason=reason, message=info.get("message") or "")
        elif ray_status != status.get("jobStatus"):
            update = {"jobStatus": ray_status, "message": info.get("message") or ""}
            self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _submit(self, job: dict) -> None:
        meta, spec, job_id = job["metadata"], job.get("spec") or {}, job["status"]["jobId"]
        body = submission_body(spec, job_id)
        cluster = self.get(RAYCLUSTER, meta["namespace"], job["status"]["rayClusterName"])
        if cluster is not None:
            body = cluster_submission(self.drivers, body, cluster, lambda name: self._read_secret(meta["namespace"], name))
            body["submission_id"] = scoped(cluster["metadata"]["uid"], job_id)
        response = self.dashboard.post("/api/jobs/", json=body)
        text = redact_text(response.text)  # Ray may echo the runtime_env, which holds the container env
        if response.is_success or "already exists" in text:
            log.info("submitted %s/%s as Ray job %s", meta["namespace"], meta["name"], job_id)
        elif response.status_code < 500:
            self._finish(job, "Failed", reason="SubmissionFailed", message=text[:500])
        else:
            log.warning("submitting %s failed (HTTP %s), retrying: %s", job_id, response.status_code, text[:200])

    def _read_secret(self, namespace: str, name: str) -> dict | None:
        try:
            return json_body(self.core.read_namespaced_secret(name, namespace, _preload_content=False))
        except kubernetes.client.exceptions.ApiException as err:
            if err.status == 404:
                return None
            raise

    def _finish(self, job: dict, phase: str, *, job_status: str | None = None, reason: str = "", message: str = "") -> None:
        meta, status = job["metadata"], job.get("status") or {}
        update = {
            "jobDeploymentStatus": phase,
            "endTime": now(),
            "reason": reason,
            "message": message,
            "succeeded": int(status.get("succeeded") or 0) + (phase == "Complete"),
            "failed": int(status.get("failed") or 0) + (phase == "Failed"),
        }
        if job_status is not None:
            update["jobStatus"] = job_status
        self.patch_status(RAYJOB, meta["namespace"], meta["name"], update)

    def _shutdown(self, job: dict) -> None:
        """After a terminal job: delete its own RayCluster once the TTL has passed."""
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        if not spec.get("shutdownAfterJobFinishes") or (spec.get("clusterSelector") or {}).get("ray.io/cluster"):
            return
        due = parse_time(status.get("endTime") or now()) + float(spec.get("ttlSecondsAfterFinished") or 0)
        if time.time() < due:
            self.later(due - time.time(), "sync_rayjob", meta["namespace"], meta["name"])
            return
        name = status.get("rayClusterName")
        if name and self.get(RAYCLUSTER, meta["namespace"], name) is not None:
            try:
                self.custom.delete_namespaced_custom_object(
                    RAYCLUSTER.group, RAYCLUSTER.version, meta["namespace"], RAYCLUSTER.plural, name,
                    propagation_policy="Background",
                )  # fmt: skip
                log.info("deleted RayCluster %s/%s after RayJob %s finished", meta["namespace"], name, meta["name"])
            except kubernetes.client.exceptions.ApiException as err:
                if err.status != 404:
                    raise


def _condition(kind: str, status: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}
