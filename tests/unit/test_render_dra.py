"""DRA objects: per-owner ComputeDomain / RoCE template, claims rewritten, readiness, kind index."""

from __future__ import annotations

import copy

import pytest

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import deployment, dgd, dra, raycluster, rayjob, secret, service
from nrl_k8s.kinds.index import kind_of
from nrl_k8s.kinds.readiness import Pending, Ready
from nrl_k8s.ops import targets

CD = {"name": "compute-domain-channel", "resourceClaimTemplateName": "shared-cd-channel"}
ROCE = {"name": "roce-channel", "resourceClaimTemplateName": "roce.example.com"}


def pod(*claims: dict, gpus: int | None = None) -> dict:
    container = {"name": "ray"}
    if gpus is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    spec = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = [copy.deepcopy(c) for c in claims]
        container.setdefault("resources", {})["claims"] = [{"name": c["name"]} for c in claims]
    return {"spec": spec}


def group(name: str, replicas: int, template: dict, **fields) -> dict:
    return {"groupName": name, "replicas": replicas, "rayStartParams": {}, "template": template, **fields}


def cluster(name: str, head: dict, *groups: dict, **entry) -> dict:
    spec = {"headGroupSpec": {"rayStartParams": {}, "template": head}, "workerGroupSpecs": list(groups)}
    return {"name": name, "spec": spec, **entry}


def make_infra(dra_settings: dict | None = None, **roles) -> dict:
    infra = {"namespace": "ns", "image": "img:0", "labels": {"team": "rl"}, "launch": {"entrypoint": "python run.py"},
             "kuberay": copy.deepcopy(roles)}
    return {**infra, "dra": dra_settings} if dra_settings else infra


def claims(obj: dict) -> list[list[dict]]:
    spec = obj["spec"].get("rayClusterSpec") or obj["spec"]
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    return [g["template"]["spec"].get("resourceClaims", []) for g in groups]


def by_kind(objects: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objects}


# (infra, expected ComputeDomain numNodes or None, expected RoCE request or None)
CASES = [
    ("no claims: no objects", make_infra(training=cluster("train", pod(), group("g", 2, pod()))), None, None),
    (
        "numNodes counts every worker pod that claims the domain",
        make_infra(
            training=cluster("train", pod(), group("a", 3, pod(CD)), group("b", 2, pod(CD)), group("c", 4, pod()))
        ),
        5,
        None,
    ),
    (
        "a claiming head counts too",
        make_infra(training=cluster("train", pod(CD), group("a", 2, pod(CD)))),
        3,
        None,
    ),
    (
        "multi-host replicas count each host",
        make_infra(training=cluster("train", pod(), group("a", 2, pod(CD), numOfHosts=4))),
        8,
        None,
    ),
    (
        "segments together count the whole group",
        make_infra(training=cluster("train", pod(), group("a", 5, pod(CD)), segmentSize=2)),
        5,
        None,
    ),
    (
        "roce: the default class (an authored template name is replaced, not a class), one NIC per GPU",
        make_infra(training=cluster("train", pod(), group("a", 2, pod(CD, ROCE, gpus=4)))),
        2,
        {"name": "roce", "exactly": {"deviceClassName": dra.DEFAULT_ROCE_DEVICE_CLASS, "count": 4}},
    ),
    (
        "roce and numNodes set in the infra (upstream's GB300 values)",
        make_infra(
            {"roce": {"deviceClassName": "roce.networking.k8s.aws", "count": 8}, "computeDomain": {"numNodes": 0}},
            training=cluster("train", pod(), group("a", 2, pod(CD, ROCE, gpus=4))),
        ),
        0,
        {"name": "roce", "exactly": {"deviceClassName": "roce.networking.k8s.aws", "count": 8}},
    ),
    (
        "roce: defaults without a template name or GPUs",
        make_infra(training=cluster("train", pod(), group("a", 2, pod({"name": "roce-channel"})))),
        None,
        {"name": "roce", "exactly": {"deviceClassName": dra.DEFAULT_ROCE_DEVICE_CLASS, "count": 1}},
    ),
    (
        "roce: count is the most GPUs of any claiming pod",
        make_infra(
            training=cluster("train", pod(), group("a", 1, pod(ROCE, gpus=2)), group("b", 1, pod(ROCE, gpus=8)))
        ),
        None,
        {"name": "roce", "exactly": {"deviceClassName": dra.DEFAULT_ROCE_DEVICE_CLASS, "count": 8}},
    ),
]


