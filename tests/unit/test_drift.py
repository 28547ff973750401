"""Drift between a rendered object and the live one: desired fields must match; lists of named
mappings (DGD v1beta1 components, containers) are compared by name, as the v1alpha1 service map is."""

from __future__ import annotations

import pytest

from nrl_k8s.kinds.drift import drift, spec_drift


def alpha(replicas: int = 1, **extra) -> dict:
    return {"spec": {"services": {"Frontend": {"replicas": 1}, "Worker": {"replicas": replicas, **extra}}}}


def beta(replicas: int = 1, **extra) -> dict:
    return {
        "spec": {"components": [{"name": "Frontend", "replicas": 1}, {"name": "Worker", "replicas": replicas, **extra}]}
    }


# name, desired, live, drift
CASES = [
    ("v1alpha1 identical", alpha(), alpha(), []),
    ("v1beta1 identical", beta(), beta(), []),
    ("v1alpha1 replica change", alpha(2), alpha(), ["spec.services.Worker.replicas: live 1 != desired 2"]),
    (
        "v1beta1 replica change names the component",
        beta(2),
        beta(),
        ["spec.components.Worker.replicas: live 1 != desired 2"],
    ),
    ("v1alpha1 server defaults are not drift", alpha(), alpha(minAvailable=1), []),
    ("v1beta1 server defaults are not drift", beta(), beta(minAvailable=1), []),
    ("v1beta1 order is not drift", beta(), {"spec": {"components": list(reversed(beta()["spec"]["components"]))}}, []),
    (
        "v1beta1 missing component",
        beta(),
        {"spec": {"components": [{"name": "Frontend", "replicas": 1}]}},
        ["spec.components.Worker: live None != desired {'name': 'Worker', 'replicas': 1}"],
    ),
    (
        "containers by name",
        {"spec": {"c": [{"name": "main", "args": ["a"]}]}},
        {"spec": {"c": [{"name": "main", "args": ["b"], "imagePullPolicy": "Always"}]}},
        ["spec.c.main.args: live ['b'] != desired ['a']"],
    ),
    (
        "plain lists compare whole",
        {"spec": {"args": ["a", "b"]}},
        {"spec": {"args": ["a"]}},
        ["spec.args: live ['a'] != desired ['a', 'b']"],
    ),
    # What a real API server defaults inside list items (found on the real control plane).
    (
        "a port's default protocol is not drift",
        {"spec": {"ports": [{"containerPort": 8000}]}},
        {"spec": {"ports": [{"containerPort": 8000, "protocol": "TCP"}]}},
        [],
    ),
    (
        "a changed port is",
        {"spec": {"ports": [{"containerPort": 8001}]}},
        {"spec": {"ports": [{"containerPort": 8000, "protocol": "TCP"}]}},
        ["spec.ports.0.containerPort: live 8000 != desired 8001"],
    ),
    (
        "worker groups by groupName, defaults not drift",
        {"spec": {"w": [{"groupName": "gpu", "replicas": 1}]}},
        {"spec": {"w": [{"groupName": "gpu", "replicas": 1, "maxReplicas": 2147483647}]}},
        [],
    ),
    (
        "a worker group's replicas are",
        {"spec": {"w": [{"groupName": "gpu", "replicas": 2}]}},
        {"spec": {"w": [{"groupName": "gpu", "replicas": 1}]}},
        ["spec.w.gpu.replicas: live 1 != desired 2"],
    ),
    (
        "names that repeat compare whole",
        {"spec": {"c": [{"name": "x"}, {"name": "x"}]}},
        {"spec": {"c": [{"name": "x"}]}},
        ["spec.c: live [{'name': 'x'}] != desired [{'name': 'x'}, {'name': 'x'}]"],
    ),
]


@pytest.mark.parametrize("desired, live, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_spec_drift(desired, live, expected):
    assert spec_drift(desired, live) == expected


def test_drift_stops_at_the_limit():
    desired = {"spec": {"components": [{"name": f"c{i}", "replicas": 2} for i in range(5)]}}
    live = {"spec": {"components": [{"name": f"c{i}", "replicas": 1} for i in range(5)]}}
    assert len(drift(desired["spec"], live["spec"], limit=3)) == 3
