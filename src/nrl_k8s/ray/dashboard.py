"""Client for the Ray dashboard's Job REST API (``/api/jobs/``), on httpx.

Imported only by live commands. Three ways in, in the SPEC's order of preference
(:meth:`Dashboard.for_cluster`; :func:`of_raycluster` given the Kube client): an explicit
``--dashboard-url``; the head Service's in-cluster DNS name when running in a pod; the API
server's service proxy with the kubeconfig's credentials.
Also the package API (``/api/packages/gcs/``) that stores a job's working_dir zip in the GCS,
and the log tail websocket (``/api/jobs/ID/logs/tail``, ``follow_logs``) on the same connection
settings (``_websocket``).

Retries with exponential backoff cover connect errors, timeouts, 502/503/504 and Ray's transient
"No available agent to submit job" 500; nothing else is retried. Every failure becomes one
:class:`DashboardError` naming the operation and URL; a duplicate ``submission_id`` is
:class:`SubmissionExists`.
"""

from __future__ import annotations

import re
import secrets
import ssl
import string
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nrl_k8s.errors import DashboardError, JobGone, SubmissionExists, WaitTimeout
from nrl_k8s.kinds import raycluster
from nrl_k8s.kinds.service import cluster_url, proxy_path
from nrl_k8s.kube import websocket as _websocket
from nrl_k8s.kube._httpx import ApiServerAuth, httpx
from nrl_k8s.kube.closing import Closing
from nrl_k8s.ray.package import Package
from nrl_k8s.redact import redact_text
from nrl_k8s.signals import held_back

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube
    from nrl_k8s.kube.connection import Connection

__all__ = ["RUN_RETRIES", "TERMINAL", "Dashboard", "JobInfo", "head_service", "of_raycluster"]

TERMINAL = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})
RETRIES = 4
# A run's: backs off for about a minute, like the API calls, so a short outage of the API server
# (which proxies the dashboard) does not fail the run.
RUN_RETRIES = 8
RETRY_STATUSES = frozenset({502, 503, 504})
RETRY_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
NO_AGENT_TEXT = "No available agent to submit job"
UPLOAD_TIMEOUT_S = 120.0  # the dashboard answers a PUT once the GCS stored it (up to 100 MiB)
EXISTS_TEXT = "already exists"
_ID_ALPHABET = string.ascii_letters + string.digits
_EXCEPTION_LINE = re.compile(r"^[\w.]+(Error|Exception): ")


