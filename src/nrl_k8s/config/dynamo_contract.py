"""NeMo-RL's Dynamo contract: the recipe's ``policy.generation`` checked against the DGD it uses.

The contract is NeMo-RL's pull request 2990 (REFERENCE.md). The recipe uses Dynamo with
``backend: dynamo``; its DGD is the declared one named by ``dynamo_cfg.dgd_name`` (stamped when one
DGD is declared), else the only one declared. NCCL refit is on with ``colocated.enabled: false``
(NeMo-RL then joins every worker to one NCCL group; it refuses Dynamo colocated) and
``dynamo_cfg.engine_world_size`` set (2990 requires it; NeMo-RL before 2990, as upstream's
``tk/pr-2429`` examples use it, did no refit through Dynamo and had no such key). The refit's
workers are the graph's non-prefill workers (Dynamo registers prefill workers under another
component, which NeMo-RL does not discover). Findings, one line each naming the DGD file and the
recipe key; an error refuses the run, a warning says what upstream leaves open:

1. ``frontend_url`` with refit on: refit finds its workers through ``dgd_name``'s frontend only, so
   an error without ``dgd_name``; a warning with it (rollouts and refit may reach two graphs).
2. ``engine_world_size`` = tensor × pipeline parallel ranks of every refit worker (a size its args
   do not give is the engine's default, 1): an error, a warning when a size is not a number in the
   args or an engine config file (``--config``, ``--extra-engine-args``) may set it, or when the
   command is not one check reads. With ``colocated.enabled: false`` and no ``engine_world_size``:
   one warning (which NeMo-RL runs is not known), and no refit rule.
3. refit on and a worker without ``--enable-rl`` (or ``DYN_ENABLE_RL``) or without
   ``--weight-transfer-config '{"backend":"nccl"}'``: an error; a warning when a Secret or ConfigMap
   may enable RL.
4. ``frontend_port`` other than the operator's frontend Service port (when the recipe reaches the
   frontend by ``dgd_name``), ``dyn_system_port`` other than a refit worker's ``DYN_SYSTEM_PORT``:
   an error; a warning when a Secret or ConfigMap may set the port.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import dgd
from nrl_k8s.kinds.dgd import Workload

CFG = "policy.generation.dynamo_cfg"
COLOCATED = "policy.generation.colocated.enabled"
_SHELLS = {"sh", "bash", "dash", "zsh"}
_OPERATORS = {"&&", "||", ";", "|", "&"}
_PARALLEL = {  # engine -> its (tensor parallel, pipeline parallel) size flags; ranks per endpoint = their product
    "vllm": (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp")),
    "sglang": (("--tp-size", "--tp", "--tensor-parallel-size"), ("--pp-size", "--pipeline-parallel-size")),
    "trtllm": (("--tensor-parallel-size",), ("--pipeline-parallel-size",)),
}
_CONFIG_FLAGS = ("--config", "--extra-engine-args")  # an engine config file, which may set the sizes
_RL_ENV = {"vllm": "DYN_ENABLE_RL", "sglang": "DYN_SGL_ENABLE_RL"}  # what --enable-rl stands for
_TRUE = {"1", "true", "yes", "on"}
_WEIGHT_TRANSFER = "--weight-transfer-config"


@dataclass(frozen=True)
class Finding:
    """One line of ``check``: the DGD file, the recipe key and what is wrong; an error refuses the run."""

    error: bool
    dgd: str  # the DGD's manifest file, or infra.dynamo.KEY.spec
    key: str  # the recipe key, dotted
    problem: str  # what follows the key in the line
    hint: str

    @property
    def message(self) -> str:
        return f"{self.dgd}: {self.key} {self.problem}"


@dataclass(frozen=True)
class _Worker:
    """A refit worker: its workload, its Dynamo engine (None: not found in its command) and the engine's args."""

    work: Workload
    engine: str | None
    flags: tuple[str, ...]


def refuse(recipe: dict, dgds: dict[str, dict], infra: dict) -> list[tuple[str, str]]:
    """The first error of ``findings`` raised as a ConfigError (exit 2, nothing applied); else the
    warnings as (message, hint)."""
    found = findings(recipe, dgds, infra)
    for finding in found:
        if finding.error:
            raise ConfigError(finding.message, hint=finding.hint)
    return [(finding.message, finding.hint) for finding in found]


