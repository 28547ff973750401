"""What the flows share, in one place each: the RayJob's end-of-job policy, the ownerReferences
patch, and the marks of an unfinished bring-up (written by flows, judged by gc, which imports no flow)."""

from __future__ import annotations

import grimp
import pytest

from nrl_k8s.flows.rayjob import options_for
from nrl_k8s.kinds.base import owners_patch
from nrl_k8s.kinds.rayjob import DEFAULT_TTL_SECONDS, LOG_GRACE_S

A = {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "a", "uid": "uid-a"}
B = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "b", "uid": "uid-b"}


def live(*owners: dict) -> dict:
    return {"metadata": {"name": "x", **({"ownerReferences": list(owners)} if owners else {})}}


OWNERS = {
    "link to an unowned object": (live(), {"add": A}, [A]),
    "already linked: nothing to send": (live(A), {"add": A}, None),
    "a second owner beside the first": (live(A), {"add": B}, [A, B]),
    "moved from one owner to another in one patch": (live(A), {"add": B, "remove": "uid-a"}, [B]),
    "moved, the new owner already there": (live(A, B), {"add": B, "remove": "uid-a"}, [B]),
    "unlinked: the field goes": (live(A), {"remove": "uid-a"}, "gone"),
    "unlink an owner it does not have": (live(B), {"remove": "uid-a"}, None),
    "nothing asked": (live(A), {}, None),
}


@pytest.mark.parametrize("obj,change,owners", OWNERS.values(), ids=OWNERS.keys())
def test_owners_patch(obj, change, owners):
    patch = owners_patch(obj, **change)
    if owners is None:
        assert patch is None
    else:
        assert patch == {"metadata": {"ownerReferences": None if owners == "gone" else owners}}


TEARDOWN = {  # (wait, shutdown, --ttl) -> (ttlSecondsAfterFinished, the run deletes the cluster itself)
    "--wait: the run frees the cluster once the log is in": ((True, True, None), (LOG_GRACE_S, True)),
    "--no-wait: KubeRay frees it as the job ends": ((False, True, None), (DEFAULT_TTL_SECONDS, False)),
    "--wait --ttl 600: the TTL given, the run leaves it": ((True, True, 600), (600, False)),
    "--no-wait --ttl 600": ((False, True, 600), (600, False)),
    "--no-shutdown: KubeRay keeps it": ((True, False, None), (DEFAULT_TTL_SECONDS, False)),
}


@pytest.mark.parametrize("flags,expected", TEARDOWN.values(), ids=TEARDOWN.keys())
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_the_rayjob_flows_share_one_teardown_policy(flags, expected, parallel):
    wait, shutdown, ttl = flags
    options, frees = options_for(wait=wait, shutdown=shutdown, ttl_seconds=ttl, parallel=parallel)
    assert (options.ttl_seconds, frees) == expected
    assert options.shutdown is shutdown and options.parallel is parallel


def test_gc_imports_no_flow_and_unfinished_no_longer_imports_itself_through_gc():
    graph = grimp.build_graph("nrl_k8s")
    chains = graph.find_shortest_chains(importer="nrl_k8s.ops.gc", imported="nrl_k8s.flows")
    assert not chains, chains
    assert graph.find_shortest_chain(importer="nrl_k8s.ops.gc", imported="nrl_k8s.flows.unfinished") is None
