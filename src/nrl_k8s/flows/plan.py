"""The offline half of a run: everything `run --rayjob` would apply, rendered and validated.

`plan_run` is pure: it reads only the loaded config and the DGD manifest files, so
`run --dry-run`, `check -o` and the live run all print/apply exactly the same objects.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from nrl_k8s.config import LoadedConfig, dynamo_contract, workflow
from nrl_k8s.config import recipe as recipe_mod
from nrl_k8s.errors import ConfigError, InfraError
from nrl_k8s.flows import head_services
from nrl_k8s.kinds import deployment, dgd, lease, rayjob
from nrl_k8s.kinds.base import MANAGED_BY, labelled
from nrl_k8s.ray.execdriver import RECIPE_NAME, check_tmp_dir, run_dir

DEFAULT_HEALTH_TIMEOUT_S = 300.0
# How long after its longest DGD readyTimeoutS a run that died while starting is ended with no one
# involved: `run --parallel`'s RayJob fails (KubeRay's pre-running deadline; its cluster deleted,
# GC takes the DGDs), the serial run's start lease (``kinds.lease``) ends and GC takes the rest.
START_MARGIN_S = 120
DEFAULT_READY_TIMEOUT_S = 600


@dataclass(frozen=True)
class RunOptions:
    shutdown: bool = True
    ttl_seconds: int = rayjob.DEFAULT_TTL_SECONDS
    active_deadline_seconds: int | None = None
    parallel: bool = False  # --parallel / launch.bringUp: parallel
    launcher: bool = True  # False: no nrl-k8s brings it up (a stream for kubectl): nothing held suspended or leased


def parallel_bringup(infra: dict, flag: bool) -> bool:
    """Whether `run --rayjob` brings the DGDs and the cluster up at once: ``--parallel`` or
    ``launch.bringUp: parallel``."""
    return flag or (infra.get("launch") or {}).get("bringUp") == "parallel"


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    recipe: dict  # the final recipe the driver reads
    notes: tuple[str, ...]  # what happened to the recipe (injected / left alone and why) and to the entrypoint
    dgds: dict[str, dict]  # infra.dynamo key -> DGD manifest (no ownerReference yet; lists this run as its user)
    secret: dict  # the run's recipe and launch.env (owned by the RayJob once both exist)
    rayjob: dict
    ready_timeouts: dict[str, float]  # infra.dynamo key -> readyTimeoutS
    deployments: dict[str, list[dict]]  # infra.deployments key -> [Deployment, Service?]
    health: dict[str, tuple[str, float]]  # infra.deployments key -> (healthCheckUrl, healthCheckTimeoutS)
    dra: list[dict]  # DRA objects the RayJob's pods claim (named after the RayJob; owned by its cluster later)
    infra: dict  # resolved (kept, secrets redacted, in the run record)
    lease: dict | None = None  # the serial run's start lease, owning the suspended RayJob (``kinds.lease``)
    warnings: tuple[tuple[str, str], ...] = ()  # (message, fix): the recipe against its DGD (``dynamo_contract``)

    def manifests(self) -> list[dict]:
        """Everything that would be applied, in apply order: Deployments (and their Services), the
        lease (serial), the RayJob, the Secret, the DRA objects, the DGDs."""
        return [*(m for objects in self.deployments.values() for m in objects), *([self.lease] if self.lease else []),
                self.rayjob, self.secret, *self.dra, *self.dgds.values()]


def default_flow(infra: dict) -> str:
    """The flow `run` takes without --rayjob / --raycluster: "raycluster" (long-lived) with
    ``launch.mode: bringup``, else "rayjob"."""
    return "raycluster" if (infra.get("launch") or {}).get("mode") == "bringup" else "rayjob"


def _same_namespace(dgds: dict[str, dict], namespace: str) -> None:
    """Every DGD in the run's namespace, and each under a name of its own."""
    seen: dict[str, str] = {}
    for key, manifest in dgds.items():
        name = manifest["metadata"]["name"]
        if name in seen:
            raise InfraError(("dynamo", key), f"names the DGD {name!r}, as infra.dynamo.{seen[name]} does",
                             hint=f"give one of them another name (infra.dynamo.{key}.name)")
        seen[name] = key
        if manifest["metadata"]["namespace"] != namespace:
            raise ConfigError(
                f"infra.dynamo.{key}.namespace is {manifest['metadata']['namespace']!r} "
                f"but the run is in {namespace!r}",
                hint="Kubernetes ownerReferences cannot cross namespaces, so the DGD could not be cleaned up with "
                "the run; remove dynamo.KEY.namespace or set infra.namespace to match",
            )


