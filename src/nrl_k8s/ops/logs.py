"""``nrl-k8s logs --source``: the driver's log, or pod logs read through the API (``pods/log``).

Sources, each pod chosen by label in the run's namespace:

- ``driver`` (default): the RayJob's submitter when KubeRay runs one (K8sJobMode: the pod
  labelled ``ray.io/originated-from-cr-name=<rayjob>`` with container ``ray-job-submitter``;
  SidecarMode: that container in the head pod), the log an exec driver keeps on the head pod
  (``execdriver``), else the driver's log from the Ray dashboard (HTTPMode and InteractiveMode
  RayJobs, and the long-lived flow): what ``logs`` always printed;
- ``daemon``: the Ray job log of the role's ``daemon`` (its latest submission: the id, or the id
  with the suffix ``--replace`` adds), from the role's cluster's dashboard;
- ``auto``: ``daemon`` when the role declares one, else ``driver`` (upstream's default);
- ``head`` / ``worker``: the role's RayCluster pods (``ray.io/cluster``, ``ray.io/node-type``),
  their Ray container (the first);
- ``dgd[:COMPONENT]``: the pods of the run's DGDs (``nvidia.com/dynamo-graph-deployment-name``),
  only COMPONENT's (its name in ``nvidia.com/dynamo-component`` or its type in
  ``nvidia.com/dynamo-component-type``, any case) when given; container ``main`` if the pod has
  one, else the first.

With several pods every line is prefixed ``[pod/NAME/CONTAINER]`` (as ``kubectl logs
--prefix``); following several pods reads them at once. A pod whose container has not started
is skipped with a note (the server's reason), unless it is the only one. Text comes back as the
server sent it: the caller redacts it, ``stream`` having remembered the values of every Secret
the chosen pods (a Ray cluster's: the driver's) read.
"""

from __future__ import annotations

import functools
import queue
import shlex
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from nrl_k8s.errors import ApiError, ConfigError, NotFoundError
from nrl_k8s.kinds import dgd, pod, raycluster

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

if TYPE_CHECKING:
    from nrl_k8s.ray.dashboard import Dashboard

SOURCES = ("driver", "daemon", "auto", "head", "worker", "dgd")
DASHBOARD_SOURCES = ("driver", "daemon", "auto")  # read through the Ray dashboard
SUBMITTER = "ray-job-submitter"
ORIGIN_NAME = "ray.io/originated-from-cr-name"
COMPONENT_LABEL = "nvidia.com/dynamo-component"
COMPONENT_TYPE_LABEL = "nvidia.com/dynamo-component-type"


@dataclass(frozen=True)
class Request:
    """What ``logs`` was asked for: ``source`` (and ``component`` for dgd), the role, tail, follow."""

    source: str = "driver"
    component: str | None = None
    role: str = "training"
    tail: int | None = None
    follow: bool = False

    @classmethod
    def parse(
        cls, source: str, *, role: str | None, tail: int | None, follow: bool, dashboard_url: str | None
    ) -> Request:
        """Validate the flags together: ConfigError (exit 2) naming the one that does not fit."""
        kind, _, component = source.partition(":")
        if (
            kind not in SOURCES
            or (component and kind != "dgd")
            or (kind == "dgd" and source.endswith(":") and not component)
        ):
            raise ConfigError(
                f"--source {source}: expected driver, daemon, auto, head, worker, dgd or dgd:COMPONENT",
                hint="e.g. --source daemon for the role's daemon, --source head, or --source dgd:frontend "
                "for a DGD's frontend pods",
            )
        if tail is not None and tail < 0:
            raise ConfigError(f"--tail {tail}: must be 0 or more", hint="--tail 0 -f prints only what comes next")
        if dashboard_url and kind not in DASHBOARD_SOURCES:
            raise ConfigError(
                f"--dashboard-url does not apply to --source {source}", hint="pod logs are read through the API server"
            )
        if role and kind == "dgd":
            raise ConfigError(
                f"--role does not apply to --source {source}", hint="a DGD belongs to the run, not to a role"
            )
        return cls(kind, component or None, role or "training", tail, follow)

    def resolved(self, infra: dict) -> Request:
        """``auto`` made ``daemon`` or ``driver`` by the role's declaration; ConfigError (exit 2) for
        ``daemon`` on a role that declares none, or a role the infra does not declare."""
        if self.source not in ("auto", "daemon"):
            return self
        declared = bool(raycluster.role_entry(infra, self.role).get("daemon"))
        if self.source == "daemon" and not declared:
            raise ConfigError(f"--source daemon: infra.kuberay.{self.role}.daemon is not set",
                              hint="use --source driver, head or worker, or pick a role with a daemon (--role)")
        return replace(self, source="daemon" if declared else "driver")