def findings(recipe: dict, dgds: dict[str, dict], infra: dict) -> list[Finding]:
    """What breaks the contract between the final ``recipe`` and the rendered ``dgds`` (infra.dynamo
    key -> manifest) it uses; nothing when it uses none of them."""
    generation = _mapping(_mapping(recipe.get("policy")).get("generation"))
    cfg = _mapping(generation.get("dynamo_cfg"))
    target = _target(cfg, dgds) if generation.get("backend") == "dynamo" else None
    if target is None:
        return []
    entry = infra["dynamo"][target]
    where = str(entry["manifest"]) if entry.get("manifest") else f"infra.dynamo.{target}.spec"
    manifest = dgds[target]
    name = manifest["metadata"]["name"]
    out: list[Finding] = []

    def add(error: bool, recipe_key: str, problem: str, hint: str) -> None:
        out.append(Finding(error, where, recipe_key, problem, hint))

    refit = _mapping(generation.get("colocated")).get("enabled") is False
    if refit and cfg.get("engine_world_size") is None:
        add(False, f"{CFG}.engine_world_size", f"is not set while {COLOCATED} is false: NeMo-RL's NCCL refit "
            "(pull request 2990) requires it; NeMo-RL before it did no refit through Dynamo",
            f"for NCCL refit set it to the ranks per worker of DGD {name} (tensor x pipeline parallel)")
        refit = False
    port = _int(cfg.get("frontend_port", dgd.FRONTEND_PORT))
    if cfg.get("dgd_name") and (refit or not cfg.get("frontend_url")) and port not in (None, dgd.FRONTEND_PORT):
        add(True, f"{CFG}.frontend_port", f"is {port}, but the frontend Service of DGD {name} "
            f"({dgd.frontend_service(name)}) serves port {dgd.FRONTEND_PORT}",
            f"remove it (NeMo-RL's default is {dgd.FRONTEND_PORT})")
    if not refit:
        return out
    if cfg.get("frontend_url"):
        if cfg.get("dgd_name"):
            add(False, f"{CFG}.frontend_url", f"is set with NCCL refit on: rollouts go to it, while the refit "
                f"finds its workers through {dgd.frontend_service(name)}",
                "remove it unless it is that DGD's frontend")
        else:
            add(True, f"{CFG}.frontend_url", "is set with NCCL refit on: NeMo-RL finds the workers to refit "
                "through dgd_name's frontend only, and the recipe has no dgd_name",
                f"remove frontend_url (nrl-k8s then stamps dgd_name {name}), or set {CFG}.dgd_name")
    for worker in _refit_workers(manifest):
        for finding in _check_worker(worker, cfg):
            add(*finding)
    return out


def _check_worker(worker: _Worker, cfg: dict) -> list[tuple[bool, str, str, str]]:
    """(error, recipe key, problem, hint) for one refit worker."""
    work, flags = worker.work, worker.flags
    if worker.engine is None:
        return [(False, COLOCATED, f"is false (NCCL refit), but check finds no `python -m dynamo.<engine>` in the "
                 f"command of worker {work.name}: its args are not checked",
                 "start the worker with python -m dynamo.vllm and its args in command/args")]
    out = []
    ews = _int(cfg.get("engine_world_size"))
    if ews is not None and worker.engine in _PARALLEL:
        sizes = [(names[0], _value(flags, names)) for names in _PARALLEL[worker.engine]]
        read = [1 if value is None else _int(value) for _, value in sizes]  # absent: the engine's default
        ranks = math.prod(size or 1 for size in read)
        if ranks != ews:
            config = any(_value(flags, (flag,)) is not None for flag in _CONFIG_FLAGS)
            unsure = [size is None or (value is None and config) for size, (_, value) in zip(read, sizes, strict=True)]
            known = math.prod(size or 1 for size, open_ in zip(read, unsure, strict=True) if not open_)
            certain = not any(unsure) or ews % known != 0
            shown = " x ".join(f"{flag} {'1 (the default)' if value is None else value}" for flag, value in sizes)
            out.append((certain, f"{CFG}.engine_world_size", f"is {ews}, but worker {work.name} runs {ranks} "
                        f"ranks per endpoint ({shown})",
                        f"set it to {ranks}: NeMo-RL's NCCL group counts engine_world_size ranks per worker"
                        + ("" if certain else " (unless a size its args do not state plainly differs)")))
    rl = _flag_on(flags, "--enable-rl")
    if rl is None:
        value = _env(work, _RL_ENV.get(worker.engine, "DYN_ENABLE_RL"), "")
        rl = None if value is None else value.strip().lower() in _TRUE
    if not rl:
        out.append((rl is False, COLOCATED, f"is false (NCCL refit), but worker {work.name} runs without --enable-rl"
                    + ("" if rl is False else " (a Secret or ConfigMap may set its DYN_ENABLE_RL)"),
                    "add --enable-rl to its args: the refit reaches workers through their rl endpoint"))
    if _weight_backend(flags) != "nccl":
        out.append((True, COLOCATED, f"is false (NCCL refit), but worker {work.name} runs without "
                    f"{_WEIGHT_TRANSFER} '{{\"backend\":\"nccl\"}}'",
                    f"add {_WEIGHT_TRANSFER} and '{{\"backend\":\"nccl\"}}' to its args (vLLM's NCCL weight transfer)"))
    wanted = _int(cfg.get("dyn_system_port", dgd.SYSTEM_PORT))
    served = _env(work, "DYN_SYSTEM_PORT", str(dgd.SYSTEM_PORT))
    port = None if served is None else _int(served)
    if wanted is not None and port != wanted and (port is not None or wanted != dgd.SYSTEM_PORT):
        shown = "set where check cannot read it" if port is None else str(port)
        out.append((port is not None, f"{CFG}.dyn_system_port",
                    f"is {wanted}, but worker {work.name} serves its system port on DYN_SYSTEM_PORT ({shown})",
                    f"make them agree (the operator sets DYN_SYSTEM_PORT={dgd.SYSTEM_PORT} unless the env does)"))
    return out


