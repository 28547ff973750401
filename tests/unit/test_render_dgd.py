"""DynamoGraphDeployment: manifest loading, the four render rules, helpers and readiness."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import dgd
from nrl_k8s.kinds.base import Kind, owner_reference
from nrl_k8s.kinds.readiness import Failed, Pending, Ready

DATA = Path(__file__).parent / "data" / "render"
BASIC = ["dgd_basic.yaml", "dgd_basic_v1beta1.yaml"]  # the same graph in both versions: rules 2 and 3 agree
both_versions = pytest.mark.parametrize("basic", BASIC, ids=["v1alpha1", "v1beta1"])


def make_infra(manifest: str = "dgd_basic.yaml", **entry) -> dict:
    return {
        "namespace": "rl",
        "image": "nemo-rl:1",
        "dynamo": {"gen": {"manifest": str(DATA / manifest), "readyTimeoutS": 600, **copy.deepcopy(entry)}},
    }


def render(infra: dict) -> dict:
    return dgd.render(infra, "gen")


def svc(obj: dict, name: str) -> dict:
    return obj["spec"]["services"][name]


def test_load_strips_server_fields():
    manifest = dgd.load_manifest(DATA / "dgd_basic.yaml", where="infra.dynamo.gen.manifest")
    assert "status" not in manifest
    assert set(manifest["metadata"]) == {"name", "namespace", "labels", "annotations"}


def test_load_picks_first_dgd_of_multidoc():
    manifest = dgd.load_manifest(DATA / "dgd_multidoc.yaml", where="infra.dynamo.gen.manifest")
    assert manifest["metadata"]["name"] == "first-graph"
    assert manifest["kind"] == "DynamoGraphDeployment"


LOAD_ERRORS = [
    ("missing file", "does_not_exist.yaml", "infra.dynamo.gen.manifest: DGD manifest .*does_not_exist.yaml not found"),
    ("directory", ".", "render: is a directory, expected a YAML file"),
    (
        "malformed yaml",
        "dgd_malformed.yaml",
        r"dgd_malformed\.yaml:6: metadata\.labels: invalid YAML: did not find expected",
    ),
    (
        "no DGD document",
        "dgd_nodgd.yaml",
        r"dgd_nodgd\.yaml has no DynamoGraphDeployment document \(found: Deployment, Pod\)",
    ),
    ("unsupported apiVersion", "dgd_v2.yaml", r"dgd_v2\.yaml uses apiVersion 'nvidia\.com/v2'"),
]


@pytest.mark.parametrize("name, message", [c[1:] for c in LOAD_ERRORS], ids=[c[0] for c in LOAD_ERRORS])
def test_load_errors(name, message):
    with pytest.raises(ConfigError, match=message) as info:
        dgd.load_manifest(DATA / name, where="infra.dynamo.gen.manifest")
    assert "infra.dynamo.gen.manifest" in info.value.message + (info.value.hint or "")


def test_unsupported_api_version_hint():
    with pytest.raises(ConfigError) as info:
        dgd.load_manifest(DATA / "dgd_v2.yaml", where="w")
    assert info.value.hint == "use apiVersion: nvidia.com/v1beta1 or nvidia.com/v1alpha1"


@pytest.mark.parametrize(
    "basic, version", list(zip(BASIC, ["v1alpha1", "v1beta1"], strict=True)), ids=["v1alpha1", "v1beta1"]
)
def test_render_basic_object_in_its_manifests_version(basic, version):
    obj = render(make_infra(basic))
    assert obj["apiVersion"] == f"nvidia.com/{version}"
    assert dgd.kind_of(obj) == Kind("nvidia.com", version, "dynamographdeployments", "DynamoGraphDeployment")
    assert obj["kind"] == "DynamoGraphDeployment"
    assert obj["metadata"]["name"] == "qwen3-small"
    assert "ownerReferences" not in obj["metadata"]
    assert "status" not in obj


OVERRIDE_CASES = [
    (
        "dicts merge",
        {"spec_overrides": {"services": {"VllmDecodeWorker": {"replicas": 4}}}},
        lambda o: (
            svc(o, "VllmDecodeWorker")["replicas"],
            svc(o, "VllmDecodeWorker")["componentType"],
            svc(o, "Frontend")["replicas"],
        ),
        (4, "worker", 1),
    ),
    (
        "lists replace",
        {"spec_overrides": {"services": {"VllmDecodeWorker": {"extraPodSpec": {"mainContainer": {"args": ["--x"]}}}}}},
        lambda o: svc(o, "VllmDecodeWorker")["extraPodSpec"]["mainContainer"]["args"],
        ["--x"],
    ),
    (
        "top-level list replaced",
        {"spec_overrides": {"envs": [{"name": "A", "value": "1"}]}},
        lambda o: o["spec"]["envs"],
        [{"name": "A", "value": "1"}],
    ),
    (
        "scalar replaced",
        {"spec_overrides": {"backendFramework": "sglang"}},
        lambda o: o["spec"]["backendFramework"],
        "sglang",
    ),
]


@pytest.mark.parametrize(
    "entry, extract, expected", [c[1:] for c in OVERRIDE_CASES], ids=[c[0] for c in OVERRIDE_CASES]
)
def test_rule1_overrides(entry, extract, expected):
    infra = make_infra(overrides=entry["spec_overrides"])
    assert extract(render(infra)) == expected


NAME_CASES = [
    ("manifest name", "dgd_basic.yaml", {}, "qwen3-small"),
    ("entry name wins", "dgd_basic.yaml", {"name": "alice-qwen"}, "alice-qwen"),
    ("entry name for a nameless manifest", "dgd_noname.yaml", {"name": "named"}, "named"),
    ("entry name fixes a bad manifest name", "dgd_badname.yaml", {"name": "ok"}, "ok"),
]


@pytest.mark.parametrize("manifest, entry, expected", [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_rule2_name(manifest, entry, expected):
    assert render(make_infra(manifest, **entry))["metadata"]["name"] == expected


NAME_ERRORS = [
    ("no name anywhere", "dgd_noname.yaml", {}, "infra.dynamo.gen: the DGD has no name", "set dynamo.gen.name"),
    (
        "invalid entry name",
        "dgd_basic.yaml",
        {"name": "Bad_Name"},
        "infra.dynamo.gen.name: DGD name 'Bad_Name'",
        "bad-name",
    ),
    (
        "invalid manifest name",
        "dgd_badname.yaml",
        {},
        "dgd_badname.yaml metadata.name: DGD name 'Qwen3_Small'",
        "qwen3-small",
    ),
    ("name too long", "dgd_basic.yaml", {"name": "a" * 64}, "more than 63", "at most 63"),
]


@pytest.mark.parametrize(
    "manifest, entry, message, hint", [c[1:] for c in NAME_ERRORS], ids=[c[0] for c in NAME_ERRORS]
)
def test_rule2_name_errors(manifest, entry, message, hint):
    with pytest.raises(ConfigError) as info:
        render(make_infra(manifest, **entry))
    assert message in info.value.message
    assert hint in info.value.hint


@both_versions
@pytest.mark.parametrize(
    "entry, expected",
    [({}, "rl"), ({"namespace": "inference"}, "inference")],
    ids=["infra namespace replaces the manifest's", "entry namespace"],
)
def test_rule2_namespace(basic, entry, expected):
    assert render(make_infra(basic, **entry))["metadata"]["namespace"] == expected


@both_versions
@pytest.mark.parametrize("entry, expected", [({}, "qwen3-small"), ({"name": "alice-qwen"}, "alice-qwen")],
                         ids=["manifest name", "entry name wins"])
def test_rule2_name_in_both_versions(basic, entry, expected):
    assert render(make_infra(basic, **entry))["metadata"]["name"] == expected


@both_versions
def test_rule3_label_and_annotation_precedence(basic):
    infra = make_infra(basic, labels={"tier": "entry", "extra": "e"}, annotations={"note": "from-entry"})
    infra["labels"] = {"team": "infra", "tier": "infra", "app.kubernetes.io/managed-by": "someone", "only-infra": "i"}
    infra["annotations"] = {"note": "from-infra", "nvidia.com/kai-scheduler-queue": "infra-q", "infra-only": "i"}
    meta = render(infra)["metadata"]
    assert meta["labels"] == {
        "app.kubernetes.io/managed-by": "someone",
        "team": "inference",
        "tier": "entry",
        "only-infra": "i",
        "extra": "e",
    }
    assert meta["annotations"] == {
        "note": "from-entry",
        "nvidia.com/kai-scheduler-queue": "backfill",
        "infra-only": "i",
    }


def test_rule3_managed_by_default():
    assert render(make_infra("dgd_multidoc.yaml"))["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nrl-k8s"}
    assert "annotations" not in render(make_infra("dgd_multidoc.yaml"))["metadata"]


POD_CASES = [
    (
        "image injected where unset",
        {},
        lambda o: svc(o, "Frontend")["extraPodSpec"]["mainContainer"]["image"],
        "nemo-rl:1",
    ),
    (
        "explicit image kept",
        {},
        lambda o: svc(o, "VllmDecodeWorker")["extraPodSpec"]["mainContainer"]["image"],
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0",
    ),
    (
        "imagePullSecrets where unset",
        {"imagePullSecrets": ["ngc"]},
        lambda o: [svc(o, s)["extraPodSpec"]["imagePullSecrets"] for s in ("Frontend", "VllmDecodeWorker")],
        [[{"name": "ngc"}], [{"name": "ngc"}]],
    ),
    (
        "serviceAccountName never injected",
        {"serviceAccount": "trainer-sa"},
        lambda o: "serviceAccountName" in svc(o, "Frontend")["extraPodSpec"],
        False,
    ),
    (
        "explicit serviceAccountName kept",
        {"serviceAccount": "trainer-sa"},
        lambda o: svc(o, "VllmDecodeWorker")["extraPodSpec"]["serviceAccountName"],
        "explicit-sa",
    ),
    (
        "other extraPodSpec fields untouched",
        {"placement": {"tolerations": [{"key": "other"}]}},
        lambda o: svc(o, "VllmDecodeWorker")["extraPodSpec"]["tolerations"],
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    ),
    (
        "no image and no secrets adds nothing",
        {"image": None},
        lambda o: "extraPodSpec" in svc(o, "Frontend"),
        False,
    ),
]


@pytest.mark.parametrize("infra_patch, extract, expected", [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_rule4_extra_pod_spec(infra_patch, extract, expected):
    infra = make_infra()
    infra.update(infra_patch)
    assert extract(render(infra)) == expected


def test_explicit_pull_secrets_kept():
    infra = make_infra(overrides={"services": {"Frontend": {"extraPodSpec": {"imagePullSecrets": [{"name": "mine"}]}}}})
    infra["imagePullSecrets"] = ["ngc"]
    assert svc(render(infra), "Frontend")["extraPodSpec"]["imagePullSecrets"] == [{"name": "mine"}]


def test_override_image_wins_over_infra_image():
    infra = make_infra(overrides={"services": {"Frontend": {"extraPodSpec": {"mainContainer": {"image": "fe:2"}}}}})
    assert svc(render(infra), "Frontend")["extraPodSpec"]["mainContainer"]["image"] == "fe:2"


def test_render_does_not_mutate_infra():
    infra = make_infra(overrides={"services": {"Frontend": {"replicas": 2}}}, labels={"a": "b"})
    before = copy.deepcopy(infra)
    render(infra)
    render(infra)
    assert infra == before


def test_deterministic_yaml():
    infra = make_infra(overrides={"services": {"VllmDecodeWorker": {"replicas": 3}}}, labels={"z": "1", "a": "2"})
    assert yaml.safe_dump(render(infra), sort_keys=False) == yaml.safe_dump(
        render(copy.deepcopy(infra)), sort_keys=False
    )


ENTRY_ERRORS = [
    ("undeclared key", lambda i: i["dynamo"].clear(), "infra.dynamo.gen: is not set"),
    ("no manifest", lambda i: i["dynamo"]["gen"].pop("manifest"), "infra.dynamo.gen.manifest: is not set"),
]


@pytest.mark.parametrize("breaker, message", [c[1:] for c in ENTRY_ERRORS], ids=[c[0] for c in ENTRY_ERRORS])
def test_entry_errors(breaker, message):
    infra = make_infra()
    breaker(infra)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        render(infra)


@pytest.mark.parametrize("manifest", ["dgd_multinode.yaml", "dgd_multinode_v1beta1.yaml"], ids=["v1alpha1", "v1beta1"])
def test_services_summary(manifest):
    obj = render(make_infra(manifest))
    assert dgd.services(obj) == [
        dgd.ServiceInfo("Frontend", "frontend", 1, 0),
        dgd.ServiceInfo("Prefill", "prefill", 2, 8),
        dgd.ServiceInfo("Decode", "decode", 3, 8),
    ]
    assert dgd.desired_pods(obj) == 1 + 2 * 2 + 3


COUNTS = {"Frontend": {"replicas": 1, "readyReplicas": 1}, "Worker": {"replicas": 2, "readyReplicas": 1}, "New": {}}


@pytest.mark.parametrize(
    "version, field", [("v1alpha1", "services"), ("v1beta1", "components")], ids=["v1alpha1", "v1beta1"]
)
def test_ready_replicas_per_part(version, field):
    live = {"apiVersion": f"nvidia.com/{version}", "status": {field: COUNTS}}
    assert dgd.ready_replicas(live) == {"Frontend": 1, "Worker": 1, "New": 0}
    assert dgd.ready_replicas({"apiVersion": f"nvidia.com/{version}"}) == {}


OWNER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "grpo-train-ab12c", "uid": "1234-abcd", "namespace": "rl"},
}


def test_owner_reference_shape():
    assert owner_reference(OWNER) == {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "grpo-train-ab12c",
        "uid": "1234-abcd",
        "controller": False,
        "blockOwnerDeletion": False,
    }


def test_owner_reference_needs_uid():
    with pytest.raises(ValueError, match="uid"):
        owner_reference({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"}})


def test_names_for_probes():
    assert dgd.pod_selector("qwen") == "nvidia.com/dynamo-graph-deployment-name=qwen"
    assert dgd.frontend_service("qwen") == "qwen-frontend"
    assert dgd.FRONTEND_PORT == 8000


def graph(state=None, conditions=None, generation=None, observed=None) -> dict:
    obj = {"apiVersion": "nvidia.com/v1alpha1", "metadata": {"name": "g"}, "status": {}}
    if state:
        obj["status"]["state"] = state
    if conditions is not None:
        obj["status"]["conditions"] = conditions
    if generation is not None:
        obj["metadata"]["generation"] = generation
    if observed is not None:
        obj["status"]["observedGeneration"] = observed
    return obj


READY_TRUE = {"type": "Ready", "status": "True"}
READY_FALSE = {"type": "Ready", "status": "False", "reason": "NotReady", "message": "VllmDecodeWorker 0/1 ready"}
READINESS_CASES = [
    ("no status", {}, Pending("state=unknown")),
    ("initializing", graph("initializing"), Pending("state=initializing")),
    (
        "pending with message",
        graph("pending", [READY_FALSE]),
        Pending("state=pending: Ready=False (NotReady: VllmDecodeWorker 0/1 ready)"),
    ),
    ("successful without conditions", graph("successful"), Ready()),
    ("successful and Ready", graph("successful", [READY_TRUE], 2, 2), Ready()),
    (
        "successful but Ready False",
        graph("successful", [READY_FALSE]),
        Pending("state=successful but Ready=False (NotReady: VllmDecodeWorker 0/1 ready)"),
    ),
    (
        "stale generation",
        graph("successful", [READY_TRUE], 3, 2),
        Pending("state=successful for generation 2, waiting for generation 3"),
    ),
    ("newer observed generation", graph("successful", [READY_TRUE], 2, 3), Ready()),
    ("generation without observed", graph("successful", [READY_TRUE], 2), Ready()),
    (
        "failed with conditions",
        graph("failed", [{"type": "Ready", "status": "False", "message": "reconcile error: bad spec"}]),
        Failed("state=failed: Ready=False (reconcile error: bad spec)"),
    ),
    ("failed without conditions", graph("failed"), Failed("state=failed")),
]


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("obj, expected", [c[1:] for c in READINESS_CASES], ids=[c[0] for c in READINESS_CASES])
def test_readiness(obj, expected, version):
    assert dgd.readiness({**obj, "apiVersion": f"nvidia.com/{version}"}) == expected


# -- interpolation inside a DGD file, and inline specs (upstream 2990 / tk/pr-2429 shapes) ----------------
INTERPOLATED = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: ${user:}-graph
spec:
  envs: [{name: HF_HOME, value: "/mnt/ws/${user:}/hf"}, {name: SHELL_VAR, value: "\\\\${HOME}"}]
  services:
    Worker:
      componentType: worker
      replicas: ${oc.decode:${oc.env:REPLICAS,1}}
      envFromSecret: ${user:}-secrets
      extraPodSpec:
        mainContainer: {args: ["--tp=${services.Worker.replicas}"]}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "graph.dgd.yaml"
    path.write_text(text)
    return str(path)


def test_a_dgd_files_interpolations_are_resolved(tmp_path, monkeypatch):
    monkeypatch.setenv("NRL_K8S_USER", "Ann_B")
    monkeypatch.setenv("REPLICAS", "3")
    obj = render({"namespace": "rl", "image": "img", "dynamo": {"gen": {"manifest": write(tmp_path, INTERPOLATED)}}})
    worker = svc(obj, "Worker")
    assert obj["metadata"]["name"] == "ann-b-graph"
    assert obj["spec"]["envs"] == [
        {"name": "HF_HOME", "value": "/mnt/ws/ann-b/hf"},
        {"name": "SHELL_VAR", "value": "${HOME}"},
    ]
    assert (worker["envFromSecret"], worker["replicas"]) == ("ann-b-secrets", 3)
    assert worker["extraPodSpec"]["mainContainer"]["args"] == ["--tp=3"]


def test_a_bad_interpolation_in_a_dgd_file_names_the_file_and_key(tmp_path):
    path = write(tmp_path, INTERPOLATED.replace("${user:}-secrets", "${nope.there}"))
    with pytest.raises(ConfigError, match=r"graph\.dgd\.yaml \(spec\): services\.Worker\.envFromSecret: .*missing key"):
        render({"namespace": "rl", "image": "img", "dynamo": {"gen": {"manifest": path}}})


INLINE = {"services": {"Worker": {"componentType": "worker", "replicas": 1,
                                  "extraPodSpec": {"mainContainer": {"command": ["serve"]}}}}}


def test_an_inline_spec_renders_like_a_manifest():
    obj = render({"namespace": "rl", "image": "img", "labels": {"team": "a"},
                  "dynamo": {"gen": {"name": "smoke", "spec": copy.deepcopy(INLINE), "readyTimeoutS": 600}}})
    assert (obj["apiVersion"], obj["metadata"]["name"], obj["metadata"]["namespace"]) == (
        "nvidia.com/v1alpha1",
        "smoke",
        "rl",
    )
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nrl-k8s", "team": "a"}
    assert svc(obj, "Worker")["extraPodSpec"]["mainContainer"] == {"command": ["serve"], "image": "img"}


def test_an_inline_spec_problem_names_the_infra_key():
    bad = copy.deepcopy(INLINE)
    bad["services"]["Worker"]["replicas"] = "two"
    with pytest.raises(ConfigError, match=r"infra\.dynamo\.gen\.spec\.services\.Worker\.replicas"):
        render({"namespace": "rl", "image": "img", "dynamo": {"gen": {"name": "smoke", "spec": bad}}})
