"""Deployment rendering and readiness."""

from __future__ import annotations

import copy

import pytest

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import deployment
from nrl_k8s.kinds.readiness import Failed, Pending, Ready

SPEC = {
    "replicas": 1,
    "template": {"spec": {"containers": [{"name": "server"}, {"name": "proxy", "image": "envoy:1"}]}},
}


def make_infra(**entry) -> dict:
    return {
        "namespace": "rl",
        "image": "nemo-rl:1",
        "labels": {"team": "rl"},
        "deployments": {"reward": {"spec": copy.deepcopy(SPEC), **entry}},
    }


def test_render_defaults():
    obj = deployment.render(make_infra(labels={"team": "reward"}, annotations={"a": "b"}), "reward")
    assert obj["apiVersion"] == "apps/v1" and obj["kind"] == "Deployment"
    assert obj["metadata"] == {
        "name": "reward",
        "namespace": "rl",
        "labels": {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "reward"},
        "annotations": {"a": "b"},
    }
    spec = obj["spec"]
    assert spec["selector"] == {"matchLabels": {"nrl-k8s.io/deployment": "reward"}}
    # the object's labels go onto its pods too (upstream does the same); the selector's stay
    assert spec["template"]["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "reward",
                                                      "nrl-k8s.io/deployment": "reward"}
    assert [c["image"] for c in spec["template"]["spec"]["containers"]] == ["nemo-rl:1", "envoy:1"]