@pytest.mark.parametrize("infra, nodes, request_", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_objects_for_the_claims(infra, nodes, request_):
    manifest, objects = raycluster.render_with_dra(infra, "training")
    found = by_kind(objects)
    assert [o["kind"] for o in objects] == [
        k for k, want in (("ComputeDomain", nodes), ("ResourceClaimTemplate", request_)) if want is not None
    ]
    if nodes is not None:
        assert found["ComputeDomain"] == {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomain",
            "metadata": {"name": "train-cd", "namespace": "ns",
                         "labels": {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "rl"}},
            "spec": {"numNodes": nodes, "channel": {"resourceClaimTemplate": {"name": "train-cd-channel"}}},
        }
    if request_ is not None:
        rct = found["ResourceClaimTemplate"]
        assert rct["apiVersion"] == "resource.k8s.io/v1" and rct["metadata"]["name"] == "train-roce"
        assert rct["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "rl"}
        assert rct["spec"] == {"spec": {"devices": {"requests": [request_]}}}
    rewritten = {"compute-domain-channel": "train-cd-channel", "roce-channel": "train-roce"}
    for pod_claims in claims(manifest):
        for claim in pod_claims:
            assert claim == {"name": claim["name"], "resourceClaimTemplateName": rewritten[claim["name"]]}


def test_other_claims_are_left_alone_and_shared_claims_rewritten():
    other = {"name": "gpus", "resourceClaimTemplateName": "a100"}
    shared = {"name": "compute-domain-channel", "resourceClaimName": "someone-elses"}
    manifest, objects = raycluster.render_with_dra(
        make_infra(training=cluster("t", pod(), group("a", 1, pod(other, shared)))), "training"
    )
    assert claims(manifest)[1] == [
        other,
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "t-cd-channel"},
    ]
    assert [o["metadata"]["name"] for o in objects] == ["t-cd"]


def test_two_clusters_never_share():
    same = group("a", 2, pod(CD, ROCE))
    infra = make_infra(training=cluster("train", pod(), same), generation=cluster("gen", pod(), same))
    train, train_objects = raycluster.render_with_dra(infra, "training")
    gen, gen_objects = raycluster.render_with_dra(infra, "generation")
    assert [o["metadata"]["name"] for o in train_objects] == ["train-cd", "train-roce"]
    assert [o["metadata"]["name"] for o in gen_objects] == ["gen-cd", "gen-roce"]
    assert {c["resourceClaimTemplateName"] for c in claims(train)[1]} == {"train-cd-channel", "train-roce"}
    assert {c["resourceClaimTemplateName"] for c in claims(gen)[1]} == {"gen-cd-channel", "gen-roce"}
    assert infra["kuberay"]["training"]["spec"]["workerGroupSpecs"][0]["template"]["spec"]["resourceClaims"] == [
        CD,
        ROCE,
    ]


def test_rayjob_objects_are_named_after_the_rayjob():
    infra = make_infra(training=cluster("train-job", pod(), group("a", 3, pod(CD, ROCE))))
    job, objects = rayjob.render_with_dra(infra, "train-job-0123abcd", shutdown=False)
    assert job["spec"]["shutdownAfterJobFinishes"] is False
    assert [o["metadata"]["name"] for o in objects] == ["train-job-cd", "train-job-roce"]
    assert objects[0]["spec"]["numNodes"] == 3
    assert {c["resourceClaimTemplateName"] for c in claims(job)[1]} == {"train-job-cd-channel", "train-job-roce"}


def test_claims_naming_other_templates_all_get_the_owners_template():
    infra = make_infra(training=cluster("t", pod(), group("a", 1, pod(ROCE)),
                                        group("b", 1, pod({**ROCE, "resourceClaimTemplateName": "other"}))))
    manifest, objects = raycluster.render_with_dra(infra, "training")
    assert [o["metadata"]["name"] for o in objects] == ["t-roce"]
    assert {c["resourceClaimTemplateName"] for group in claims(manifest) for c in group} == {"t-roce"}


def dgd_pods(*claim_sets: tuple[dict, ...]) -> list[dict]:
    return [{"resourceClaims": [copy.deepcopy(c) for c in claim_set]} for claim_set in claim_sets]


def test_dgd_claims_are_wired_to_the_training_clusters_templates():
    _, objects = raycluster.render_with_dra(
        make_infra(training=cluster("t", pod(), group("a", 1, pod(CD, ROCE)))), "training"
    )
    pods = dgd_pods((ROCE, {"name": "scratch", "resourceClaimTemplateName": "mine"}), (CD,))
    dra.wire_claims(pods, objects, "t", "dynamo.serving")
    assert [[(c["name"], c["resourceClaimTemplateName"]) for c in p["resourceClaims"]] for p in pods] == [
        [("roce-channel", "t-roce"), ("scratch", "mine")], [("compute-domain-channel", "t-cd-channel")]]


def test_a_dgd_claim_the_training_does_not_make_is_refused():
    _, objects = raycluster.render_with_dra(
        make_infra(training=cluster("t", pod(), group("a", 1, pod(CD)))), "training"
    )
    with pytest.raises(ConfigError, match="dynamo.serving: a pod claims roce-channel") as caught:
        dra.wire_claims(dgd_pods((ROCE,)), objects, "t", "dynamo.serving")
    assert "kuberay.training" in caught.value.hint


def test_rendering_is_repeatable():
    infra = make_infra(training=cluster("t", pod(), group("a", 2, pod(CD, ROCE, gpus=4))))
    assert raycluster.render_with_dra(infra, "training") == raycluster.render_with_dra(copy.deepcopy(infra), "training")


def cd(status: dict | None = None, nodes: int = 2) -> dict:
    return {"kind": "ComputeDomain", "spec": {"numNodes": nodes}, **({"status": status} if status is not None else {})}


READINESS = [
    ("domain without status", cd(), Pending("ComputeDomain status not reported yet")),
    ("domain not ready", cd({"status": "NotReady", "nodes": [{"name": "n1", "status": "Ready"}]}),
     Pending("ComputeDomain status NotReady; 1/2 nodes ready")),
    ("domain ready", cd({"status": "Ready"}), Ready()),
    ("claim template exists", {"kind": "ResourceClaimTemplate", "spec": {}}, Ready()),
]


@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS], ids=[c[0] for c in READINESS])
def test_readiness(obj, expected):
    assert dra.readiness(obj) == expected


