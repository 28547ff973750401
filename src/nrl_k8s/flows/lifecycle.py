"""The skeleton every run flow shares: bring up, roll back on failure or Ctrl-C until the driver is
submitted, then record and (optionally) follow, never deleting anything from the submission on.

A flow is a short function listing shared steps (``steps.BringUp``) and its own over one run
context; the context tells this skeleton what only the flow knows (``Flow``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from nrl_k8s.errors import NrlK8sError
from nrl_k8s.events import Warning
from nrl_k8s.flows import records
from nrl_k8s.signals import Interrupted, RollbackInterrupts, interrupts_raise

from .steps import BringUp


@dataclass(frozen=True)
class LiveOptions:
    """What `run` (either flow) and `cluster up` were asked; a flag of one flow only keeps its default in the other."""

    wait: bool = True  # follow the job to its end
    job_timeout_s: float | None = None  # --timeout: how long --wait follows the job; None = until it ends
    dashboard_url: str | None = None  # reach the training cluster's dashboard here
    context: str | None = None  # the kube context, kept in the run record
    adopt: bool = False  # --adopt: reuse a same-named object another user or a person made
    place_anyway: bool = False  # --place-anyway: apply a pod group predicted never to fit (ops.fit)
    frees_cluster: bool = False  # --rayjob --wait: delete the ended job's cluster once its log is in (LOG_GRACE_S)
    driver_grace_s: float = 90.0  # --rayjob: how long KubeRay gets to submit the driver before the rescue
    recreate: bool = False  # --raycluster: replace a drifted object nrl-k8s made
    replace: bool = False  # --raycluster: stop the cluster's running jobs, start the daemons anew
    skip_daemons: bool = False  # --raycluster
    repo_root: str | None = None  # --raycluster: where upload paths are read


@dataclass(kw_only=True)
class Outcome:
    """What either flow reports at its end, beside what only it has."""

    namespace: str
    dgds: dict[str, str] = field(default_factory=dict)  # name -> "created" | "reused"
    owners: dict[str, list[str]] = field(default_factory=dict)  # dgd name -> owner names
    record: str | None = None  # path of the run record
    job_status: str | None = None
    succeeded: bool | None = None

    def recorded(self, data: dict) -> None:
        """Save the run record ``data`` and remember where."""
        self.record = str(records.save(data))

    def ended(self, job_status: str | None, data: dict) -> None:
        """The job is over (``job_status`` None when it cannot be told): note it here and in the record."""
        self.job_status, self.succeeded = job_status, job_status == "SUCCEEDED"
        data["job_status"] = job_status
        records.save(data)


class Flow(Protocol):
    """What the skeleton asks of a run context."""

    steps: BringUp

    def driver_started(self) -> bool | None:
        """Whether the driver is submitted: True, False, or None when the API cannot tell."""

    def keep(self) -> None:
        """The driver started and the run failed after all: undo whatever would still end the job."""

    def record(self) -> None:
        """Write the run record once the driver is submitted (again, should a failure follow)."""

    def running_hint(self) -> str:
        """What keeps running and how to follow and stop it."""

    def unsure_hint(self) -> str:
        """How to find out whether the driver started, and stop it, when the API could not tell."""


def execute(run: Flow, bring_up: Callable[[], None], follow: Callable[[], None] | None) -> None:
    """``bring_up()``, rolled back on failure, Ctrl-C or SIGTERM until the driver is submitted; then
    the run recorded and (``follow``) followed, nothing deleted whenever Ctrl-C comes from there on."""
    with interrupts_raise():
        try:
            bring_up()
        except KeyboardInterrupt:
            raise fail(run, None) from None
        except NrlK8sError as err:
            raise fail(run, err) from None
        try:
            record(run)
            if follow is not None:
                follow()
        except KeyboardInterrupt:
            raise Interrupted("stopped following the job", hint=run.running_hint()) from None
        except NrlK8sError as err:
            err.hint = "; ".join(filter(None, [err.hint, run.running_hint()]))
            raise


def fail(run: Flow, error: NrlK8sError | None) -> NrlK8sError:
    """Roll back unless the driver started; the error to raise (``error`` None: interrupted)."""
    steps = run.steps
    if not steps.ledger.created and not steps.ledger.claimed:
        return error or Interrupted("interrupted before anything was created")
    with RollbackInterrupts(steps.emit) as interrupts:
        try:
            started = run.driver_started()
        except KeyboardInterrupt:
            started = None
        if started is False:
            aborted = steps.ledger.rollback(interrupts)
            if error is not None:
                return error
            if aborted:
                return Interrupted("interrupted during bring-up; the rollback was aborted: see what is left above")
            return Interrupted("interrupted during bring-up; rolled back what this run created")
        interrupts.abortable = False
        if started is None:  # it may be running: deleting it could kill a live job
            for entry in steps.ledger.created:
                steps.emit(entry.left(steps.ns, "not rolled back: could not tell whether the driver started"))
        else:
            run.keep()
            steps.report_unlinked()
            record(run)
    failure = error or Interrupted("interrupted after the driver was submitted")
    hint = run.running_hint() if started else run.unsure_hint() if started is None else ""
    failure.hint = "; ".join(filter(None, [failure.hint, hint]))
    return failure


def record(run: Flow) -> None:
    """The run recorded once its driver started, so the printed hints (``--run RUN_ID``) find it."""
    try:
        run.record()
    except OSError as err:
        run.steps.emit(Warning(f"could not write the run record ({err.strerror}): commands need this run's "
                               "config instead of --run"))
