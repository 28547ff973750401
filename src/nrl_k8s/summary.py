"""The data behind `nrl-k8s check`: a plain, JSON-able description of a loaded run.

The CLI renders it; tests assert on it. Secrets are redacted unless asked otherwise.
"""

from __future__ import annotations

from pathlib import Path

from .config import LoadedConfig
from .kinds import dgd, raycluster
from .plan import RunPlan
from .redact import redact
from .unused import unused_fields


def _gpus(container: dict) -> int:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get("nvidia.com/gpu")
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
                "manifest": _display(entry["manifest"]),
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
        "roles": [role_sizing(infra, role) for role in sorted(infra.get("kuberay") or {})],
        "entrypoint": launch.get("entrypoint"),
        "env": dict(launch.get("env") or {}),
        "dynamo": dynamo,
        "recipe_injection": _injection(plan),
        "unused": unused_fields(infra),
    }
    return summary if show_secrets else redact(summary)


def bundle(cfg: LoadedConfig, plan: RunPlan, *, show_secrets: bool = False) -> dict:
    """What `check -o FILE` writes: resolved infra, final recipe and every rendered manifest."""
    data = {"infra": cfg.infra, "recipe": plan.recipe, "manifests": plan.manifests()}
    return data if show_secrets else redact(data)
