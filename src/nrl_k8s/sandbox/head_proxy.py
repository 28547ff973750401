"""A RayCluster's dashboard as its head Service shows it: that cluster's jobs and packages only.

Every simulated RayCluster shares the one real Ray dashboard. A request through the service
proxy to the dashboard port (8265, ``dashboard``) of a Ray head Service (label
``ray.io/cluster``) goes through ``HeadDashboard``, which keeps clusters apart as separate heads
would, keyed by the RayCluster's uid (a cluster deleted and created again under the same name
starts empty, like a new head):

- ``POST /api/jobs/``: the job gets what the cluster's head container would give it
  (``driver_env``) and is tagged with the cluster in its metadata (``CLUSTER_KEY``; the
  simulated KubeRay tags the jobs it submits the same way, ``cluster_submission``);
- ``GET /api/jobs/`` lists only the cluster's jobs; ``/api/jobs/ID[/...]`` (get, logs, stop,
  delete) of another cluster's job, or of one submitted to the dashboard directly, is 404 with
  Ray's "does not exist" text;
- ``PUT /api/packages/PROTOCOL/NAME`` that succeeds records the package for the cluster;
  ``GET`` of a package not uploaded through this Service is 404 even when the shared GCS has it;
- job details returned lose the tag and the env that was added.

An upgrade request (the job log tail websocket, ``/api/jobs/ID/logs/tail``) is relayed the
same way: only to a job of this cluster, under the id Ray stores it by.

Submission ids are per cluster too: a given id is stored in Ray as ``<cluster uid>--<id>``
(``scoped``) and shown without the prefix, so a new cluster can reuse an id an old one used.

Not isolated: a job's
``working_dir`` (a package uploaded through another cluster still unpacks), the state API
(``/api/v0/...``), the dashboard UI, and what a running driver sees of the shared head.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Callable

from nrl_k8s.sandbox.driver_env import INJECTED_KEY, DriverEnv, ReadSecret
from nrl_k8s.sandbox.proxy import ServiceProxy, service_port

CLUSTER_KEY = "sandbox.nrl-k8s.io/raycluster"
CLUSTER_LABEL = "ray.io/cluster"
DASHBOARD_PORT = 8265
# (group, version, plural, namespace, name) -> the stored object or None
Lookup = Callable[[str, str, str, str, str], "dict | None"]
Reply = tuple[int, bytes, str]


def cluster_submission(drivers: DriverEnv, body: dict, cluster: dict, read_secret: ReadSecret) -> dict:
    """A ``POST /api/jobs/`` body for ``cluster``: its head container's env, and its tag."""
    body = copy.deepcopy(drivers.submission(body, cluster, read_secret))
    body["metadata"] = {**(body.get("metadata") or {}), CLUSTER_KEY: cluster["metadata"]["uid"]}
    return body


def job_cluster(job: dict) -> str | None:
    """The uid of the RayCluster a job was submitted for (None: submitted to the dashboard directly)."""
    return (job.get("metadata") or {}).get(CLUSTER_KEY) if isinstance(job, dict) else None


def scoped(uid: str, submission_id: str) -> str:
    """The id Ray stores for ``submission_id`` submitted through the cluster with ``uid``."""
    return f"{uid}--{submission_id}"


def shown(job: dict) -> dict:
    """Job details without what the sandbox added (its tag, id prefix, and the env ``driver_env`` added)."""
    job = copy.deepcopy(job)
    uid = job_cluster(job)
    if uid and str(job.get("submission_id") or "").startswith(f"{uid}--"):
        job["submission_id"] = job["submission_id"][len(uid) + 2:]
    metadata = job.get("metadata") or {}
    metadata.pop(CLUSTER_KEY, None)
    names = metadata.pop(INJECTED_KEY, None)
    if names:
        runtime_env = job.get("runtime_env") or {}
        env_vars = runtime_env.get("env_vars") or {}
        for name in names.split(","):
            env_vars.pop(name, None)
        if not env_vars:
            runtime_env.pop("env_vars", None)
    return job


def _missing(text: str) -> Reply:
    return 404, text.encode(), "text/plain; charset=utf-8"


