"""`unused_fields` is honest: reported fields change nothing, every other field changes something."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from nrl_k8s.config.unused_fields import unused_fields
from nrl_k8s.errors import ConfigError
from nrl_k8s.flows.plan import _plan_longlived, health_check
from nrl_k8s.kinds import deployment, dgd, raycluster, rayjob

DATA = Path(__file__).parent / "data" / "render"
WORKER_GROUP = {"groupName": "gpu", "replicas": 4, "template": {"spec": {"containers": [{"name": "w"}]}}}

FULL = {
    "namespace": "rl",
    "image": "img:1",
    "imagePullSecrets": ["ngc"],
    "serviceAccount": "trainer",
    "rayVersion": "2.49.0",
    "labels": {"team": "rl"},
    "annotations": {"owner": "me"},
    "scheduler": {"kind": "default", "queue": "q"},
    "placement": {"nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu"}], "affinity": {"nodeAffinity": {}}},
    "networking": {
        "hostNetwork": True,
        "gloo_socket_ifname": "eth0",
        "nccl_socket_ifname": "eth0",
        "nccl_ib_disable": 1,
        "nccl_net": "Socket",
        "extra_env": {"NCCL_DEBUG": "INFO"},
    },
    "workspace": {
        "kind": "pvc",
        "pvcName": "ws",
        "mountPath": "/ws",
        "repoSubdir": "nemo-rl",
        "size": "10Gi",
        "hostPath": "/data",
    },
    "hf_cache": {"kind": "emptyDir", "pvcName": "hf", "mountPath": "/hf"},
    "checkpoints": {"kind": "pvc", "pvcName": "ck", "mountPath": "/ck"},
    "submit": {"kind": "portForward", "portForward": True, "localDashboardPort": 8265},
    "launch": {
        "mode": "single",
        "runMode": "interactive",
        "attach": {"training": "other"},
        "peerWatcher": True,
        "entrypoint": "python run.py",
        "env": {"A": "1"},
        "rayUploadPaths": ["."],
        "codeSource": "upload",
        "codePath": "/code",
    },
    "resources": {
        "training": {"head": {"cpu": 2}, "worker": {"gpu": 4}},
        "generation": {"worker": {"gpu": 1}},
        "gym": {"head": {"cpu": 1}},
    },
    "kuberay": {
        "training": {
            "name": "train",
            "spec": {"workerGroupSpecs": [WORKER_GROUP]},
            "labels": {"exp": "a"},
            "annotations": {"x": "y"},
            "segmentSize": 2,
            "daemon": {"entrypoint": "python daemon.py"},
        },
        "generation": {
            "name": "gen",
            "spec": {"headGroupSpec": {"rayStartParams": {"num-cpus": "0"}}},
            "segmentSize": 4,
        },
    },
    "deployments": {
        "rm": {
            "spec": {"template": {"spec": {"containers": [{"name": "rm"}]}}},
            "labels": {"app": "rm"},
            "annotations": {"a": "b"},
            "healthCheckUrl": "/health",
            "healthCheckTimeoutS": 30,
        }
    },
    "dynamo": {
        "g": {
            "manifest": str(DATA / "dgd_basic.yaml"),
            "name": "gen-graph",
            "namespace": "inference",
            "overrides": {"backendFramework": "sglang"},
            "labels": {"l": "1"},
            "annotations": {"n": "2"},
            "readyTimeoutS": 600,
        }
    },
}

EXPECTED_UNUSED = [
    "submit.kind",
    "submit.portForward",
    "submit.localDashboardPort",
    "launch.mode",
    "launch.attach",
    "launch.peerWatcher",
    "launch.codePath",
    "workspace.hostPath",
    "workspace.size",
    "workspace.repoSubdir",
    "hf_cache.pvcName",
    "scheduler.queue",
    "kuberay.generation.segmentSize",
    "resources.generation.worker",
    "resources.gym.head",
]

# Fields whose removal cannot show: read by the DGD wait, always set by the loader, or set
# to the value that removing it falls back to.
NOT_OBSERVABLE = {"dynamo.g.readyTimeoutS", "namespace", "scheduler.kind", "launch.codeSource", "launch.runMode"}
# Values the test descends no further into: free-form blocks and whole fields.
LEAVES = {"spec", "overrides", "nodeSelector", "affinity", "extra_env", "env", "labels", "annotations", "attach"}


def render_all(infra: dict) -> str:
    objs = [raycluster.render(infra, role) for role in raycluster.ROLES if role in infra.get("kuberay", {})]
    objs += [rayjob.render(infra, "train-00000000"), rayjob.render_secret(infra, {"grpo": {}}, "train-00000000")]
    objs += [deployment.render(infra, key) for key in infra.get("deployments", {})]
    objs += [dgd.render(infra, key) for key in infra.get("dynamo", {})]
    objs += [{"health": health_check(entry)} for entry in infra.get("deployments", {}).values()]
    # What `run --raycluster` submits: the daemons and the driver (its code source and paths).
    # (its DGDs are the ones rendered above; this infra puts them in another namespace, which only it refuses)
    plan = _plan_longlived(SimpleNamespace(infra={**infra, "dynamo": {}}, recipe={"grpo": {}}), "run-1")
    objs += [dataclasses.asdict(s) for s in [*plan.daemons.values(), plan.driver]] + plan.manifests()
    return yaml.safe_dump_all(objs, sort_keys=False)


def field_paths(node: dict, prefix: str = "") -> list[str]:
    paths = []
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and key not in LEAVES:
            paths += field_paths(value, f"{path}.")
        else:
            paths.append(path)
    return paths


def without(infra: dict, path: str) -> dict:
    out = copy.deepcopy(infra)
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node[part]
    del node[last]
    return out


@pytest.fixture(scope="module")
def baseline() -> str:
    return render_all(FULL)


def test_full_infra_reports_exactly_the_unused_fields():
    assert unused_fields(FULL) == EXPECTED_UNUSED


@pytest.mark.parametrize("path", EXPECTED_UNUSED)
def test_reported_field_has_no_effect(path, baseline):
    assert render_all(without(FULL, path)) == baseline


USED = [
    p
    for p in field_paths(FULL)
    if p not in NOT_OBSERVABLE and not any(p == u or p.startswith(f"{u}.") for u in EXPECTED_UNUSED)
]


@pytest.mark.parametrize("path", USED)
def test_every_other_field_has_an_effect(path, baseline):
    try:
        changed = render_all(without(FULL, path))
    except ConfigError:
        return  # a required field: removing it is refused, which is an effect
    assert changed != baseline


CASES = [
    ("nothing set", {"namespace": "rl"}, []),
    ("queue used by kai", {"scheduler": {"kind": "kai", "queue": "q"}}, []),
    (
        "hostPath workspace reads hostPath",
        {"workspace": {"kind": "hostPath", "hostPath": "/d", "mountPath": "/w", "pvcName": "x"}},
        ["workspace.pvcName"],
    ),
    ("emptyDir workspace reads size", {"workspace": {"kind": "emptyDir", "size": "1Gi", "mountPath": "/w"}}, []),
    ("None counts as unset", {"submit": {"kind": None}, "launch": {"mode": None}}, []),
    (
        "an empty block (nulls dropped) counts as unset",
        {"launch": {"attach": {}}, "resources": {"gym": {"head": {}}}},
        [],
    ),
    (
        "upload (the default) ignores codePath",
        {"launch": {"codePath": "/c", "rayUploadPaths": ["a"]}},
        ["launch.codePath"],
    ),
    (
        "image and lustre ignore rayUploadPaths",
        {"launch": {"codeSource": "lustre", "codePath": "/c", "rayUploadPaths": ["a"]}},
        ["launch.rayUploadPaths"],
    ),
    (
        "daemon and deployment keys are read",
        {
            "kuberay": {
                "gym": {
                    "name": "g",
                    "daemon": {
                        "entrypoint": "x",
                        "submissionId": "s",
                        "env": {"A": "1"},
                        "healthCheckUrl": "http://g:1/",
                        "healthCheckTimeoutS": 5,
                        "rayUploadPaths": ["a"],
                    },
                }
            },
            "deployments": {"d": {"healthCheckUrl": "http://d:1/", "healthCheckTimeoutS": 5}},
        },
        [],
    ),
    (
        "a health check timeout without a URL",
        {
            "kuberay": {"gym": {"name": "g", "daemon": {"entrypoint": "x", "healthCheckTimeoutS": 5}}},
            "deployments": {"d": {"healthCheckTimeoutS": 5}},
        },
        ["kuberay.gym.daemon.healthCheckTimeoutS", "deployments.d.healthCheckTimeoutS"],
    ),
    (
        "resources for a role that is not declared",
        {"resources": {"gym": {"head": {"cpu": 1}, "worker": {"cpu": 1}}}},
        ["resources.gym.head", "resources.gym.worker"],
    ),
    # The earlier launcher's values: each acts, or is listed.
    ("launch.mode rayjob picks run's flow", {"launch": {"mode": "rayjob"}}, []),
    ("launch.mode bringup picks run's flow", {"launch": {"mode": "bringup"}}, []),
    *((f"launch.mode {mode} is listed", {"launch": {"mode": mode}}, ["launch.mode"]) for mode in ("single", "disagg")),
    *(
        (f"submit.portForward {value} is listed", {"submit": {"portForward": value}}, ["submit.portForward"])
        for value in ("auto", "kubectl-ray-plugin", "kubectl-port-forward", True, False)
    ),
    (
        "workspace rayUpload uploads (the code source)",
        {"workspace": {"kind": "rayUpload"}, "launch": {"codeSource": "upload"}},
        [],
    ),
    (
        "workspace rayUpload under another code source is listed, as are its volume fields",
        {
            "workspace": {"kind": "rayUpload", "mountPath": "/mnt", "repoSubdir": "w"},
            "launch": {"codeSource": "image", "codePath": "/c"},
        },
        ["workspace.mountPath", "workspace.repoSubdir", "workspace.kind"],
    ),
    ("workspace auto is listed", {"workspace": {"kind": "auto"}}, ["workspace.kind"]),
    # How the driver starts (``workflow``): the run mode's preset is the default of the keys it covers.
    (
        "runMode batch makes the code the image's: codePath read",
        {"launch": {"runMode": "batch", "codePath": "/c", "rayUploadPaths": ["a"]}},
        ["launch.rayUploadPaths"],
    ),
    (
        "execTmpDir without the exec submitter is listed",
        {"submit": {"submitter": "dashboard", "execTmpDir": "/x"}},
        ["submit.execTmpDir"],
    ),
    (
        "execTmpDir with the exec submitter is read",
        {"submit": {"submitter": "exec", "execTmpDir": "/x"}, "launch": {"codeSource": "image"}},
        [],
    ),
    (
        "execTmpDir with runMode batch (exec) is read",
        {"submit": {"execTmpDir": "/x"}, "launch": {"runMode": "batch"}},
        [],
    ),
    (
        "lustre mounts its PVC (with any code source)",
        {
            "workspace": {"kind": "lustre", "pvcName": "fsx", "mountPath": "/ws"},
            "launch": {"codeSource": "image", "codePath": "/c"},
            "hf_cache": {"kind": "lustre", "pvcName": "fsx", "mountPath": "/hf"},
        },
        [],
    ),
    (
        "none mounts nothing: its other fields are listed",
        {
            "hf_cache": {"kind": "none", "mountPath": "/root/.cache/huggingface"},
            "checkpoints": {"kind": "none", "pvcName": "c"},
        },
        ["hf_cache.mountPath", "checkpoints.pvcName"],
    ),
    (
        "segmentSize that splits something is used",
        {
            "kuberay": {
                "training": {
                    "name": "t",
                    "segmentSize": 1,
                    "spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 2}]},
                }
            }
        },
        [],
    ),
]


@pytest.mark.parametrize("infra, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cases(infra, expected):
    assert unused_fields(infra) == expected