def _rendered_dgds(infra: dict) -> dict[str, dict]:
    """infra.dynamo key -> its DGD as rendered (no user, claims or run id yet), keys sorted;
    refused unless each is in the run's namespace under a name of its own."""
    dgds = {key: dgd.render(infra, key) for key in sorted(infra.get("dynamo") or {})}
    _same_namespace(dgds, infra["namespace"])
    return dgds


def _dgd_names(dgds: dict[str, dict]) -> list[str]:
    return [m["metadata"]["name"] for m in dgds.values()]


def _stamped_recipe(infra: dict, recipe: dict, dgds: dict[str, dict]) -> tuple[dict, list[str], list[tuple[str, str]]]:
    """(the recipe the driver reads, notes, warnings): the single DGD's name stamped in
    (``recipe.inject_dynamo``), then refused if it breaks NeMo-RL's Dynamo contract with the DGD it
    uses (``dynamo_contract``; the warnings are what upstream leaves open). ``driver_notes`` stays
    apart: `run --rayjob` checks the RayJob's name before the driver's command."""
    final, notes = recipe_mod.inject_dynamo(recipe, _dgd_names(dgds))
    return final, notes, dynamo_contract.refuse(final, dgds, infra)


def _used_by(dgds: dict[str, dict], training_dra: list[dict], owner: str) -> dict[str, dict]:
    """Each DGD listing ``owner`` (the RayJob or training RayCluster) as its user, its claims pointed
    at that owner's DRA objects ``training_dra``."""
    return {key: dgd.with_user(dgd.wire_claims(manifest, key, training_dra, owner), owner)
            for key, manifest in dgds.items()}


def _ready_timeouts(infra: dict, dgds: dict[str, dict]) -> dict[str, float]:
    """infra.dynamo key -> readyTimeoutS."""
    return {key: float(infra["dynamo"][key]["readyTimeoutS"]) for key in dgds}


def plan_run(cfg: LoadedConfig, options: RunOptions = RunOptions()) -> RunPlan:
    with cfg.located():
        return _plan(cfg, options)


def _plan(cfg: LoadedConfig, options: RunOptions) -> RunPlan:
    dgds = _rendered_dgds(cfg.infra)
    final_recipe, notes, warnings = _stamped_recipe(cfg.infra, cfg.recipe, dgds)
    run_id = recipe_mod.run_id(cfg.infra, final_recipe, list(dgds.values()))
    timeouts = _ready_timeouts(cfg.infra, dgds)
    pre_running = (int(max(timeouts.values(), default=DEFAULT_READY_TIMEOUT_S)) + START_MARGIN_S
                   if options.parallel else None)
    job, dra = rayjob.render_with_dra(
        cfg.infra,
        run_id,
        shutdown=options.shutdown,
        ttl_seconds=options.ttl_seconds,
        active_deadline_seconds=options.active_deadline_seconds,
        pre_running_deadline_seconds=pre_running,
        # KubeRay refuses to suspend one that keeps its cluster
        suspend=options.launcher and not options.parallel and options.shutdown,
    )
    notes += driver_notes(cfg.infra, final_recipe, _dgd_names(dgds))
    # every object the run creates carries its run id (`nrl-k8s gc` finds what a dead run left)
    dgds = {key: labelled(manifest, rayjob.RUN_ID_LABEL, run_id)
            for key, manifest in _used_by(dgds, dra, job["metadata"]["name"]).items()}
    dra = [labelled(obj, rayjob.RUN_ID_LABEL, run_id) for obj in dra]
    deployments, health = _deployments(cfg.infra)
    head_services.check_planned([job])
    return RunPlan(run_id=run_id, recipe=final_recipe, notes=tuple(notes), dgds=dgds,
                   secret=rayjob.render_secret(cfg.infra, final_recipe, run_id), rayjob=job, ready_timeouts=timeouts,
                   deployments=deployments, health=health, dra=dra, infra=cfg.infra, warnings=tuple(warnings),
                   lease=None if options.parallel or not options.launcher else lease.render(
                       cfg.infra, job, int(max(timeouts.values(), default=0)) + START_MARGIN_S))


