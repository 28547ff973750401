"""DGD version conversion, the mapping the conversion webhook applies: tables, both ways, exact
round trips (the webhook itself: test_controlplane_webhook; on the API server: test_controlplane_dynamo_live)."""

from __future__ import annotations

import copy
import json

import pytest

from nrl_k8s_sandbox.controlplane.conversion import ALPHA, BETA, SPEC_ANNOTATION, convert

GROUP, PLURAL, NS = "nvidia.com", "dynamographdeployments", "default"


def obj(api_version: str, spec: dict, status: dict | None = None, annotations: dict | None = None) -> dict:
    metadata = {"name": "g", "labels": {"team": "rl"}, **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": api_version, "kind": "DynamoGraphDeployment", "metadata": metadata, "spec": spec,
            **({"status": status} if status is not None else {})}


MAIN = {"name": "main"}
# name, v1alpha1 spec, the same spec in v1beta1: each converts exactly into the other.
EXACT = [
    (
        "names and types",
        {"services": {"Frontend": {"componentType": "frontend", "replicas": 1}}},
        {"components": [{"name": "Frontend", "type": "frontend", "replicas": 1}]},
    ),
    (
        "prefill and decode workers are types",
        {
            "services": {
                "P": {"componentType": "worker", "subComponentType": "prefill"},
                "D": {"componentType": "worker", "subComponentType": "decode"},
            }
        },
        {"components": [{"name": "P", "type": "prefill"}, {"name": "D", "type": "decode"}]},
    ),
    (
        "graph env",
        {"envs": [{"name": "DYN_LOG", "value": "info"}], "backendFramework": "vllm", "services": {}},
        {"env": [{"name": "DYN_LOG", "value": "info"}], "backendFramework": "vllm", "components": []},
    ),
    (
        "resources, envs and mainContainer make container main",
        {
            "services": {
                "W": {
                    "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"gpu": "1"}},
                    "envs": [{"name": "A", "value": "1"}],
                    "extraPodSpec": {
                        "nodeSelector": {"gpu": "yes"},
                        "mainContainer": {"image": "vllm:1", "args": ["--model", "m"]},
                    },
                }
            }
        },
        {
            "components": [
                {
                    "name": "W",
                    "podTemplate": {
                        "spec": {
                            "nodeSelector": {"gpu": "yes"},
                            "containers": [
                                {
                                    "name": "main",
                                    "resources": {
                                        "requests": {"cpu": "4", "memory": "16Gi"},
                                        "limits": {"nvidia.com/gpu": "1"},
                                    },
                                    "env": [{"name": "A", "value": "1"}],
                                    "image": "vllm:1",
                                    "args": ["--model", "m"],
                                }
                            ],
                        }
                    },
                }
            ]
        },
    ),
    (
        "sidecars follow main",
        {"services": {"W": {"extraPodSpec": {"containers": [{"name": "log", "image": "busybox"}]}}}},
        {
            "components": [
                {"name": "W", "podTemplate": {"spec": {"containers": [MAIN, {"name": "log", "image": "busybox"}]}}}
            ]
        },
    ),
    (
        "pod metadata",
        {"services": {"W": {"extraPodMetadata": {"labels": {"a": "b"}}}}},
        {
            "components": [
                {"name": "W", "podTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [MAIN]}}}
            ]
        },
    ),
    (
        "shared memory size",
        {"services": {"W": {"sharedMemory": {"size": "16Gi"}}}},
        {"components": [{"name": "W", "sharedMemorySize": "16Gi"}]},
    ),
    (
        "shared memory disabled",
        {"services": {"W": {"sharedMemory": {"disabled": True}}}},
        {"components": [{"name": "W", "sharedMemorySize": "0"}]},
    ),
    (
        "other fields carried as is",
        {"services": {"W": {"multinode": {"nodeCount": 2}, "minAvailable": 1}}, "restart": {"id": "1"}},
        {"components": [{"name": "W", "multinode": {"nodeCount": 2}, "minAvailable": 1}], "restart": {"id": "1"}},
    ),
    ("a spec the mapping does not know", {"x": 1}, {"x": 1}),
    (
        "a service shape the mapping does not know",
        {"services": {"W": {"extraPodSpec": "odd"}}},
        {"components": [{"name": "W", "extraPodSpec": "odd"}]},
    ),
]


@pytest.mark.parametrize("alpha, beta", [c[1:] for c in EXACT], ids=[c[0] for c in EXACT])
def test_exact_conversions_both_ways(alpha, beta):
    assert convert(obj(ALPHA, alpha), BETA) == obj(BETA, beta)
    assert convert(obj(BETA, beta), ALPHA) == obj(ALPHA, alpha)


STATUS = {"state": "successful", "observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}
COUNTS = {"W": {"componentKind": "Deployment", "replicas": 1, "readyReplicas": 1}}


def test_status_counts_move_between_services_and_components():
    alpha, beta = obj(ALPHA, {}, {**STATUS, "services": COUNTS}), obj(BETA, {}, {**STATUS, "components": COUNTS})
    assert convert(alpha, BETA) == beta and convert(beta, ALPHA) == alpha


# name, object, the version it is converted to: the other version cannot say it all, so the
# converted object carries the original spec in SPEC_ANNOTATION, and converting back restores it.
LOSSY = [
    (
        "v1beta1 pod without a main container",
        obj(
            BETA,
            {
                "components": [
                    {"name": "W", "podTemplate": {"spec": {"containers": [{"name": "log", "image": "busybox"}]}}}
                ]
            },
        ),
        ALPHA,
    ),
    (
        "v1alpha1 gpuType",
        obj(ALPHA, {"services": {"W": {"resources": {"limits": {"gpu": "1", "gpuType": "amd.com/gpu"}}}}}),
        BETA,
    ),
    (
        "v1alpha1 env set twice",
        obj(
            ALPHA,
            {
                "services": {
                    "W": {
                        "envs": [{"name": "A", "value": "1"}],
                        "extraPodSpec": {"mainContainer": {"env": [{"name": "A", "value": "2"}]}},
                    }
                }
            },
        ),
        BETA,
    ),
    ("v1alpha1 envFromSecret", obj(ALPHA, {"services": {"W": {"envFromSecret": "alice-secrets"}}}), BETA),
]


SECRET_REF = {"secretRef": {"name": "alice-secrets"}}


@pytest.mark.parametrize(
    "service, env_from",
    [
        ({"envFromSecret": "alice-secrets"}, [SECRET_REF]),
        ({"envFromSecret": "alice-secrets", "envs": [{"name": "A", "value": "1"}]}, [SECRET_REF]),
        # the operator merges mainContainer over the dedicated fields: its envFrom replaces the list
        (
            {
                "envFromSecret": "alice-secrets",
                "extraPodSpec": {"mainContainer": {"envFrom": [{"configMapRef": {"name": "c"}}]}},
            },
            [{"configMapRef": {"name": "c"}}],
        ),
    ],
    ids=["alone", "with envs", "mainContainer envFrom wins"],
)
def test_env_from_secret_becomes_the_main_containers_env_from(service, env_from):
    """As the Dynamo operator's webhook maps it (buildMainContainerFromDedicated): what upstream's
    DGDs use to read ``${user:}-secrets``."""
    converted = convert(obj(ALPHA, {"services": {"W": service}}), BETA)
    (component,) = converted["spec"]["components"]
    (main,) = component["podTemplate"]["spec"]["containers"]
    assert main["name"] == "main" and main["envFrom"] == env_from and "envFromSecret" not in component


@pytest.mark.parametrize("original, to", [c[1:] for c in LOSSY], ids=[c[0] for c in LOSSY])
def test_what_a_version_cannot_say_is_kept_and_restored(original, to):
    converted = convert(original, to)
    assert json.loads(converted["metadata"]["annotations"][SPEC_ANNOTATION]) == original["spec"]
    assert convert(converted, original["apiVersion"]) == original
    # Only metadata changed on the way (a label added in the other version): still exact.
    relabelled = copy.deepcopy(converted)
    relabelled["metadata"]["labels"]["added"] = "yes"
    back = convert(relabelled, original["apiVersion"])
    assert back["spec"] == original["spec"] and SPEC_ANNOTATION not in back["metadata"].get("annotations", {})


def test_a_spec_changed_in_the_other_version_is_converted_not_restored():
    original = LOSSY[0][1]
    converted = convert(original, ALPHA)
    converted["spec"]["services"]["W"]["replicas"] = 3
    back = convert(converted, BETA)
    assert back["spec"]["components"][0]["replicas"] == 3
    assert [c["name"] for c in back["spec"]["components"][0]["podTemplate"]["spec"]["containers"]] == ["main", "log"]


def test_objects_of_other_kinds_and_versions_pass_through():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert convert(pod, BETA) is pod
    same = obj(BETA, {"components": []})
    assert convert(same, BETA) is same


# -- served by the API server ------------------------------------------------------------------
BETA_GRAPH = obj(
    BETA,
    {
        "backendFramework": "vllm",
        "components": [
            {
                "name": "Frontend",
                "type": "frontend",
                "podTemplate": {"spec": {"containers": [{"name": "main", "image": "fe:1"}]}},
            },
            {
                "name": "Worker",
                "type": "decode",
                "replicas": 2,
                "podTemplate": {
                    "spec": {
                        "containers": [
                            {"name": "main", "image": "w:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                        ]
                    }
                },
            },
        ],
    },
)
