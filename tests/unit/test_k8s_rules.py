"""k8s_rules and pod_schema: Kubernetes' own rules, accepting what the API server accepts."""

from __future__ import annotations

import pytest

from nrl_k8s.kinds import k8s_rules as rules
from nrl_k8s.kinds.k8s_rules import Invalid
from nrl_k8s.kinds.pod_schema import check_extra_pod_spec, check_pod_template

QUANTITIES_OK = ["4", "500m", "16Gi", "1.5", ".5", "5.", "1e3", "2E-1", "100n", "0", "-0", 4, 0.5, 0]
QUANTITIES_BAD = ["lots", "", "1.5.1", "16GB", "Gi", "-1", "- 1", float("nan"), float("inf"), -2, True, None, [1]]


@pytest.mark.parametrize("value", QUANTITIES_OK, ids=repr)
def test_quantity_accepts(value):
    rules.quantity(value)


@pytest.mark.parametrize("value", QUANTITIES_BAD, ids=repr)
def test_quantity_refuses(value):
    with pytest.raises(Invalid):
        rules.quantity(value)


LABELS_OK = [{"team": "rl"}, {"app.kubernetes.io/name": "x"}, {"a": ""}, {"a_b.c-d": "v_1.2-3"}, {"x" * 63: "y" * 63},
             {"count": 3}, {"flag": True}]
LABELS_BAD = [{"team name": "rl"}, {"Team.COM/x": "y"}, {"/x": "y"}, {"x/": "y"}, {"x" * 64: "y"}, {"a": "y" * 64},
              {"a": "-lead"}, {"a": "a b"}, {"a": None}, {"a": [1]}, {1: "x"}]


@pytest.mark.parametrize("labels", LABELS_OK, ids=repr)
def test_labels_accept(labels):
    rules.labels(labels)


@pytest.mark.parametrize("labels", LABELS_BAD, ids=lambda v: repr(v)[:40])
def test_labels_refuse_naming_the_key(labels):
    with pytest.raises(Invalid) as err:
        rules.labels(labels)
    assert err.value.path == (next(iter(labels)),)


def test_annotations_size_limit_counts_keys_and_values():
    rules.annotations({"k": "x" * (256 * 1024 - 1)})
    with pytest.raises(Invalid, match="262145 bytes"):
        rules.annotations({"k": "x" * (256 * 1024)})


@pytest.mark.parametrize(
    "value, ok", [(1, True), (65535, True), (0, False), (65536, False), ("80", False), (True, False)]
)
def test_port(value, ok):
    if ok:
        rules.port(value)
    else:
        with pytest.raises(Invalid):
            rules.port(value)


@pytest.mark.parametrize("name, ok", [("http", True), ("dash-board", True), ("a" * 16, False), ("8080", False),
                                      ("a--b", False), ("Web", False)])
def test_port_name(name, ok):
    if ok:
        rules.port_name(name)
    else:
        with pytest.raises(Invalid):
            rules.port_name(name)


def template(**container) -> dict:
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "img:1", **container}]},
    }


POD_OK = {
    "ports and probes": template(ports=[{"containerPort": 8000, "name": "http", "hostPort": 0}],
                                 readinessProbe={"httpGet": {"path": "/health", "port": "http"}}),
    "resources": template(resources={"limits": {"nvidia.com/gpu": 8, "cpu": "500m"}, "requests": {"memory": "16Gi"}}),
    "null fields": {"metadata": None, "spec": {"containers": [{"name": "main", "image": "img:1", "env": None}]}},
}


@pytest.mark.parametrize("value", POD_OK.values(), ids=POD_OK)
def test_pod_template_accepts(value):
    check_pod_template(value, rendered=True)


POD_BAD = {
    "containers not a list": ({"spec": {"containers": "abc"}}, ("spec", "containers"), "expected array"),
    "unknown field": (template(resouces={}), ("spec", "containers", 0, "resouces"), "unknown field"),
    "missing name": ({"spec": {"containers": [{"image": "x"}]}}, ("spec", "containers", 0, "name"), "is required"),
    "port out of range": (
        template(ports=[{"containerPort": 99999}]),
        ("spec", "containers", 0, "ports", 0, "containerPort"),
        "out of range",
    ),
    "bad quantity": (
        template(resources={"limits": {"memory": "lots"}}),
        ("spec", "containers", 0, "resources", "limits", "memory"),
        "not a quantity",
    ),
    "half a GPU": (
        template(resources={"limits": {"nvidia.com/gpu": "0.5"}}),
        ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
        "whole number",
    ),
    "empty image": (template(image=""), ("spec", "containers", 0, "image"), "image is empty"),
    "no image": ({"spec": {"containers": [{"name": "main"}]}}, ("spec", "containers", 0, "image"), "no image"),
    "container name": (template(name="Main_1"), ("spec", "containers", 0, "name"), "not a valid Kubernetes name"),
    "template label": (
        {"metadata": {"labels": {"a b": "c"}}, "spec": template()["spec"]},
        ("metadata", "labels", "a b"),
        "label key",
    ),
}


@pytest.mark.parametrize("value, path, problem", POD_BAD.values(), ids=POD_BAD)
def test_pod_template_refuses_at_the_key(value, path, problem):
    with pytest.raises(Invalid) as err:
        check_pod_template(value, rendered=True)
    assert err.value.path == path
    assert problem in err.value.problem


def test_unrendered_template_may_miss_containers_and_images():
    check_pod_template({"spec": {"nodeSelector": {"pool": "gpu"}}}, rendered=False)
    check_pod_template({"spec": {"containers": [{"name": "ray-head"}]}}, rendered=False)


def test_extra_pod_spec_main_container_is_a_container_without_a_name():
    check_extra_pod_spec(
        {"mainContainer": {"args": ["--model", "x"]}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    )
    with pytest.raises(Invalid) as err:
        check_extra_pod_spec({"mainContainer": {"args": "--model x"}})
    assert err.value.path == ("mainContainer", "args")