def kubectl_stream(cfg: LoadedConfig) -> list[dict]:
    """What `check --manifests-only` prints: the objects of the flow `run` takes (``default_flow``)
    as `kubectl apply -f -` makes a run of them with no nrl-k8s involved, in apply order.

    `run --rayjob`'s RayJob is neither held suspended nor leased (nothing would resume it): KubeRay
    starts it at once, with `run --no-wait`'s TTL. Its DGDs are refused: an ownerReference needs
    the owner's uid, which no stream can hold, so nothing would end them with the job. The run
    Secret and DRA objects it would own are applied unowned (`nrl-k8s gc` deletes them once the job
    has ended). `run --raycluster`'s objects are long-lived anyway: they are applied unowned.
    """
    if default_flow(cfg.infra) == "raycluster":
        return plan_longlived(cfg).manifests()
    plan = plan_run(cfg, RunOptions(launcher=False))
    for key, manifest in plan.dgds.items():
        with cfg.located():
            raise InfraError(("dynamo", key), f"kubectl cannot make DGD {manifest['metadata']['name']} owned by the "
                             "RayJob (an ownerReference needs the RayJob's uid, which exists only once it is created), "
                             "so the DGD would serve on after the job ends",
                             hint="`nrl-k8s run` creates it owned by the RayJob; a stream for kubectl can hold a run "
                                  "without DGDs (~infra.dynamo), or the long-lived objects "
                                  "(+infra.launch.mode=bringup), which kubectl delete -f removes")
    return plan.manifests()


def driver_notes(infra: dict, recipe: dict, dgd_names: list[str]) -> list[str]:
    """What ``run`` says about the driver's command: each ``--config`` it points at the run's recipe,
    and, when a DGD name was stamped into the recipe, whether the command reads that recipe at all."""
    notes = recipe_mod.config_rewrites(infra)
    stamped = ((recipe.get("policy") or {}).get("generation") or {}).get("dynamo_cfg") or {}
    if len(dgd_names) == 1 and stamped.get("dgd_name") == dgd_names[0] \
            and not recipe_mod.reads_recipe(recipe_mod.driver_entrypoint(infra)):
        notes.append(f"launch.entrypoint does not name the run's recipe (${recipe_mod.RECIPE_ENV}, or a --config "
                     f"nrl-k8s points at it): the driver sees dgd_name {dgd_names[0]} only if its command reads "
                     f"${recipe_mod.RECIPE_ENV}")
    return notes


def _deployments(infra: dict) -> tuple[dict[str, list[dict]], dict[str, tuple[str, float]]]:
    """Each ``infra.deployments`` key's [Deployment, Service?] and its health check, if any."""
    declared = infra.get("deployments") or {}
    return ({key: deployment.render_with_service(infra, key) for key in sorted(declared)},
            {key: check for key in sorted(declared) if (check := health_check(declared[key]))})


def health_check(entry: dict) -> tuple[str, float] | None:
    """(healthCheckUrl, healthCheckTimeoutS or 300 s) of an ``infra.deployments`` entry or a
    ``kuberay.ROLE.daemon``; None without a URL."""
    if not entry.get("healthCheckUrl"):
        return None
    timeout = entry.get("healthCheckTimeoutS")
    return entry["healthCheckUrl"], float(timeout if timeout is not None else DEFAULT_HEALTH_TIMEOUT_S)


# -- `run --raycluster` ---------------------------------------------------------------------

DRIVER_RECIPE = "nrl_k8s_run.yaml"  # the final recipe, at the root of the driver's working dir
REGISTRY_PREFIX = "nemo-rl-endpoints-"  # the gym's endpoint registry: ConfigMap nemo-rl-endpoints-<job id>
# ``--job-id X`` / ``--job-id=X`` in the gym daemon's entrypoint (X quoted or not)
_JOB_ID_FLAG = re.compile(r"""(?<![\w-])--job-id(?:\s+|=)("[^"]*"|'[^']*'|[^\s'";&|<>()]+)""")


