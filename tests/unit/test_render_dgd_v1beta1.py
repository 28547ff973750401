"""DGD ``nvidia.com/v1beta1`` (``spec.components`` keyed by name): loading and the render rules.

The rules shared with v1alpha1 (name, namespace, labels, annotations, readiness, sizes) are in
``test_render_dgd.py``, run on the same graph in both versions; these tables cover the list-map
overrides and the pod-template defaults.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import dgd

DATA = Path(__file__).parent / "data" / "render"
WORKER_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1"


def make_infra(**entry) -> dict:
    return {
        "namespace": "rl",
        "image": "nemo-rl:1",
        "dynamo": {
            "gen": {"manifest": str(DATA / "dgd_basic_v1beta1.yaml"), "readyTimeoutS": 600, **copy.deepcopy(entry)}
        },
    }


def render(infra: dict) -> dict:
    return dgd.render(infra, "gen")


def component(obj: dict, name: str) -> dict:
    return next(c for c in obj["spec"]["components"] if c["name"] == name)


def containers(obj: dict, name: str) -> list[dict]:
    return component(obj, name)["podTemplate"]["spec"]["containers"]


def main(obj: dict, name: str) -> dict:
    return next(c for c in containers(obj, name) if c["name"] == "main")


def write(tmp_path: Path, spec: dict) -> str:
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
                                    "metadata": {"name": "g"}, "spec": spec}))
    return str(path)


def test_load_keeps_the_components_list():
    manifest = dgd.load_manifest(DATA / "dgd_basic_v1beta1.yaml", where="infra.dynamo.gen.manifest")
    assert [c["name"] for c in manifest["spec"]["components"]] == ["Frontend", "VllmDecodeWorker"]
    assert "status" not in manifest and "uid" not in manifest["metadata"]


def test_a_minimal_manifest_loads():
    assert dgd.load_manifest(DATA / "dgd_v1beta1.yaml", where="w")["spec"]["components"][0]["name"] == "Frontend"


def comp(name: str = "W", **fields) -> dict:
    return {"name": name, **fields}


LOAD_ERRORS = [
    ("no spec", None, "spec: is missing", "spec.components"),
    ("no components", {"backendFramework": "vllm"}, "spec.components: is missing", "declare the graph's components"),
    ("empty components", {"components": []}, "spec.components: is empty", "declare the graph's components"),
    ("components as a mapping", {"components": {"W": {}}}, "spec.components: expected a list, got mapping", ""),
    (
        "too many components",
        {"components": [comp(f"c{i}") for i in range(26)]},
        "has 26 components, more than 25",
        "at most 25",
    ),
    (
        "component without a name",
        {"components": [{"type": "frontend"}]},
        "spec.components.0.name: is required",
        "name: Frontend",
    ),
    (
        "invalid component name",
        {"components": [comp("bad_name")]},
        "spec.components.0.name: 'bad_name' is not a valid",
        "letters, digits",
    ),
    (
        "names repeat case-insensitively",
        {"components": [comp("Worker"), comp("worker")]},
        "spec.components.1.name: 'worker' repeats component 'Worker'",
        "case-insensitively",
    ),
    ("negative replicas", {"components": [comp(replicas=-1)]}, "spec.components.W.replicas: ", "replica"),
    ("zero nodes", {"components": [comp(multinode={"nodeCount": 0})]}, "spec.components.W.multinode.nodeCount", "node"),
    (
        "bad shared memory size",
        {"components": [comp(sharedMemorySize="lots")]},
        "spec.components.W.sharedMemorySize",
        "",
    ),
    (
        "unknown container field",
        {"components": [comp(podTemplate={"spec": {"containers": [{"name": "main", "imag": "x"}]}})]},
        "spec.components.W.podTemplate.spec.containers.main.imag: unknown field",
        "spelling",
    ),
    (
        "fractional GPU",
        {
            "components": [
                comp(
                    podTemplate={
                        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}
                    }
                )
            ]
        },
        "spec.components.W.podTemplate.spec.containers.main.resources.limits.nvidia.com/gpu",
        "whole units",
    ),
]


@pytest.mark.parametrize("spec, message, hint", [c[1:] for c in LOAD_ERRORS], ids=[c[0] for c in LOAD_ERRORS])
def test_load_errors(tmp_path, spec, message, hint):
    path = write(tmp_path, spec)
    if spec is None:
        Path(path).write_text("apiVersion: nvidia.com/v1beta1\nkind: DynamoGraphDeployment\nmetadata: {name: g}\n")
    with pytest.raises(ConfigError) as info:
        dgd.load_manifest(path, where="infra.dynamo.gen.manifest")
    assert message in info.value.message and "graph.yaml" in info.value.message
    assert hint in info.value.hint and "infra.dynamo.gen.manifest" in info.value.hint


# -- rule 1: overrides merge into spec.components by name ----------------------------------
OVERRIDES = [
    (
        "one component by name, as a mapping",
        {"components": {"VllmDecodeWorker": {"replicas": 4}}},
        lambda o: (
            [c["name"] for c in o["spec"]["components"]],
            component(o, "VllmDecodeWorker")["replicas"],
            component(o, "VllmDecodeWorker")["type"],
            component(o, "Frontend")["replicas"],
        ),
        (["Frontend", "VllmDecodeWorker"], 4, "decode", 1),
    ),
    (
        "one component by name, as a list entry",
        {"components": [{"name": "VllmDecodeWorker", "replicas": 4}]},
        lambda o: (
            len(o["spec"]["components"]),
            component(o, "VllmDecodeWorker")["replicas"],
            component(o, "Frontend")["replicas"],
        ),
        (2, 4, 1),
    ),
    (
        "main's args replaced, its resources and image kept",
        {"components": {"VllmDecodeWorker": {"podTemplate": {"spec": {"containers": {"main": {"args": ["--x"]}}}}}}},
        lambda o: (
            main(o, "VllmDecodeWorker")["args"],
            main(o, "VllmDecodeWorker")["resources"],
            main(o, "VllmDecodeWorker")["image"],
        ),
        (["--x"], {"limits": {"nvidia.com/gpu": "1"}}, WORKER_IMAGE),
    ),
    (
        "containers as a list merge by name too",
        {
            "components": [
                {
                    "name": "VllmDecodeWorker",
                    "podTemplate": {
                        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}]}
                    },
                }
            ]
        },
        lambda o: (main(o, "VllmDecodeWorker")["resources"], [c["name"] for c in containers(o, "VllmDecodeWorker")]),
        ({"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "4"}}, ["main", "log"]),
    ),
    (
        "a sidecar is changed in place",
        {
            "components": {
                "VllmDecodeWorker": {"podTemplate": {"spec": {"containers": {"log": {"image": "busybox:2"}}}}}
            }
        },
        lambda o: [(c["name"], c["image"]) for c in containers(o, "VllmDecodeWorker")],
        [("main", WORKER_IMAGE), ("log", "busybox:2")],
    ),
    (
        "a new container is appended",
        {"components": {"VllmDecodeWorker": {"podTemplate": {"spec": {"containers": {"metrics": {"image": "m:1"}}}}}}},
        lambda o: [c["name"] for c in containers(o, "VllmDecodeWorker")],
        ["main", "log", "metrics"],
    ),
    (
        "init containers merge by name",
        {
            "components": {
                "VllmDecodeWorker": {"podTemplate": {"spec": {"initContainers": {"fetch": {"image": "f:1"}}}}}
            }
        },
        lambda o: component(o, "VllmDecodeWorker")["podTemplate"]["spec"]["initContainers"],
        [{"name": "fetch", "image": "f:1"}],
    ),
    (
        "other lists in a component replace",
        {"components": {"VllmDecodeWorker": {"podTemplate": {"spec": {"tolerations": [{"key": "other"}]}}}}},
        lambda o: component(o, "VllmDecodeWorker")["podTemplate"]["spec"]["tolerations"],
        [{"key": "other"}],
    ),
    (
        "a list inside a container replaces",
        {
            "components": {
                "VllmDecodeWorker": {
                    "podTemplate": {"spec": {"containers": {"main": {"env": [{"name": "B", "value": "2"}]}}}}
                }
            }
        },
        lambda o: main(o, "VllmDecodeWorker")["env"],
        [{"name": "B", "value": "2"}],
    ),
    (
        "graph env replaced",
        {"env": [{"name": "A", "value": "1"}]},
        lambda o: o["spec"]["env"],
        [{"name": "A", "value": "1"}],
    ),
    ("graph labels merge", {"labels": {"x": "y"}}, lambda o: o["spec"]["labels"], {"x": "y"}),
    ("scalar replaced", {"backendFramework": "sglang"}, lambda o: o["spec"]["backendFramework"], "sglang"),
    (
        "null unsets",
        {"components": {"VllmDecodeWorker": {"replicas": None}}},
        lambda o: "replicas" in component(o, "VllmDecodeWorker"),
        False,
    ),
]


@pytest.mark.parametrize("overrides, extract, expected", [c[1:] for c in OVERRIDES], ids=[c[0] for c in OVERRIDES])
def test_rule1_overrides(overrides, extract, expected):
    assert extract(render(make_infra(overrides=overrides))) == expected


OVERRIDE_ERRORS = [
    (
        "unknown component",
        {"components": {"Nope": {"replicas": 2}}},
        "infra.dynamo.gen.overrides.components.Nope: the DGD manifest has no such component",
        "its components are: Frontend, VllmDecodeWorker",
    ),
    (
        "unknown component in a list",
        {"components": [{"name": "Nope"}]},
        "infra.dynamo.gen.overrides.components.Nope: the DGD manifest has no such component",
        "Frontend, VllmDecodeWorker",
    ),
    (
        "components not a list or mapping",
        {"components": "Worker"},
        "infra.dynamo.gen.overrides.components: expected a list of components or a mapping of component names",
        "NAME",
    ),
    (
        "list entry without a name",
        {"components": [{"replicas": 2}]},
        "infra.dynamo.gen.overrides.components.0: expected a mapping with the component's name",
        "name: NAME",
    ),
    (
        "component override not a mapping",
        {"components": {"VllmDecodeWorker": 3}},
        "infra.dynamo.gen.overrides.components.VllmDecodeWorker: expected a mapping, got integer 3",
        "override fields",
    ),
    (
        "container override not a mapping",
        {"components": {"VllmDecodeWorker": {"podTemplate": {"spec": {"containers": {"main": "x"}}}}}},
        "infra.dynamo.gen.overrides.components.VllmDecodeWorker.podTemplate.spec.containers.main: expected a mapping",
        "container",
    ),
    (
        "a bad value is blamed on the override",
        {"components": {"VllmDecodeWorker": {"replicas": -2}}},
        "infra.dynamo.gen.overrides.components.VllmDecodeWorker.replicas: ",
        "replica",
    ),
    (
        "a bad container field is blamed on the override",
        {"components": {"Frontend": {"podTemplate": {"spec": {"containers": {"main": {"imagePullPolicy": 3}}}}}}},
        "infra.dynamo.gen.overrides.components.Frontend.podTemplate.spec.containers.main.imagePullPolicy",
        "",
    ),
]


@pytest.mark.parametrize(
    "overrides, message, hint", [c[1:] for c in OVERRIDE_ERRORS], ids=[c[0] for c in OVERRIDE_ERRORS]
)
def test_rule1_override_errors(overrides, message, hint):
    with pytest.raises(ConfigError) as info:
        render(make_infra(overrides=overrides))
    assert message in info.value.message
    assert hint in info.value.hint
    assert info.value.exit_code == 2


# -- rule 4: pod defaults on the main container and the pod template -----------------------
FRONTEND_MAIN = {"components": {"Frontend": {"podTemplate": {"spec": {"containers": {"main": {"args": ["--x"]}}}}}}}
FRONTEND_SIDECAR = {"components": {"Frontend": {"podTemplate": {"spec": {"containers": {"log": {"image": "b:1"}}}}}}}
FRONTEND_SECRETS = {"components": {"Frontend": {"podTemplate": {"spec": {"imagePullSecrets": [{"name": "mine"}]}}}}}
# name, infra fields, overrides, what to look at, expected
POD_DEFAULTS = [
    ("a main container with the image where there was none", {}, {},
     lambda o: containers(o, "Frontend"), [{"name": "main", "image": "nemo-rl:1"}]),
    ("explicit image kept, sidecar untouched", {}, {},
     lambda o: [(c["name"], c["image"]) for c in containers(o, "VllmDecodeWorker")],
     [("main", WORKER_IMAGE), ("log", "busybox:1.36")]),
    ("image set on a main container without one", {}, FRONTEND_MAIN,
     lambda o: containers(o, "Frontend"), [{"name": "main", "args": ["--x"], "image": "nemo-rl:1"}]),
    ("main goes first when a sidecar came without it", {}, FRONTEND_SIDECAR,
     lambda o: [c["name"] for c in containers(o, "Frontend")], ["main", "log"]),
    ("imagePullSecrets where unset", {"imagePullSecrets": ["ngc"]}, {},
     lambda o: [component(o, n)["podTemplate"]["spec"]["imagePullSecrets"] for n in ("Frontend", "VllmDecodeWorker")],
     [[{"name": "ngc"}], [{"name": "ngc"}]]),
    ("explicit imagePullSecrets kept", {"imagePullSecrets": ["ngc"]}, FRONTEND_SECRETS,
     lambda o: component(o, "Frontend")["podTemplate"]["spec"]["imagePullSecrets"], [{"name": "mine"}]),
    ("serviceAccountName never injected", {"serviceAccount": "trainer-sa"}, {},
     lambda o: "serviceAccountName" in component(o, "Frontend")["podTemplate"]["spec"], False),
    ("explicit serviceAccountName kept", {"serviceAccount": "trainer-sa"}, {},
     lambda o: component(o, "VllmDecodeWorker")["podTemplate"]["spec"]["serviceAccountName"], "explicit-sa"),
    ("other pod fields untouched", {"placement": {"tolerations": [{"key": "other"}]}}, {},
     lambda o: component(o, "VllmDecodeWorker")["podTemplate"]["spec"]["tolerations"],
     [{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    ("no infra image: a complete template is left as it is", {"image": None},
     {"components": {"Frontend": {"podTemplate": {"spec": {"containers": {"main": {"image": "fe:1"}}}}}}},
     lambda o: component(o, "VllmDecodeWorker")["podTemplate"],
     yaml.safe_load((DATA / "dgd_basic_v1beta1.yaml").read_text())["spec"]["components"][1]["podTemplate"]),
]


@pytest.mark.parametrize("infra_patch, overrides, extract, expected", [c[1:] for c in POD_DEFAULTS],
                         ids=[c[0] for c in POD_DEFAULTS])
def test_rule4_pod_defaults(infra_patch, overrides, extract, expected):
    infra = make_infra(overrides=overrides)
    infra.update(infra_patch)
    assert extract(render(infra)) == expected


POD_ERRORS = [
    (
        "no infra image and no main container",
        {"image": None},
        {},
        "dgd_basic_v1beta1.yaml: spec.components.Frontend.podTemplate.spec.containers: has no container named 'main'",
        "set infra.image",
    ),
    (
        "no infra image and a main container without one",
        {"image": None},
        FRONTEND_MAIN,
        "infra.dynamo.gen.overrides.components.Frontend.podTemplate.spec.containers.main.image: no image",
        "set infra.image",
    ),
    (
        "a sidecar without an image",
        {},
        {"components": {"Frontend": {"podTemplate": {"spec": {"containers": {"log": {"args": ["x"]}}}}}}},
        "infra.dynamo.gen.overrides.components.Frontend.podTemplate.spec.containers.log.image: no image",
        "an image on the container",
    ),
    (
        "a sidecar without an image, overridden as a list item",
        {},
        {
            "components": [
                {"name": "Frontend", "podTemplate": {"spec": {"containers": [{"name": "log", "args": ["x"]}]}}}
            ]
        },
        "infra.dynamo.gen.overrides.components.Frontend.podTemplate.spec.containers.log.image: no image",
        "an image on the container",
    ),
]


@pytest.mark.parametrize(
    "infra_patch, overrides, message, hint", [c[1:] for c in POD_ERRORS], ids=[c[0] for c in POD_ERRORS]
)
def test_rule4_errors(infra_patch, overrides, message, hint):
    infra = make_infra(overrides=overrides)
    infra.update(infra_patch)
    with pytest.raises(ConfigError) as info:
        render(infra)
    assert message in info.value.message and hint in info.value.hint


def test_a_main_container_the_manifest_left_without_an_image_is_blamed_on_the_manifest(tmp_path):
    spec = {
        "components": [{"name": "F", "type": "frontend", "podTemplate": {"spec": {"containers": [{"name": "main"}]}}}]
    }
    infra = {
        "namespace": "rl",
        "dynamo": {
            "gen": {
                "manifest": write(tmp_path, spec),
                "readyTimeoutS": 600,
                "overrides": {"components": {"F": FRONTEND_MAIN["components"]["Frontend"]}},
            }
        },
    }
    with pytest.raises(ConfigError) as info:
        render(infra)
    assert info.value.message.endswith("graph.yaml: spec.components.F.podTemplate.spec.containers.main.image: no image")


def test_render_does_not_mutate_infra_or_manifest_and_is_deterministic():
    infra = make_infra(
        overrides={
            "components": {"VllmDecodeWorker": {"podTemplate": {"spec": {"containers": {"main": {"args": []}}}}}}
        }
    )
    before = copy.deepcopy(infra)
    first, second = render(infra), render(infra)
    assert infra == before and first == second
    assert yaml.safe_dump(first, sort_keys=False) == yaml.safe_dump(render(copy.deepcopy(infra)), sort_keys=False)
