"""What a run created, and how to undo it when the run fails before its driver is submitted.

The product rule: rollback deletes only what the current run created and no other live run
uses; when a rollback cannot finish, it says what is left and how to remove it.

- ``Ledger.created`` lists every object the run created (any kind), in creation order, and
  ``Ledger.claimed`` the DGDs it reused (it added itself to their users annotation). Entries
  carry their descriptor, so a DGD is always addressed in its manifest's version.
- Rollback first takes the run off the DGDs it reused (users and ownerReferences), then deletes
  the ledger in creation order. A DGD it created but another live run uses is kept, minus this
  run's RayCluster as owner, so GC cannot take it with that cluster. Deletes retry transient
  failures (``Kube``'s time budget); a DGD delete is guarded by the resourceVersion it judged.
- What cannot be deleted is reported as ``LeftBehind`` with the exact command that removes it.
- While rolling back (``signals.RollbackInterrupts``), a Ctrl-C (or SIGTERM) only warns; the next
  aborts the rollback, which then reports everything not deleted yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nrl_k8s.errors import ApiError, ConflictError, NotFoundError
from nrl_k8s.events import Emit, LeftBehind, RolledBack, Waiting, Warning
from nrl_k8s.kinds import dgd
from nrl_k8s.kinds.base import Kind, delete_command, owners_patch
from nrl_k8s.kube import dgd_users as usage
from nrl_k8s.signals import RollbackInterrupts

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


@dataclass(frozen=True)
class Created:
    kind: Kind
    name: str
    label: str

    def left(self, namespace: str, reason: str) -> LeftBehind:
        return LeftBehind(f"{self.kind.kind} {self.name}", reason, delete_command(self.kind, self.name, namespace))


@dataclass
class Ledger:
    kube: Kube
    namespace: str
    run: str  # the RayJob name, as listed in a DGD's users
    emit: Emit
    created: list[Created] = field(default_factory=list)
    claimed: list[Created] = field(default_factory=list)
    cluster_uid: str | None = None  # the owner (RayJob or RayCluster) this run linked reused DGDs to

    def rollback(self, interrupts: RollbackInterrupts) -> bool:
        """Undo everything; True when a further Ctrl-C aborted it."""
        done: dict[str, list[str]] = {
            "deleted": [],
            "kept": [f"DynamoGraphDeployment {entry.name} (existed before this run)" for entry in self.claimed],
        }
        left: list[LeftBehind] = []
        todo = self.created[::-1]
        try:
            # Reused DGDs first: off with this run before its RayJob goes, so GC cannot take them
            # with this run's RayCluster.
            for entry in list(self.claimed):
                self._release(entry, unclaim=True)
                self.claimed.remove(entry)
            # Newest first: every object is created after its owner, so each is deleted (and
            # reported) before the owner whose deletion would let GC take it unseen.
            while todo:
                entry = todo[0]
                self.emit(Waiting("rollback", f"deleting {entry.kind.kind} {entry.name}"))
                try:
                    outcome = self._undo(entry)
                except ApiError as err:
                    left.append(entry.left(self.namespace, f"delete failed: {err.message}"))
                else:
                    if outcome:
                        done[outcome[0]].append(outcome[1])
                todo.pop(0)
        except KeyboardInterrupt:
            left += [entry.left(self.namespace, "rollback aborted") for entry in todo]
        interrupts.abortable = False
        self.created.clear()
        self.emit(RolledBack(tuple(done["deleted"]), tuple(done["kept"]), aborted=bool(todo)))
        for leftover in left:
            self.emit(leftover)
        return bool(todo)

    def _undo(self, entry: Created) -> tuple[str, str] | None:
        """Delete one entry: ("deleted"|"kept", description), or None when it was already gone."""
        what = f"{entry.kind.kind} {entry.name}"
        if entry.kind not in dgd.KINDS:
            return ("deleted", what) if self.kube.delete(entry.kind, entry.name, self.namespace) else None
        while True:  # only when no other live run uses it; the delete is guarded by the version judged
            current = self.kube.find(entry.kind, entry.name, self.namespace)
            if current is None:
                return None
            others = [user for user in usage.users(self.kube, current, self.namespace) if user != self.run]
            others = usage.live(self.kube, others, self.namespace, starting_is_live=True)
            if others:
                self._release(entry, unclaim=False)
                return "kept", f"{what} (run {', '.join(others)} uses it too)"
            try:
                self.kube.delete(entry.kind, entry.name, self.namespace,
                                 resource_version=current["metadata"]["resourceVersion"])
                return "deleted", what
            except ConflictError:
                continue  # changed since we looked (maybe a new user): judge again

    def _release(self, entry: Created, *, unclaim: bool) -> None:
        """Take this run's RayCluster off a kept DGD's owners (and, ``unclaim``, this run off its users)."""
        def change(obj: dict) -> dict | None:
            users = (dgd.users_patch(obj, remove=self.run) if unclaim else None) or {"metadata": {}}
            owners = owners_patch(obj, remove=self.cluster_uid) or {"metadata": {}}
            metadata = {**users["metadata"], **owners["metadata"]}
            return {"metadata": metadata} if metadata else None

        try:
            self.kube.modify(entry.kind, entry.name, change, self.namespace)
        except NotFoundError:
            pass
        except ApiError as err:
            self.emit(Warning(f"could not take run {self.run} off DGD {entry.name} ({err.message}); if this run's "
                              "RayCluster still owns it, GC deletes it with that cluster"))