@dataclass(frozen=True)
class Code:
    """What the driver (or a daemon) runs from: an uploaded package, or a path in the image."""

    source: str  # upload | image | lustre
    upload_paths: tuple[str, ...] | None  # None: the NeMo-RL defaults (upload only)
    code_path: str | None  # image / lustre: where the driver starts


@dataclass(frozen=True)
class Submission:
    """One Ray job the flow submits through a cluster's dashboard (a daemon or the driver)."""

    role: str
    cluster: str
    submission_id: str
    entrypoint: str
    env: dict[str, str]  # runtime_env env_vars (values that do not look secret)
    code: Code
    health: tuple[str, float] | None = None  # (healthCheckUrl, timeout) awaited after submission


@dataclass(frozen=True)
class LongLivedPlan:
    run_id: str
    namespace: str
    infra: dict  # resolved (kept, secrets redacted, in the run record)
    recipe: dict  # the final recipe, staged as nrl_k8s_run.yaml
    notes: tuple[str, ...]
    deployments: dict[str, list[dict]]  # infra.deployments key -> [Deployment, Service?]
    health: dict[str, tuple[str, float]]  # infra.deployments key -> (healthCheckUrl, timeout)
    clusters: dict[str, dict]  # role -> RayCluster
    dra: dict[str, list[dict]]  # role -> its DRA objects (owned by the RayCluster at creation)
    env_secrets: dict[str, dict]  # role -> Secret of the env values that look secret (owned likewise)
    dgds: dict[str, dict]  # owned by the training RayCluster at creation
    ready_timeouts: dict[str, float]
    daemons: dict[str, Submission]  # role -> its daemon
    driver: Submission
    submitter: str = "dashboard"  # how the driver starts: through the dashboard, or exec on the head pod
    exec_dir: str | None = None  # exec: the run's directory on the head pod
    registry: str | None = None  # the gym's endpoint-registry ConfigMap (--replace deletes it)
    warnings: tuple[tuple[str, str], ...] = ()  # (message, fix): the recipe against its DGD (``dynamo_contract``)

    def manifests(self) -> list[dict]:
        """Everything that would be applied, in apply order."""
        out = [m for pair in self.deployments.values() for m in pair]
        for role, cluster in self.clusters.items():
            out += [cluster, *self.dra.get(role, []), *([self.env_secrets[role]] if role in self.env_secrets else [])]
        return out + list(self.dgds.values())


def plan_longlived(cfg: LoadedConfig, run_id: str | None = None) -> LongLivedPlan:
    with cfg.located():
        return _plan_longlived(cfg, run_id)


