"""The offline half of a run: everything `run --rayjob` would apply, rendered and validated.

`plan_run` is pure: it reads only the loaded config and the DGD manifest files, so
`run --dry-run`, `check -o` and the live run all print/apply exactly the same objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import recipe as recipe_mod
from .config import LoadedConfig
from .errors import ConfigError
from .kinds import deployment, dgd, rayjob

DEFAULT_HEALTH_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class RunOptions:
    shutdown: bool = True
    ttl_seconds: int = 0
    active_deadline_seconds: int | None = None


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    recipe: dict  # the final recipe the driver reads
    notes: tuple[str, ...]  # what happened to the recipe (injected / left alone and why)
    dgds: dict[str, dict]  # infra.dynamo key -> DGD manifest (no ownerReference yet; lists this run as its user)
    secret: dict  # the run's recipe and launch.env (owned by the RayJob once both exist)
    rayjob: dict
    ready_timeouts: dict[str, float]  # infra.dynamo key -> readyTimeoutS
    deployments: dict[str, list[dict]]  # infra.deployments key -> [Deployment, Service?]
    health: dict[str, tuple[str, float]]  # infra.deployments key -> (healthCheckUrl, healthCheckTimeoutS)
    dra: list[dict]  # DRA objects the RayJob's pods claim (named after the RayJob; owned by its cluster later)

    def manifests(self) -> list[dict]:
        """Everything that would be applied, in apply order: Deployments (and their Services),
        DGDs, the Secret, the DRA objects, the RayJob."""
        return [*(m for objects in self.deployments.values() for m in objects), *self.dgds.values(), self.secret,
                *self.dra, self.rayjob]


def plan_run(cfg: LoadedConfig, options: RunOptions = RunOptions()) -> RunPlan:
    with cfg.located():
        return _plan(cfg, options)


def _plan(cfg: LoadedConfig, options: RunOptions) -> RunPlan:
    dgds = {key: dgd.render(cfg.infra, key) for key in sorted(cfg.infra.get("dynamo") or {})}
    names = [m["metadata"]["name"] for m in dgds.values()]
    job_ns = cfg.infra["namespace"]
    for key, manifest in dgds.items():
        if manifest["metadata"]["namespace"] != job_ns:
            raise ConfigError(
                f"infra.dynamo.{key}.namespace is {manifest['metadata']['namespace']!r} but the RayJob runs in {job_ns!r}",
                hint="Kubernetes ownerReferences cannot cross namespaces, so the DGD could not be cleaned up with "
                "the run; remove dynamo.KEY.namespace or set infra.namespace to match",
            )
    final_recipe, notes = recipe_mod.inject_dynamo(cfg.recipe, names)
    run_id = recipe_mod.run_id(cfg.infra, final_recipe, list(dgds.values()))
    job, dra = rayjob.render_with_dra(
        cfg.infra,
        run_id,
        shutdown=options.shutdown,
        ttl_seconds=options.ttl_seconds,
        active_deadline_seconds=options.active_deadline_seconds,
    )
    dgds = {key: dgd.with_user(manifest, job["metadata"]["name"]) for key, manifest in dgds.items()}
    timeouts = {key: float(cfg.infra["dynamo"][key]["readyTimeoutS"]) for key in dgds}
    declared = cfg.infra.get("deployments") or {}
    return RunPlan(run_id=run_id, recipe=final_recipe, notes=tuple(notes), dgds=dgds,
                   secret=rayjob.render_secret(cfg.infra, final_recipe, run_id), rayjob=job, ready_timeouts=timeouts,
                   deployments={key: deployment.render_with_service(cfg.infra, key) for key in sorted(declared)},
                   health={key: health for key in sorted(declared) if (health := health_check(declared[key]))},
                   dra=dra)


def health_check(entry: dict) -> tuple[str, float] | None:
    """(healthCheckUrl, healthCheckTimeoutS or 300 s) of an ``infra.deployments`` entry or a
    ``kuberay.ROLE.daemon``; None without a URL."""
    if not entry.get("healthCheckUrl"):
        return None
    timeout = entry.get("healthCheckTimeoutS")
    return entry["healthCheckUrl"], float(timeout if timeout is not None else DEFAULT_HEALTH_TIMEOUT_S)
