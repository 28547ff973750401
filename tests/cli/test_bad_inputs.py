"""The bad-input corpus: every row runs the installed CLI on one bad input.

Each must exit 2 with exactly one ``error:`` line naming the file (or override) and the key,
one ``hint:`` line, no traceback and nothing on stdout, within 200 MiB of address space. The
timeout only catches a hang (a FIFO read would block forever). Big inputs (alias bomb, deep
nesting, 50 MB recipe, long `defaults:` chains) are generated here, not committed.
``bench/bad_inputs.py`` times the same rows.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "bad_inputs"
RECIPE, INFRA, DGD = DATA / "recipe.yaml", DATA / "infra.yaml", DATA / "dgd.yaml"
V1BETA1 = Path(__file__).parents[2] / "examples_dgd" / "qwen3_0.6b_kind_v1beta1.yaml"  # a valid v1beta1 DGD
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent))
MEMORY_LIMIT = 200 << 20
TIMEOUT_S = 120  # only a hang gets near this


@dataclass(frozen=True)
class Case:
    argv: list[str]
    words: tuple[str, ...]  # all in the error line: the file (or override) and the key, the problem
    env: dict[str, str] = field(default_factory=dict)


def check(*extra: str, recipe: Path | str = RECIPE, infra: Path | str = INFRA) -> list[str]:
    return ["check", str(recipe), "--infra", str(infra), *extra]


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def infra_with(tmp: Path, old: str, new: str) -> Path:
    """The valid infra with one text replaced (its DGD manifest stays the corpus one)."""
    text = INFRA.read_text()
    assert old in text, old
    return write(tmp, "infra.yaml", text.replace(old, new).replace("manifest: dgd.yaml", f"manifest: {DGD}"))


def override(token: str, *words: str) -> Callable[[Path], Case]:
    return lambda tmp: Case(check(token), (f"override '{token[:60]}", *words))


def alias_bomb(tmp: Path) -> Case:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for level, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[level]
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    path = write(tmp, "bomb.yaml", "\n".join(lines) + "\n")
    assert path.stat().st_size < 1024
    return Case(check(recipe=path), ("bomb.yaml:", "more than 50000 values"))


def deep_nesting(tmp: Path) -> Case:
    path = write(tmp, "deep.yaml", "a: " + "[" * 10_000 + "]" * 10_000 + "\n")
    return Case(check(infra=path), ("deep.yaml:1:", "a.0.0.0", "nested more than 64 levels"))


def big_recipe(tmp: Path) -> Case:
    path = tmp / "big.yaml"
    with path.open("w") as handle:
        handle.write("grpo: {max_num_steps: 5}\n")
        handle.truncate(50 << 20)
    return Case(check(recipe=path), ("big.yaml", "larger than 1024 KiB"))


def nul_byte(tmp: Path) -> Case:
    return Case(
        check(infra=write(tmp, "nul.yaml", "namespace: nemo-rl\nimage: nemo\x00rl:1\n")),
        ("nul.yaml:2:", "image:", "NUL byte"),
    )


def symlink_loop(tmp: Path) -> Case:
    (tmp / "a.yaml").symlink_to(tmp / "b.yaml")
    (tmp / "b.yaml").symlink_to(tmp / "a.yaml")
    return Case(check(infra=tmp / "a.yaml"), ("a.yaml", "symlink loop"))


def fifo(tmp: Path) -> Case:
    os.mkfifo(tmp / "pipe.yaml")
    return Case(check(infra=tmp / "pipe.yaml"), ("pipe.yaml", "is a FIFO"))


def defaults_chain(tmp: Path) -> Case:
    for i in range(1000):
        write(tmp, f"d{i}.yaml", f"defaults: d{i + 1}.yaml\n" if i < 999 else "namespace: nemo-rl\n")
    return Case(check(infra=tmp / "d0.yaml"), ("d15.yaml: defaults", "more than 16 files deep"))


def long_defaults_name(tmp: Path) -> Case:
    path = write(tmp, "i.yaml", f"defaults: {'x' * 300}.yaml\n")
    return Case(check(infra=path), ("i.yaml: defaults", "too long (305 characters)"))


def huge_number(tmp: Path) -> Case:
    path = infra_with(tmp, "readyTimeoutS: 900", f"readyTimeoutS: {'9' * 400}")
    return Case(check(infra=path), ("infra.yaml:40:", "dynamo.serving.readyTimeoutS", "out of range"))


def interpolation_chain(line: Callable[[int], str], count: int, *words: str) -> Callable[[Path], Case]:
    """Scratch keys _k0.._k<count-1> (each line(i)), the infra's image referring to the last."""
    def case(tmp: Path) -> Case:
        keys = "\n".join(f"_k{i}: {line(i)}" for i in range(count))
        path = infra_with(tmp, "image: nvcr.io/nvidia/nemo-rl:v0.4.0", f"{keys}\nimage: ${{_k{count - 1}}}")
        return Case(check(infra=path), ("infra.yaml: _k", *words))
    return case


