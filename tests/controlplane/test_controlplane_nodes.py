"""The sandbox's node pools (``controlplane.nodes``, ``sandbox up --nodes SPEC``), offline: the SPEC
parser, the nodes it renders, what it refuses and how ``sandbox up`` says so. The live test is
tests/integration/test_fit_matrix.py."""

from __future__ import annotations

import pytest
from sandbox_harness import nrl_k8s

from nrl_k8s.errors import ConfigError
from nrl_k8s_sandbox.controlplane import kueue, nodes
from nrl_k8s_sandbox.process import parse_faults

H100 = ("h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,label=zone=a,taint=dedicated=team-a:NoSchedule,"
        "cpu=96,memory=1Ti")
TEAM_A = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}

#: SPEC -> (node names, labels every node has beyond the fixed ones, taints, capacity)
PARSED = {
    "a name alone: one CPU node": (
        "small", ["small-0"], {}, [], {"cpu": "144", "memory": "960Gi", "pods": "250"}),
    "the issue's H100 pool": (
        H100, ["h100-0", "h100-1"],
        {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
         "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": "a"},
        [TEAM_A], {"cpu": "96", "memory": "1Ti", "pods": "250", "nvidia.com/gpu": "8"}),
    "GPUs without a product, repeated labels and taints, a taint without a value": (
        "g:gpus=2,label=a=1,label=example.com/b=,taint=gpu:NoExecute,taint=x=y:PreferNoSchedule,pods=10,cpu=500m",
        ["g-0"], {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2", "a": "1", "example.com/b": ""},
        [{"key": "gpu", "effect": "NoExecute"}, {"key": "x", "value": "y", "effect": "PreferNoSchedule"}],
        {"cpu": "500m", "memory": "960Gi", "pods": "10", "nvidia.com/gpu": "2"}),
    "a label given twice: the last wins": ("l:label=zone=a,label=zone=b", ["l-0"], {"zone": "b"}, [], None),
}


@pytest.mark.parametrize("spec,names,labels,taints,capacity", PARSED.values(), ids=PARSED.keys())
def test_a_pool_renders_its_nodes(spec, names, labels, taints, capacity):
    [pool] = nodes.parse(spec)
    assert pool.names() == names
    for name in names:
        node = pool.node(name)
        fixed = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                 "type": "kwok"}
        assert node["metadata"]["labels"] == {**fixed, **labels}
        assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}  # kwok plays it
        assert node["spec"].get("taints", []) == taints
        if capacity is not None:
            assert node["status"]["capacity"] == node["status"]["allocatable"] == {
                **capacity, "ephemeral-storage": "4Ti"}


def test_the_default_pools_are_the_sandbox_it_always_had():
    gb300, cpu = nodes.DEFAULT
    assert gb300.names() == [f"gb300-{i}" for i in range(8)] and cpu.names() == ["cpu-0", "cpu-1"]
    labels = gb300.node("gb300-0")["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith(("nvidia.com/", "node.kubernetes.io/"))} == {
        "nvidia.com/gpu.product": "NVIDIA-GB300", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.family": "blackwell", "nvidia.com/gpu.memory": "284000",
        "node.kubernetes.io/instance-type": "gb300-nvl72"}
    assert "nvidia.com/gpu" not in cpu.node("cpu-0")["status"]["capacity"]
    assert nodes.pools(None) == nodes.DEFAULT


CAPACITY = {
    "the default sandbox": (None, {"cpu": "1440", "memory": "9600Gi", "nvidia.com/gpu": "32"}),
    "milli-CPUs and mixed memory units add up": (
        "a:count=2,cpu=500m,memory=1536Mi;b:gpus=8,cpu=1,memory=1Gi", {"cpu": "2", "memory": "4Gi",
                                                                        "nvidia.com/gpu": "8"}),
    "what does not add up to a whole CPU stays in milli-CPUs": (
        "a:cpu=1500m,memory=1000", {"cpu": "1500m", "memory": "1000", "nvidia.com/gpu": "0"}),
    "500 nodes of 8 GPUs": ("big:count=500,gpus=8", {"cpu": "72000", "memory": "480000Gi", "nvidia.com/gpu": "4000"}),
}


