"""The recipe copy a run executes: Dynamo name injection, run id, and what the driver is given.

The driver gets the final recipe and ``infra.launch.env`` through the run's Secret (see
``kinds.rayjob``), never through the entrypoint: the entrypoint is ``infra.launch.entrypoint``,
run by Ray with the Ray container's environment, in which nrl-k8s sets ``NRL_K8S_RUN_ID``,
``NRL_K8S_RECIPE`` (the recipe file mounted from the Secret) and every ``infra.launch.env``
name. Two changes are made to it (``driver_entrypoint``): every ``--config X.yaml`` is pointed
at ``"$NRL_K8S_RECIPE"`` (upstream entrypoints name a recipe file of the checkout, which is not
the run's: no overrides, no DGD name), and with the code in the image or on Lustre it starts
with ``cd launch.codePath``. So the entrypoint holds no value, needs nothing on ``PATH`` and is
deterministic: the same string can be resubmitted unchanged.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
import time
from collections.abc import Sequence

import yaml

from nrl_k8s.errors import ConfigError, InfraError
from nrl_k8s.kinds.base import k8s_str
from nrl_k8s.kinds.names import MAX_RAYJOB_NAME_LEN, validate_name
from nrl_k8s.kinds.raycluster import role_entry

from . import workflow

RUN_ID_ENV = "NRL_K8S_RUN_ID"
RECIPE_ENV = "NRL_K8S_RECIPE"
RUN_DIR = "/etc/nrl-k8s/run"  # where the run Secret is mounted in every Ray container
RECIPE_KEY = "recipe.yaml"
RECIPE_PATH = f"{RUN_DIR}/{RECIPE_KEY}"

RECIPE_REF = f'"${RECIPE_ENV}"'  # the run's recipe in a shell command line, in every flow
_RECIPE_READS = (f"${RECIPE_ENV}", f"${{{RECIPE_ENV}}}")
# ``--config VALUE`` / ``--config=VALUE`` (not --config-name, --config-dir, --model-config):
# VALUE double- or single-quoted, or a word up to whitespace or a shell operator.
_CONFIG_FLAG = re.compile(r"""(?<![\w-])(--config(?:\s+|=))("[^"]*"|'[^']*'|[^\s'";&|<>()]+)""")
_YAML_PATH = re.compile(r"[^$`*?\[\]{}]+\.ya?ml")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an environment variable's name
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


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


def run_id(infra: dict, recipe: dict, dgds: Sequence[dict] = ()) -> str:
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


def driver_entrypoint(infra: dict) -> str:
    """The command Ray (or the exec submitter) runs as the driver: ``infra.launch.entrypoint`` with
    every ``--config X.yaml`` pointed at the run's recipe (``config_rewrites``), after ``cd
    launch.codePath`` when the code is in the image or on Lustre (``workflow.code_path``)."""
    command = _rewritten(_user_entrypoint(infra))[0]
    path = workflow.code_path(infra)
    return f"cd {shlex.quote(path)} && {command}" if path else command


def config_rewrites(infra: dict) -> list[str]:
    """One line per distinct ``--config X`` of ``launch.entrypoint`` that ``driver_entrypoint``
    points at the run's recipe (printed by ``run``, ``check``)."""
    return [f"launch.entrypoint: `{old}` -> `{new}` (the recipe this run stages)"
            for old, new in _rewritten(_user_entrypoint(infra))[1]]


def reads_recipe(command: str) -> bool:
    """Whether a driver command names the run's recipe (``$NRL_K8S_RECIPE``, or the staged
    ``nrl_k8s_run.yaml`` of ``run --raycluster``)."""
    return any(ref in command for ref in _RECIPE_READS) or "nrl_k8s_run.yaml" in command


def _user_entrypoint(infra: dict) -> str:
    user = (infra.get("launch") or {}).get("entrypoint")
    if not isinstance(user, str) or not user.strip():
        raise ConfigError(
            "infra.launch.entrypoint is not set",
            hint='set it to the training command, e.g. python examples/run_grpo.py --config "$NRL_K8S_RECIPE"',
        )
    return user


def _rewritten(entrypoint: str) -> tuple[str, list[tuple[str, str]]]:
    """(``entrypoint`` with each ``--config`` recipe path replaced by ``"$NRL_K8S_RECIPE"``,
    the distinct (old, new) pairs). A ``--config`` whose value is neither a literal ``.yaml`` /
    ``.yml`` path nor the run's recipe is refused: the driver would read another recipe."""
    done: dict[str, str] = {}

    def swap(match: re.Match) -> str:
        flag, value = match.group(1), match.group(2)
        bare = value[1:-1] if value[:1] in "\"'" and len(value) >= 2 else value
        if bare in _RECIPE_READS:
            return match.group(0)
        if not _YAML_PATH.fullmatch(bare):
            raise InfraError(("launch", "entrypoint"),
                             f"`{match.group(0).strip()}`: the driver would read that, not the recipe this run stages, "
                             "and nrl-k8s cannot point it there",
                             hint=f'pass --config {RECIPE_REF} (the run\'s recipe, with its overrides and DGD name) '
                             "or --config PATH.yaml (nrl-k8s points it at the run's recipe)")
        new = flag + RECIPE_REF
        done.setdefault(match.group(0).strip(), new.strip())
        return new

    return _CONFIG_FLAG.sub(swap, entrypoint), list(done.items())


def launch_env(infra: dict) -> dict[str, str]:
    """``infra.launch.env`` as strings, names checked (valid, not one nrl-k8s sets)."""
    return checked_env((infra.get("launch") or {}).get("env"), "launch.env")


def checked_env(env: dict | None, where: str) -> dict[str, str]:
    """An env mapping (infra key ``where``) as strings, names checked (valid, not one nrl-k8s sets)."""
    out = {}
    for name, value in (env or {}).items():
        if not ENV_NAME.fullmatch(str(name)):
            raise ConfigError(f"infra.{where}: {name!r} is not a valid environment variable name",
                              hint="use letters, digits and underscores, not starting with a digit")
        if name in (RUN_ID_ENV, RECIPE_ENV):
            raise ConfigError(f"infra.{where}: {name} is set by nrl-k8s", hint=f"remove {name} from infra.{where}")
        out[str(name)] = k8s_str(value)
    return out


def new_run_id(cluster: str) -> str:
    """A fresh run id for a long-lived run: ``<cluster>-<UTC time>-<4 random>`` (Ray never reuses one)."""
    import secrets

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{cluster}-{stamp}-{secrets.token_hex(2)}"


def checked_run_id(run_id: str, where: str = "--run-id") -> str:
    """``--run-id`` (and ``--run``): used as the Ray submission id and the run record's file name."""
    if not _RUN_ID.fullmatch(run_id):
        raise ConfigError(f"{where} {run_id!r} is not a valid run id",
                          hint="use 1-100 letters, digits, '-', '_' or '.', starting with a letter or digit")
    return run_id


def recipe_text(recipe: dict) -> str:
    """The recipe file the driver reads (key order kept, interpolations untouched)."""
    return yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True)


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
