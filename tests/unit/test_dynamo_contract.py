"""NeMo-RL's Dynamo contract (``config.dynamo_contract``): one table of cases per rule, each run
against the same graph written as a v1alpha1 and as a v1beta1 DGD."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from nrl_k8s.config.dynamo_contract import CFG, COLOCATED, findings, refuse
from nrl_k8s.errors import ConfigError

FILE = "/dgds/rl.dgd.yaml"
INFRA = {"dynamo": {"serving": {"manifest": FILE}}}
RL = ("--enable-rl", "--weight-transfer-config", '{"backend":"nccl"}')
TP2 = ("--model", "m", "--tensor-parallel-size", "2")
VLLM = ("python3", "-m", "dynamo.vllm")
DROP = object()  # a dynamo_cfg key the case removes
VERSIONS = ("v1alpha1", "v1beta1")


@dataclass(frozen=True)
class Worker:
    args: tuple[str, ...] = (*TP2, *RL)
    command: tuple[str, ...] = VLLM
    name: str = "VllmDecodeWorker"
    role: str = "worker"  # worker, decode, prefill
    env: dict = field(default_factory=dict)  # a None value: valueFrom
    env_from: bool = False  # v1alpha1: envFromSecret on the service; v1beta1: envFrom on main


@dataclass(frozen=True)
class Case:
    expected: tuple[tuple[bool, str], ...] = ()  # (error, recipe key) of each finding, in order
    cfg: dict = field(default_factory=dict)  # merged onto {dgd_name: rl, engine_world_size: 2}
    colocated: object = False
    workers: tuple[Worker, ...] = (Worker(),)
    graph_env: dict = field(default_factory=dict)
    backend: str = "dynamo"


def manifest(version: str, workers: tuple[Worker, ...], graph_env: dict) -> dict:
    """A Frontend and ``workers`` as one DGD of ``version``."""
    parts = [Worker(args=(), command=("python3", "-m", "dynamo.frontend"), name="Frontend", role="frontend"), *workers]

    def env(values: dict) -> list[dict]:
        return [{"name": k, "value": v} if v is not None else {"name": k, "valueFrom": {"secretKeyRef": {"name": "s"}}}
                for k, v in values.items()]

    if version == "v1alpha1":
        services = {}
        for part in parts:
            service: dict = {"componentType": "worker" if part.role in ("prefill", "decode") else part.role}
            if part.role in ("prefill", "decode"):
                service["subComponentType"] = part.role
            if part.env_from:
                service["envFromSecret"] = "secrets"
            service["extraPodSpec"] = {"mainContainer": {"command": list(part.command), "args": list(part.args),
                                                         "env": env(part.env)}}
            services[part.name] = service
        spec = {"services": services, "envs": env(graph_env)}
    else:
        components = []
        for part in parts:
            main = {"name": "main", "command": list(part.command), "args": list(part.args), "env": env(part.env),
                    **({"envFrom": [{"secretRef": {"name": "secrets"}}]} if part.env_from else {})}
            components.append({"name": part.name, "type": part.role,
                               "podTemplate": {"spec": {"containers": [main]}}})
        spec = {"components": components, "env": env(graph_env)}
    return {"apiVersion": f"nvidia.com/{version}", "kind": "DynamoGraphDeployment",
            "metadata": {"name": "rl", "namespace": "team"}, "spec": spec}


def recipe(case: Case) -> dict:
    cfg = {k: v for k, v in {"dgd_name": "rl", "engine_world_size": 2, **case.cfg}.items() if v is not DROP}
    return {"policy": {"generation": {"backend": case.backend, "colocated": {"enabled": case.colocated},
                                      "dynamo_cfg": cfg}}}


def run(case: Case, version: str) -> list[tuple[bool, str]]:
    found = findings(recipe(case), {"serving": manifest(version, case.workers, case.graph_env)}, INFRA)
    for finding in found:
        assert finding.message.startswith(f"{FILE}: {finding.key} "), finding.message
    return [(f.error, f.key) for f in found]


ERROR, WARNING = True, False
PORT, SYSTEM = f"{CFG}.frontend_port", f"{CFG}.dyn_system_port"
EWS, URL = f"{CFG}.engine_world_size", f"{CFG}.frontend_url"

WHEN = {  # which recipes and graphs the rules look at
    "a graph that keeps the contract": Case(),
    "a backend other than dynamo": Case(backend="vllm", cfg={"frontend_port": 1}, workers=(Worker(args=()),)),
    "colocated not said: no refit to check": Case(colocated=None, workers=(Worker(args=()),)),
    "colocated true: no refit to check": Case(colocated=True, workers=(Worker(args=()),)),
    "a dgd_name no declared DGD has": Case(cfg={"dgd_name": "elsewhere"}, workers=(Worker(args=()),)),
    "a prefill worker by its role is not refit": Case(workers=(Worker(), Worker(args=("-tp", "4"), name="P",
                                                                                role="prefill"))),
    "a prefill worker by its args is not refit": Case(workers=(Worker(), Worker(
        args=("--tensor-parallel-size", "4", "--disaggregation-mode", "prefill"), name="P"))),
    "a decode worker is refit": Case(workers=(Worker(args=TP2, role="decode"),),
                                     expected=((ERROR, COLOCATED), (ERROR, COLOCATED))),
}

FRONTEND_URL = {  # rule 1
    "frontend_url without dgd_name while refit is on": Case(
        cfg={"frontend_url": "http://x:8000/v1", "dgd_name": DROP}, expected=((ERROR, URL),)),
    "frontend_url beside dgd_name while refit is on": Case(
        cfg={"frontend_url": "http://x:8000/v1"}, expected=((WARNING, URL),)),
    "frontend_url without refit": Case(cfg={"frontend_url": "http://x:8000/v1", "dgd_name": DROP}, colocated=True),
}

ENGINE_WORLD_SIZE = {  # rule 2
    "vLLM -tp and -pp multiplied": Case(cfg={"engine_world_size": 8},
                                        workers=(Worker(args=("-tp", "4", "-pp=2", *RL)),)),
    "vLLM tensor parallel 2, engine_world_size 4": Case(cfg={"engine_world_size": 4}, expected=((ERROR, EWS),)),
    "no size in the args: the default 1": Case(workers=(Worker(args=RL),), expected=((ERROR, EWS),)),
    "SGLang --tp and --pp-size": Case(cfg={"engine_world_size": 4}, workers=(Worker(
        command=("python3", "-m", "dynamo.sglang"), args=("--tp", "2", "--pp-size", "2", *RL)),)),
    "TRT-LLM --tensor-parallel-size": Case(cfg={"engine_world_size": 4}, workers=(Worker(
        command=("python3", "-m", "dynamo.trtllm"), args=("--tensor-parallel-size", "4", *RL)),)),
    "a size the args do not state plainly": Case(cfg={"engine_world_size": 4}, workers=(Worker(
        command=("/bin/sh", "-c"), args=(f"exec python3 -m dynamo.vllm --tensor-parallel-size $TP {' '.join(RL[:2])} "
                                         f"'{RL[2]}'",)),), expected=((WARNING, EWS),)),
    "an engine config file may set the pipeline size": Case(cfg={"engine_world_size": 4}, workers=(Worker(
        args=("--config", "engine.yaml", "--tensor-parallel-size", "2", *RL)),), expected=((WARNING, EWS),)),
    "an engine config file cannot make 2 ranks 3": Case(cfg={"engine_world_size": 3}, workers=(Worker(
        args=("--config", "engine.yaml", "--tensor-parallel-size", "2", *RL)),), expected=((ERROR, EWS),)),
    "not set while colocated is false: one warning, no other rule": Case(
        cfg={"engine_world_size": DROP, "frontend_url": "http://x/v1"}, workers=(Worker(args=()),),
        expected=((WARNING, EWS),)),
    "a worker whose engine the command hides": Case(workers=(Worker(command=("/opt/start.sh",)),),
                                                    expected=((WARNING, COLOCATED),)),
    "the engine in a shell script": Case(workers=(Worker(command=("bash", "-c"), args=(
        "cd /w && python3 -m dynamo.vllm -tp 2 --enable-rl --weight-transfer-config '{\"backend\": \"nccl\"}'"
        "; true",)),)),
}

NCCL_ARGS = {  # rule 3
    "no --enable-rl": Case(workers=(Worker(args=(*TP2, *RL[1:])),), expected=((ERROR, COLOCATED),)),
    "--no-enable-rl last": Case(workers=(Worker(args=(*TP2, *RL, "--no-enable-rl")),),
                                expected=((ERROR, COLOCATED),)),
    "DYN_ENABLE_RL instead of the flag": Case(workers=(Worker(args=(*TP2, *RL[1:]), env={"DYN_ENABLE_RL": "true"}),)),
    "a Secret may set DYN_ENABLE_RL": Case(workers=(Worker(args=(*TP2, *RL[1:]), env_from=True),),
                                           expected=((WARNING, COLOCATED),)),
    "no --weight-transfer-config": Case(workers=(Worker(args=(*TP2, *RL[:1])),), expected=((ERROR, COLOCATED),)),
    "a weight transfer backend other than nccl": Case(workers=(Worker(
        args=(*TP2, "--enable-rl", '--weight-transfer-config={"backend":"gloo"}')),), expected=((ERROR, COLOCATED),)),
    "--weight-transfer-config.backend nccl": Case(workers=(Worker(
        args=(*TP2, "--enable-rl", "--weight-transfer-config.backend", "nccl")),)),
}

PORTS = {  # rule 4
    "frontend_port other than the Service's": Case(cfg={"frontend_port": 8080}, expected=((ERROR, PORT),)),
    "frontend_port 8000": Case(cfg={"frontend_port": 8000}),
    "frontend_port unused beside frontend_url": Case(
        cfg={"frontend_port": 8080, "frontend_url": "http://x/v1"}, colocated=True),
    "dyn_system_port the operator does not set": Case(cfg={"dyn_system_port": 9345}, expected=((ERROR, SYSTEM),)),
    "dyn_system_port the worker's env sets": Case(cfg={"dyn_system_port": 9345}, workers=(Worker(
        env={"DYN_SYSTEM_PORT": "9345"}),)),
    "dyn_system_port the graph's env sets": Case(cfg={"dyn_system_port": 9345}, graph_env={"DYN_SYSTEM_PORT": "9345"}),
    "a worker port the recipe leaves at 9090": Case(workers=(Worker(env={"DYN_SYSTEM_PORT": "9345"}),),
                                                    expected=((ERROR, SYSTEM),)),
    "a Secret may set DYN_SYSTEM_PORT": Case(cfg={"dyn_system_port": 9345}, workers=(Worker(env_from=True),),
                                             expected=((WARNING, SYSTEM),)),
    "DYN_SYSTEM_PORT from a valueFrom": Case(cfg={"dyn_system_port": 9345}, workers=(Worker(
        env={"DYN_SYSTEM_PORT": None}),), expected=((WARNING, SYSTEM),)),
}


def table(cases: dict[str, Case]):
    return pytest.mark.parametrize(
        "name, version", [(name, version) for name in cases for version in VERSIONS],
        ids=[f"{name} [{version}]" for name in cases for version in VERSIONS])


@table(WHEN)
def test_which_recipes_and_workers_the_rules_read(name, version):
    assert run(WHEN[name], version) == list(WHEN[name].expected)


@table(FRONTEND_URL)
def test_frontend_url_while_nccl_refit_is_on(name, version):
    assert run(FRONTEND_URL[name], version) == list(FRONTEND_URL[name].expected)


@table(ENGINE_WORLD_SIZE)
def test_engine_world_size_against_the_workers_tensor_and_pipeline_parallel_args(name, version):
    assert run(ENGINE_WORLD_SIZE[name], version) == list(ENGINE_WORLD_SIZE[name].expected)


@table(NCCL_ARGS)
def test_nccl_refit_needs_the_rl_endpoint_and_the_nccl_weight_transfer(name, version):
    assert run(NCCL_ARGS[name], version) == list(NCCL_ARGS[name].expected)


@table(PORTS)
def test_frontend_port_and_dyn_system_port_against_what_the_dgd_serves(name, version):
    assert run(PORTS[name], version) == list(PORTS[name].expected)


def test_refuse_raises_the_first_error_and_returns_the_warnings():
    dgds = {"serving": manifest("v1alpha1", (Worker(),), {})}
    warnings = refuse(recipe(Case(cfg={"frontend_url": "http://x:8000/v1"})), dgds, INFRA)
    assert [message.startswith(f"{FILE}: {URL} is set with NCCL refit on") for message, _ in warnings] == [True]
    with pytest.raises(ConfigError) as refused:
        refuse(recipe(Case(cfg={"frontend_url": "http://x:8000/v1", "frontend_port": 1})), dgds, INFRA)
    assert refused.value.message.startswith(f"{FILE}: {PORT} is 1, but the frontend Service of DGD rl (rl-frontend)")
    assert refused.value.hint == "remove it (NeMo-RL's default is 8000)"


def test_an_inline_spec_is_named_by_its_infra_key():
    dgds = {"serving": manifest("v1beta1", (Worker(args=TP2),), {})}
    found = findings(recipe(Case()), dgds, {"dynamo": {"serving": {"spec": dgds["serving"]["spec"]}}})
    assert found[0].message.startswith(f"infra.dynamo.serving.spec: {COLOCATED} is false (NCCL refit)")


def test_several_dgds_the_one_dgd_name_names_is_checked():
    dgds = {"judge": {**manifest("v1alpha1", (Worker(args=()),), {}), "metadata": {"name": "judge"}},
            "serving": manifest("v1beta1", (Worker(),), {})}
    infra = {"dynamo": {"judge": {"manifest": "/dgds/judge.yaml"}, "serving": {"manifest": FILE}}}
    assert findings(recipe(Case(cfg={"engine_world_size": 4})), dgds, infra)[0].message.startswith(f"{FILE}: {EWS}")
    assert findings(recipe(Case(cfg={"dgd_name": DROP})), dgds, infra) == []  # none named, two declared