CASES = [
    ("explicit name", {"name": "rm-server"}, lambda o: o["metadata"]["name"], "rm-server"),
    (
        "explicit selector copied to template",
        {"spec": {**SPEC, "selector": {"matchLabels": {"app": "rm"}}}},
        lambda o: (o["spec"]["selector"], o["spec"]["template"]["metadata"]["labels"]["app"]),
        ({"matchLabels": {"app": "rm"}}, "rm"),
    ),
    (
        "matchExpressions left alone",
        {"spec": {**SPEC, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}},
        lambda o: o["spec"]["selector"],
        {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
    ),
]


@pytest.mark.parametrize("entry, extract, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_render_cases(entry, extract, expected):
    assert extract(deployment.render(make_infra(**entry), "reward")) == expected


def pod_of(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


# Patched like the RayCluster pods (raycluster.apply_identity): (infra fields, pod spec fields, expected pod fields).
IDENTITY = [
    ("pull secrets where unset", {"imagePullSecrets": ["ngc"]}, {}, {"imagePullSecrets": [{"name": "ngc"}]}),
    (
        "pull secrets appended, present names skipped",
        {"imagePullSecrets": ["ngc", {"name": "mine"}]},
        {"imagePullSecrets": [{"name": "mine"}]},
        {"imagePullSecrets": [{"name": "mine"}, {"name": "ngc"}]},
    ),
    ("service account where unset", {"serviceAccount": "trainer"}, {}, {"serviceAccountName": "trainer"}),
    (
        "explicit service account kept",
        {"serviceAccount": "trainer"},
        {"serviceAccountName": "own"},
        {"serviceAccountName": "own"},
    ),
    (
        "image on init containers too",
        {},
        {"initContainers": [{"name": "init"}]},
        {"initContainers": [{"name": "init", "image": "nemo-rl:1"}]},
    ),
]


@pytest.mark.parametrize("infra_fields, pod_fields, expected", [c[1:] for c in IDENTITY], ids=[c[0] for c in IDENTITY])
def test_pod_identity_patched_like_raycluster(infra_fields, pod_fields, expected):
    infra = {**make_infra(), **infra_fields}
    infra["deployments"]["reward"]["spec"]["template"]["spec"].update(copy.deepcopy(pod_fields))
    pod = pod_of(deployment.render(infra, "reward"))
    assert {k: pod.get(k) for k in expected} == expected


def ported(*containers: dict, **spec) -> dict:
    """make_infra with the given containers (and Deployment spec fields)."""
    infra = make_infra()
    infra["deployments"]["reward"]["spec"] = {"template": {"spec": {"containers": list(containers)}}, **spec}
    return infra


SERVICES = [
    ("no ports: no Service", ported({"name": "a"}), None),
    (
        "unnamed port gets port-N, TCP",
        ported({"name": "a", "ports": [{"containerPort": 8000}]}),
        [{"name": "port-8000", "port": 8000, "targetPort": 8000, "protocol": "TCP"}],
    ),
    (
        "ports of every container, names and protocols kept",
        ported({"name": "a", "ports": [{"containerPort": 80, "name": "http"}]},
               {"name": "b", "ports": [{"containerPort": 53, "protocol": "UDP"}]}),
        [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"},
         {"name": "port-53", "port": 53, "targetPort": 53, "protocol": "UDP"}],
    ),
    (
        "same port twice is one Service port",
        ported({"name": "a", "ports": [{"containerPort": 80}]}, {"name": "b", "ports": [{"containerPort": 80}]}),
        [{"name": "port-80", "port": 80, "targetPort": 80, "protocol": "TCP"}],
    ),
]


@pytest.mark.parametrize("infra, ports", [c[1:] for c in SERVICES], ids=[c[0] for c in SERVICES])
def test_service_for_container_ports(infra, ports):
    objects = deployment.render_with_service(infra, "reward")
    assert objects[0] == deployment.render(infra, "reward")
    if ports is None:
        assert len(objects) == 1
        return
    manifest, svc = objects
    assert svc["apiVersion"] == "v1" and svc["kind"] == "Service"
    assert svc["metadata"] == {"name": "reward", "namespace": "rl", "labels": manifest["metadata"]["labels"]}
    assert svc["spec"] == {"type": "ClusterIP", "selector": {"nrl-k8s.io/deployment": "reward"}, "ports": ports}


SELECTORS = [
    ("matchLabels", {"selector": {"matchLabels": {"app": "rm"}}}, {"app": "rm"}),
    (
        "expressions only: the template labels",
        {
            "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "template": {"metadata": {"labels": {"app": "x"}}},
        },
        {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "rl", "app": "x"},
    ),
]


@pytest.mark.parametrize("spec, selector", [c[1:] for c in SELECTORS], ids=[c[0] for c in SELECTORS])
def test_service_selects_the_deployments_pods(spec, selector):
    infra = ported({"name": "a", "ports": [{"containerPort": 80}]})
    entry = infra["deployments"]["reward"]["spec"]
    entry["selector"] = spec["selector"]
    entry["template"].update(spec.get("template") or {})
    assert deployment.render_with_service(infra, "reward")[1]["spec"]["selector"] == selector


ERRORS = [
    ("not declared", lambda i: i["deployments"].clear(), "infra.deployments.reward: is not set"),
    (
        "bad key as name",
        lambda i: i["deployments"].update(Bad_Key=i["deployments"].pop("reward")),
        "not a valid Kubernetes name",
    ),
    (
        "no containers",
        lambda i: i["deployments"]["reward"]["spec"]["template"]["spec"].pop("containers"),
        "template.spec.containers: is empty",
    ),
    (
        "selector conflicts with template",
        lambda i: i["deployments"]["reward"]["spec"].update(
            selector={"matchLabels": {"app": "a"}},
            template={"metadata": {"labels": {"app": "b"}}, "spec": SPEC["template"]["spec"]},
        ),
        "does not match",
    ),
]


@pytest.mark.parametrize("breaker, message", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors(breaker, message):
    infra = make_infra()
    breaker(infra)
    key = next(iter(infra["deployments"]), "reward")
    with pytest.raises(ConfigError, match=message):
        deployment.render(infra, key)


def dep(replicas=2, available=None, updated=None, generation=None, observed=None, conditions=None) -> dict:
    status = {
        k: v
        for k, v in {
            "availableReplicas": available,
            "updatedReplicas": updated,
            "observedGeneration": observed,
            "conditions": conditions,
        }.items()
        if v is not None
    }
    meta = {"generation": generation} if generation is not None else {}
    return {"metadata": meta, "spec": {"replicas": replicas}, "status": status}


READINESS = [
    ("nothing yet", dep(), Pending("0/2 replicas available")),
    ("partially available", dep(available=1, updated=2), Pending("1/2 replicas available")),
    ("all available", dep(available=2, updated=2, generation=1, observed=1), Ready()),
    ("old replicas available during rollout", dep(available=2, updated=1), Pending("2/2 replicas available")),
    (
        "generation not observed",
        dep(available=2, updated=2, generation=2, observed=1),
        Pending("waiting for generation 2 to be observed"),
    ),
    ("scaled to zero", dep(replicas=0), Ready()),
    (
        "progress deadline exceeded",
        dep(
            conditions=[
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "slow"}
            ]
        ),
        Failed("Progressing=False (ProgressDeadlineExceeded: slow)"),
    ),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS], ids=[c[0] for c in READINESS])
def test_readiness(obj, expected):
    assert deployment.readiness(obj) == expected
