"""Head Service names KubeRay gives a run's RayClusters and RayJob, and collisions among them
or with live Services (refused before anything is applied)."""

from __future__ import annotations

import pytest

from nrl_k8s.errors import ConfigError, ForbiddenError
from nrl_k8s.events import Warning
from nrl_k8s.flows import head_services
from nrl_k8s.flows.head_services import legacy_name
from nrl_k8s.kinds import raycluster


def cluster(name: str, service: str | None = None) -> dict:
    head = {"rayStartParams": {}, **({"headService": {"metadata": {"name": service}}} if service else {})}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {"headGroupSpec": head},
    }


def job(name: str, service: str | None = None) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name},
            "spec": {"rayClusterSpec": cluster("x", service)["spec"]}}


def svc(name: str, cluster_label: str | None = None, origin: str | None = None) -> dict:
    """A live Service, labelled as KubeRay labels a cluster's (``ray.io/cluster``) or a RayJob's own."""
    labels = {**({"ray.io/cluster": cluster_label} if cluster_label else {}),
              **({"ray.io/originated-from-cr-name": origin} if origin else {})}
    return {"metadata": {"name": name, "labels": labels}}


LEGACY = {
    "short-kept": ("train-head-svc", "train-head-svc"),
    "long-keeps-its-last-50": ("a" * 13 + "b" * 40 + "-head-svc", "a" + "b" * 40 + "-head-svc"),
    "leading-digit-becomes-r": ("x" * 10 + "9" + "c" * 40 + "-head-svc", "r" + "c" * 40 + "-head-svc"),
    "leading-dash-becomes-r": ("x" * 10 + "-" + "c" * 40 + "-head-svc", "r" + "c" * 40 + "-head-svc"),
}


@pytest.mark.parametrize(("name", "expected"), LEGACY.values(), ids=LEGACY.keys())
def test_legacy_name_is_kuberays_check_name(name, expected):
    assert head_services.legacy_name(name) == expected
    assert len(head_services.legacy_name(name)) <= 50


CLAIMS = {
    "cluster": (cluster("train"), ["train-head-svc"]),
    "cluster-custom-name": (cluster("train", "my-head"), ["my-head"]),
    "long-cluster-also-its-legacy-name": (cluster("t" * 45), ["t" * 45 + "-head-svc", ("t" * 45 + "-head-svc")[-50:]]),
    "rayjob-its-own-service": (job("grpo"), ["grpo-head-svc"]),
    "rayjob-custom-cluster-service": (job("grpo", "fixed"), ["grpo-head-svc", "fixed"]),
    "other-kinds-none": ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}, []),
}


@pytest.mark.parametrize(("manifest", "names"), CLAIMS.values(), ids=CLAIMS.keys())
def test_claims(manifest, names):
    assert [c.name for c in head_services.claims(manifest)] == names


PLANNED_COLLISIONS = {
    "same-custom-name": ([cluster("a", "shared"), cluster("b", "shared")], "RayCluster a and RayCluster b would both "
                                                                           "get the head Service shared"),
    "custom-name-of-another-clusters-default": ([cluster("a"), cluster("b", "a-head-svc")], "head Service a-head-svc"),
    "same-last-50-characters": ([cluster("x" * 8 + "-" + "m" * 40), cluster("y" * 8 + "-" + "m" * 40)],
                                "KubeRay before 1.4 shortens it"),
}


@pytest.mark.parametrize(("manifests", "message"), PLANNED_COLLISIONS.values(), ids=PLANNED_COLLISIONS.keys())
def test_planned_collisions_are_refused(manifests, message):
    with pytest.raises(ConfigError, match=message) as caught:
        head_services.check_planned(manifests)
    assert caught.value.exit_code == 2 and "kuberay.ROLE.name" in caught.value.hint


def test_distinct_names_pass():
    head_services.check_planned([cluster("training"), cluster("generation"), cluster("gym", "gym-svc")])
    head_services.check_planned([job("grpo")])


class Services:
    """A Kube stand-in holding live Services by name (``forbidden``: every get is refused)."""

    def __init__(self, *live: dict, forbidden: bool = False):
        self.live = {s["metadata"]["name"]: s for s in live}
        self.forbidden = forbidden

    def find(self, kind, name, namespace):
        assert (kind.plural, namespace) == ("services", "ns")
        if self.forbidden:
            raise ForbiddenError("forbidden: cannot get services")
        return self.live.get(name)


LIVE_OK = {
    "nothing-there": ([job("grpo")], Services()),
    "the-clusters-own-service": ([cluster("train")], Services(svc("train-head-svc", cluster_label="train"))),
    "the-rayjobs-own-service": ([job("grpo")], Services(svc("grpo-head-svc", origin="grpo"))),
    "the-rayjobs-clusters-custom-service": ([job("grpo", "fixed")],
                                            Services(svc("fixed", cluster_label="grpo-bx4z9"))),
}


@pytest.mark.parametrize(("manifests", "kube"), LIVE_OK.values(), ids=LIVE_OK.keys())
def test_live_services_of_the_same_objects_pass(manifests, kube):
    head_services.check_live(kube, "ns", manifests, lambda event: pytest.fail(f"unexpected {event}"))


LIVE_COLLISIONS = {
    "rayjob-named-like-a-long-lived-cluster": (
        job("grpo"), Services(svc("grpo-head-svc", cluster_label="grpo")),
        "RayJob grpo would get the head Service grpo-head-svc (KubeRay 1.5+", "--rayjob-name"),
    "another-rayjobs-custom-service": (
        job("second", "fixed"), Services(svc("fixed", cluster_label="first-k2m9x")),
        "Service fixed already exists in namespace ns for Ray cluster first-k2m9x", "--rayjob-name"),
    "a-plain-service": (
        cluster("train"), Services(svc("train-head-svc")), "already exists in namespace ns$",
        "kubectl -n ns delete service train-head-svc"),
}


@pytest.mark.parametrize(("manifest", "kube", "message", "hint"), LIVE_COLLISIONS.values(), ids=LIVE_COLLISIONS.keys())
def test_live_collisions_are_refused(manifest, kube, message, hint):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")) as caught:
        head_services.check_live(kube, "ns", [manifest], lambda event: None)
    assert hint in caught.value.hint


def test_without_permission_to_read_services_a_warning():
    events = []
    head_services.check_live(Services(forbidden=True), "ns", [cluster("a"), cluster("b")], events.append)
    assert events == [Warning("head Service names not checked for collisions: no permission to get services in ns")]


HEAD_SERVICE_OF = {
    "generated": ({"metadata": {"name": "train"}, "spec": {}}, "train-head-svc"),
    "set-by-the-spec": ({"metadata": {"name": "train"}, "spec": {"headGroupSpec": {"headService": {
        "metadata": {"name": "train-dash"}}}}}, "train-dash"),
    "reported-by-kuberay-wins": ({"metadata": {"name": "a" * 60}, "spec": {}, "status": {"head": {
        "serviceName": legacy_name("a" * 60 + "-head-svc")}}}, legacy_name("a" * 60 + "-head-svc")),
}


@pytest.mark.parametrize(("cluster", "expected"), HEAD_SERVICE_OF.values(), ids=HEAD_SERVICE_OF.keys())
def test_the_dashboard_is_reached_through_the_head_service_kuberay_made(cluster, expected):
    assert raycluster.head_service_of(cluster) == expected
