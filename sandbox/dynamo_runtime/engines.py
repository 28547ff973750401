"""What runs for a DGD pod's ``main`` container: its command, read the way the image would run it.

* ``python3 -m dynamo.frontend ARGS`` runs as written, in Dynamo's venv, on the loopback port the
  sandbox gives its in-cluster HTTP port (``--http-port``, 8000 by default).
* ``python3 -m dynamo.vllm|dynamo.sglang|dynamo.trtllm ARGS`` (GPU engines) runs Dynamo's own
  GPU-less engine, ``dynamo.mocker``, through ``worker.py`` with the arguments the two share: the
  model (a Hugging Face id becomes a tiny local model, ``model.py``), the served model name and
  the disaggregation mode. The parallel sizes are kept as data: tensor × pipeline parallel is the
  worker's RL ``world_size``. ``--enable-rl`` (or ``DYN_ENABLE_RL``) serves the RL routes.
* ``python3 -m dynamo.mocker ARGS`` runs as written (a model id again becomes a tiny model).

A ``sh -c SCRIPT`` command is read for the one ``python3 -m dynamo.X`` command in it, without its
redirections (upstream's manifests pipe it through ``tee``). Anything else is no Dynamo process (``NotDynamo``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")
ENGINES = ("dynamo.vllm", "dynamo.sglang", "dynamo.trtllm")
MOCKER, FRONTEND = "dynamo.mocker", "dynamo.frontend"
HTTP_PORT = 8000
_SHELLS = ("sh", "bash")
_SHELL_BREAKS = re.compile(r"&&|\|\||[;|\n&]")
_REDIRECT = re.compile(r"(?<!\S)\d*(>>?|<)(&\d+|\s*\S+)")  # 2>&1, > file, >>file, < file
#: The flags of what the engines share with the mocker.
_MODEL = ("--model", "--model-path")
_SERVED = ("--served-model-name",)
_TP = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")
_PP = ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp")
_DISAGG = ("--disaggregation-mode",)
TRUE = {"1", "true", "yes", "on"}


class NotDynamo(ValueError):
    """The container's command starts no Dynamo process the sandbox can run."""


@dataclass(frozen=True)
class Launch:
    """A Dynamo process: ``argv`` after the venv's interpreter, and what it stands for."""

    module: str  # what the manifest runs: dynamo.frontend, dynamo.vllm, ...
    argv: list[str]
    runs: str  # what really runs: the module itself, or dynamo.mocker
    model: str | None = None
    world_size: int = 1
    rl: bool = False
    http_port: int | None = None  # the frontend's in-cluster port

    @property
    def description(self) -> str:
        if self.runs == self.module:
            return f"{self.module} (Dynamo {self.module.split('.')[1]}, from PyPI)"
        return f"{self.runs} (Dynamo's GPU-less engine) for {self.module}: model {self.model}, world size " \
               f"{self.world_size}{', RL routes' if self.rl else ''}"


def dynamo_command(command: list[str], args: list[str]) -> tuple[str, list[str]]:
    """(module, its arguments) of the ``python -m dynamo.X`` the container runs."""
    words = [*command, *args]
    if len(words) >= 3 and Path(words[0]).name in _SHELLS and words[1] == "-c":
        for part in _SHELL_BREAKS.split(_REDIRECT.sub(" ", words[2])):
            tokens = shlex.split(part)
            tokens = tokens[1:] if tokens[:1] == ["exec"] else tokens
            if _is_dynamo(tokens):
                return tokens[2], tokens[3:]
        raise NotDynamo(f"no 'python3 -m dynamo.<module>' command in the script {words[2][:200]!r}")
    if _is_dynamo(words):
        return words[2], words[3:]
    raise NotDynamo(f"the command {shlex.join(words)[:200]!r} is not 'python3 -m dynamo.<module> ...'")


def _is_dynamo(tokens: list[str]) -> bool:
    return len(tokens) >= 3 and Path(tokens[0]).name.startswith("python") and tokens[1] == "-m" \
        and tokens[2].startswith("dynamo.")


def _value(args: list[str], flags: tuple[str, ...]) -> str | None:
    for index, word in enumerate(args):
        for flag in flags:
            if word == flag and index + 1 < len(args):
                return args[index + 1]
            if word.startswith(flag + "="):
                return word.split("=", 1)[1]
    return None


def _without(args: list[str], flags: tuple[str, ...]) -> list[str]:
    kept, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word in flags:
            skip = True
        elif not any(word.startswith(flag + "=") for flag in flags):
            kept.append(word)
    return kept


def _size(args: list[str], flags: tuple[str, ...]) -> int:
    value = _value(args, flags)
    try:
        return max(1, int(value)) if value is not None else 1
    except ValueError as err:
        raise NotDynamo(f"{flags[0]} {value!r} is not a whole number") from err


def launch(command: list[str], args: list[str], env: dict[str, str], local_port: Callable[[int], int],
           model_dir: Callable[[str], Path]) -> Launch:
    """How to run the container: ``local_port(in-cluster port)`` gives the loopback port it listens
    on, ``model_dir(model id)`` a tiny model folder."""
    module, rest = dynamo_command(command, args)
    if module == FRONTEND:
        port = _size(rest, ("--http-port",)) if _value(rest, ("--http-port",)) else HTTP_PORT
        argv = ["-m", FRONTEND, *_without(rest, ("--http-host", "--http-port")),
                "--http-host", "127.0.0.1", "--http-port", str(local_port(port))]
        return Launch(module, argv, module, http_port=port)
    if module == MOCKER:
        model = _value(rest, ("--model-path",))
        argv = ["-m", MOCKER, *rest]
        if model and not Path(model).is_dir():
            argv = ["-m", MOCKER, *_without(rest, ("--model-path",)), "--model-path", str(model_dir(model))]
        if model and not _value(rest, ("--model-name",)):
            argv += ["--model-name", model]
        return Launch(module, argv, MOCKER, model=model)
    if module not in ENGINES:
        raise NotDynamo(f"python3 -m {module}: the sandbox runs dynamo.frontend, dynamo.mocker and the engines "
                        f"{', '.join(ENGINES)} (as dynamo.mocker)")
    model = _value(rest, _MODEL)
    if model is None:
        raise NotDynamo(f"python3 -m {module} names no model (--model or --model-path)")
    served = _value(rest, _SERVED) or model
    disagg = _value(rest, _DISAGG) or ("prefill" if "--is-prefill-worker" in rest else None)
    world = _size(rest, _TP) * _size(rest, _PP)
    rl = "--enable-rl" in rest or env.get("DYN_ENABLE_RL", "").strip().lower() in TRUE
    folder = Path(model) if Path(model).is_dir() else model_dir(model)
    argv = [str(WORKER), "--world-size", str(world), *(["--enable-rl"] if rl else []), "--",
            "--model-path", str(folder), "--model-name", served,
            *(["--disaggregation-mode", disagg] if disagg in ("prefill", "decode") else [])]
    return Launch(module, argv, MOCKER, model=served, world_size=world, rl=rl)