def _plan_longlived(cfg: LoadedConfig, run_id: str | None) -> LongLivedPlan:
    from nrl_k8s.kinds import raycluster, secret
    from nrl_k8s.redact import is_secret

    infra, ns = cfg.infra, cfg.infra["namespace"]
    dgds = _rendered_dgds(infra)
    training = raycluster.cluster_name(infra, "training")
    final_recipe, notes, warnings = _stamped_recipe(infra, cfg.recipe, dgds)
    notes += driver_notes(infra, final_recipe, _dgd_names(dgds))
    run_id = recipe_mod.checked_run_id(run_id) if run_id else recipe_mod.new_run_id(training)

    clusters, dra, env_secrets, daemons = {}, {}, {}, {}
    for role in raycluster.ROLES:
        if role not in (infra.get("kuberay") or {}):
            continue
        cluster, dra[role] = raycluster.render_with_dra(infra, role)
        name = cluster["metadata"]["name"]
        entry = infra["kuberay"][role]
        daemon = entry.get("daemon")
        env = recipe_mod.launch_env(infra) if role == "training" else {}
        if daemon:
            env = {**env, **recipe_mod.checked_env(daemon.get("env"), f"kuberay.{role}.daemon.env")}
        hidden = {k: v for k, v in env.items() if is_secret(k)}
        if hidden:
            secret_name = f"{name}-env"
            env_secrets[role] = secret.render(secret_name, ns, [MANAGED_BY, infra.get("labels"),
                                                                {raycluster.ROLE_LABEL: role}],
                                              hidden, hint="keep the env values small")
            rayjob.wire_env(cluster["spec"], secret_name, sorted(hidden))
        clusters[role] = cluster
        if daemon:
            daemons[role] = Submission(
                role=role, cluster=name,
                submission_id=raycluster.daemon_submission_id(infra, role),
                entrypoint=_daemon_entrypoint(daemon, role),
                env={k: v for k, v in recipe_mod.checked_env(daemon.get("env"), f"kuberay.{role}.daemon.env").items()
                     if not is_secret(k)},
                code=Code("upload", tuple(daemon["rayUploadPaths"]), None) if daemon.get("rayUploadPaths")
                else Code("image", None, None),
                health=health_check(daemon),
            )
    dgds = _used_by(dgds, dra.get("training", []), training)
    launch = infra.get("launch") or {}
    source, submitter = workflow.code_source(infra), workflow.submitter(infra)
    upload = source == "upload"  # else the driver starts in codePath; only the recipe travels
    if upload and submitter == "exec":
        explicit = ("submit", "submitter") if (infra.get("submit") or {}).get("submitter") else ("launch", "runMode")
        raise InfraError(explicit, "the exec submitter cannot upload code (launch.codeSource is upload)",
                         hint="use --code-source image (or lustre) with --code-path DIR, the code being in the image, "
                         "or --submitter dashboard (infra: launch.codeSource, submit.submitter)")
    code = Code(source, tuple(launch["rayUploadPaths"]) if upload and launch.get("rayUploadPaths") else None,
                workflow.code_path(infra))
    exec_dir = None
    recipe_path = DRIVER_RECIPE  # in the working dir Ray unpacks (the dashboard submitter)
    if submitter == "exec":
        exec_dir = run_dir(check_tmp_dir(workflow.exec_tmp_dir(infra)), run_id)
        recipe_path = posixpath.join(exec_dir, RECIPE_NAME)
    driver_env = {k: v for k, v in recipe_mod.launch_env(infra).items() if not is_secret(k)}
    driver = Submission(role="training", cluster=training, submission_id=run_id,
                        entrypoint=recipe_mod.driver_entrypoint(infra),
                        env={**driver_env, recipe_mod.RUN_ID_ENV: run_id, recipe_mod.RECIPE_ENV: recipe_path},
                        code=code)
    deployments, health = _deployments(infra)
    head_services.check_planned(list(clusters.values()))
    timeouts = _ready_timeouts(infra, dgds)
    return LongLivedPlan(run_id=run_id, namespace=ns, infra=infra, recipe=final_recipe, notes=tuple(notes),
                         deployments=deployments, health=health, clusters=clusters, dra=dra,
                         env_secrets=env_secrets, dgds=dgds, ready_timeouts=timeouts, daemons=daemons, driver=driver,
                         submitter=submitter, exec_dir=exec_dir, registry=registry_configmap(infra),
                         warnings=tuple(warnings))


def registry_configmap(infra: dict) -> str | None:
    """The gym's endpoint-registry ConfigMap, ``nemo-rl-endpoints-<job id>``, the job id taken from
    ``--job-id X`` / ``--job-id=X`` in ``kuberay.gym.daemon.entrypoint``; None without one (or when
    the id is not a literal, e.g. a shell variable)."""
    daemon = ((infra.get("kuberay") or {}).get("gym") or {}).get("daemon") or {}
    found = _JOB_ID_FLAG.search(daemon.get("entrypoint") or "")
    if found is None:
        return None
    value = found.group(1)
    job_id = value[1:-1] if value[:1] in "\"'" and len(value) >= 2 else value
    name = REGISTRY_PREFIX + job_id
    return name if re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) and len(name) <= 253 else None


