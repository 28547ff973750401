"""The bring-up steps the run flows share (``rayjob``: ``--rayjob`` and ``--parallel``;
``raycluster``: ``--raycluster`` and ``cluster up``), over one namespace.

A flow lists these steps and its own in its order (``lifecycle`` runs it). Every object a step
creates goes into the run's rollback ledger before the request is sent.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Final

from nrl_k8s.errors import (
    ApiError,
    ConfigError,
    ConflictError,
    FitError,
    ForbiddenError,
    NotFoundError,
    ResourceFailed,
    ServerError,
    UnauthorizedError,
)
from nrl_k8s.events import Applied, Became, Emit, LeftBehind, Waiting, Warning
from nrl_k8s.kinds import crds, deployment, dgd
from nrl_k8s.kinds.base import OWNER_LABEL, Kind, delete_command, maker, managed, owned, owner_reference, owners_patch
from nrl_k8s.kinds.drift import spec_drift
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kube.diagnose import pod_selector
from nrl_k8s.kube.errors import KindNotServedError
from nrl_k8s.ops import fit
from nrl_k8s.ops.probe import Permission, missing_device_classes, missing_permissions

from .concurrency import fan_out
from .rollback import Created, Ledger
from .serving import healthy, present, wait_http, wait_serving

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

GONE_TIMEOUT_S = 600
PROVISION_TIMEOUT_S = 1800  # a RayCluster's provisioning (both flows wait this long)


class _Unread(Enum):
    UNREAD = "unread"


UNREAD: Final = _Unread.UNREAD  # BringUp.ensure: the live object was not read yet
DEPLOYMENT_TIMEOUT_S = 600


Stamp = Callable[[Kind, dict], dict]  # a manifest as the flow creates it
Reused = Callable[[Kind, dict, str], dict]  # (kind, live object, label) -> the live object the flow keeps


class BringUp:
    """Shared steps over one namespace; ``run`` names the run in DGD users and rollback messages.
    ``adopt`` (--adopt): reuse, and drive, a same-named object another user or a person made.
    A flow's own rules for what it creates and reuses come in as ``stamp`` and ``reused``."""

    def __init__(self, kube: Kube, namespace: str, run: str, emit: Emit, *, adopt: bool = False,
                 place_anyway: bool = False, stamp: Stamp | None = None, reused: Reused | None = None):
        self.kube, self.ns, self.emit, self.adopt, self.place_anyway = kube, namespace, emit, adopt, place_anyway
        self.stamp, self.reused = stamp, reused
        self.ledger = Ledger(kube, namespace, run, emit)
        self.dgd_actions: dict[str, str] = {}  # DGD name -> "created" | "reused"
        self.dgd_kinds: dict[str, Kind] = {}  # DGD name -> its descriptor, in its manifest's version
        self.dgd_owners: dict[str, list[str]] = {}  # DGD name -> owner names
        self.cluster: str | None = None  # the training RayCluster, once known
        self._read: dict[tuple[str, str], dict | None] = {}  # (kind, name) -> what check_owners read, for ensure

    # -- preflight -------------------------------------------------------------------------
    def check_permissions(self, needed: list[Permission], *, dashboard_url_helps: bool = False) -> None:
        """Refuse when the API server denies one of ``needed``; ``dashboard_url_helps``: the run
        needs services/proxy only for what --dashboard-url replaces (the hint says so). Only a
        review the server refuses means "cannot verify, going ahead": no answer (``UnreachableError``,
        ``ServerError`` once retries are spent) or rejected credentials end the run."""
        try:
            missing = missing_permissions(self.kube, needed, self.ns)
        except (UnauthorizedError, ServerError):
            raise
        except ApiError as err:
            self.emit(Warning(f"cannot verify permissions before starting ({err.message}); going ahead"))
            return
        if missing:
            proxy = dashboard_url_helps and any(p.resource == "services/proxy" for p in missing)
            raise ForbiddenError(
                f"missing permissions in namespace {self.ns}: {', '.join(map(str, missing))}; nothing was created",
                hint="ask your cluster admin for a Role (and RoleBinding) granting them; "
                "`nrl-k8s check` lists every permission a run needs"
                + ("; without services/proxy, pass --dashboard-url to reach the Ray dashboard directly (e.g. "
                   "through `kubectl port-forward`): the DGD frontends are then gated on pod readiness"
                   if proxy else ""),
            )

    def check_dgd_versions(self, dgds: dict[str, dict]) -> None:
        """Refuse when the API server does not serve a DGD's apiVersion (asked of discovery;
        when discovery is forbidden, go ahead)."""
        needed = sorted({m["apiVersion"] for m in dgds.values()})
        served = self.kube.served_versions(crds.DGD) if needed else None
        missing = [v for v in needed if served is not None and v.rpartition("/")[2] not in served]
        if missing:
            serves = f"it serves {', '.join(served)}" if served else "its CRD is not installed"
            raise NotFoundError(
                f"the API server does not serve DynamoGraphDeployment {', '.join(missing)} ({serves}); "
                "nothing was created",
                hint=f"{crds.HELMFILE_HINT}; {crds.UPGRADE[crds.DGD]}",
            )

    def check_owners(self, manifests: list[dict]) -> None:
        """Refuse, before anything is applied, a planned object that exists and is not this user's
        own nrl-k8s object (``ensure`` refuses it too, should one appear meanwhile), and claims naming
        a DeviceClass the cluster lacks (their pods would wait in Pending forever), and pod groups that
        never fit the cluster (``check_fit``)."""
        if missing := missing_device_classes(self.kube, manifests):
            raise missing
        self.check_fit(manifests)
        for manifest in manifests:
            kind, name = kind_of(manifest), manifest["metadata"]["name"]
            try:
                self._read[(kind.plural, name)] = live = self.kube.find(kind, name, self.ns)
            except KindNotServedError:
                continue  # nothing of it can exist; check_dgds says which versions are served
            self.refuse_foreign(manifest, live)

    def check_fit(self, manifests: list[dict]) -> None:
        """Refuse a run with a pod group that never fits the cluster (unless ``place_anyway``); warn
        about each that fits only once capacity frees."""
        verdicts = fit.report(self.kube, self.ns, manifests)
        never = [v for v in verdicts if v.state == fit.NEVER]
        if never and not self.place_anyway:
            raise FitError("; ".join(f"{v.group}: {v}" for v in never) + "; nothing was applied",
                           hint="give its pods what a node has (nrl-k8s check shows the fit of every pod group), "
                                "or pass --place-anyway to apply it regardless")
        for verdict in verdicts:
            if verdict.state in (fit.ONCE, fit.NEVER):
                self.emit(Warning(f"{verdict.group}: {verdict}: its pods wait in Pending until then"
                                  if verdict.state == fit.ONCE else f"{verdict.group}: {verdict} (--place-anyway)"))

    def read(self, kind: Kind, name: str) -> dict | None:
        """The live object: what ``check_owners`` read of it, the first time; else a fresh read."""
        found = self._read.pop((kind.plural, name), UNREAD)
        return self.kube.find(kind, name, self.ns) if found is UNREAD else found

    def refuse_foreign(self, manifest: dict, live: dict | None) -> None:
        """ConfigError (exit 2) when ``live`` (``manifest``'s live object) was made by another user or
        not by nrl-k8s, unless ``adopt``."""
        owner = (manifest["metadata"].get("labels") or {}).get(OWNER_LABEL)
        who = maker(live, owner) if live is not None and not self.adopt else None
        if who:
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            raise ConfigError(f"{kind} {name} already exists in namespace {self.ns}, made by {who}; "
                              "nrl-k8s never reuses, drives or deletes it",
                              hint="give yours another name, or pass --adopt to take it over deliberately")

    def check_dgds(self, dgds: dict[str, dict]) -> dict[str, dict | None]:
        """The live DGD of each key (None when absent); a different live spec is refused. Discovery
        is asked only when a DGD's apiVersion is not served, to say which versions are."""
        existing = {}
        for key, manifest in dgds.items():
            name = manifest["metadata"]["name"]
            try:
                found = self.kube.find(dgd.kind_of(manifest), name, self.ns)
            except KindNotServedError:
                self.check_dgd_versions(dgds)
                raise
            changed = spec_drift(manifest, found) if found is not None else []
            if changed:
                raise ConfigError(
                    f"DGD {name} (infra.dynamo.{key}) already exists in namespace {self.ns} with a different spec "
                    f"({'; '.join(changed[:3])})",
                    hint=f"delete it (kubectl -n {self.ns} delete dgd {name}) or use "
                    f"`nrl-k8s cluster up RECIPE --target dynamo.{key} --recreate` with this run's RECIPE",
                )
            existing[key] = found
        return existing

    # -- create / reuse --------------------------------------------------------------------
    def create(self, kind: Kind, manifest: dict, label: str) -> dict:
        """Create and remember it for rollback; remembered first, so Ctrl-C mid-request still rolls it back."""
        if self.stamp is not None:
            manifest = self.stamp(kind, manifest)
        entry = Created(kind, manifest["metadata"]["name"], label)
        self.ledger.created.append(entry)
        try:
            return self.kube.create(kind, manifest)
        except ConflictError:
            self.ledger.created.remove(entry)  # someone else's object: never ours to delete
            raise ResourceFailed(
                f"{kind.kind} {entry.name} appeared while this run was starting",
                hint="another run may be starting the same config; if not (a create of this run that timed out "
                f"can land late), remove it: {delete_command(kind, entry.name, self.ns)}",
            ) from None

    def ensure(self, kind: Kind, manifest: dict, label: str, *, recreate: bool = False,
               live: dict | None | _Unread = UNREAD) -> tuple[dict, str]:
        """Reuse an identical live object, keep a drifted one (warning with the paths) unless
        ``recreate`` (nrl-k8s-made objects only), else create; (live object, action). ``live``:
        the object as just read (None: absent), saving the read."""
        name = manifest["metadata"]["name"]
        if live is UNREAD:
            live = self.read(kind, name)
        self.refuse_foreign(manifest, live)
        if live is not None:
            changed = spec_drift(manifest, live)
            if changed and not recreate:
                self.emit(Warning(f"{label} ({kind.kind} {name}) differs from the live object, keeping it "
                                  f"(--recreate replaces it): {'; '.join(changed)}"))
            if not changed or not recreate:
                self.emit(Applied(label, name, "reused"))
                return (live if self.reused is None else self.reused(kind, live, label)), "reused"
            if not managed(live):
                raise ConfigError(f"{label} ({kind.kind} {name}) exists but was not created by nrl-k8s; "
                                  "refusing to replace it",
                                  hint=f"delete it yourself: {delete_command(kind, name, self.ns)}")
            self.kube.delete(kind, name, self.ns)
            self.kube.wait_gone(kind, name, self.ns, timeout_s=GONE_TIMEOUT_S)
        created = self.create(kind, manifest, label)
        self.emit(Applied(label, name, "recreated" if live is not None else "created"))
        return created, "created"

    def wait_ready(self, kind: Kind, readiness, name: str, label: str, timeout_s: float, emit: Emit | None = None,
                   pods: str | None = None) -> dict:
        """Until ``readiness`` says Ready; a failure names its pods' reasons and Events (``pods``: their
        selector, known by itself for RayClusters and DGDs)."""
        emit = emit or self.emit
        obj = self.kube.wait(kind, present(readiness), name=name, namespace=self.ns, timeout_s=timeout_s,
                             on_progress=lambda reason: emit(Waiting(label, reason)), what=f"{label} ({name})",
                             pods=pods or pod_selector(kind, name))
        assert obj is not None  # present(): never Ready while absent
        emit(Became(label, "ready"))
        return obj

    # -- Deployments -----------------------------------------------------------------------
    def deployments(self, deployments: dict[str, list[dict]], health: dict[str, tuple[str, float]], *,
                    recreate: bool = False, wait: bool = True) -> None:
        """Each Deployment and its Service ensured, then (``wait``) every Deployment awaited Available
        and (``health``: key -> (url, timeout)) answering 2xx, in parallel."""
        for key, objects in deployments.items():
            for manifest in objects:
                self.ensure(kind_of(manifest), manifest, f"deployments.{key}", recreate=recreate)
        if not wait:
            return
        fan_out({key: functools.partial(self._wait_deployment, deployments[key][0], key, health.get(key))
                 for key in deployments}, self.emit, lambda key: None)

    def _wait_deployment(self, manifest: dict, key: str, health: tuple[str, float] | None, emit: Emit) -> None:
        label = f"deployments.{key}"
        self.wait_ready(deployment.KIND, deployment.readiness, manifest["metadata"]["name"], label,
                        DEPLOYMENT_TIMEOUT_S, emit, pods=deployment.pod_selector(manifest))
        self.wait_healthy(label, health, emit)

    def wait_healthy(self, label: str, health: tuple[str, float] | None, emit: Emit | None = None,
                     failed=lambda: None) -> None:
        """Until ``health`` = (url, timeout) answers 2xx (service proxy from outside the cluster);
        ``failed()`` returning a reason ends the wait early."""
        if health is not None:
            emit = emit or self.emit
            url, timeout = health
            wait_http(self.kube, label, url, self.ns, time.monotonic() + timeout, emit, up=healthy, failed=failed)
            emit(Became(label, f"healthy ({url})"))

    # -- DGDs ------------------------------------------------------------------------------
    def apply_dgds(self, dgds: dict[str, dict], existing: dict[str, dict | None], owner: dict | None = None) -> None:
        """Create each DGD (with ``owner`` already in its metadata when given) or reuse the live one."""
        for key, manifest in dgds.items():
            name, label = manifest["metadata"]["name"], f"dynamo.{key}"
            self.dgd_kinds[name] = dgd.kind_of(manifest)
            if existing[key] is not None:
                live = self.claim(name)
                self.dgd_actions[name] = "reused"
                self.emit(Applied(label, name, "reused"))
                if owner is not None:
                    self.link_owner(name, owner, live)
                continue
            if owner is not None:
                manifest = owned(manifest, owner)
                self.dgd_owners[name] = [owner["metadata"]["name"]]
                self.ledger.cluster_uid = owner["metadata"]["uid"]  # a rollback that keeps it takes this owner off
            self.create(self.dgd_kinds[name], manifest, label)
            self.dgd_actions[name] = "created"
            self.emit(Applied(label, name, "created" + (f", owned by {owner['kind']} {owner['metadata']['name']}"
                                                        if owner is not None else "")))

    def claim(self, name: str) -> dict:
        """List this run among the users of a DGD it reuses, so no other run's rollback deletes it;
        the DGD as it then is."""
        entry = Created(self.dgd_kinds[name], name, "dynamo")
        self.ledger.claimed.append(entry)
        try:
            return self.kube.modify(entry.kind, name, lambda obj: dgd.users_patch(obj, add=self.ledger.run), self.ns)
        except NotFoundError:
            self.ledger.claimed.remove(entry)
            raise ResourceFailed(f"DGD {name} was deleted while this run was starting to reuse it",
                                 hint="run again: this run creates it") from None

    def wait_dgds(self, dgds: dict[str, dict], timeouts: dict[str, float]) -> None:
        """Three-gate readiness of every DGD, in parallel."""
        fan_out({key: functools.partial(wait_serving, self.kube, f"dynamo.{key}", manifest, timeouts[key])
                 for key, manifest in dgds.items()},
                 self.emit, lambda key: self.emit(Became(f"dynamo.{key}", "serving")))

    def create_owned(self, kind: Kind, manifest: dict, owner: dict, label: str) -> dict:
        """Create ``manifest`` with ``owner`` already its owner (never a moment without one)."""
        created = self.create(kind, owned(manifest, owner), label)
        self.emit(Applied(label, manifest["metadata"]["name"],
                          f"created ({kind.kind}), owned by {owner['kind']} {owner['metadata']['name']}"))
        return created

    def add_owner(self, kind: Kind, name: str, owner: dict, replacing: str | None = None) -> None:
        """Make ``owner`` a non-controlling owner of an object this run created (GC deletes it with
        the owner), in place of the owner of uid ``replacing`` when given (one patch: never unowned)."""
        ref = owner_reference(owner)

        self.kube.modify(kind, name, lambda live: owners_patch(live, ref, replacing), self.ns)

    def link_owner(self, name: str, owner: dict, live: dict | None = None, replacing: str | None = None) -> None:
        """Add ``owner`` (the RayJob or its RayCluster) as a non-controlling owner of DGD ``name``, in
        place of the owner of uid ``replacing`` when given (``live``: the DGD as just read or patched,
        saving a read); GC then deletes it with that owner.

        A DGD that existed before this run with no owner and no other user is left alone (with a
        warning); adding an owner to a DGD that already has others is warned.
        """
        ref = owner_reference(owner)
        self.ledger.cluster_uid = ref["uid"]
        action = self.dgd_actions[name]
        seen: dict = {}

        def change(current: dict) -> dict | None:
            seen["owners"] = [o for o in current["metadata"].get("ownerReferences") or [] if o.get("uid") != replacing]
            seen["shared"] = any(user != self.ledger.run for user in dgd.users(current))
            if action == "reused" and not seen["owners"] and not seen["shared"]:
                return None
            return owners_patch(current, ref, replacing)

        updated = self.kube.modify(self.dgd_kinds[name], name, change, self.ns, current=live)
        names = [o.get("name") for o in seen["owners"]]
        if action == "reused" and not seen["owners"] and not seen["shared"]:
            self.emit(Warning(f"DGD {name} existed before this run and has no owner: it is not linked to "
                              f"{ref['name']} and will keep running after the run"))
            self.dgd_owners[name] = []
            return
        if any(o.get("uid") == ref["uid"] for o in seen["owners"]):
            self.dgd_owners[name] = names
            return
        if seen["owners"] and replacing is None:
            self.emit(Warning(f"DGD {name} already has owner(s) {', '.join(names)}; adding "
                              f"{ref['name']} as a second owner (GC deletes it once every owner is gone)"))
        self.dgd_owners[name] = [o.get("name") for o in updated["metadata"]["ownerReferences"]]
        self.emit(Became(f"dgd {name}", f"owned by {ref['kind']} {ref['name']}"))

    def report_unlinked(self) -> None:
        """DGDs this run created that its RayCluster does not own: nothing deletes them when the job ends."""
        for name, action in self.dgd_actions.items():
            owners = self.dgd_owners.get(name) or []
            if action == "created" and (self.cluster is None or self.cluster not in owners):
                kind, held = self.dgd_kinds[name], f", owned by {', '.join(owners)} only" if owners else ""
                self.emit(
                    LeftBehind(
                        f"{kind.kind} {name}",
                        f"not linked to RayCluster {self.cluster or '(not created)'}{held}, so it outlives the run",
                        delete_command(kind, name, self.ns),
                    )
                )