@dataclass(frozen=True)
class JobInfo:
    """One job as the dashboard reports it; times are epoch milliseconds."""

    submission_id: str | None
    job_id: str | None
    status: str
    message: str = ""
    entrypoint: str = ""
    start_time: int | None = None
    end_time: int | None = None
    driver_exit_code: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def id(self) -> str:
        """What the job API takes for it: the submission id, else (a driver started without the job
        API) the job id; Ray reports one or the other."""
        return self.submission_id or self.job_id or ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobInfo:
        def as_int(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        return cls(
            submission_id=data.get("submission_id"),
            job_id=data.get("job_id"),
            status=data.get("status") or "",
            message=data.get("message") or "",
            entrypoint=data.get("entrypoint") or "",
            start_time=as_int("start_time"),
            end_time=as_int("end_time"),
            driver_exit_code=as_int("driver_exit_code"),
            metadata=dict(data.get("metadata") or {}),
        )


class Dashboard(Closing):
    """A synchronous Job REST API client bound to one dashboard base URL."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        verify: bool | str | ssl.SSLContext = True,
        cert: tuple[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        auth: httpx.Auth | None = None,
        proxy: str | None = None,
        timeout_s: float = 10.0,
        retries: int = RETRIES,
        backoff_s: float = 0.25,
        auth_hint: str | None = None,
    ):
        """``verify`` is a bool, a CA bundle path or an SSLContext; ``cert`` is (cert_file, key_file).

        ``auth_hint`` replaces the default hint on 401/403 (the API proxy sets an RBAC hint).
        """
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.auth_hint = auth_hint or f"the dashboard at {self.base_url} refused the credentials; check --dashboard-url"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=dict(headers or {}),
            verify=_ssl_context(verify, cert),
            transport=transport,
            auth=auth,
            proxy=proxy,
            timeout=timeout_s,
        )

    @classmethod
    def in_cluster(cls, service: str, namespace: str, port: int = raycluster.DASHBOARD_PORT,
                   **options: Any) -> Dashboard:
        """The head Service by its cluster DNS name (only resolvable inside a pod)."""
        return cls(cluster_url(service, namespace, port), **options)

    @classmethod
    def via_api_proxy(cls, connection: Connection, service: str, namespace: str, port: int = raycluster.DASHBOARD_PORT,
                      **options: Any) -> Dashboard:
        """Through the API server's service proxy, with the connection's TLS, proxy and (fresh) credentials."""
        return cls(
            connection.host + proxy_path(service, namespace, port),
            auth=ApiServerAuth(connection),
            verify=connection.ssl_context or True,
            proxy=connection.proxy,
            auth_hint=(
                f"reaching the dashboard through the API server needs get and create on services/proxy: "
                f"`kubectl auth can-i get services/proxy -n {namespace}` and "
                f"`kubectl auth can-i create services/proxy -n {namespace}`; "
                f"or pass --dashboard-url to reach it directly (e.g. through kubectl port-forward)"
            ),
            **options,
        )

    @classmethod
    def for_cluster(
        cls,
        *,
        cluster_name: str,
        namespace: str,
        connection: Connection | None = None,
        in_cluster: bool = False,
        url: str | None = None,
        service: str | None = None,
        **options: Any,
    ) -> Dashboard:
        """The dashboard of RayCluster ``cluster_name`` through its head Service (``service``,
        default ``<cluster>-head-svc``): ``url`` > in-cluster DNS > API server proxy."""
        if url:
            return cls(url, **options)
        service = service or raycluster.head_service(cluster_name)
        if in_cluster:
            return cls.in_cluster(service, namespace, **options)
        if connection is None:
            raise DashboardError(
                f"no way to reach the dashboard of RayCluster {cluster_name}",
                hint="pass --dashboard-url or use a kubeconfig",
            )
        return cls.via_api_proxy(connection, service, namespace, **options)

    # -- the Job REST API -------------------------------------------------------------------

    def version(self) -> dict:
        return _json(self._call("GET", "/api/version", "read the dashboard version"))

    def list_jobs(self) -> list[JobInfo]:
        return [JobInfo.from_json(item) for item in _json(self._call("GET", "/api/jobs/", "list jobs"))]

    def get_job(self, submission_id: str) -> JobInfo | None:
        """The job, or None when the dashboard does not know it (404)."""
        response = self._send("GET", f"/api/jobs/{submission_id}", f"get job {submission_id}")
        if response.status_code == 404:
            return None
        return JobInfo.from_json(_json(self._check(response, f"get job {submission_id}")))

    def submit(
        self,
        entrypoint: str,
        *,
        submission_id: str | None = None,
        runtime_env: dict | None = None,
        metadata: dict[str, str] | None = None,
        entrypoint_num_cpus: float | None = None,
        entrypoint_num_gpus: float | None = None,
        entrypoint_resources: dict[str, float] | None = None,
    ) -> str:
        """Submit a job; return its submission_id.

        Without ``submission_id`` one is generated here, so a retried POST cannot start a second job.
        Raises SubmissionExists when a job with that id already exists (Ray never reuses ids),
        unless this POST was sent again (a timeout or a gateway error: the first may have landed)
        and the job that exists is the one it asked for (same entrypoint and metadata).
        """
        generated = submission_id is None
        submission_id = submission_id or "raysubmit_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16))
        body = {
            "entrypoint": entrypoint,
            "submission_id": submission_id,
            "runtime_env": runtime_env,
            "metadata": metadata,
            "entrypoint_num_cpus": entrypoint_num_cpus,
            "entrypoint_num_gpus": entrypoint_num_gpus,
            "entrypoint_resources": entrypoint_resources,
        }
        operation = f"submit job {submission_id}"
        resent: list[bool] = []
        response = self._send("POST", "/api/jobs/", operation, json={k: v for k, v in body.items() if v is not None},
                              on_retry=lambda: resent.append(True))
        if response.is_error and EXISTS_TEXT in response.text:
            if generated:  # a random id can only exist because an earlier attempt of ours landed
                return submission_id
            if resent and self._is_submission(submission_id, entrypoint, metadata):
                return submission_id
            raise SubmissionExists(
                f"a Ray job with submission_id {submission_id} already exists at {self.base_url}",
                hint="Ray never reuses a submission id; pick another one or follow the existing job",
            )
        return _json(self._check(response, operation))["submission_id"]

    def _is_submission(self, submission_id: str, entrypoint: str, metadata: dict[str, str] | None) -> bool:
        """Whether job ``submission_id`` runs ``entrypoint`` with (at least) ``metadata``."""
        job = self.get_job(submission_id)
        return (job is not None and job.entrypoint == entrypoint
                and all(job.metadata.get(k) == v for k, v in (metadata or {}).items()))

    def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job; True if it was running and is being stopped."""
        operation = f"stop job {submission_id}"
        return bool(_json(self._call("POST", f"/api/jobs/{submission_id}/stop", operation)).get("stopped"))

    def logs(self, submission_id: str) -> str:
        operation = f"read the logs of job {submission_id}"
        return _json(self._call("GET", f"/api/jobs/{submission_id}/logs", operation)).get("logs") or ""

    def follow_logs(self, submission_id: str, *, deadline_s: float | None = None, idle_s: float = 20.0,
                    over: Callable[[], bool] | None = None) -> Iterator[str]:
        """Yield the job's log from its start as Ray writes it; stop once the job has ended and
        all of it was yielded. A job already over has its whole log read with one request.

        Reads the dashboard's log tail websocket (``/api/jobs/ID/logs/tail``): Ray sends the log
        from the start, then new lines as they are written, and closes once the job is over and
        its log read to the end. A dropped connection is opened again (``retries`` times in a
        row, with backoff): Ray sends from the start again and the characters already yielded
        are skipped, so nothing is repeated or lost. A clean close when the job can no longer be
        asked about (KubeRay deleted the cluster of a job that ended) is the end too. After
        ``idle_s`` seconds without a frame the job's status is read; a stream still silent
        ``idle_s`` after the job ended is dropped. ``over``, when given, tells from elsewhere
        whether the job has ended (its RayJob's status): when the stream of an ended job broke or
        went silent and the dashboard does not answer at once, its head is taken to be gone with
        the job's cluster (JobGone) instead of being retried for a minute.
        Raises WaitTimeout (with the last status) once ``deadline_s`` seconds have passed,
        DashboardError when the job is unknown or the dashboard stays unreachable, and JobGone
        when the dashboard no longer knows a job whose log it had opened once the stream broke
        or closed uncleanly: its Ray head went away (KubeRay deletes a RayJob's cluster as the
        job ends, which can come before Ray closes the stream), so the log's last lines may be lost.
        """
        if (job := self._status_now(submission_id)) is not None and job.terminal:
            # its log is whole: Ray's tail would poll it for ~5 s more; a failed read tries the tail
            if text := self.logs(submission_id):
                yield text
            return
        deadline = _Deadline(deadline_s)
        yielded = attempt = 0
        opened = False  # a connection to the job's log was accepted
        while True:
            try:
                for text in self._tail(submission_id, yielded, deadline, idle_s, over):
                    yielded, attempt = yielded + len(text), 0
                    yield text
                return
            except _Broken as broken:
                opened = opened or broken.opened
                self._unless_late(submission_id, deadline, opened=opened, over=over)
                if attempt >= self.retries:
                    raise DashboardError(
                        f"could not follow the log of job {submission_id}: the stream from {self.base_url} failed "
                        f"{attempt + 1} time(s) in a row ({broken})",
                        hint="is the Ray head running? `nrl-k8s job logs` reads the log so far") from None
            time.sleep(self.backoff_s * 2**attempt)
            attempt += 1

    def _tail(self, submission_id: str, skip: int, deadline: _Deadline, idle_s: float,
              over: Callable[[], bool] | None) -> Iterator[str]:
        """One connection to the log tail: the text past the first ``skip`` characters, until Ray
        closes it at the job's end; _Broken when it breaks in a way worth reconnecting."""
        operation = f"follow the log of job {submission_id}"
        received = 0  # characters of this connection's replay of the log
        opened = False
        try:
            with _websocket.connect(self._client, f"/api/jobs/{submission_id}/logs/tail") as ws:
                opened = True
                ended_before = False  # the job was over at the previous silent check
                while True:
                    if deadline.passed():
                        self._unless_late(submission_id, deadline, opened=True, over=over)
                        deadline.at = None  # the job ended in time: read the rest
                    text = ws.receive(deadline.wait(idle_s))
                    if text is None:
                        if self._unless_late(submission_id, deadline, opened=True, over=over).terminal:
                            if ended_before:
                                raise _Broken(f"silent for {idle_s:g}s after the job ended", opened=True)
                            ended_before = True
                        continue
                    fresh, received = text[max(0, skip - received):], received + len(text)
                    if fresh:
                        yield fresh
        except _websocket.Closed as closed:
            job = self._status_now(submission_id)
            if job is None and closed.code != 1000:
                raise self._gone(submission_id) from None
            if job is not None and not job.terminal:
                raise _Broken(f"the dashboard closed the log while the job is {job.status}", opened=True) from None
            # over, or gone with its cluster after a clean close by Ray: all of it was read
        except _websocket.Refused as exc:
            response = exc.response
            if response.status_code == 404:
                raise DashboardError(f"no job {submission_id} at {self.base_url}") from None
            if response.status_code in RETRY_STATUSES:
                raise _Broken(f"{response.status_code}: {_detail(response)}") from None
            self._check(response, operation)
            raise DashboardError(f"could not {operation}: {response.request.url} answered {response.status_code} "
                                 "instead of switching to a websocket") from None
        except _websocket.Dropped as exc:
            raise _Broken(str(exc), opened=opened) from None
        except RETRY_ERRORS as exc:
            if _tls_failure(exc):
                raise DashboardError(f"could not {operation} at {self.base_url}: {exc}") from exc
            raise _Broken(f"{type(exc).__name__}: {exc}", opened=opened) from None
        except httpx.HTTPError as exc:
            raise DashboardError(f"could not {operation} at {self.base_url}: {exc}") from exc

    def _status_now(self, submission_id: str) -> JobInfo | None:
        """The job in one attempt; None when unknown or unreachable (KubeRay may have just deleted
        the cluster of a job that ended)."""
        try:
            response = self._send("GET", f"/api/jobs/{submission_id}", f"get job {submission_id}", retries=0)
            return None if response.status_code == 404 else JobInfo.from_json(_json(self._check(response, "")))
        except DashboardError:
            return None

    def _unless_late(self, submission_id: str, deadline: _Deadline, *, opened: bool,
                     over: Callable[[], bool] | None) -> JobInfo:
        """The job; WaitTimeout (with its status) when it still runs past ``deadline``. A job
        the dashboard does not know is JobGone when its log was ``opened`` before; so is one that
        is ``over`` when the dashboard does not answer at once (its head went with its cluster)."""
        ended = opened and over is not None and over()
        job = self._status_now(submission_id) if ended else self.get_job(submission_id)
        if job is None:
            if opened:
                raise self._gone(submission_id)
            raise DashboardError(f"no job {submission_id} at {self.base_url}")
        if deadline.passed() and not job.terminal:
            raise WaitTimeout(f"job {submission_id} is still {job.status} after {deadline.seconds:g}s"
                              + (f" ({job.message})" if job.message else ""))
        return job

    def _gone(self, submission_id: str) -> JobGone:
        return JobGone(f"no job {submission_id} at {self.base_url} any more: its Ray head went away before "
                       "the log stream ended (KubeRay deletes a RayJob's cluster as soon as its job ends)",
                       hint="the log may lack its last lines; `nrl-k8s status` tells how the job ended")

    # -- the package API (working_dir uploads) ---------------------------------------------------

    def has_package(self, name: str) -> bool:
        """Whether the cluster's GCS has package ``name`` (``_ray_pkg_<hash>.zip``).

        The dashboard also pins an existing package for a while, so it survives until the job uses it."""
        operation = f"check for package {name}"
        response = self._send("GET", f"/api/packages/gcs/{name}", operation)
        if response.status_code == 404:
            return False
        self._check(response, operation)
        return True

    def upload_package(self, package: Package) -> None:
        """Store the package's zip in the cluster's GCS (idempotent: the name is its content hash)."""
        limits = self._client.timeout
        slow = max(limits.read or 0, limits.write or 0, UPLOAD_TIMEOUT_S)
        self._call("PUT", f"/api/packages/gcs/{package.name}", f"upload package {package.name}",
                   content=package.zip_bytes(), timeout=httpx.Timeout(slow, connect=limits.connect, pool=limits.pool))

    def ensure_package(self, package: Package) -> int:
        """Upload the package unless the cluster has it; return the bytes uploaded (0 when it had it)."""
        if self.has_package(package.name):
            return 0
        self.upload_package(package)
        return len(package.zip_bytes())

    def close(self) -> None:
        with held_back():
            self._client.close()

    # -- transport: retries and error mapping (the only place) ---------------------------------

    def _call(self, method: str, path: str, operation: str, **kwargs: Any) -> httpx.Response:
        return self._check(self._send(method, path, operation, **kwargs), operation)

    def _send(self, method: str, path: str, operation: str, *, retries: int | None = None,
              on_retry: Callable[[], None] | None = None, **kwargs: Any) -> httpx.Response:
        """Send with retries (default ``self.retries``) on transient failures; return the last response
        (errors included). ``on_retry`` is called before each send after the first."""
        retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            try:
                with held_back():
                    response = self._client.request(method, path, **kwargs)
            except RETRY_ERRORS as exc:
                if attempt >= retries or _tls_failure(exc):
                    raise DashboardError(
                        f"could not {operation}: the dashboard at {self.base_url} is unreachable "
                        f"after {attempt + 1} attempt(s) ({type(exc).__name__}: {exc})",
                        hint="is the Ray head running and its dashboard serving? --dashboard-url reaches it directly",
                    ) from exc
            except httpx.HTTPError as exc:
                raise DashboardError(f"could not {operation} at {self.base_url}: {exc}") from exc
            else:
                transient = response.status_code in RETRY_STATUSES or (
                    response.status_code == 500 and NO_AGENT_TEXT in response.text
                )
                if not transient or attempt >= retries:
                    return response
            time.sleep(self.backoff_s * 2**attempt)
            attempt += 1
            if on_retry is not None:
                on_retry()

    def _check(self, response: httpx.Response, operation: str) -> httpx.Response:
        if not response.is_error:
            return response
        code = response.status_code
        message = (
            f"could not {operation}: {response.request.method} {response.request.url} → {code}: {_detail(response)}"
        )
        if code in (401, 403):
            raise DashboardError(message, hint=self.auth_hint)
        raise DashboardError(message)


def head_service(kube: Kube, cluster: str, namespace: str) -> str:
    """The head Service of RayCluster ``cluster``: the live one's (``raycluster.head_service_of``), else
    KubeRay's default."""
    live = kube.find(raycluster.KIND, cluster, namespace)
    return raycluster.head_service_of(live) if live is not None else raycluster.head_service(cluster)


def of_raycluster(kube: Kube, cluster: dict | str, namespace: str, *, url: str | None = None,
                  retries: int = RETRIES) -> Dashboard:
    """The dashboard of a RayCluster, given as its object (live or rendered) or its name (the live one is
    read): ``url`` when given, else through its head Service, as :meth:`Dashboard.for_cluster` chooses."""
    if isinstance(cluster, str):
        name, service = cluster, None if url else head_service(kube, cluster, namespace)
    else:
        name, service = cluster["metadata"]["name"], raycluster.head_service_of(cluster)
    return Dashboard.for_cluster(cluster_name=name, namespace=namespace, connection=kube.connection,
                                 in_cluster=kube.in_cluster, url=url, service=service, retries=retries)


class _Broken(Exception):
    """A log stream that broke in a way worth opening again (dropped, refused by a gateway, closed
    early); ``opened``: after the dashboard had accepted the connection."""

    def __init__(self, reason: str, *, opened: bool = False):
        super().__init__(reason)
        self.opened = opened


class _Deadline:
    """``seconds`` from now (None: never); ``at`` is cleared once nothing is late any more."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def wait(self, idle_s: float) -> float:
        """How long to wait for a frame: ``idle_s``, or less to wake at the deadline."""
        return idle_s if self.at is None else min(idle_s, max(0.05, self.at - time.monotonic()))


def _ssl_context(verify: bool | str | ssl.SSLContext, cert: tuple[str, str] | None) -> bool | ssl.SSLContext:
    """httpx wants an SSLContext for a CA path or a client certificate."""
    if isinstance(verify, ssl.SSLContext):
        context = verify
    elif isinstance(verify, str):
        context = ssl.create_default_context(cafile=verify)
    elif cert is None:
        return verify
    elif verify:
        context = ssl.create_default_context()
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


def _tls_failure(exc: BaseException) -> bool:
    """A TLS handshake failure (bad CA, bad client cert) is not worth retrying."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise DashboardError(
            f"{response.request.method} {response.request.url} answered {response.status_code} with non-JSON: "
            f"{redact_text(response.text)[:200]!r}",
            hint="is this URL a Ray dashboard?",
        ) from exc


def _detail(response: httpx.Response) -> str:
    """The useful part of an error body: a Kubernetes Status message or Ray's last traceback line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("message"):
        return redact_text(str(body["message"]))[:300]  # before the cut: a cut value no longer looks like one
    lines = [line.strip() for line in redact_text(response.text).splitlines() if line.strip()]
    raised = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return (raised or lines or [response.reason_phrase])[-1][:300]