def command_line_secrets(infra: dict) -> list[tuple[str, str]]:
    """(warning, fix) for each command line that carries a secret (``--token X``, ``--api-key=X``,
    ``Bearer X``, a known secret value): the entrypoint and daemons go verbatim into the RayJob and
    Ray's job store, a DGD's args into the DGD, a container's ``command``/``args`` (a role's pod
    templates, a Deployment's) into its object. Printed output (a dry run too) redacts them; the
    objects cannot, so the warning says the real value is what is applied."""
    from nrl_k8s.redact import redact, redact_text

    applied = "stored as written in the object it goes into (a dry run prints <redacted>; the real value is applied)"
    env_fix = "put the value in infra.launch.env (the run's Secret) and let the program read it from the environment"
    lines = [("launch.entrypoint", (infra.get("launch") or {}).get("entrypoint"))]
    lines += [(f"kuberay.{role}.daemon.entrypoint", (entry.get("daemon") or {}).get("entrypoint"))
              for role, entry in (infra.get("kuberay") or {}).items()]
    found = [(key, env_fix) for key, line in lines if isinstance(line, str) and redact_text(line) != line]
    for key in sorted(infra.get("dynamo") or {}):
        spec = dgd.render(infra, key)["spec"]
        if redact(spec) != spec:
            found.append((f"dynamo.{key} (a command or argument)", env_fix))
    container_fix = ("give the container the value in an env var read from a Secret (valueFrom.secretKeyRef) and "
                     "write $(NAME) in its command or args, which Kubernetes expands")
    for kind in ("kuberay", "deployments"):
        for key, entry in sorted((infra.get(kind) or {}).items()):
            spec = (entry or {}).get("spec")
            found += [(path, container_fix) for path in _secret_commands(spec, (kind, key, "spec"))]
    return [(f"{key} passes a secret on its command line, {applied}", fix) for key, fix in found]


def _secret_commands(tree, path: tuple) -> list[str]:
    """The dotted keys of each container ``command`` / ``args`` in ``tree`` that carries a secret."""
    from nrl_k8s.redact import redact

    if isinstance(tree, dict):
        return [key for name, value in tree.items() for key in (
            [".".join(map(str, (*path, name)))] if name in ("command", "args") and redact(value) != value
            else _secret_commands(value, (*path, name)))]
    if isinstance(tree, list):
        return [key for index, item in enumerate(tree) for key in _secret_commands(item, (*path, index))]
    return []


def unstaged_recipe_reads(infra: dict, flow: str | None = None) -> list[tuple[str, str]]:
    """(warning, fix) for each entrypoint that reads ``nrl_k8s_run.yaml`` where nothing stages it
    in ``flow`` ("rayjob" | "raycluster"; default: the one `run` takes, ``default_flow``).

    Only `run --raycluster` stages that file, in the working dir it uploads: the driver's with
    ``launch.codeSource: upload``, a daemon's when it has ``rayUploadPaths``. `run --rayjob`
    mounts the recipe elsewhere.
    """
    flow = flow or default_flow(infra)
    fix = f'read the recipe from "${recipe_mod.RECIPE_ENV}" (its path in every flow), not {DRIVER_RECIPE}'
    launch = infra.get("launch") or {}
    found = []
    if DRIVER_RECIPE in (launch.get("entrypoint") or ""):
        source = workflow.code_source(infra)
        if source != "upload":
            found.append((f"launch.entrypoint reads {DRIVER_RECIPE}, but with launch.codeSource {source} nothing "
                          f"stages it: the driver starts in launch.codePath ({launch.get('codePath')})", fix))
        elif flow == "rayjob":
            found.append((f"launch.entrypoint reads {DRIVER_RECIPE}, which only run --raycluster stages; "
                          "run --rayjob (what `nrl-k8s run` does unless launch.mode is bringup) does not",
                          f"{fix}; or run with --raycluster (launch.mode: bringup)"))
    for role, entry in sorted((infra.get("kuberay") or {}).items()):
        daemon = (entry or {}).get("daemon") or {}
        if DRIVER_RECIPE in (daemon.get("entrypoint") or "") and not daemon.get("rayUploadPaths"):
            found.append((f"kuberay.{role}.daemon.entrypoint reads {DRIVER_RECIPE}, but the daemon uploads no "
                          "working dir (no rayUploadPaths), so nothing stages it", fix))
    return found


def _daemon_entrypoint(daemon: dict, role: str) -> str:
    if not (daemon.get("entrypoint") or "").strip():
        raise InfraError(("kuberay", role, "daemon", "entrypoint"), "is not set",
                         hint="set the command Ray runs as the role's long-running daemon job")
    return daemon["entrypoint"]