@pytest.mark.parametrize("value,capacity", CAPACITY.values(), ids=CAPACITY.keys())
def test_kueues_default_quota_is_what_the_pools_hold(value, capacity):
    chosen = nodes.pools(value)
    assert nodes.capacity(chosen) == capacity
    assert kueue.parse("queued", nodes.capacity(chosen)).quota == capacity
    assert kueue.parse("queued,nvidia.com/gpu=2", nodes.capacity(chosen)).quota == {**capacity,
                                                                                     "nvidia.com/gpu": "2"}


#: SPEC (one --nodes) -> what the error says after "--nodes SPEC: "
REFUSED = {
    "an empty spec": ("", "pool name '' is not a DNS label (lower-case letters, digits and '-')"),
    "an upper-case pool name": ("H100:gpus=8", "pool name 'H100' is not a DNS label"),
    "an unknown key": ("a:gpu=8", "unknown key 'gpu' (known: count, gpus, product, label, taint, cpu, memory, pods)"),
    "a key without a value": ("a:count=", "'count=' is not count=VALUE"),
    "a key given twice": ("a:count=1,count=2", "count is given twice"),
    "no nodes": ("a:count=0", "count must be a whole number >= 1, got '0'"),
    "a GPU count that is no number": ("a:gpus=x", "gpus must be a whole number >= 0, got 'x'"),
    "a product without GPUs": ("a:product=NVIDIA-GB300", "product=NVIDIA-GB300 needs gpus=N (N > 0)"),
    "a product no label value can hold": ("a:gpus=1,product=NVIDIA GB300", "product value 'NVIDIA GB300' is not"),
    "a label without a value": ("a:label=zone", "label=zone is not label=KEY=VALUE"),
    "a label key with two slashes": ("a:label=a/b/c=1", "label key 'a/b/c' is not a label key"),
    "the hostname label": ("a:label=kubernetes.io/hostname=x", "label kubernetes.io/hostname is each node's name"),
    "a taint without an effect": ("a:taint=dedicated=team-a", "taint=dedicated=team-a is not taint=KEY[=VALUE]:EFFECT"),
    "an unknown effect": ("a:taint=k:NoRun", "taint=k:NoRun is not taint=KEY[=VALUE]:EFFECT with EFFECT one of"),
    "a taint value with a space": ("a:taint=k=a b:NoSchedule", "taint value 'a b' is not a label value"),
    "zero CPUs": ("a:cpu=0", "cpu must be a positive quantity such as 96 or 500m, got '0'"),
    "decimal memory units": ("a:memory=1TB", "memory must be a positive quantity such as 1Ti or 960Gi, got '1TB'"),
    "no pods": ("a:pods=0", "pods must be a whole number >= 1, got '0'"),
    "node names past 63 characters": (f"{'a' * 60}:count=1000", f"node name {'a' * 60}-999 is longer than 63"),
}


@pytest.mark.parametrize("spec,message", REFUSED.values(), ids=REFUSED.keys())
def test_a_bad_spec_is_refused_naming_it(spec, message):
    with pytest.raises(ValueError) as refused:
        nodes.parse(spec)
    assert str(refused.value).startswith(f"{spec}: {message}")
    with pytest.raises(ConfigError, match="fault nodes: "):  # --fault nodes=... is refused at sandbox up too
        parse_faults([f"nodes={spec}"])


def test_a_pool_given_twice_is_refused():
    with pytest.raises(ValueError, match="^a:count=2: pool a is given twice$"):
        nodes.parse("a;a:count=2")


def test_sandbox_up_refuses_a_bad_spec_in_one_line_and_starts_nothing(tmp_path):
    result = nrl_k8s("sandbox", "up", "--dir", str(tmp_path / "box"), "--nodes", "gb300:count=2,gpus=4",
                     "--nodes", "h100:taint=dedicated:NoRun", check=False)
    assert result.returncode == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error == ("error: --nodes h100:taint=dedicated:NoRun: taint=dedicated:NoRun is not "
                     "taint=KEY[=VALUE]:EFFECT with EFFECT one of NoSchedule, PreferNoSchedule, NoExecute")
    assert hint == f"hint: {nodes.HINT}"
    assert result.stdout == "" and not (tmp_path / "box").exists()