def _target(cfg: dict, dgds: dict[str, dict]) -> str | None:
    """The infra.dynamo key of the DGD the recipe uses: the one ``dgd_name`` names, else the only one."""
    named = [key for key, manifest in dgds.items() if manifest["metadata"]["name"] == cfg.get("dgd_name")]
    if named:
        return named[0]
    return next(iter(dgds)) if not cfg.get("dgd_name") and len(dgds) == 1 else None


def _refit_workers(manifest: dict) -> list[_Worker]:
    """The DGD's workers NeMo-RL refits: role worker or decode, not made a prefill worker by its args."""
    out = []
    for work in dgd.workloads(manifest):
        engine, flags = _engine(work.argv)
        prefill = "--is-prefill-worker" in flags or _value(flags, ("--disaggregation-mode",)) == "prefill"
        if work.role in ("worker", "decode") and not prefill:
            out.append(_Worker(work, engine, flags))
    return out


def _engine(argv: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(``X`` of the ``-m dynamo.X`` the command runs, the words after it up to a shell operator);
    a ``sh -c SCRIPT`` command is read in its script. (None, ()) when there is no such module."""
    words = list(argv)
    if words and PurePosixPath(words[0]).name in _SHELLS and "-c" in words[1:-1]:
        words = _split(words[words.index("-c") + 1])
    for index in range(1, len(words)):
        if words[index - 1] == "-m" and words[index].startswith("dynamo."):
            rest = words[index + 1:]
            end = next((i for i, word in enumerate(rest) if word in _OPERATORS), len(rest))
            return words[index].removeprefix("dynamo."), tuple(rest[:end])
    return None, ()


def _split(script: str) -> list[str]:
    """A shell script's words, operators apart; [] when it does not parse."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return []


def _value(flags: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """The value the last of ``names`` is given (``--flag V`` or ``--flag=V``); None when absent."""
    found = None
    for index, word in enumerate(flags):
        name, eq, value = word.partition("=")
        if name in names:
            found = value if eq else flags[index + 1] if index + 1 < len(flags) else ""
    return found


def _flag_on(flags: tuple[str, ...], flag: str) -> bool | None:
    """A negatable flag: True (``--x``), False (``--no-x``), the last one winning; None when absent."""
    negated = "--no-" + flag.removeprefix("--")
    last = next((word for word in reversed(flags) if word in (flag, negated)), None)
    return None if last is None else last == flag


def _weight_backend(flags: tuple[str, ...]) -> object:
    """The ``backend`` of ``--weight-transfer-config JSON`` (or ``--weight-transfer-config.backend X``)."""
    raw = _value(flags, (_WEIGHT_TRANSFER,))
    if raw is None:
        return _value(flags, (f"{_WEIGHT_TRANSFER}.backend",))
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return parsed.get("backend") if isinstance(parsed, dict) else None


def _env(work: Workload, name: str, default: str) -> str | None:
    """The worker's env value ``name``: its literal, ``default`` when unset, None when a Secret or
    ConfigMap may give it."""
    if name in work.env:
        return work.env[name]
    return None if work.env_from else default


def _int(value: object) -> int | None:
    """``value`` as a whole number (an int, or a string of digits); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def _mapping(value: object) -> dict:
    return value if isinstance(value, dict) else {}
