"""DGD version conversion: the mapping (tables, both ways, exact round trips) and the API server
serving one object in both versions (official client, watch, kubectl)."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
from kubernetes import client, watch

from nrl_k8s.sandbox.conversion import ALPHA, BETA, SPEC_ANNOTATION, convert
from nrl_k8s.sandbox.crds import DGD_CRD

GROUP, PLURAL, NS = "nvidia.com", "dynamographdeployments", "default"


def obj(api_version: str, spec: dict, status: dict | None = None, annotations: dict | None = None) -> dict:
    metadata = {"name": "g", "labels": {"team": "rl"}, **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": api_version, "kind": "DynamoGraphDeployment", "metadata": metadata, "spec": spec,
            **({"status": status} if status is not None else {})}


MAIN = {"name": "main"}
# name, v1alpha1 spec, the same spec in v1beta1: each converts exactly into the other.
EXACT = [
    ("names and types", {"services": {"Frontend": {"componentType": "frontend", "replicas": 1}}},
     {"components": [{"name": "Frontend", "type": "frontend", "replicas": 1}]}),
    ("prefill and decode workers are types",
     {"services": {"P": {"componentType": "worker", "subComponentType": "prefill"},
                   "D": {"componentType": "worker", "subComponentType": "decode"}}},
     {"components": [{"name": "P", "type": "prefill"}, {"name": "D", "type": "decode"}]}),
    ("graph env", {"envs": [{"name": "DYN_LOG", "value": "info"}], "backendFramework": "vllm", "services": {}},
     {"env": [{"name": "DYN_LOG", "value": "info"}], "backendFramework": "vllm", "components": []}),
    ("resources, envs and mainContainer make container main",
     {"services": {"W": {"resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"gpu": "1"}},
                         "envs": [{"name": "A", "value": "1"}],
                         "extraPodSpec": {"nodeSelector": {"gpu": "yes"},
                                          "mainContainer": {"image": "vllm:1", "args": ["--model", "m"]}}}}},
     {"components": [{"name": "W", "podTemplate": {"spec": {"nodeSelector": {"gpu": "yes"}, "containers": [
         {"name": "main", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": "1"}},
          "env": [{"name": "A", "value": "1"}], "image": "vllm:1", "args": ["--model", "m"]}]}}}]}),
    ("sidecars follow main", {"services": {"W": {"extraPodSpec": {"containers": [{"name": "log", "image": "busybox"}]}}}},
     {"components": [{"name": "W", "podTemplate": {"spec": {"containers": [MAIN, {"name": "log", "image": "busybox"}]}}}]}),
    ("pod metadata", {"services": {"W": {"extraPodMetadata": {"labels": {"a": "b"}}}}},
     {"components": [{"name": "W", "podTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [MAIN]}}}]}),
    ("shared memory size", {"services": {"W": {"sharedMemory": {"size": "16Gi"}}}},
     {"components": [{"name": "W", "sharedMemorySize": "16Gi"}]}),
    ("shared memory disabled", {"services": {"W": {"sharedMemory": {"disabled": True}}}},
     {"components": [{"name": "W", "sharedMemorySize": "0"}]}),
    ("other fields carried as is", {"services": {"W": {"multinode": {"nodeCount": 2}, "minAvailable": 1}}, "restart": {"id": "1"}},
     {"components": [{"name": "W", "multinode": {"nodeCount": 2}, "minAvailable": 1}], "restart": {"id": "1"}}),
    ("a spec the mapping does not know", {"x": 1}, {"x": 1}),
    ("a service shape the mapping does not know", {"services": {"W": {"extraPodSpec": "odd"}}},
     {"components": [{"name": "W", "extraPodSpec": "odd"}]}),
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
    ("v1beta1 pod without a main container", obj(BETA, {"components": [
        {"name": "W", "podTemplate": {"spec": {"containers": [{"name": "log", "image": "busybox"}]}}}]}), ALPHA),
    ("v1alpha1 gpuType", obj(ALPHA, {"services": {"W": {"resources": {"limits": {"gpu": "1", "gpuType": "amd.com/gpu"}}}}}), BETA),
    ("v1alpha1 env set twice", obj(ALPHA, {"services": {"W": {"envs": [{"name": "A", "value": "1"}],
                                                             "extraPodSpec": {"mainContainer": {"env": [{"name": "A", "value": "2"}]}}}}}), BETA),
]


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
BETA_GRAPH = obj(BETA, {"backendFramework": "vllm", "components": [
    {"name": "Frontend", "type": "frontend", "podTemplate": {"spec": {"containers": [{"name": "main", "image": "fe:1"}]}}},
    {"name": "Worker", "type": "decode", "replicas": 2,
     "podTemplate": {"spec": {"containers": [{"name": "main", "image": "w:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
]})


@pytest.fixture
def dgd_api(server, custom):
    server.install_crd(DGD_CRD)
    return custom


def test_an_object_created_in_one_version_reads_in_the_other(dgd_api):
    dgd_api.create_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, BETA_GRAPH)
    alpha = dgd_api.get_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL, "g")
    assert alpha["apiVersion"] == ALPHA
    assert alpha["spec"]["services"]["Worker"] == {"componentType": "worker", "subComponentType": "decode", "replicas": 2,
                                                   "resources": {"limits": {"gpu": "1"}},
                                                   "extraPodSpec": {"mainContainer": {"image": "w:1"}}}
    assert SPEC_ANNOTATION not in alpha["metadata"].get("annotations", {})
    (listed,) = dgd_api.list_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL)["items"]
    assert listed["spec"] == alpha["spec"]

    stored = dgd_api.get_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, "g")
    assert stored["spec"] == BETA_GRAPH["spec"] and stored["metadata"]["generation"] == 1


def test_writes_through_the_other_version_keep_the_spec_and_generation(dgd_api):
    lossy = obj(BETA, {"components": [{"name": "W", "podTemplate": {"spec": {"containers": [{"name": "log", "image": "b"}]}}}]})
    dgd_api.create_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, lossy)
    patch = {"metadata": {"labels": {"added": "yes"}}}
    dgd_api.patch_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL, "g", patch, _content_type="application/merge-patch+json")
    stored = dgd_api.get_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, "g")
    assert stored["spec"] == lossy["spec"] and stored["metadata"]["generation"] == 1
    assert stored["metadata"]["labels"] == {"team": "rl", "added": "yes"} and "annotations" not in stored["metadata"]

    spec = {"spec": {"services": {"W": {"replicas": 4}}}}
    dgd_api.patch_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL, "g", spec, _content_type="application/merge-patch+json")
    stored = dgd_api.get_namespaced_custom_object(GROUP, "v1beta1", NS, PLURAL, "g")
    assert stored["spec"]["components"][0]["replicas"] == 4 and stored["metadata"]["generation"] == 2


def test_status_written_in_one_version_is_watched_in_the_other(dgd_api):
    created = dgd_api.create_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL, obj(ALPHA, {"services": {"W": {}}}))
    status = {"status": {"state": "successful", "components": {"W": {"replicas": 1, "readyReplicas": 1}}}}
    dgd_api.patch_namespaced_custom_object_status(GROUP, "v1beta1", NS, PLURAL, "g", status,
                                                  _content_type="application/merge-patch+json")
    stream = watch.Watch().stream(dgd_api.list_namespaced_custom_object, GROUP, "v1alpha1", NS, PLURAL,
                                  resource_version=created["metadata"]["resourceVersion"], timeout_seconds=30)
    event = next(stream)
    assert (event["type"], event["object"]["apiVersion"]) == ("MODIFIED", ALPHA)
    assert event["object"]["status"] == {"state": "successful", "services": {"W": {"replicas": 1, "readyReplicas": 1}}}


def test_discovery_prefers_the_storage_version(server, dgd_api, api):
    group = next(g for g in client.ApisApi(api).get_api_versions().groups if g.name == GROUP)
    assert [v.version for v in group.versions] == ["v1beta1", "v1alpha1"]
    assert group.preferred_version.version == "v1beta1"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_gets_one_object_in_both_versions(dgd_api, kubectl):
    dgd_api.create_namespaced_custom_object(GROUP, "v1alpha1", NS, PLURAL, obj(ALPHA, {"services": {
        "Frontend": {"componentType": "frontend"}, "Prefill": {"componentType": "worker", "subComponentType": "prefill"}}}))
    # kubectl expands a short name to its group and resource and drops the version (client-go's
    # shortcut expander), so both short forms find the object, in the preferred version ...
    for short in ("dgd.v1beta1.nvidia.com", "dgd.v1alpha1.nvidia.com"):
        assert kubectl("get", short, "g", "-o", "name") == "dynamographdeployment.nvidia.com/g\n"
    # ... and the resource name with a version reads it in that version.
    beta = kubectl("get", "dynamographdeployments.v1beta1.nvidia.com", "g", "-o", "jsonpath={.apiVersion} {.spec.components[*].type}")
    assert beta == "nvidia.com/v1beta1 frontend prefill"
    alpha = kubectl("get", "dynamographdeployments.v1alpha1.nvidia.com", "g", "-o",
                    "jsonpath={.apiVersion} {.spec.services.Prefill.componentType}")
    assert alpha == "nvidia.com/v1alpha1 worker"