def user_defaults(tmp: Path) -> Case:
    path = write(tmp, "defaults.yaml", "image: a:1\nimage: b:1\n")
    return Case(check(), ("defaults.yaml:2:", "image: duplicate key"), env={"NRL_K8S_DEFAULTS": str(path)})


def dgd_case(name: str, *words: str) -> Callable[[Path], Case]:
    path = DATA / f"dgd_{name}.yaml"
    return lambda tmp: Case(check(f"infra.dynamo.serving.manifest={path}"), (f"{path.name}", *words))


def empty_infra(tmp: Path) -> Case:
    return Case(check(infra=write(tmp, "empty.yaml", "")), ("empty.yaml: kuberay.training: is not set",))


def output_into(target: Callable[[Path], Path], *words: str) -> Callable[[Path], Case]:
    return lambda tmp: Case(check("-o", str(target(tmp))), ("--output", *words))


def annotations_too_big(tmp: Path) -> Case:
    path = infra_with(tmp, "namespace: nemo-rl\n", f"namespace: nemo-rl\nannotations:\n  note: {'x' * (256 << 10)}\n")
    return Case(check(infra=path), ("infra.yaml: infra key 'annotations'", "more than the 262144"))


HEAD = "kuberay.training.spec.headGroupSpec"
# + a Service
PORTED = "infra.deployments.reward.spec.template.spec.containers=[{name: server, ports: [{containerPort: 8080}]}]"
HEAD_CONTAINER = f"{HEAD}.template.spec.containers.0"
CORPUS: dict[str, Callable[[Path], Case]] = {
    # Files that are not YAML files nrl-k8s can read.
    "infra is /dev/zero": lambda tmp: Case(check(infra="/dev/zero"), ("/dev/zero", "is a character device")),
    "infra is a symlink loop": symlink_loop,
    "infra is a FIFO": fifo,
    "recipe is 50 MB": big_recipe,
    "NUL byte": nul_byte,
    "empty infra": empty_infra,
    # YAML that would expand, nest or overflow without bounds.
    "1 KB alias bomb": alias_bomb,
    "10k-deep nesting": deep_nesting,
    "1000-deep defaults chain": defaults_chain,
    "300-character defaults name": long_defaults_name,
    "400-digit readyTimeoutS": huge_number,
    "text doubled through 20 keys": interpolation_chain(
        lambda i: f"'${{_k{i - 1}}}${{_k{i - 1}}}'" if i else "x" * 1000, 20, "builds more than 4194304 characters"
    ),
    "lists doubled through 20 keys": interpolation_chain(
        lambda i: f"['${{_k{i - 1}}}', '${{_k{i - 1}}}']" if i else "[1]", 20, "builds more than 50000 values"
    ),
    "numbers squared through 20 keys": interpolation_chain(
        lambda i: f"'${{mul:${{_k{i - 1}}},${{_k{i - 1}}}}}'" if i else "10", 20, "out of the 64-bit integer range"
    ),
    "1000-key reference chain": interpolation_chain(
        lambda i: f"'${{_k{i - 1}}}'" if i else "a", 1000, "nest too deeply"
    ),
    "interpolation nested 1000 deep": override(
        "infra.image=" + "${oc.decode:" * 1000 + "x" + "}" * 1000,
        "image: interpolations and references nest too deeply",
    ),
    "unknown resolver": override("infra.image=${oc.create:x}", "image: unknown resolver 'oc.create'"),
    "500k backslashes before a missing reference": lambda tmp: Case(
        check(infra=infra_with(tmp, "image: nvcr.io/nvidia/nemo-rl:v0.4.0", "image: '" + "\\" * 500_000 + "x${nope}'")),
        ("infra.yaml: image:", "refers to a missing key 'nope'"),
    ),
    "500k dollars in an unterminated quote": lambda tmp: Case(
        check(
            infra=infra_with(
                tmp, "image: nvcr.io/nvidia/nemo-rl:v0.4.0", "image: \"${oc.env:X,'" + "$" * 500_000 + "}\""
            )
        ),
        ("infra.yaml: image:", "unterminated quote"),
    ),
    "integer key in the recipe": lambda tmp: Case(
        check(recipe=DATA / "recipe_integer_key.yaml"), ("recipe_integer_key.yaml:3:", "key 1 is an integer")
    ),
    # Duplicate keys: YAML keeps the last one silently.
    "duplicate key in the infra": lambda tmp: Case(
        check(infra=DATA / "infra_duplicate_key.yaml"),
        ("infra_duplicate_key.yaml:6:", "image: duplicate key (first set on line 2)"),
    ),
    "duplicate key in the recipe": lambda tmp: Case(
        check(recipe=DATA / "recipe_duplicate_key.yaml"),
        ("recipe_duplicate_key.yaml:3:", "grpo.max_num_steps: duplicate key"),
    ),
    "duplicate key in the DGD": dgd_case("duplicate_key", ":7:", "spec.services.Frontend: duplicate key"),
    "duplicate key in user defaults": user_defaults,
    # DGD manifests: the fields nrl-k8s reads, by type; spec.services must exist.
    "DGD metadata is a list": dgd_case("metadata_list", "metadata: expected a mapping, got list"),
    "DGD spec is a string": dgd_case("spec_string", "spec: expected a mapping, got string"),
    "DGD without spec": dgd_case("no_spec", "spec: is missing"),
    "DGD without services": dgd_case("no_services", "spec.services: is missing"),
    "DGD services: null": dgd_case("services_null", "spec.services: is missing"),
    "DGD services is a list": dgd_case("services_list", "spec.services: expected a mapping, got list"),
    "DGD service is a string": dgd_case("service_string", "spec.services.Frontend: expected a mapping"),
    "DGD replicas: abc": dgd_case(
        "replicas_abc", "spec.services.Frontend.replicas: expected a replica count, got string 'abc'"
    ),
    "DGD negative replicas": dgd_case("negative_replicas", "spec.services.Frontend.replicas: -1 is out of range"),
    "DGD label key": dgd_case("bad_label", "metadata.labels.team name: label key"),
    "DGD half a GPU": dgd_case("gpu_fraction", "spec.services.Worker.resources.limits.gpu", "not a whole number"),
    "DGD port 99999": dgd_case(
        "main_container_port", "extraPodSpec.mainContainer.ports.0.containerPort: 99999 is out of range"
    ),
    "DGD unknown pod field": dgd_case(
        "pod_unknown_field", "spec.services.Worker.extraPodSpec.tolerashuns: unknown field"
    ),
    "override names a missing DGD service": override(
        "++infra.dynamo.serving.overrides={services: {VllmWorker: {replicas: 2}}}",
        "dynamo.serving.overrides.services.VllmWorker: the DGD manifest has no such service",
    ),
    "override services: null": override(
        "++infra.dynamo.serving.overrides={services: null}", "dynamo.serving.overrides.services: expected a mapping"
    ),
    "override DGD replicas negative": override(
        "++infra.dynamo.serving.overrides={services: {Frontend: {replicas: -2}}}",
        "dynamo.serving.overrides.services.Frontend.replicas: -2 is out of range",
    ),
    # RayCluster and Deployment specs: read fields by type, pod templates by the Kubernetes schema.
    "headGroupSpec: null": lambda tmp: Case(
        check(
            infra=infra_with(
                tmp,
                "      headGroupSpec:\n        rayStartParams: {dashboard-host: 0.0.0.0}\n        template:\n"
                "          spec:\n            containers:\n              - name: ray-head\n                ports:\n"
                "                  - {containerPort: 8265, name: dashboard}\n",
                "      headGroupSpec: null\n",
            )
        ),
        ("infra.yaml: kuberay.training.spec.headGroupSpec: expected a mapping, got null",),
    ),
    "containers: abc": lambda tmp: Case(
        check(infra=infra_with(tmp, "              containers: [{name: ray-worker}]", "              containers: abc")),
        (
            "infra.yaml: kuberay.training.spec.workerGroupSpecs.0.template.spec.containers: "
            "expected array, got string 'abc'",
        ),
    ),
    "worker replicas: abc": lambda tmp: Case(
        check(infra=infra_with(tmp, "          replicas: 1", "          replicas: abc")),
        ("infra.yaml: kuberay.training.spec.workerGroupSpecs.0.replicas: expected a replica count",),
    ),
    "negative worker replicas": lambda tmp: Case(
        check(infra=infra_with(tmp, "          replicas: 1", "          replicas: -3")),
        ("infra.yaml: kuberay.training.spec.workerGroupSpecs.0.replicas: -3 is out of range",),
    ),
    "container port 99999": override(
        f"infra.{HEAD}.template.spec.containers.0.ports.0.containerPort=99999",
        f"{HEAD_CONTAINER}.ports.0.containerPort",
        "out of range",
    ),
    "unknown container field": override(
        f"+infra.{HEAD}.template.spec.containers.0.resouces={{}}", f"{HEAD_CONTAINER}.resouces: unknown field"
    ),
    # What KubeRay or the API server would refuse (issue 19: these were accepted, one with a traceback).
    "worker group without groupName": lambda tmp: Case(
        check(infra=infra_with(tmp, "        - groupName: gpu\n          replicas: 1", "        - replicas: 1")),
        ("infra.yaml: kuberay.training.spec.workerGroupSpecs.0.groupName: is missing",),
    ),
    "two worker groups named gpu": lambda tmp: Case(
        check(
            infra=infra_with(
                tmp,
                "              containers: [{name: ray-worker}]\n",
                "              containers: [{name: ray-worker}]\n        - groupName: gpu\n          replicas: 1\n"
                "          template: {spec: {containers: [{name: ray-worker}]}}\n",
            )
        ),
        ("infra.yaml: kuberay.training.spec.workerGroupSpecs.1.groupName: 'gpu' names another worker group too",),
    ),
    "minReplicas above maxReplicas": lambda tmp: Case(
        check(
            infra=infra_with(
                tmp,
                "          replicas: 1",
                "          replicas: 1\n          minReplicas: 4\n          maxReplicas: 2",
            )
        ),
        ("infra.yaml: kuberay.training.spec.workerGroupSpecs.0.minReplicas: 4 is more than maxReplicas 2",),
    ),
    "two containers of one name": lambda tmp: Case(
        check(
            infra=infra_with(
                tmp, "containers: [{name: ray-worker}]", "containers: [{name: ray-worker}, {name: ray-worker}]"
            )
        ),
        (
            "kuberay.training.spec.workerGroupSpecs.0.template.spec.containers.1.name: "
            "'ray-worker' is the name of another container",
        ),
    ),
    "probe port name": override(
        f"+infra.{HEAD}.template.spec.containers.0.livenessProbe={{tcpSocket: {{port: Not_A_Name}}}}",
        f"{HEAD_CONTAINER}.livenessProbe.tcpSocket.port",
        "is not a valid port name",
    ),
    "two dynamo keys, one DGD name": override(
        f"++infra.dynamo.twin={{manifest: {DGD}}}",
        "dynamo.twin: names the DGD 'tester-dgd', as infra.dynamo.serving does",
    ),
    "two roles, one RayCluster name": override(
        "++infra.kuberay.gym={name: tester-rl, spec: {headGroupSpec: {template: {spec: {containers: [{name: h}]}}}}}",
        "kuberay.gym.name: names the RayCluster 'tester-rl', as infra.kuberay.training does",
    ),
    "a head Service named as another role's": override(
        "++infra.kuberay.gym={name: tester-gym, spec: {headGroupSpec: "
        "{headService: {metadata: {name: tester-rl-head-svc}}, "
        "template: {spec: {containers: [{name: h}]}}}}}",
        "kuberay.gym.spec.headGroupSpec.headService.metadata.name",
        "'tester-rl-head-svc' would also be RayCluster tester-rl's",
    ),
    "a Deployment's Service named as a head Service": lambda tmp: Case(
        check("++infra.deployments.reward.name=tester-rl-head-svc", PORTED),
        (
            "override '++infra.deployments.reward.name=tester-rl-head-svc'",
            "deployments.reward.name",
            "'tester-rl-head-svc' would also be RayCluster tester-rl's head Service",
        ),
    ),
    "a Deployment's Service named as a DGD's frontend": lambda tmp: Case(
        check("++infra.deployments.reward.name=tester-dgd-frontend", PORTED),
        ("deployments.reward.name", "'tester-dgd-frontend' would also be DGD tester-dgd's frontend Service"),
    ),
    "run --raycluster --dry-run: two roles, one name": lambda tmp: Case(
        [
            "run",
            "--raycluster",
            "--dry-run",
            *check(
                "++infra.kuberay.gym={name: tester-rl, spec: "
                "{headGroupSpec: {template: {spec: {containers: [{name: h}]}}}}}"
            )[1:],
        ],
        ("kuberay.gym.name: names the RayCluster 'tester-rl'",),
    ),
    # Upload paths: what no checkout can hold is refused by every command; the rest as the run checks it.
    "rayUploadPaths: [/etc]": override(
        "++infra.launch.rayUploadPaths=[/etc]", "launch.rayUploadPaths.0: '/etc' must be a path relative"
    ),
    "a daemon's rayUploadPaths leaving the root": override(
        "++infra.kuberay.training.daemon={entrypoint: python d.py, rayUploadPaths: [code/../../up]}",
        "kuberay.training.daemon.rayUploadPaths.0: 'code/../../up' must be a path relative",
    ),
    "run --raycluster --dry-run: a missing upload path": lambda tmp: Case(
        [
            "run",
            "--raycluster",
            "--dry-run",
            "--repo-root",
            str(tmp),
            *check("++infra.launch.rayUploadPaths=[nope]")[1:],
        ],
        ("override '++infra.launch.rayUploadPaths=[nope]'", "launch.rayUploadPaths.0: 'nope' does not exist"),
    ),
    "run --raycluster --dry-run outside a checkout": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", *check("++infra.launch.rayUploadPaths=[code]")[1:]],
        ("is not inside a git checkout",),
    ),
    # A secret-looking value written inline would sit in the applied object (issue 19).
    "inline secret in networking.extra_env": lambda tmp: Case(  # the override shown with its value redacted
        check("++infra.networking.extra_env.HF_TOKEN=hf_abc"),
        (
            "override '++infra.networking.extra_env.HF_TOKEN=<redacted>'",
            "HF_TOKEN is a secret-looking value written inline",
        ),
    ),
    "inline secret in a container's env": override(
        f"+infra.{HEAD}.template.spec.containers.0.env=[{{name: WANDB_API_KEY, value: wk}}]",
        f"{HEAD_CONTAINER}.env.0",
        "WANDB_API_KEY is a secret-looking value written inline",
    ),
    "inline secret in a DGD service's envs": override(
        "++infra.dynamo.serving.overrides={services: {Frontend: {envs: [{name: API_TOKEN, value: t0k}]}}}",
        "dynamo.serving.overrides.services.Frontend.envs.0",
        "API_TOKEN is a secret-looking value written inline",
    ),
    "inline secret in a v1beta1 DGD's spec.env": dgd_case(
        "v1beta1_inline_secret", "spec.env.0", "HF_TOKEN is a secret-looking value written inline"
    ),
    "inline secret in a v1beta1 component's envs": lambda tmp: Case(
        check(
            f"infra.dynamo.serving.manifest={V1BETA1}",
            "++infra.dynamo.serving.overrides={components: {Frontend: {envs: [{name: API_KEY, value: k}]}}}",
        ),
        ("dynamo.serving.overrides.components.Frontend.envs.0", "API_KEY is a secret-looking value written inline"),
    ),
    "inline secret in a v1beta1 component's container env": lambda tmp: Case(
        check(
            f"infra.dynamo.serving.manifest={V1BETA1}",
            "++infra.dynamo.serving.overrides={components: {Frontend: {podTemplate: {spec: {containers: "
            "[{name: main, env: [{name: API_KEY, value: k}]}]}}}}}",
        ),
        (
            "dynamo.serving.overrides.components.Frontend.podTemplate.spec.containers.main.env.0",
            "API_KEY is a secret-looking value written inline",
        ),
    ),
    # Fields that would do nothing, and secrets however they reach an env (issue 30).
    "a list item as KEY[N], a field KubeRay does not have": override(
        "++infra.kuberay.training.spec.workerGroupSpecs[0].minReplicas=5",
        "kuberay.training.spec.workerGroupSpecs[0]: unknown field",
    ),
    "unknown field of a RayCluster head group": override(
        "++infra.kuberay.training.spec.headGroupSpec.replicas=2", "kuberay.training.spec.headGroupSpec.replicas",
        "unknown field",
    ),
    "inline secret in the Ray autoscaler's env": override(
        "++infra.kuberay.training.spec.autoscalerOptions={env: [{name: HF_TOKEN, value: hf_x}]}",
        "kuberay.training.spec.autoscalerOptions.env.0", "HF_TOKEN is a secret-looking value written inline",
    ),
    "unknown field of a Deployment spec": override(
        "++infra.deployments.reward.spec.replicaz=2", "deployments.reward.spec.replicaz", "unknown field"
    ),
    "unknown field of a DGD service override": override(
        "+infra.dynamo.serving.overrides={services: {Frontend: {replicaz: 2}}}",
        "dynamo.serving.overrides.services.Frontend.replicaz: unknown field",
    ),
    "a DGD override under spec.": override(
        "+infra.dynamo.serving.overrides.spec.services.Frontend.replicas=2",
        "dynamo.serving.overrides.spec: unknown field",
    ),
    "inline secret in a DGD override under spec.": override(
        "+infra.dynamo.serving.overrides.spec.services.VllmDecodeWorker.extraPodSpec.mainContainer.env="
        "[{name: HF_TOKEN, value: hf_x}]",
        "dynamo.serving.overrides.spec.services.VllmDecodeWorker.extraPodSpec.mainContainer.env.0",
        "HF_TOKEN is a secret-looking value written inline",
    ),
    "inline secret in a DGD service's frontend sidecar": override(
        "++infra.dynamo.serving.overrides={services: {Frontend: {frontendSidecar: {image: f, envs: "
        "[{name: HF_TOKEN, value: hf_x}]}}}}",
        "dynamo.serving.overrides.services.Frontend.frontendSidecar.envs.0", "HF_TOKEN is a secret-looking value",
    ),
    "unknown field of a v1beta1 component override": lambda tmp: Case(
        check(f"infra.dynamo.serving.manifest={V1BETA1}",
              "+infra.dynamo.serving.overrides={components: [{name: Frontend, replicaz: 2}]}"),
        ("dynamo.serving.overrides.components.Frontend.replicaz: unknown field",),
    ),
    "a v1beta1 DGD override under spec.": lambda tmp: Case(
        check(f"infra.dynamo.serving.manifest={V1BETA1}", "+infra.dynamo.serving.overrides.spec.env=[]"),
        ("dynamo.serving.overrides.spec: unknown field",),
    ),
    "inline secret in a v1beta1 component role's pod template": lambda tmp: Case(
        check(f"infra.dynamo.serving.manifest={V1BETA1}",
              "++infra.dynamo.serving.overrides={components: {VllmDecodeWorker: {roles: [{name: leader, podTemplate: "
              "{spec: {containers: [{name: main, env: [{name: HF_TOKEN, value: hf_x}]}]}}}]}}}"),
        ("dynamo.serving.overrides.components", "containers.0.env.0", "HF_TOKEN is a secret-looking value"),
    ),
    "a user name that is no Kubernetes name": lambda tmp: Case(
        check(), ("$NRL_K8S_USER 'Évil User!'", "not a Kubernetes name"), env={"NRL_K8S_USER": "Évil User!"}
    ),
    "Deployment replicas negative": override(
        "+infra.deployments.reward.spec.replicas=-1", "deployments.reward.spec.replicas: -1 is out of range"
    ),
    "Deployment containers: abc": override(
        "infra.deployments.reward.spec.template.spec.containers=abc",
        "deployments.reward.spec.template.spec.containers: expected array",
    ),
    # Infra values Kubernetes would refuse.
    "cpu: .nan": override(
        "infra.resources.training.head.cpu=.nan", "infra key 'resources.training.head.cpu'", "nan is not a quantity"
    ),
    "memory: lots": override(
        "infra.resources.training.head.memory=lots", "resources.training.head.memory", "'lots' is not a quantity"
    ),
    "empty image": override("infra.image=", "infra key 'image'", "image is empty"),
    "label key with a space": override("++infra.labels={team name: rl}", "labels.team name", "label key"),
    "label value too long": override(f"++infra.labels={{team: {'x' * 64}}}", "labels.team", "label value"),
    "annotations over 256 KiB": annotations_too_big,
    "emptyDir without mountPath": override(
        "++infra.checkpoints={kind: emptyDir}", "infra key 'checkpoints.kind'", "requires 'checkpoints.mountPath'"
    ),
    "override creating an unknown key": override("++infra.foo.bar=1", "unknown infra key 'foo'"),
    # A value with a line break or an escape sequence is quoted on one line (issue 19).
    "newline in an override value": lambda tmp: Case(
        check("infra.kuberay.training.name=tester\nrl"),
        ("override 'infra.kuberay.training.name=tester\\nrl'", "kuberay.training.name"),
    ),
    "newline in a file name": lambda tmp: Case(
        check(recipe=tmp / "re\ncipe\u2028.yaml"), ("re\\ncipe\\u2028.yaml", "file not found")
    ),
    # Command-line output paths.
    "check -o into a missing folder": output_into(
        lambda tmp: tmp / "missing" / "bundle.yaml", "is not an existing directory"
    ),
    "check -o onto a folder": output_into(lambda tmp: tmp, "is a directory"),
    "check -o onto a FIFO": output_into(lambda tmp: (os.mkfifo(tmp / "out.yaml"), tmp / "out.yaml")[1], "is a FIFO"),
    "check -o /dev/zero": output_into(lambda tmp: Path("/dev/zero"), "is a character device"),
    "check --manifests-only -o onto a FIFO": lambda tmp: Case(
        check("--manifests-only", "-o", str((os.mkfifo(tmp / "m.yaml"), tmp / "m.yaml")[1])), ("--output", "is a FIFO")
    ),
    # Other commands refuse the same way before applying anything.
    "cluster up --dry-run": lambda tmp: Case(
        ["cluster", "up", "--dry-run", str(RECIPE), "--infra", str(DATA / "infra_duplicate_key.yaml")],
        ("infra_duplicate_key.yaml:6:",),
    ),
    "run --dry-run": lambda tmp: Case(["run", "--dry-run", *check(infra="/dev/zero")[1:]], ("/dev/zero",)),
    # logs flags that do not fit together, refused before any file or cluster is read.
    "logs --source unknown": lambda tmp: Case(
        ["logs", *check()[1:], "--source", "pods"], ("--source pods", "expected driver")
    ),
    "logs --source dgd:": lambda tmp: Case(["logs", *check()[1:], "--source", "dgd:"], ("--source dgd:",)),
    "logs --tail -1": lambda tmp: Case(["logs", *check()[1:], "--tail", "-1"], ("--tail -1", "0 or more")),
    "logs --role with dgd": lambda tmp: Case(
        ["logs", *check()[1:], "-s", "dgd", "--role", "gym"], ("--role", "--source dgd")
    ),
    "logs --dashboard-url with head": lambda tmp: Case(
        ["logs", *check()[1:], "-s", "head", "--dashboard-url", "http://127.0.0.1:8265"],
        ("--dashboard-url", "--source head"),
    ),
    # How the driver starts (run --mode / --submitter / --code-source / --code-path) and what it reads.
    "a --config the driver would read instead of the run's recipe": override(
        'infra.launch.entrypoint="python run.py --config $CFG"', "launch.entrypoint", "--config $CFG"
    ),
    "exec submitter uploading code": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--submitter", "exec", *check()[1:]],
        ("override '++infra.submit.submitter=exec'", "submit.submitter", "cannot upload code"),
    ),
    "batch mode with the code uploaded": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--mode", "batch", *check("++infra.launch.codeSource=upload")[1:]],
        ("launch.runMode", "cannot upload code"),
    ),
    "--submitter ssh": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--submitter", "ssh", *check()[1:]], ("--submitter 'ssh'",)
    ),
    "--mode with --rayjob": lambda tmp: Case(
        ["run", "--rayjob", "--dry-run", "--mode", "batch", *check()[1:]], ("--mode", "--rayjob")
    ),
    "--code-source upload with --rayjob": lambda tmp: Case(
        ["run", "--rayjob", "--dry-run", "--code-source", "upload", *check()[1:]], ("--code-source upload", "--rayjob")
    ),
    "--code-path with the code uploaded": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--code-path", "/opt/code", *check()[1:]], ("--code-path", "uploaded")
    ),
    "relative execTmpDir": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--mode", "batch", *check("++infra.submit.execTmpDir=tmp")[1:]],
        ("override '++infra.submit.execTmpDir=tmp'", "submit.execTmpDir", "not an absolute path"),
    ),
    "--timeout where batch mode does not wait": lambda tmp: Case(
        ["run", "--raycluster", "--dry-run", "--timeout", "5", "--mode", "batch", "--code-path", "/c", *check()[1:]],
        ("--timeout", "batch"),
    ),
}


def run_cli(case: Case, cwd: Path) -> subprocess.CompletedProcess:
    """The installed CLI on one case, in 200 MiB of address space, offline."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "NRL_K8S_USER": "tester",
        "KUBECONFIG": str(cwd / "none"),
        **case.env,
    }
    return subprocess.run([EXE, *case.argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                          preexec_fn=limit_memory)


@pytest.mark.parametrize("build", CORPUS.values(), ids=CORPUS)
def test_bad_input_is_refused_with_one_line(build, tmp_path):
    case = build(tmp_path)
    result = run_cli(case, tmp_path)
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    for word in case.words:
        assert word in lines[0], (word, lines[0])
    assert result.stdout == ""


def test_the_valid_corpus_base_is_accepted(tmp_path):
    """Every row breaks one thing: the base it breaks must pass."""
    result = run_cli(Case(check(), ()), tmp_path)
    assert result.returncode == 0, result.stderr
