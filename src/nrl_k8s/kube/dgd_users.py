"""Which runs use a DGD, and which of them are live.

A run is named by its RayJob. A DGD's users are the runs in its ``nrl-k8s.io/users``
annotation (the run that created it and every run that reused it) and the RayJobs behind the
RayClusters that own it. A run is live while its RayJob exists and has not finished. These are
reads through the client (the pure part, the annotation, is ``kinds.dgd.users``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nrl_k8s.kinds import dgd, raycluster, rayjob

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube


def users(kube: Kube, obj: dict, namespace: str) -> list[str]:
    names = dgd.users(obj)
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") != raycluster.KIND.kind:
            continue
        cluster = kube.find(raycluster.KIND, ref["name"], namespace) or {"metadata": {}}
        for owner in cluster["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == rayjob.KIND.kind and owner["name"] not in names:
                names.append(owner["name"])
    return names


def live(kube: Kube, runs: list[str], namespace: str, *, starting_is_live: bool = False) -> list[str]:
    """The ``runs`` whose RayJob is live; ``starting_is_live``: also those without a RayJob yet.

    A run creates its RayJob only once its DGDs serve, so a rollback (which must never delete
    what another run is about to use) counts a run without a RayJob as live.
    """
    found = {run: kube.find(rayjob.KIND, run, namespace) for run in runs}
    return [run for run, job in found.items() if rayjob.live(job) or (job is None and starting_is_live)]