class PodContainer(NamedTuple):
    """One container of one pod: whose log is read."""

    pod: str
    container: str

    def __str__(self) -> str:
        return f"pod/{self.pod}/{self.container}"


Skip = Callable[[PodContainer, str], None]  # told about a pod whose log cannot be read (why)


def pod_targets(kube: Kube, namespace: str, selector: str, choose: Callable[[dict], str], what: str,
                keep: Callable[[dict], bool] = lambda _: True) -> list[PodContainer]:
    """The pods matching ``selector`` (and ``keep``), oldest name first, with the container ``choose`` picks."""
    pods = [p for p in kube.list(pod.KIND, namespace, label_selector=selector) if keep(p)]
    if not pods:
        raise NotFoundError(f"no {what} pods in namespace {namespace} ({selector})",
                            hint=f"kubectl -n {namespace} get pods -l {shlex.quote(selector)}")
    return [PodContainer(p["metadata"]["name"], choose(p)) for p in sorted(pods, key=lambda p: p["metadata"]["name"])]


def _containers(p: dict) -> list[str]:
    return [c.get("name", "") for c in (p.get("spec") or {}).get("containers") or []]


def _first(p: dict) -> str:
    return _containers(p)[0]


def _main(p: dict) -> str:
    return "main" if "main" in _containers(p) else _first(p)


def ray_targets(kube: Kube, namespace: str, cluster: str, node_type: str) -> list[PodContainer]:
    selector = f"ray.io/cluster={cluster},ray.io/node-type={node_type}"
    return pod_targets(kube, namespace, selector, _first, f"Ray {node_type}")


def dgd_targets(kube: Kube, names: list[str], namespace: str, component: str | None) -> list[PodContainer]:
    """The pods of the DGDs ``names`` (only ``component``'s when given)."""
    if not names:
        raise ConfigError("the run declares no DGD (infra.dynamo is empty)", hint="use --source driver, head or worker")

    def keep(p: dict) -> bool:
        labels = p["metadata"].get("labels") or {}
        wanted = (component or "").lower()
        return not component or wanted in (
            labels.get(COMPONENT_LABEL, "").lower(),
            labels.get(COMPONENT_TYPE_LABEL, "").lower(),
        )

    selector = dgd_selector(names)
    try:
        return pod_targets(
            kube, namespace, selector, _main, f"DGD {'/'.join(names)}" + (f" {component}" if component else ""), keep
        )
    except NotFoundError:
        if not component:
            raise
        found = sorted(
            {
                (p["metadata"].get("labels") or {}).get(COMPONENT_LABEL, "?")
                for p in kube.list(pod.KIND, namespace, label_selector=selector)
            }
        )
        raise ConfigError(
            f"--source dgd:{component}: no such component in DGD {', '.join(names)}",
            hint=f"components with pods: {', '.join(found) or 'none yet'}",
        ) from None


def dgd_selector(names: list[str]) -> str:
    """The pods of the DGDs ``names``."""
    return dgd.pod_selector(names[0]) if len(names) == 1 else f"{dgd.POD_LABEL} in ({','.join(sorted(names))})"