class HeadDashboard:
    def __init__(self, drivers: DriverEnv, proxy: ServiceProxy):
        self.drivers = drivers
        self.proxy = proxy
        self._packages: dict[str, set[str]] = {}  # RayCluster uid -> "PROTOCOL/NAME" uploaded through it
        self._lock = threading.Lock()

    @staticmethod
    def serves(service: dict, target: str) -> bool:
        """True for the dashboard port of a Ray head Service (``target``: the proxy's NAME[:PORT])."""
        if CLUSTER_LABEL not in (service["metadata"].get("labels") or {}):
            return False
        port = service_port(service, target) or {}
        return port.get("port") == DASHBOARD_PORT or port.get("name") == "dashboard"

    def forward(self, service: dict, target: str, method: str, path: str, query: str, body: bytes,
                headers: dict[str, str], lookup: Lookup) -> Reply:  # fmt: skip
        meta = service["metadata"]
        cluster = lookup("ray.io", "v1", "rayclusters", meta["namespace"], meta["labels"][CLUSTER_LABEL])

        def send(send_method: str = method, send_path: str = path, send_body: bytes = body, send_query: str = query) -> Reply:
            return self.proxy.forward(service, target, send_method, send_path, send_query, send_body, headers)

        if cluster is None:
            return send()
        uid = cluster["metadata"]["uid"]
        parts = [part for part in path.split("/") if part]
        if parts[:2] == ["api", "packages"] and len(parts) == 4:
            return self._package(uid, method, "/".join(parts[2:]), send)
        if parts[:2] != ["api", "jobs"]:
            return send()
        if len(parts) == 2 and method == "POST":
            read_secret = lambda name: lookup("", "v1", "secrets", meta["namespace"], name)  # noqa: E731
            try:
                submitted = json.loads(body)
            except ValueError:
                return send()  # the dashboard answers for a malformed body
            if isinstance(submitted, dict):
                if isinstance(submitted.get("submission_id"), str):
                    submitted["submission_id"] = scoped(uid, submitted["submission_id"])
                body = json.dumps(cluster_submission(self.drivers, submitted, cluster, read_secret)).encode()
            code, payload, ctype = send(send_body=body)
            if code == 200:  # {"job_id", "submission_id"}: the id as the client gave it
                answer = json.loads(payload)
                answer["submission_id"] = str(answer.get("submission_id", "")).removeprefix(f"{uid}--")
                payload = json.dumps(answer).encode()
            return code, payload, ctype
        if len(parts) == 2:
            code, payload, ctype = send()
            if code == 200 and method == "GET":
                jobs = [shown(job) for job in json.loads(payload) if job_cluster(job) == uid]
                return code, json.dumps(jobs).encode(), ctype
            return code, payload, ctype
        stored = self._stored(uid, parts[2], send)
        if stored is None:
            return _missing(f"Job {parts[2]} does not exist")
        return self._shown(send(send_path="/" + "/".join(["api", "jobs", stored, *parts[3:]])))

    def relay(self, service: dict, target: str, path: str, query: str, headers: dict[str, str], lookup: Lookup,
              client) -> Reply | None:  # fmt: skip
        """An upgrade request (the job log tail websocket): relayed with the job's stored id when the
        job is this cluster's; a Reply (404) when it is not."""
        meta = service["metadata"]
        cluster = lookup("ray.io", "v1", "rayclusters", meta["namespace"], meta["labels"][CLUSTER_LABEL])
        parts = [part for part in path.split("/") if part]
        if cluster is not None and parts[:2] == ["api", "jobs"] and len(parts) > 2:
            def send(method: str, send_path: str, body: bytes, send_query: str) -> Reply:
                return self.proxy.forward(service, target, method, send_path, send_query, body, {})

            stored = self._stored(cluster["metadata"]["uid"], parts[2], send)
            if stored is None:
                return _missing(f"Job {parts[2]} does not exist")
            path = "/" + "/".join(["api", "jobs", stored, *parts[3:]])
        self.proxy.relay(service, target, path, query, headers, client)
        return None

    @staticmethod
    def _stored(uid: str, job_id: str, send: Callable[..., Reply]) -> str | None:
        """The id Ray stores for ``job_id`` when it is a job of the cluster with ``uid``: submitted
        through this Service (scoped), else by KubeRay or Ray under its own id; None otherwise."""
        for stored in (scoped(uid, job_id), job_id):
            code, payload, _ = send("GET", f"/api/jobs/{stored}", b"", "")
            if code == 200 and job_cluster(json.loads(payload)) == uid:
                return stored
        return None

    def _package(self, uid: str, method: str, package: str, send: Callable[..., Reply]) -> Reply:
        code, payload, ctype = send()  # a GET pins the package in Ray for a while, also before its upload
        if method == "GET":
            with self._lock:
                known = package in self._packages.get(uid, ())
            if not known:
                protocol, _, name = package.partition("/")
                return _missing(f"Package {protocol}://{name} does not exist")
        if method == "PUT" and 200 <= code < 300:
            with self._lock:
                self._packages.setdefault(uid, set()).add(package)
        return code, payload, ctype

    @staticmethod
    def _shown(reply: Reply) -> Reply:
        code, payload, ctype = reply
        try:
            data = json.loads(payload)
        except ValueError:
            return reply
        if not isinstance(data, dict) or "metadata" not in data:
            return reply
        return code, json.dumps(shown(data)).encode(), ctype
