"""The data behind `nrl-k8s check`: a plain, JSON-able description of a loaded run.

The CLI renders it; tests assert on it. Secrets are redacted unless asked otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nrl_k8s.config import LoadedConfig, workflow
from nrl_k8s.config.unused_fields import unused_fields
from nrl_k8s.flows.plan import (
    RunPlan,
    command_line_secrets,
    default_flow,
    health_check,
    plan_longlived,
    unstaged_recipe_reads,
)
from nrl_k8s.kinds import dgd, dra, raycluster
from nrl_k8s.redact import redact


def _gpus(container: dict) -> int:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get(dra.GPU_RESOURCE)
        if value is not None:
            return int(value)
    return 0


def _group(template: dict) -> dict:
    containers = (template.get("spec") or {}).get("containers") or [{}]
    res = containers[0].get("resources") or {}
    req = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    return {"cpu": req.get("cpu"), "memory": req.get("memory"), "gpus": _gpus(containers[0])}


def role_sizing(infra: dict, role: str) -> dict:
    spec = raycluster.render_spec(infra, role)
    head = _group(spec["headGroupSpec"]["template"])
    workers = []
    for group in spec.get("workerGroupSpecs") or []:
        workers.append({"group": group["groupName"], "replicas": group.get("replicas", 1), **_group(group["template"])})
    total = head["gpus"] + sum(w["gpus"] * w["replicas"] for w in workers)
    return {"role": role, "name": infra["kuberay"][role]["name"], "head": head, "workers": workers, "total_gpus": total}


def long_lived(infra: dict, role: str) -> dict:
    """What `run --raycluster` adds to a role: the DRA objects its pods claim, its daemon and,
    for training, where the driver's code comes from."""
    _, dra = raycluster.render_with_dra(infra, role)
    daemon = raycluster.role_entry(infra, role).get("daemon")
    out: dict[str, Any] = {
        "dra": [_dra(obj) for obj in dra],
        "daemon": None,
        "code": _driver_code(infra) if role == "training" else None,
    }
    if daemon:
        out["daemon"] = {
            "entrypoint": daemon.get("entrypoint"),
            "submission_id": raycluster.daemon_submission_id(infra, role),
            "health": _health(daemon),
            "code": f"upload {', '.join(daemon['rayUploadPaths'])}" if daemon.get("rayUploadPaths") else "image",
        }
    return out


def _dra(obj: dict) -> str:
    nodes = obj["spec"].get("numNodes")
    return f"{obj['kind']} {obj['metadata']['name']}" + (f" (numNodes {nodes})" if nodes is not None else "")


def _driver_code(infra: dict) -> str:
    """Where the driver's code comes from and how it starts (``workflow``)."""
    launch = infra.get("launch") or {}
    source = workflow.code_source(infra)
    start = ("; started by exec on the head pod, files in " + workflow.exec_tmp_dir(infra)
             if workflow.submitter(infra) == "exec" else "")
    if source != "upload":
        return f"{source} {launch.get('codePath') or '(the image working directory)'}{start}"
    paths = launch.get("rayUploadPaths")
    return (f"upload {', '.join(paths)}" if paths else "upload (the NeMo-RL source folders)") + start


def _health(entry: dict) -> str | None:
    found = health_check(entry)
    return f"{found[0]} within {found[1]:g}s" if found else None


def _deployments(infra: dict, plan: RunPlan) -> list[dict]:
    rows = []
    for key, objects in plan.deployments.items():
        service = objects[1] if len(objects) > 1 else None
        ports = [f"{p['name']} {p['port']}/{p['protocol']}" for p in service["spec"]["ports"]] if service else []
        rows.append(
            {
                "key": key,
                "name": objects[0]["metadata"]["name"],
                "replicas": objects[0]["spec"].get("replicas", 1),
                "service": ", ".join(ports) or None,
                "health": _health(infra["deployments"][key]),
            }
        )
    return rows


def _display(path: str | Path) -> str:
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _injection(plan: RunPlan) -> list[str]:
    generation = (plan.recipe.get("policy") or {}).get("generation") or {}
    name = (generation.get("dynamo_cfg") or {}).get("dgd_name")
    injected = []
    if len(plan.dgds) == 1 and name == next(iter(plan.dgds.values()))["metadata"]["name"]:
        injected.append(f"injected policy.generation.backend=dynamo, policy.generation.dynamo_cfg.dgd_name={name}")
    return injected + list(plan.notes)


def summarize(cfg: LoadedConfig, plan: RunPlan, *, show_secrets: bool = False) -> dict:
    infra = cfg.infra
    launch = infra.get("launch") or {}
    dynamo = []
    for key, manifest in plan.dgds.items():
        entry = infra["dynamo"][key]
        dynamo.append(
            {
                "key": key,
                "name": manifest["metadata"]["name"],
                "namespace": manifest["metadata"]["namespace"],
                "manifest": _display(entry["manifest"]) if entry.get("manifest") else "inline (infra spec)",
                "api_version": manifest["apiVersion"],
                "ready_timeout_s": entry["readyTimeoutS"],
                "services": [vars(s) for s in dgd.services(manifest)],
            }
        )
    summary = {
        "recipe": _display(cfg.recipe_path),
        "infra": _display(cfg.infra_path),
        "sources": [_display(p) for p in cfg.sources],
        "namespace": infra["namespace"],
        "namespace_source": cfg.namespace_source,
        "image": infra.get("image"),
        "run_id": plan.run_id,
        "rayjob": plan.rayjob["metadata"]["name"],
        "flow": default_flow(infra),
        "roles": [
            {**role_sizing(infra, role), **long_lived(infra, role)} for role in sorted(infra.get("kuberay") or {})
        ],
        "deployments": _deployments(infra, plan),
        "entrypoint": launch.get("entrypoint"),
        "env": dict(launch.get("env") or {}),
        "dynamo": dynamo,
        "recipe_injection": _injection(plan),
        "unused": unused_fields(infra),
        "warnings": [
            {"message": message, "hint": hint}
            for message, hint in [
                *unstaged_recipe_reads(infra),
                *raycluster.foreign_images(infra),
                *command_line_secrets(infra),
                *plan.warnings,
            ]
        ],
    }
    return summary if show_secrets else redact(summary)


def bundle(cfg: LoadedConfig, plan: RunPlan, *, show_secrets: bool = False) -> dict:
    """What `check -o FILE` writes: resolved infra, final recipe, the manifests `run --rayjob`
    applies (``manifests``) and those `cluster up` / `run --raycluster` apply for every declared
    target (``long_lived``: Deployments and Services, each role's RayCluster with its DRA objects and
    env Secret, the DGDs)."""
    data = {"infra": cfg.infra, "recipe": plan.recipe, "manifests": plan.manifests(),
            "long_lived": plan_longlived(cfg).manifests()}
    return data if show_secrets else redact(data)
