"""The sandbox's kwok nodes, in pools: ``sandbox up --nodes SPEC`` (the ``nodes`` start option).

SPEC is one pool, ``NAME[:KEY=VALUE,...]``; its nodes are ``NAME-0`` .. ``NAME-(count-1)``:

    count=N           nodes in the pool (default 1)
    gpus=N            ``nvidia.com/gpu`` each (default 0), and the labels nvidia.com/gpu.present, .count
    product=P         the label ``nvidia.com/gpu.product`` (needs gpus)
    label=K=V         a label (repeatable)
    taint=K[=V]:E     a taint in the node's spec.taints, E one of EFFECTS (repeatable)
    cpu, memory, pods capacity (default 144, 960Gi, 250)

The option's value joins pools with ``;``; given, they replace ``DEFAULT`` (8 GB300 nodes of 4
GPUs and 2 CPU nodes). Every GPU node gets its DRA devices (``dra.devices``). Stdlib only:
``sandbox up`` refuses a bad SPEC with this before anything starts.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
KEYS = ("count", "gpus", "product", "label", "taint", "cpu", "memory", "pods")
HINT = ("e.g. --nodes h100:count=2,gpus=8,product=NVIDIA-H100-80GB-HBM3,label=zone=a,"
        "taint=dedicated=team-a:NoSchedule,cpu=96,memory=1Ti (KEYs: " + ", ".join(KEYS) + ")")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # RFC 1123: a pool's and a node's name
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")  # a label key's name, a label value
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_CPU = re.compile(r"(\d+)(m?)")
_MEMORY = re.compile(r"(\d+)(Ki|Mi|Gi|Ti|Pi)?")
_BINARY = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


@dataclass(frozen=True)
class Pool:
    """``count`` alike kwok nodes; ``labels`` and ``taints`` (``{key, value?, effect}``) as given."""

    name: str
    count: int = 1
    gpus: int = 0
    product: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    cpu: str = "144"
    memory: str = "960Gi"
    pods: str = "250"

    def names(self) -> list[str]:
        return [f"{self.name}-{index}" for index in range(self.count)]

    def node(self, name: str) -> dict:
        """The Node kwok plays (the ``node-ready`` Stage makes it Ready)."""
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods, "ephemeral-storage": "4Ti"}
        gpu_labels = {}
        if self.gpus:
            capacity["nvidia.com/gpu"] = str(self.gpus)
            gpu_labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(self.gpus)}
        if self.product:
            gpu_labels["nvidia.com/gpu.product"] = self.product
        labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok", **gpu_labels,
                  **self.labels, "kubernetes.io/hostname": name}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
                "spec": {"taints": list(self.taints)} if self.taints else {},
                "status": {"capacity": capacity, "allocatable": capacity}}

    def summary(self) -> dict:
        return asdict(self)


def _whole(key: str, text: str, minimum: int) -> int:
    if not (text.isdigit() and int(text) >= minimum):
        raise ValueError(f"{key} must be a whole number >= {minimum}, got {text!r}")
    return int(text)


def _key(text: str, what: str) -> str:
    prefix, slash, name = text.rpartition("/")
    if not (_NAME.fullmatch(name) and len(name) <= 63 and (not slash or _PREFIX.fullmatch(prefix))
            and len(prefix) <= 253):
        raise ValueError(f"{what} key {text!r} is not a label key ([prefix/]name, the name 63 characters at most)")
    return text


def _value(text: str, what: str) -> str:
    if text and not (_NAME.fullmatch(text) and len(text) <= 63):
        raise ValueError(f"{what} value {text!r} is not a label value (63 characters at most: letters, digits, "
                         "'-', '_', '.', beginning and ending with a letter or digit)")
    return text


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"label={text} is not label=KEY=VALUE")
    if key == "kubernetes.io/hostname":
        raise ValueError("label kubernetes.io/hostname is each node's name")
    return _key(key, "label"), _value(value, "label")


def _taint(text: str) -> dict[str, str]:
    pair, sep, effect = text.rpartition(":")
    if not sep or effect not in EFFECTS:
        raise ValueError(f"taint={text} is not taint=KEY[=VALUE]:EFFECT with EFFECT one of {', '.join(EFFECTS)}")
    key, sep, value = pair.partition("=")
    taint = {"key": _key(key, "taint"), "effect": effect}
    if sep:
        taint["value"] = _value(value, "taint")
    return taint


def _quantity(key: str, text: str) -> str:
    if key == "pods":
        return str(_whole(key, text, 1))
    pattern, example = (_CPU, "96 or 500m") if key == "cpu" else (_MEMORY, "1Ti or 960Gi")
    match = pattern.fullmatch(text)
    if not (match and int(match.group(1)) > 0):
        raise ValueError(f"{key} must be a positive quantity such as {example}, got {text!r}")
    return text


def _pool(spec: str) -> Pool:
    name, _, rest = spec.partition(":")
    if not _LABEL.fullmatch(name):
        raise ValueError(f"pool name {name!r} is not a DNS label (lower-case letters, digits and '-')")
    given: dict[str, str] = {}
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    for item in rest.split(",") if rest else ():
        key, sep, value = item.partition("=")
        if key not in KEYS:
            raise ValueError(f"unknown key {key!r} (known: {', '.join(KEYS)})")
        if not (sep and value):
            raise ValueError(f"{item!r} is not {key}=VALUE")
        if key == "label":
            labels.update([_label(value)])
        elif key == "taint":
            taints.append(_taint(value))
        elif key in given:
            raise ValueError(f"{key} is given twice")
        else:
            given[key] = value
    count, gpus = _whole("count", given.pop("count", "1"), 1), _whole("gpus", given.pop("gpus", "0"), 0)
    product = _value(given.pop("product", ""), "product")
    if product and not gpus:
        raise ValueError(f"product={product} needs gpus=N (N > 0)")
    if len(f"{name}-{count - 1}") > 63:
        raise ValueError(f"node name {name}-{count - 1} is longer than 63 characters")
    sizes = {key: _quantity(key, value) for key, value in given.items()}
    return Pool(name, count, gpus, product, labels, tuple(taints), **sizes)


def parse(value: str) -> tuple[Pool, ...]:
    """``SPEC[;SPEC...]`` → the pools; ValueError naming the SPEC and what is wrong with it."""
    pools: dict[str, Pool] = {}
    for spec in value.split(";"):
        try:
            pool = _pool(spec.strip())
        except ValueError as err:
            raise ValueError(f"{spec.strip()}: {err}") from None
        if pool.name in pools:
            raise ValueError(f"{spec.strip()}: pool {pool.name} is given twice")
        pools[pool.name] = pool
    return tuple(pools.values())


DEFAULT = parse("gb300:count=8,gpus=4,product=NVIDIA-GB300,label=nvidia.com/gpu.family=blackwell,"
                "label=nvidia.com/gpu.memory=284000,label=node.kubernetes.io/instance-type=gb300-nvl72;cpu:count=2")


def pools(value: str | None) -> tuple[Pool, ...]:
    """The sandbox's pools: the ``nodes`` start option's, or ``DEFAULT``."""
    return DEFAULT if value is None else parse(value)


def _millicores(cpu: str) -> int:
    number, milli = _CPU.fullmatch(cpu).groups()  # type: ignore[union-attr]
    return int(number) * (1 if milli else 1000)


def _bytes(memory: str) -> int:
    number, unit = _MEMORY.fullmatch(memory).groups()  # type: ignore[union-attr]
    return int(number) * _BINARY[unit or ""]


def capacity(chosen: tuple[Pool, ...]) -> dict[str, str]:
    """What the pools hold together: cpu, memory and ``nvidia.com/gpu`` (Kueue's default quota)."""
    milli = sum(pool.count * _millicores(pool.cpu) for pool in chosen)
    memory = sum(pool.count * _bytes(pool.memory) for pool in chosen)
    unit = next(unit for unit in reversed(_BINARY) if memory % _BINARY[unit] == 0)
    return {"cpu": str(milli // 1000) if milli % 1000 == 0 else f"{milli}m",
            "memory": f"{memory // _BINARY[unit]}{unit}",
            "nvidia.com/gpu": str(sum(pool.count * pool.gpus for pool in chosen))}
