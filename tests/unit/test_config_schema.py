"""The infra schema: every SPEC field accepted, and every error names key and file."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nrl_k8s.config.provenance import Provenance
from nrl_k8s.config.schema import field_paths, validate
from nrl_k8s.errors import ConfigError

SOURCE = Path("/cfg/infra.yaml")

# The field list from SPEC "Infra schema", written out by hand (KEY = user-chosen key).
SPEC_FIELDS = """
namespace image imagePullSecrets serviceAccount rayVersion labels annotations
scheduler scheduler.kind scheduler.queue
placement placement.nodeSelector placement.tolerations placement.affinity
networking networking.hostNetwork networking.gloo_socket_ifname networking.nccl_socket_ifname
networking.nccl_ib_disable networking.nccl_net networking.extra_env
workspace workspace.kind workspace.pvcName workspace.mountPath workspace.repoSubdir workspace.size workspace.hostPath
hf_cache hf_cache.kind hf_cache.pvcName hf_cache.mountPath
checkpoints checkpoints.kind checkpoints.pvcName checkpoints.mountPath
submit submit.kind submit.portForward submit.devPod submit.localDashboardPort submit.submitter submit.execTmpDir
launch launch.mode launch.runMode launch.attach launch.attach.generation launch.attach.gym launch.attach.training
launch.peerWatcher launch.entrypoint launch.env launch.rayUploadPaths launch.codeSource launch.codePath launch.bringUp
resources
""" + "".join(
    f" resources.{r} resources.{r}.head resources.{r}.head.cpu resources.{r}.head.memory resources.{r}.head.gpu"
    f" resources.{r}.worker resources.{r}.worker.cpu resources.{r}.worker.memory resources.{r}.worker.gpu"
    for r in ("training", "generation", "gym")
) + " kuberay" + "".join(
    f" kuberay.{r} kuberay.{r}.name kuberay.{r}.spec kuberay.{r}.labels kuberay.{r}.annotations kuberay.{r}.segmentSize"
    f" kuberay.{r}.daemon kuberay.{r}.daemon.entrypoint kuberay.{r}.daemon.submissionId kuberay.{r}.daemon.env"
    f" kuberay.{r}.daemon.healthCheckUrl kuberay.{r}.daemon.healthCheckTimeoutS kuberay.{r}.daemon.rayUploadPaths"
    for r in ("training", "generation", "gym")
) + """
deployments deployments.KEY.name deployments.KEY.spec deployments.KEY.labels deployments.KEY.annotations
deployments.KEY.healthCheckUrl deployments.KEY.healthCheckTimeoutS
dynamo dynamo.KEY.manifest dynamo.KEY.spec dynamo.KEY.apiVersion dynamo.KEY.name dynamo.KEY.namespace
dynamo.KEY.overrides dynamo.KEY.labels dynamo.KEY.annotations dynamo.KEY.readyTimeoutS
dra dra.roce dra.roce.deviceClassName dra.roce.count dra.computeDomain dra.computeDomain.numNodes
"""

POD = {"cpu": "4", "memory": "16Gi", "gpu": 1}
RAY_ROLE = {
    "name": "c",
    "spec": {"headGroupSpec": {"x": [{"anything": {"goes": True}}]}},
    "labels": {"a": "b"},
    "annotations": {"a": "b"},
    "segmentSize": 4,
    "daemon": {
        "entrypoint": "python x.py",
        "submissionId": "s",
        "env": {"K": "v"},
        "healthCheckUrl": "http://x/health",
        "healthCheckTimeoutS": 30,
        "rayUploadPaths": ["a", "b"],
    },
}
FULL = {
    "namespace": "team-a",
    "image": "nvcr.io/nemo-rl:1",
    "imagePullSecrets": ["regcred"],
    "serviceAccount": "sa",
    "rayVersion": "2.46.0",
    "labels": {"team": "rl"},
    "annotations": {"note": "x"},
    "scheduler": {"kind": "kai", "queue": "q"},
    "placement": {
        "nodeSelector": {"gpu": "h100"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {}},
    },
    "networking": {
        "hostNetwork": True,
        "gloo_socket_ifname": "eth0",
        "nccl_socket_ifname": "eth0",
        "nccl_ib_disable": 1,
        "nccl_net": "IB",
        "extra_env": {"NCCL_DEBUG": "INFO"},
    },
    "workspace": {
        "kind": "pvc",
        "pvcName": "ws",
        "mountPath": "/ws",
        "repoSubdir": "rl",
        "size": "100Gi",
        "hostPath": "/h",
    },
    "hf_cache": {"kind": "pvc", "pvcName": "hf", "mountPath": "/hf"},
    "checkpoints": {"kind": "emptyDir", "mountPath": "/ckpt"},
    "submit": {
        "kind": "dashboard",
        "portForward": True,
        "devPod": "dev",
        "localDashboardPort": 8265,
        "submitter": "exec",
        "execTmpDir": "/tmp/x",
    },
    "launch": {
        "mode": "attach",
        "runMode": "interactive",
        "attach": {"generation": "g", "gym": "y", "training": "t"},
        "peerWatcher": True,
        "entrypoint": "python run.py",
        "env": {"A": "1"},
        "rayUploadPaths": ["src"],
        "codeSource": "lustre",
        "codePath": "/lustre/code",
    },
    "resources": {r: {"head": dict(POD), "worker": dict(POD)} for r in ("training", "generation", "gym")},
    "kuberay": {r: copy.deepcopy(RAY_ROLE) for r in ("training", "generation", "gym")},
    "deployments": {
        "gym-server": {
            "name": "gym",
            "spec": {"replicas": 1},
            "labels": {},
            "annotations": {},
            "healthCheckUrl": "http://g",
            "healthCheckTimeoutS": 60,
        },
    },
    "dynamo": {
        "gen": {
            "manifest": "dgd/x.yaml",
            "name": "my-dgd",
            "namespace": "team-a",
            "overrides": {"services": {"Frontend": {"replicas": 2}}},
            "labels": {"x": "y"},
            "annotations": {"x": "y"},
            "readyTimeoutS": 900,
        },
    },
}


def check(infra: dict, provenance: Provenance | None = None) -> dict:
    if provenance is None:
        provenance = Provenance()
        provenance.record(infra, SOURCE)
    return validate(infra, provenance)


def with_value(path: str, value) -> dict:
    """A copy of FULL with `path` set (a value of DELETE removes it)."""
    infra = copy.deepcopy(FULL)
    *parents, last = path.split(".")
    node = infra
    for part in parents:
        node = node.setdefault(part, {})
    if value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return infra


DELETE = object()


def test_schema_covers_exactly_the_spec_field_list():
    assert sorted(field_paths()) == sorted(SPEC_FIELDS.split())


def test_every_spec_field_is_accepted_unchanged():
    assert check(FULL) == FULL


def test_minimal_infra_is_valid():
    assert check({}) == {}


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("labels", {"n": 3, "f": 1.5, "b": True, "s": "x"}, {"n": "3", "f": "1.5", "b": "true", "s": "x"}),
        ("annotations", {"n": 3}, {"n": "3"}),
        ("launch.env", {"N": 1, "B": False}, {"N": "1", "B": "false"}),
        ("networking.extra_env", {"N": 8}, {"N": "8"}),
        ("kuberay.training.daemon.env", {"N": 8}, {"N": "8"}),
        ("dynamo.gen.labels", {"v": 2}, {"v": "2"}),
        ("imagePullSecrets", ["a", {"name": "b"}], ["a", "b"]),
        ("dynamo.gen.readyTimeoutS", DELETE, 600),
        ("dynamo.gen.readyTimeoutS", None, 600),
        ("resources.training.head.cpu", 4, 4),
        ("resources.training.head.cpu", 0.5, 0.5),
        ("resources.training.head.memory", "1Gi", "1Gi"),
        ("resources.training.head.gpu", 0, 0),
        ("networking.nccl_ib_disable", True, True),
        ("scheduler", {"kind": "default"}, {"kind": "default"}),
        ("scheduler", {"kind": "kueue", "queue": "q"}, {"kind": "kueue", "queue": "q"}),
        (
            "workspace",
            {"kind": "hostPath", "hostPath": "/data", "mountPath": "/ws"},
            {"kind": "hostPath", "hostPath": "/data", "mountPath": "/ws"},
        ),
        (
            "workspace",
            {"kind": "emptyDir", "size": "10Gi", "mountPath": "/ws"},
            {"kind": "emptyDir", "size": "10Gi", "mountPath": "/ws"},
        ),
        ("launch.codeSource", "image", "image"),
        ("image", None, DELETE),
    ],
    ids=[
        "labels-coerced",
        "annotations-coerced",
        "launch-env-coerced",
        "extra-env-coerced",
        "daemon-env-coerced",
        "dynamo-labels-coerced",
        "pull-secrets-names-or-refs",
        "ready-timeout-default",
        "null-ready-timeout-default",
        "cpu-int",
        "cpu-float",
        "memory-string",
        "gpu-zero",
        "ib-disable-bool",
        "scheduler-default-no-queue",
        "kueue-with-queue",
        "workspace-hostpath",
        "workspace-emptydir",
        "code-source-image",
        "null-unsets-key",
    ],
)
def test_normalisation(path, value, expected):
    result = check(with_value(path, value))
    node = result
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    if expected is DELETE:
        assert last not in node
    else:
        assert node[last] == expected


def test_dynamo_entry_gets_default_ready_timeout():
    result = check({"dynamo": {"a": {"manifest": "m.yaml"}, "b": {"manifest": "n.yaml", "readyTimeoutS": 5}}})
    assert result["dynamo"]["a"]["readyTimeoutS"] == 600
    assert result["dynamo"]["b"]["readyTimeoutS"] == 5


@pytest.mark.parametrize(
    "path, value, key, message",
    [
        ("bogus", 1, "bogus", "unknown infra key 'bogus'"),
        ("launch.entrypiont", "x", "launch.entrypiont", "unknown infra key 'launch.entrypiont'"),
        ("kuberay.trainer", {}, "kuberay.trainer", "unknown infra key 'kuberay.trainer'"),
        ("kuberay.training.daemon.bogus", 1, "kuberay.training.daemon.bogus", "unknown infra key"),
        ("dynamo.gen.bogus", 1, "dynamo.gen.bogus", "unknown infra key 'dynamo.gen.bogus'"),
        ("resources.training.head.gpus", 1, "resources.training.head.gpus", "unknown infra key"),
        ("image", 5, "image", "expected string, got integer 5"),
        ("rayVersion", 2.4, "rayVersion", "expected string, got number 2.4"),
        ("serviceAccount", ["a"], "serviceAccount", "expected string, got list"),
        ("networking.hostNetwork", "yes please", "networking.hostNetwork", "expected boolean, got string 'yes please'"),
        ("submit.localDashboardPort", "8265", "submit.localDashboardPort", "expected integer, got string '8265'"),
        ("submit.localDashboardPort", True, "submit.localDashboardPort", "expected integer, got boolean true"),
        ("dynamo.gen.readyTimeoutS", 1.5, "dynamo.gen.readyTimeoutS", "expected integer, got number 1.5"),
        ("labels", ["a"], "labels", "expected a mapping of strings, got list"),
        ("labels", {"a": {"b": 1}}, "labels.a", "expected a string, got mapping"),
        ("launch.env", {"A": None}, "launch.env.A", "expected a string, got null"),
        ("imagePullSecrets", "regcred", "imagePullSecrets", "expected a list, got string"),
        ("imagePullSecrets", [{"nom": "x"}], "imagePullSecrets.0", "expected a secret name or {name: NAME}"),
        ("launch.rayUploadPaths", ["a", 3], "launch.rayUploadPaths.1", "expected string, got integer 3"),
        ("placement.tolerations", {"key": "k"}, "placement.tolerations", "expected a list, got mapping"),
        ("placement.nodeSelector", ["a"], "placement.nodeSelector", "expected a mapping of strings, got list"),
        ("kuberay.training.spec", "spec", "kuberay.training.spec", "expected a mapping, got string"),
        ("dynamo.gen.overrides", [1], "dynamo.gen.overrides", "expected a mapping, got list"),
        ("launch", "single", "launch", "expected a mapping, got string 'single'"),
        ("dynamo", ["x"], "dynamo", "expected a mapping, got list"),
        ("scheduler.kind", "volcano", "scheduler.kind", "expected one of default|kai|kueue, got string 'volcano'"),
        ("launch.mode", "multi", "launch.mode", "expected one of single|disagg|attach|rayjob|bringup"),
        ("launch.runMode", "daemon", "launch.runMode", "expected one of interactive|batch"),
        ("launch.codeSource", "git", "launch.codeSource", "expected one of upload|image|lustre"),
        ("submit.submitter", "ssh", "submit.submitter", "expected one of dashboard|portForward|exec"),
        ("workspace.kind", "nfs", "workspace.kind", "expected one of pvc|lustre|hostPath|emptyDir|rayUpload|auto"),
        ("dynamo.gen.readyTimeoutS", 0, "dynamo.gen.readyTimeoutS", "expected a number >= 1, got integer 0"),
        ("kuberay.gym.segmentSize", -2, "kuberay.gym.segmentSize", "expected a number >= 1"),
        ("deployments.gym-server.healthCheckTimeoutS", 0, "deployments.gym-server.healthCheckTimeoutS", ">= 1"),
        ("submit.localDashboardPort", 0, "submit.localDashboardPort", "0 is out of range 1..65535"),
        ("resources.gym.worker.gpu", -1, "resources.gym.worker.gpu", "expected a number >= 0"),
        ("namespace", "Team_A", "namespace", "'Team_A' is not a valid Kubernetes name"),
        ("namespace", "x" * 64, "namespace", "is not a valid Kubernetes name"),
        ("dynamo.gen.namespace", "-bad", "dynamo.gen.namespace", "is not a valid Kubernetes name"),
        ("dynamo.gen.manifest", DELETE, "dynamo.gen.manifest", "is required"),
        ("workspace.kind", DELETE, "workspace.kind", "is required"),
        ("scheduler.queue", DELETE, "scheduler.kind", "'kai' requires 'scheduler.queue' to be set"),
        ("scheduler", {"kind": "kueue", "queue": ""}, "scheduler.kind", "'kueue' requires 'scheduler.queue'"),
        ("workspace.pvcName", DELETE, "workspace.kind", "'pvc' requires 'workspace.pvcName'"),
        ("hf_cache.pvcName", DELETE, "hf_cache.kind", "'pvc' requires 'hf_cache.pvcName'"),
        ("checkpoints", {"kind": "pvc"}, "checkpoints.kind", "'pvc' requires 'checkpoints.pvcName'"),
        ("workspace", {"kind": "hostPath"}, "workspace.kind", "'hostPath' requires 'workspace.hostPath'"),
        ("launch.codePath", DELETE, "launch.codeSource", "'lustre' requires 'launch.codePath'"),
        ("launch.attach", DELETE, "launch.mode", "'attach' requires 'launch.attach'"),
    ],
    ids=[
        "unknown-top-level", "unknown-nested-typo", "unknown-role", "unknown-daemon-key", "unknown-dynamo-key",
        "unknown-resource-key", "str-got-int", "str-got-float", "str-got-list", "bool-got-str", "int-got-str",
        "int-got-bool", "int-got-float", "strmap-got-list", "strmap-value-mapping", "strmap-value-null",
        "list-got-str", "pull-secret-bad-ref", "list-item-type", "free-list-got-map", "free-map-got-list",
        "spec-got-str", "overrides-got-list", "struct-got-scalar", "dictof-got-list", "scheduler-enum",
        "mode-enum", "run-mode-enum", "code-source-enum", "submitter-enum", "workspace-kind-enum",
        "ready-timeout-zero", "segment-size-negative", "deployment-timeout-zero", "port-zero", "gpu-negative",
        "namespace-not-dns", "namespace-too-long", "dynamo-namespace-not-dns", "manifest-required",
        "volume-kind-required", "kai-needs-queue", "kueue-empty-queue", "workspace-pvc-needs-name",
        "hf-cache-pvc-needs-name", "checkpoints-pvc-needs-name", "workspace-hostpath-needs-path",
        "lustre-needs-code-path", "attach-needs-attach",
    ],
)
def test_schema_errors_name_key_and_file(path, value, key, message):
    with pytest.raises(ConfigError) as err:
        check(with_value(path, value))
    text = err.value.message
    assert text.startswith(f"{SOURCE}: "), text
    assert f"'{key}'" in text
    assert message in text
    assert "\n" not in text
    assert err.value.hint


KUBERNETES_RULES = {
    "cpu nan": ("resources.training.head.cpu", float("nan"), "resources.training.head.cpu", "nan is not a quantity"),
    "memory word": (
        "resources.training.head.memory",
        "lots",
        "resources.training.head.memory",
        "'lots' is not a quantity",
    ),
    "negative quantity": ("resources.gym.worker.cpu", "-1", "resources.gym.worker.cpu", "is negative"),
    "emptyDir size": ("workspace.size", "big", "workspace.size", "'big' is not a quantity"),
    "port too high": (
        "submit.localDashboardPort",
        99999,
        "submit.localDashboardPort",
        "99999 is out of range 1..65535",
    ),
    "empty image": ("image", "", "image", "image is empty"),
    "image with space": ("image", "nemo rl:1", "image", "contains whitespace"),
    "label key": ("labels", {"bad key": "x"}, "labels.bad key", "label key string 'bad key' is invalid"),
    "label prefix": ("labels", {"Example.com/x": "y"}, "labels.Example.com/x", "is not a DNS subdomain"),
    "label value": (
        "kuberay.gym.labels",
        {"team": "a b"},
        "kuberay.gym.labels.team",
        "label value string 'a b' is invalid",
    ),
    "label value length": ("dynamo.gen.labels", {"team": "x" * 64}, "dynamo.gen.labels.team", "label value"),
    "annotations size": (
        "annotations",
        {"big": "x" * (256 * 1024)},
        "annotations",
        "more than the 262144 Kubernetes allows",
    ),
    "annotation key": (
        "deployments.gym-server.annotations",
        {"/x": "y"},
        "deployments.gym-server.annotations./x",
        "annotation key",
    ),
    "node selector": ("placement.nodeSelector", {"pool": "a b"}, "placement.nodeSelector.pool", "label value"),
    "service account": (
        "serviceAccount",
        "Trainer_SA",
        "serviceAccount",
        "ServiceAccount name string 'Trainer_SA' is not a valid",
    ),
    "pvc name": ("hf_cache.pvcName", "HF Cache", "hf_cache.pvcName", "PVC name"),
    "pull secret": ("imagePullSecrets", ["NGC"], "imagePullSecrets.0", "Secret name string 'NGC' is not a valid"),
    "timeout too long": ("dynamo.gen.readyTimeoutS", 10**9, "dynamo.gen.readyTimeoutS", "expected a number <= 604800"),
    "emptyDir without mountPath": (
        "checkpoints",
        {"kind": "emptyDir"},
        "checkpoints.kind",
        "'emptyDir' requires 'checkpoints.mountPath'",
    ),
}


@pytest.mark.parametrize("path, value, key, message", KUBERNETES_RULES.values(), ids=KUBERNETES_RULES)
def test_kubernetes_rules_name_key_and_file(path, value, key, message):
    with pytest.raises(ConfigError) as err:
        check(with_value(path, value))
    text = err.value.message
    assert text.startswith(f"{SOURCE}: infra key '{key}': "), text
    assert message in text
    assert len(text) < 400 and "\n" not in text
    assert err.value.hint


@pytest.mark.parametrize(
    "path, value, hint",
    [
        ("launch.entrypiont", "x", "did you mean 'launch.entrypoint'?"),
        ("zzz", 1, "allowed keys here: namespace, image,"),
        ("rayVersion", 2.4, 'quote the value to make it a string, e.g. rayVersion: "2.4"'),
        ("image", True, 'image: "true"'),
        ("launch.mode", "x", "use one of: single, disagg, attach, rayjob, bringup"),
    ],
    ids=["typo-suggestion", "allowed-keys", "quote-number", "quote-bool", "enum-choices"],
)
def test_schema_error_hints(path, value, hint):
    with pytest.raises(ConfigError) as err:
        check(with_value(path, value))
    assert hint in err.value.hint


@pytest.mark.parametrize(
    "key, layer, expected_file",
    [
        ("image", "high", "/high.yaml"),
        ("launch.mode", "low", "/low.yaml"),
        ("launch.entrypoint", "high", "/high.yaml"),
        ("launch.bogus", "low", "/low.yaml"),
        ("launch.bogus", "high", "/high.yaml"),
    ],
    ids=["scalar-from-high", "nested-from-low", "nested-from-high", "unknown-from-low", "unknown-from-high"],
)
def test_errors_name_the_layer_that_set_the_key(key, layer, expected_file):
    layers = {
        "low": {"image": "a", "launch": {"mode": "single"}},
        "high": {"image": "b", "launch": {"entrypoint": "x"}},
    }
    section, last = key.split(".") if "." in key else (None, key)
    target = layers[layer] if section is None else layers[layer][section]
    target[last] = 123
    provenance = Provenance()
    provenance.record(layers["low"], Path("/low.yaml"))
    provenance.record(layers["high"], Path("/high.yaml"))
    merged = {**layers["low"], **layers["high"], "launch": {**layers["low"]["launch"], **layers["high"]["launch"]}}
    with pytest.raises(ConfigError) as err:
        validate(merged, provenance)
    assert err.value.message.startswith(f"{expected_file}: ")
    assert f"'{key}'" in err.value.message


# Values the earlier launcher accepts: each is accepted here (and acts, or `check` lists it unused:
# tests/unit/test_unused.py).
UPSTREAM_VALUES = [
    ("workspace", {"kind": "rayUpload"}),
    ("workspace", {"kind": "auto"}),
    ("workspace", {"kind": "lustre", "pvcName": "fsx", "mountPath": "/mnt/ws"}),
    ("hf_cache", {"kind": "none"}),
    ("hf_cache", {"kind": "lustre", "pvcName": "fsx", "mountPath": "/hf"}),
    ("checkpoints", {"kind": "none"}),
    ("checkpoints", {"kind": "lustre", "pvcName": "fsx", "mountPath": "/ckpt"}),
    ("submit.portForward", "auto"),
    ("submit.portForward", "kubectl-ray-plugin"),
    ("submit.portForward", "kubectl-port-forward"),
    ("submit.portForward", True),
    ("submit.portForward", False),
    ("launch.mode", "rayjob"),
    ("launch.mode", "bringup"),
]


@pytest.mark.parametrize("path, value", UPSTREAM_VALUES,
                         ids=[f"{p}={v['kind'] if isinstance(v, dict) else v}" for p, v in UPSTREAM_VALUES])
def test_upstream_values_are_accepted(path, value):
    result = check(with_value(path, value))
    node = result
    for part in path.split("."):
        node = node[part]
    assert node == value


@pytest.mark.parametrize(
    "workspace, launch, expected",
    [
        ({"kind": "rayUpload"}, {}, "upload"),
        ({"kind": "lustre", "pvcName": "fsx", "mountPath": "/ws"}, {"codePath": "/ws/rl"}, "lustre"),
        ({"kind": "rayUpload"}, {"codeSource": "image", "codePath": "/opt/rl"}, "image"),
        ({"kind": "lustre", "pvcName": "fsx", "mountPath": "/ws"}, {"codeSource": "upload"}, "upload"),
        ({"kind": "auto"}, {}, None),
        ({"kind": "pvc", "pvcName": "ws", "mountPath": "/ws"}, {}, None),
    ],
    ids=["rayUpload-uploads", "lustre-runs-from-lustre", "explicit-code-source-wins", "explicit-upload-wins",
         "auto-sets-nothing", "pvc-sets-nothing"],
)
def test_workspace_kind_sets_the_code_source(workspace, launch, expected):
    result = check({"workspace": workspace, "launch": launch})
    assert result["launch"].get("codeSource") == expected


def test_lustre_workspace_needs_a_code_path():
    with pytest.raises(ConfigError) as err:
        check({"workspace": {"kind": "lustre", "pvcName": "fsx", "mountPath": "/ws"}})
    assert err.value.message == (f"{SOURCE}: infra key 'workspace.kind': 'lustre' makes launch.codeSource lustre, "
                                 "which requires 'launch.codePath'")
    assert "set launch.codePath" in err.value.hint


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("submit.portForward", "yes", "expected one of auto|kubectl-ray-plugin|kubectl-port-forward|true|false"),
        ("submit.portForward", 1, "expected boolean or string, got integer 1"),
        ("hf_cache", {"kind": "rayUpload"}, "expected one of pvc|lustre|emptyDir|none"),
        ("checkpoints", {"kind": "lustre", "mountPath": "/c"}, "'lustre' requires 'checkpoints.pvcName'"),
        ("workspace", {"kind": "lustre", "pvcName": "fsx"}, "'lustre' requires 'workspace.mountPath'"),
    ],
    ids=["port-forward-word", "port-forward-number", "hf-cache-kind", "lustre-needs-pvc", "lustre-needs-mount"],
)
def test_upstream_value_errors(path, value, message):
    with pytest.raises(ConfigError) as err:
        check(with_value(path, value))
    assert message in err.value.message


@pytest.mark.parametrize(
    ("entry", "key", "problem"),
    [
        (
            {"manifest": "m.yaml", "spec": {"services": {}}, "name": "x"},
            "dynamo.gen.spec",
            "is set together with 'dynamo.gen.manifest'",
        ),
        ({"spec": {"services": {}}}, "dynamo.gen.spec", "spec requires 'dynamo.gen.name' to be set"),
        ({"name": "x"}, "dynamo.gen.manifest", "is required"),
    ],
    ids=["manifest-and-spec", "inline-spec-without-name", "neither"],
)
def test_a_dgd_entry_has_a_manifest_or_an_inline_spec(entry, key, problem):
    with pytest.raises(ConfigError) as caught:
        check({"dynamo": {"gen": entry}})
    assert caught.value.message.endswith(f"infra key '{key}': {problem}")
    assert caught.value.hint