def submitter(kube: Kube, namespace: str, rayjob: dict, cluster: str) -> PodContainer | None:
    """KubeRay's submitter of ``rayjob`` (K8sJobMode pod, or the SidecarMode container of the head), if any."""
    name = rayjob["metadata"]["name"]
    jobs = kube.list(pod.KIND, namespace, label_selector=f"{ORIGIN_NAME}={name},ray.io/originated-from-crd=RayJob")
    heads = kube.list(pod.KIND, namespace, label_selector=f"ray.io/cluster={cluster},ray.io/node-type=head")
    found = [p for p in jobs + heads if SUBMITTER in _containers(p)]
    newest = max(found, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)
    return PodContainer(newest["metadata"]["name"], SUBMITTER) if newest else None


def stream(kube: Kube, infra: dict, request: Request, *, record: dict | None, dashboard_url: str | None,
           skip: Skip) -> Iterator[str]:
    """The text ``request`` asks for, as chunks; the pods are chosen (or NotFoundError raised) at once,
    and the values of the Secrets they read remembered for redaction (``driver_log.remember_pod_secrets``)."""
    from nrl_k8s.flows.driver_log import CLUSTER_LABEL, remember_pod_secrets

    namespace = kube.namespace
    if request.source == "dgd":
        names = dgd_names(infra, record)
        targets = dgd_targets(kube, names, namespace, request.component)
        remember_pod_secrets(kube, namespace, dgd_selector(names))
    else:
        cluster, job = role_cluster_name(kube, infra, request.role)
        remember_pod_secrets(kube, namespace, f"{CLUSTER_LABEL}={cluster}")
        if request.source in ("head", "worker"):
            targets = ray_targets(kube, namespace, cluster, request.source)
        elif request.source == "daemon":
            submission = raycluster.daemon_submission_id(infra, request.role)
            return _dashboard_log(kube, cluster, lambda dash: _daemon_job(dash, submission, cluster, request.role),
                                  request, dashboard_url)
        else:
            found = submitter(kube, namespace, job, cluster) if job is not None else None
            if found is None:
                from .jobs import current_job

                recorded = record["job_id"] if record is not None and request.role == "training" else None
                if request.role == "training" and (
                    exec_log := _exec_log(kube, infra, record, cluster, recorded, request)
                ):
                    return exec_log
                return _dashboard_log(kube, cluster, lambda dash: recorded or current_job(dash, job), request,
                                      dashboard_url)
            targets = [found]
    return read(kube, namespace, targets, tail=request.tail, follow=request.follow, skip=skip)


def _dashboard_log(kube: Kube, cluster: str, pick: Callable[[Dashboard], str], request: Request,
                   url: str | None) -> Iterator[str]:
    """The log of the Ray job ``pick`` chooses on the cluster's dashboard."""
    from nrl_k8s.ray.dashboard import of_raycluster

    with of_raycluster(kube, cluster, kube.namespace, url=url) as dash:
        job_id = pick(dash)
        if request.tail is None and request.follow:
            yield from dash.follow_logs(job_id)
            return
        shown = dash.logs(job_id)
        yield last_lines(shown, request.tail)
        if request.follow:  # the follow stream starts at the beginning: skip what was read
            yield from skip_chars(dash.follow_logs(job_id), len(shown))


def _exec_log(kube: Kube, infra: dict, record: dict | None, cluster: str, recorded: str | None,
              request: Request) -> Iterator[str] | None:
    """The driver's log from the head pod when it is an exec driver (``jobs.exec_job``), else None."""
    from .jobs import exec_job

    found = exec_job(kube, infra, record, cluster, recorded)
    if found is None:
        return None
    drivers, job_id = found

    def chunks() -> Iterator[str]:
        with drivers:
            if request.follow:
                yield from drivers.follow_logs(job_id, tail=request.tail)
            else:
                yield drivers.logs(job_id, tail=request.tail)

    return chunks()


