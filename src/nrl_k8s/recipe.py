"""The recipe copy a run executes: Dynamo name injection, run id and the driver entrypoint.

The driver entrypoint is a self-contained POSIX ``sh`` command (Ray runs entrypoints with a
shell): it exports the run's environment, writes the final recipe to
``/tmp/nrl-k8s/<run_id>/recipe.yaml`` from an embedded base64 blob and then runs
``infra.launch.entrypoint`` verbatim, so the user's exit code is the command's. It needs no
ConfigMap, so it works in a KubeRay pod and on any Ray head, and it is deterministic: the same
inputs give the same string, which can be resubmitted unchanged.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import shlex

import yaml

from .errors import ConfigError
from .kinds.base import k8s_str
from .kinds.raycluster import role_entry
from .names import MAX_RAYJOB_NAME_LEN, validate_name

RECIPE_DIR = "/tmp/nrl-k8s"
RUN_ID_ENV = "NRL_K8S_RUN_ID"
RECIPE_ENV = "NRL_K8S_RECIPE"
# `sh -c ENTRYPOINT` is one execve argument: Linux caps a single argument at 128 KiB.
MAX_ENTRYPOINT_BYTES = 120_000

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BLOB = re.compile(r"printf %s '?([A-Za-z0-9+/=]*)'? \| base64 -d")


def inject_dynamo(recipe: dict, dgd_names: list[str]) -> tuple[dict, list[str]]:
    """Stamp the single declared DGD into a copy of ``recipe``; return (recipe, notes).

    Exactly one DGD sets ``policy.generation.backend=dynamo`` and
    ``policy.generation.dynamo_cfg.dgd_name``, unless the recipe already points at a frontend
    with ``dynamo_cfg.frontend_url``. With several DGDs the recipe is left alone.
    """
    out = copy.deepcopy(recipe)
    if not dgd_names:
        return out, []
    if len(dgd_names) > 1:
        listed = ", ".join(dgd_names)
        return out, [
            f"{len(dgd_names)} DGDs declared ({listed}): the recipe is left alone; "
            "set policy.generation.dynamo_cfg yourself"
        ]
    name = dgd_names[0]
    generation = _mapping(out, ("policy", "generation"))
    dynamo_cfg = _mapping(generation, ("dynamo_cfg",), prefix="policy.generation")
    if dynamo_cfg.get("frontend_url"):
        return out, [
            f"the recipe sets policy.generation.dynamo_cfg.frontend_url; DGD {name} is not stamped into it"
        ]
    notes = []
    previous = dynamo_cfg.get("dgd_name")
    if previous and previous != name:
        notes.append(f"policy.generation.dynamo_cfg.dgd_name {previous!r} replaced by the declared DGD {name!r}")
    generation["backend"] = "dynamo"
    dynamo_cfg["dgd_name"] = name
    return out, notes


def run_id(infra: dict, recipe: dict, dgds: list[dict] = ()) -> str:
    """``<rayjob name>-<8 hex>``: a digest of the canonical JSON of infra, recipe and rendered DGDs.

    DGD manifest *paths* are left out (they are absolute, so they differ per checkout); the
    rendered DGDs stand in for the files' contents.
    """
    name = validate_name(
        role_entry(infra, "training").get("name"),
        what="RayJob name",
        key=("kuberay", "training", "name"),
        max_len=MAX_RAYJOB_NAME_LEN,
    )
    located = {**infra, "dynamo": {k: {**v, "manifest": None} for k, v in (infra.get("dynamo") or {}).items()}}
    content = {"infra": located, "recipe": recipe, "dgds": list(dgds)}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return f"{name}-{hashlib.sha256(canonical.encode()).hexdigest()[:8]}"


def recipe_path(run_id_: str) -> str:
    """Where the driver entrypoint writes the recipe (``$NRL_K8S_RECIPE``)."""
    return f"{RECIPE_DIR}/{run_id_}/recipe.yaml"


def driver_entrypoint(infra: dict, recipe: dict, run_id_: str) -> str:
    """The ``sh`` command that writes ``recipe`` and runs ``infra.launch.entrypoint``."""
    launch = infra.get("launch") or {}
    user = launch.get("entrypoint")
    if not isinstance(user, str) or not user.strip():
        raise ConfigError(
            "infra.launch.entrypoint is not set",
            hint='set it to the training command, e.g. python examples/run_grpo.py --config "$NRL_K8S_RECIPE"',
        )
    env = [(RUN_ID_ENV, run_id_), (RECIPE_ENV, recipe_path(run_id_))]
    for name, value in (launch.get("env") or {}).items():
        if not _ENV_NAME.fullmatch(str(name)):
            raise ConfigError(f"infra.launch.env: {name!r} is not a valid environment variable name")
        if name in (RUN_ID_ENV, RECIPE_ENV):
            raise ConfigError(f"infra.launch.env: {name} is set by nrl-k8s", hint=f"remove {name} from infra.launch.env")
        env.append((str(name), k8s_str(value)))
    text = yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True)
    blob = base64.b64encode(text.encode()).decode()
    lines = [f"export {name}={shlex.quote(value)}" for name, value in env]
    lines.append(
        f"mkdir -p {shlex.quote(f'{RECIPE_DIR}/{run_id_}')} && "
        f'printf %s {shlex.quote(blob)} | base64 -d > "${RECIPE_ENV}" || exit $?'
    )
    lines.append(user.rstrip("\n"))
    entrypoint = "\n".join(lines)
    if len(entrypoint.encode()) > MAX_ENTRYPOINT_BYTES:
        raise ConfigError(
            f"the driver entrypoint is {len(entrypoint.encode())} bytes, more than {MAX_ENTRYPOINT_BYTES}",
            hint="the recipe is embedded in the entrypoint: make it smaller",
        )
    return entrypoint


def decode_recipe(entrypoint: str) -> dict | None:
    """The recipe embedded by ``driver_entrypoint``, or None if there is none."""
    match = _BLOB.search(entrypoint)
    if match is None:
        return None
    return yaml.safe_load(base64.b64decode(match.group(1)).decode())


def _mapping(root: dict, path: tuple[str, ...], prefix: str = "") -> dict:
    node = root
    where = prefix
    for key in path:
        where = f"{where}.{key}" if where else key
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"recipe key {where} is not a mapping", hint=f"make {where} a mapping to use Dynamo")
        node = child
    return node