KINDS = [deployment.KIND, service.KIND, secret.KIND, raycluster.KIND, rayjob.KIND, *dgd.KINDS, *dra.KINDS]


@pytest.mark.parametrize("kind", KINDS, ids=[k.api_version + " " + k.kind for k in KINDS])
def test_kind_of_every_rendered_kind(kind):
    assert kind_of({"apiVersion": kind.api_version, "kind": kind.kind}) is kind


TARGETS = [
    ("kuberay role: cluster then its DRA objects", targets.Target("kuberay", "training"),
     ["RayCluster", "ComputeDomain", "ResourceClaimTemplate"]),
    ("deployment: Deployment then Service", targets.Target("deployments", "web"), ["Deployment", "Service"]),
]


@pytest.mark.parametrize("target, kinds", [c[1:] for c in TARGETS], ids=[c[0] for c in TARGETS])
def test_target_renders_every_object_it_applies(target, kinds):
    infra = make_infra(training=cluster("t", pod(), group("a", 1, pod(CD, ROCE))))
    infra["deployments"] = {
        "web": {"spec": {"template": {"spec": {"containers": [{"name": "w", "ports": [{"containerPort": 80}]}]}}}}
    }
    objects = targets.render_all(infra, target)
    assert [o["kind"] for o in objects] == kinds
    assert targets.render(infra, target) == objects[0]