def _daemon_job(dash: Dashboard, submission_id: str, cluster: str, role: str) -> str:
    """The latest submission of the daemon ``submission_id`` (``--replace`` submits it again with a suffix)."""
    from nrl_k8s.flows.raycluster import latest_daemon_job

    job = latest_daemon_job(dash.list_jobs(), submission_id)
    if job is None or job.submission_id is None:
        raise NotFoundError(f"daemon {submission_id} of role {role} was never submitted to RayCluster {cluster}",
                            hint=f"submit it with `nrl-k8s cluster up RECIPE --target kuberay.{role}` "
                                 "(or `nrl-k8s run --raycluster RECIPE`; RECIPE: its run config)")
    return job.submission_id


def read(
    kube: Kube, namespace: str, targets: list[PodContainer], *, tail: int | None, follow: bool, skip: Skip
) -> Iterator[str]:
    """The logs of ``targets`` as text chunks: one pod as it is, several line by line with a prefix."""
    if len(targets) == 1:
        target = targets[0]
        try:
            yield from kube.logs(target.pod, namespace, container=target.container, tail_lines=tail, follow=follow)
        except ApiError as err:
            err.hint = err.hint or f"kubectl -n {namespace} describe pod {target.pod}"
            raise
        return
    readers = [(t, functools.partial(kube.logs, t.pod, namespace, container=t.container, tail_lines=tail,
                                     follow=follow)) for t in targets]
    if not follow:
        for target, open_log in readers:
            try:
                yield from _prefixed(target, open_log())
            except ApiError as err:
                skip(target, err.message)
        return
    yield from _merged(readers, skip)


def _prefixed(target: PodContainer, chunks: Iterator[str]) -> Iterator[str]:
    pending = ""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split("\n")
        if lines:
            yield "".join(f"[{target}] {line}\n" for line in lines)
    if pending:
        yield f"[{target}] {pending}\n"


def _merged(readers: Sequence[tuple[PodContainer, Callable[[], Iterator[str]]]], skip: Skip) -> Iterator[str]:
    """Follow every log at once (a thread each), yielding prefixed lines as they come."""
    lines: queue.Queue = queue.Queue()

    def pump(target: PodContainer, open_log) -> None:
        try:
            for text in _prefixed(target, open_log()):
                lines.put(text)
        except ApiError as err:
            lines.put((target, err.message))
        finally:
            lines.put(None)

    for target, open_log in readers:
        threading.Thread(target=pump, args=(target, open_log), daemon=True, name=f"logs-{target.pod}").start()
    running = len(readers)
    while running:
        item = lines.get()
        if item is None:
            running -= 1
        elif isinstance(item, tuple):
            skip(*item)
        else:
            yield item


def last_lines(text: str, count: int | None) -> str:
    """The last ``count`` lines of ``text`` (all of it for None), as ``tailLines`` cuts a pod log."""
    if count is None:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[len(lines) - count:]) if count else ""


def skip_chars(chunks: Iterator[str], count: int) -> Iterator[str]:
    """``chunks`` without their first ``count`` characters (what was already printed)."""
    for chunk in chunks:
        if count >= len(chunk):
            count -= len(chunk)
            continue
        yield chunk[count:]
        count = 0


def dgd_names(infra: dict, record: dict | None) -> list[str]:
    """The run's DGD names: the run record's, else rendered from ``infra.dynamo``."""
    if record is not None and record.get("dgds") is not None:
        return list(record["dgds"])
    return [dgd.render(infra, key)["metadata"]["name"] for key in sorted(infra.get("dynamo") or {})]


def role_cluster_name(kube: Kube, infra: dict, role: str) -> tuple[str, dict | None]:
    """(the role's RayCluster, its RayJob or None): the bare name first, then the RayJob's cluster."""
    from .jobs import role_cluster

    raycluster.role_entry(infra, role)  # a role the infra does not declare: a clear ConfigError
    return role_cluster(kube, infra, role)

