"""A user's own corner of a namespace: the ``<user>-secrets`` Secret and the dev pod with its RBAC.

``dev setup-secrets`` writes the Secret that upstream's DGDs read through
``envFromSecret: ${user:}-secrets`` and the dev pod through ``envFrom``; ``dev connect``
creates the ServiceAccount, Role and RoleBinding ``<user>-dev`` and the pod ``<user>-dev-pod``
(no GPU; ``sleep`` until deleted), waits for it to run (a watch with a deadline) and gives the
``kubectl exec`` command into it; ``dev stop`` deletes the pod, and with ``everything`` its RBAC.

Ownership: each object carries ``app.kubernetes.io/managed-by: nrl-k8s`` and
``nrl-k8s/owner: <user>``. An object of one of these names without both is never changed or
deleted: the command refuses (``ConfigError``, exit 2) before it applies anything.

Secret values are read from the environment or files, never from a command line (shell history,
``ps``), and are never printed or logged: only key names are reported.

The Role grants what nrl-k8s itself calls in the namespace (``role_rules``), so nrl-k8s run in
the dev pod works under the pod's own ServiceAccount. Cluster-scoped reads (namespaces, CRDs) are
outside any Role; ``check`` says "not verified" for them instead of failing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrl_k8s.config.recipe import ENV_NAME
from nrl_k8s.errors import ConfigError, ConflictError, ForbiddenError
from nrl_k8s.events import Applied, Emit, Waiting, Warning
from nrl_k8s.kinds import deployment, dgd, dra, lease, pod, raycluster, rayjob, secret, service
from nrl_k8s.kinds.base import MANAGED_BY, OWNER_LABEL, Kind, maker, managed
from nrl_k8s.kinds.core import CONFIGMAP, EVENT, SERVICE_ACCOUNT
from nrl_k8s.kinds.names import validate_name
from nrl_k8s.kinds.rbac import ROLE, ROLE_BINDING, render_role, render_role_binding, render_service_account
from nrl_k8s.kinds.readiness import Pending, Readiness

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

COMPONENT_LABEL = "nrl-k8s/component"
CONTAINER = "dev"
SSH_KEY_NAME, SSH_KEY_CONTENT = "SSH_KEY_NAME", "SSH_KEY_CONTENT"  # upstream's keys, read by the dev pod
_KEY_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
# The pod's command: a trap first, so the pod goes at once on SIGTERM from its first moment (`sleep
# infinity` as PID 1 would ignore it for the grace period), its `sleep` with it; then install the
# SSH key from the Secret, if any, and wait to be deleted.
STARTUP = """\
trap 'kill $! 2>/dev/null; exit 0' TERM INT
if [ -n "${SSH_KEY_CONTENT:-}" ]; then
  mkdir -p "$HOME/.ssh" && chmod 700 "$HOME/.ssh" &&
  (umask 077 && printf '%s\\n' "$SSH_KEY_CONTENT" > "$HOME/.ssh/${SSH_KEY_NAME:-id_rsa}")
fi
while :; do sleep 3600 & wait $!; done
"""
SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"]
_NOT_YOURS_HINT = ("nrl-k8s changes and deletes only what it created for you: use another namespace (-n) or user "
                   "name (NRL_K8S_USER), or ask the object's owner to remove it")

# What nrl-k8s calls in a namespace, by kind (the Role of the dev pod grants exactly this).
_APPLIED = (
    rayjob.KIND,
    lease.KIND,
    raycluster.KIND,
    *dgd.KINDS,
    *dra.KINDS,
    deployment.KIND,
    service.KIND,
    secret.KIND,
    CONFIGMAP,
)  # rendered and applied (configmaps: the gym's endpoint registry that --replace resets)
_APPLY_VERBS: tuple[str, ...] = ("get", "list", "watch", "create", "patch", "delete")  # find/wait/create/modify/delete
_READ = (pod.KIND, EVENT)  # readiness and the reasons a wait gives (diagnose)
_READ_VERBS: tuple[str, ...] = ("get", "list", "watch")
_SUBRESOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pods/log", ("get",)),  # logs --source head|worker|dgd
    ("pods/exec", ("create", "get")),  # the exec submitter and `kubectl exec` (websocket: get; SPDY and 1.31+: create)
    ("services/proxy", ("get", "create", "update", "patch", "delete")),  # dashboard, frontends, the relay (any method)
    ("pods/proxy", ("get", "create")),  # status: a DGD's RL listener and its workers' weight versions (GET, POST)
)


@dataclass(frozen=True)
class Names:
    """The names of a user's objects in a namespace."""

    user: str
    namespace: str

    @property
    def secret(self) -> str:
        return secret.user_secret(self.user)

    @property
    def rbac(self) -> str:
        """The ServiceAccount, the Role and the RoleBinding."""
        return f"{self.user}-dev"

    @property
    def pod(self) -> str:
        return f"{self.user}-dev-pod"

    @property
    def labels(self) -> dict:
        return {**MANAGED_BY, OWNER_LABEL: self.user}

    @property
    def pod_selector(self) -> str:
        return f"{OWNER_LABEL}={self.user},{COMPONENT_LABEL}=dev-pod"


def names_for(user: str, namespace: str) -> Names:
    """ConfigError when the user name (``${user:}``) or the namespace cannot name Kubernetes objects."""
    validate_name(namespace, what="namespace", where="the namespace")
    validate_name(user, what="user name", where="${user:} ($NRL_K8S_USER or the login name)",
                  max_len=63 - len("-dev-pod"))
    return Names(user, namespace)


# -- rendering (pure) -------------------------------------------------------------------------
def role_rules() -> list[dict]:
    """The Role's rules, one per API group and verb set, from the kinds nrl-k8s touches."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for kinds, verbs in ((_APPLIED, _APPLY_VERBS), (_READ, _READ_VERBS)):
        for kind in kinds:
            plurals = groups.setdefault((kind.group, verbs), [])
            if kind.plural not in plurals:
                plurals.append(kind.plural)
    for resource, verbs in _SUBRESOURCES:
        groups.setdefault(("", verbs), []).append(resource)
    return [{"apiGroups": [group], "resources": plurals, "verbs": list(verbs)}
            for (group, verbs), plurals in groups.items()]


@dataclass(frozen=True)
class DevPod:
    """What ``connect`` applies, in order: ServiceAccount, Role, RoleBinding, Pod. Without an
    ``image`` an existing dev pod can be reused, none created."""

    names: Names
    image: str | None
    objects: tuple[tuple[Kind, dict], ...] = field(repr=False)

    @property
    def pod(self) -> dict:
        return self.objects[-1][1]


def render(names: Names, image: str | None, *, pull_secrets: list[dict] | None = None,
           volumes: list[tuple[dict, str]] | None = None, env: Mapping[str, str] | None = None) -> DevPod:
    """The dev pod and its RBAC. ``volumes``: (volume, mountPath) pairs mounted in the container;
    ``env``: more environment variables (e.g. ``HF_HOME`` of a mounted cache)."""
    check_image(image)
    labels = names.labels
    account = render_service_account(names.rbac, names.namespace, labels)
    role = render_role(names.rbac, names.namespace, labels, role_rules())
    binding = render_role_binding(names.rbac, names.namespace, labels, names.rbac, names.rbac)
    variables = {"USER": names.user, "NRL_K8S_USER": names.user, **(env or {})}  # ${user:} inside = outside
    container: dict[str, Any] = {
        "name": CONTAINER,
        **({"image": image} if image else {}),
        "command": ["/bin/sh", "-c", STARTUP],
        "env": [{"name": k, "value": v} for k, v in variables.items()],
        "envFrom": [{"secretRef": {"name": names.secret, "optional": True}}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "5", "memory": "10Gi"}},
    }
    spec: dict = {
        "serviceAccountName": names.rbac,
        "restartPolicy": "Never",
        "containers": [container],
        # Off GPU nodes where there are others (preferred: a GPU-only cluster still runs it).
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"}]
                        },
                    }
                ]
            }
        },
    }
    if pull_secrets:
        spec["imagePullSecrets"] = list(pull_secrets)
    for volume, mount_path in volumes or []:
        spec.setdefault("volumes", []).append(volume)
        container.setdefault("volumeMounts", []).append({"name": volume["name"], "mountPath": mount_path})
    manifest = {"apiVersion": pod.KIND.api_version, "kind": pod.KIND.kind,
                "metadata": {"name": names.pod, "namespace": names.namespace,
                             "labels": {**labels, COMPONENT_LABEL: "dev-pod"}},
                "spec": spec}
    return DevPod(
        names, image, ((SERVICE_ACCOUNT, account), (ROLE, role), (ROLE_BINDING, binding), (pod.KIND, manifest))
    )


def check_image(image: str | None) -> None:
    """ConfigError for an image Kubernetes refuses (empty, or with whitespace); None is no image."""
    if image is not None and (not image or any(c.isspace() for c in image)):
        raise ConfigError(
            f"--image {image!r} is not an image reference", hint="e.g. --image nvcr.io/nvidia/nemo-rl:v0.4.0"
        )


def render_for_infra(names: Names, image: str | None, infra: dict | None) -> DevPod:
    """``render`` with what an infra gives a dev pod: its ``image`` (unless ``image`` is given), its
    ``imagePullSecrets`` and its mounted storage (``workspace``, ``hf_cache`` with ``HF_HOME``,
    ``checkpoints``), as on the run's own pods."""
    if infra is None:
        return render(names, image)
    volumes, env = [], {}
    for key, volume_name in (("workspace", "workspace"), ("hf_cache", "hf-cache"), ("checkpoints", "checkpoints")):
        found = raycluster.storage_volume(infra, key, volume_name)
        if found is not None:
            volumes.append(found)
            if key == "hf_cache":
                env["HF_HOME"] = found[1]
    return render(
        names,
        image or infra.get("image"),
        pull_secrets=raycluster.pull_secret_refs(infra.get("imagePullSecrets") or []),
        volumes=volumes,
        env=env,
    )


def exec_argv(kubectl: str, names: Names, command: list[str] | None, *, tty: bool, context: str | None) -> list[str]:
    """``kubectl exec`` into the dev pod: ``command`` (an argv, never a shell line) or a shell."""
    argv = [kubectl, *(["--context", context] if context else []), "-n", names.namespace, "exec", "-i"]
    return [*argv, *(["-t"] if tty else []), names.pod, "-c", CONTAINER, "--", *(command or SHELL)]


def secret_values(
    from_env: list[str], from_file: list[str], ssh_key: str | None, env: Mapping[str, str]
) -> dict[str, str]:
    """The keys and values ``setup-secrets`` stores; ConfigError (naming the flag, never a value)
    for a bad one.

    ``--from-env NAME``: the value of $NAME. ``--from-file KEY=PATH``: the file's text, one final
    newline dropped (as ``$(cat PATH)`` would; ``/dev/stdin`` reads a pipe). ``--ssh-key PATH``:
    ``SSH_KEY_NAME`` (the file's name) and ``SSH_KEY_CONTENT`` (its text), which the dev pod
    installs in ``~/.ssh``. Keys are environment variable names: the Secret is read through ``envFrom``.
    """
    values: dict[str, str] = {}

    def put(key: str, value: str, flag: str) -> None:
        if not ENV_NAME.fullmatch(key):
            raise ConfigError(
                f"{flag}: {key!r} is not an environment variable name",
                hint="the Secret is read through envFrom: use letters, digits and '_', not starting with a digit",
            )
        if key in values:
            raise ConfigError(f"{flag}: key {key} is given twice", hint="give each key once")
        values[key] = value

    for name in from_env:
        if "=" in name:  # NAME=VALUE out of habit: the value must not be echoed
            raise ConfigError(
                f"--from-env takes a variable name, not NAME=VALUE (got a value for {name.partition('=')[0]})",
                hint="values on a command line stay in shell history and show in `ps`: export the "
                "variable and pass its name",
            )
        flag = f"--from-env {name}"
        put(name, "", flag)  # the name is checked before its value is read
        value = env.get(name)
        if not value:
            raise ConfigError(
                f"{flag}: ${name} is {'empty' if value == '' else 'not set'}",
                hint=f"export {name} first (e.g. `read -rs {name} && export {name}`), or use --from-file {name}=PATH",
            )
        values[name] = value
    for item in from_file:
        key, sep, path = item.partition("=")
        if not sep or not path:  # never echoed: it may be a value given by mistake
            raise ConfigError("--from-file: an argument is not KEY=PATH",
                              hint="give KEY=PATH, KEY an environment variable name (PATH /dev/stdin reads a pipe)")
        text = _read_text(Path(path).expanduser(), f"--from-file {key}", show_path=False)
        put(
            key,
            text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text,
            f"--from-file {key}",
        )
    if ssh_key is not None:
        key_file = Path(ssh_key).expanduser()
        if not _KEY_FILE_NAME.fullmatch(key_file.name):
            raise ConfigError(f"--ssh-key {ssh_key}: the file name {key_file.name!r} cannot name a file in ~/.ssh",
                              hint="use a key file named like id_ed25519")
        content = _read_text(key_file, f"--ssh-key {ssh_key}")
        put(SSH_KEY_NAME, key_file.name, "--ssh-key")
        put(SSH_KEY_CONTENT, content, "--ssh-key")
    if not values:
        raise ConfigError(
            "dev setup-secrets: nothing to store",
            hint="pass --from-env NAME or --from-file KEY=PATH (repeatable), or a key file with --ssh-key",
        )
    return values


def _read_text(path: Path, flag: str, *, show_path: bool = True) -> str:
    """The file's text; ``show_path=False`` keeps the path out of errors (it may be a value given by mistake)."""
    shown = str(path) if show_path else "the file"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot read {shown}: {exc.strerror or type(exc).__name__}",
                          hint="give a readable file (KEY=PATH; =/dev/stdin reads a pipe)") from None
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ConfigError(f"{flag}: {shown} is not UTF-8 text", hint="environment variables hold text") from None


# -- ownership ---------------------------------------------------------------------------------
def refusal(kind: Kind, obj: dict, names: Names) -> ConfigError | None:
    """Why ``obj`` (found under one of the user's names) is not the user's to change, or None."""
    if maker(obj, names.user) is None:
        return None
    owner = (obj["metadata"].get("labels") or {}).get(OWNER_LABEL)
    what = f"{kind.kind} {obj['metadata']['name']} in namespace {names.namespace}"
    if managed(obj) and owner:
        return ConfigError(f"{what} belongs to {owner}, not to {names.user}", hint=_NOT_YOURS_HINT)
    return ConfigError(f"{what} was not created by nrl-k8s for {names.user} (owner: {owner or 'unknown'})",
                       hint=_NOT_YOURS_HINT)


def _found(kube: Kube, objects: list[tuple[Kind, str]], names: Names) -> dict[Kind, dict | None]:
    """Each object as it is now; refuses (nothing applied yet) when one exists and is not the user's."""
    live = {kind: kube.find(kind, name, names.namespace) for kind, name in objects}
    for kind, obj in live.items():
        if obj is not None and (problem := refusal(kind, obj, names)) is not None:
            raise problem
    return live


def _create(kube: Kube, kind: Kind, manifest: dict, names: Names, emit: Emit, what: str) -> dict | None:
    """Create ``manifest``; None when it appeared meanwhile (and is the user's: else refuse)."""
    try:
        created = kube.create(kind, manifest)
    except ConflictError:
        raced = kube.get(kind, manifest["metadata"]["name"], names.namespace)
        if (problem := refusal(kind, raced, names)) is not None:
            raise problem from None
        return None
    emit(Applied(what, manifest["metadata"]["name"], "created"))
    return created


# -- setup-secrets -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Stored:
    action: str  # "created" | "updated"
    keys: tuple[str, ...]  # the keys written now
    all_keys: tuple[str, ...]  # every key the Secret holds


def setup_secrets(kube: Kube, names: Names, values: dict[str, str]) -> Stored:
    """Create the user's Secret with ``values``, or merge them into it (keys given replace theirs)."""
    manifest = secret.render(names.secret, names.namespace, [names.labels], values,
                             hint="store large files elsewhere (a volume) and keep the Secret for credentials")
    keys = tuple(sorted(values))
    live = _found(kube, [(secret.KIND, names.secret)], names)[secret.KIND]
    if live is None:
        try:
            kube.create(secret.KIND, manifest)
            return Stored("created", keys, keys)
        except ConflictError:
            pass  # created meanwhile: merge into it, if it is the user's

    def merge(current: dict) -> dict:
        if (problem := refusal(secret.KIND, current, names)) is not None:
            raise problem
        return {"stringData": values}

    updated = kube.modify(secret.KIND, names.secret, merge, names.namespace)
    return Stored("updated", keys, tuple(sorted(updated.get("data") or {})))


# -- connect -----------------------------------------------------------------------------------
_ENDED = ("Succeeded", "Failed")


def _phase(obj: dict) -> str | None:
    return (obj.get("status") or {}).get("phase")


def connect(kube: Kube, plan: DevPod, emit: Emit, *, timeout_s: float) -> dict:
    """Apply ``plan`` (creating what is missing, bringing the user's Role and RoleBinding up to date)
    and wait until the pod runs; the pod as it runs."""
    names = plan.names
    live = _found(kube, [(kind, manifest["metadata"]["name"]) for kind, manifest in plan.objects], names)
    (_, account), (_, role), (_, binding), _ = plan.objects
    current = live[pod.KIND]
    reuse = current is not None and not current["metadata"].get("deletionTimestamp") and _phase(current) not in _ENDED
    if not reuse and plan.image is None:
        raise ConfigError(
            f"no dev pod {names.pod} runs in namespace {names.namespace}, and no image was given to start one",
            hint="pass --image IMAGE, or --infra FILE whose `image` is set",
        )
    if live[SERVICE_ACCOUNT] is None:
        _create(kube, SERVICE_ACCOUNT, account, names, emit, "serviceaccount")
    else:
        emit(Applied("serviceaccount", names.rbac, "reused"))
    _ensure_role(kube, role, live[ROLE], names, emit)
    _ensure_binding(kube, binding, live[ROLE_BINDING], names, emit)
    if reuse:
        assert current is not None
        emit(Applied("dev pod", names.pod, "reused"))
        running = next((c.get("image") for c in current["spec"]["containers"] if c.get("name") == CONTAINER), None)
        if plan.image is not None and running != plan.image:
            emit(
                Warning(
                    f"the dev pod runs {running}, not {plan.image}: `nrl-k8s dev stop`, then connect again to change it"
                )
            )
    else:
        if current is not None:
            emit(
                Waiting(
                    "dev pod",
                    "replacing the one that " + ("ended" if _phase(current) in _ENDED else "is being deleted"),
                )
            )
            kube.delete(pod.KIND, names.pod, names.namespace)
            kube.wait_gone(pod.KIND, names.pod, names.namespace, timeout_s=timeout_s)
        _create(kube, pod.KIND, plan.pod, names, emit, "dev pod")

    def running_pod(obj: object) -> Readiness:
        return Pending("not created yet") if obj is None else pod.readiness(obj)  # type: ignore[arg-type]

    found = kube.wait(pod.KIND, running_pod, name=names.pod, namespace=names.namespace, timeout_s=timeout_s,
                      on_progress=lambda reason: emit(Waiting("dev pod", reason)), what=f'dev pod "{names.pod}"',
                      pods=names.pod_selector)
    assert isinstance(found, dict)
    return found


def _ensure_role(kube: Kube, role: dict, live: dict | None, names: Names, emit: Emit) -> None:
    if live is None:
        try:
            _create(kube, ROLE, role, names, emit, "role")
        except ForbiddenError as err:  # RBAC escalation prevention: a Role grants only what its creator holds
            raise ForbiddenError(f"{err.message} (a Role may grant only what its creator holds)",
                                 hint=f"ask your admin for these permissions in {names.namespace}, or for the Role "
                                      f"itself: `nrl-k8s dev connect` creates Role {names.rbac} with rules "
                                      + "; ".join(_describe(rule) for rule in role["rules"]),
                                 status=err.status) from None
        return
    if live.get("rules") != role["rules"]:  # made by an nrl-k8s that called other things
        kube.modify(ROLE, names.rbac, lambda _: {"rules": role["rules"]}, names.namespace, current=live)
        emit(Applied("role", names.rbac, "updated"))
    else:
        emit(Applied("role", names.rbac, "reused"))


def _ensure_binding(kube: Kube, binding: dict, live: dict | None, names: Names, emit: Emit) -> None:
    if live is not None and live.get("roleRef") != binding["roleRef"]:  # roleRef is immutable
        kube.delete(ROLE_BINDING, names.rbac, names.namespace, resource_version=live["metadata"]["resourceVersion"])
        kube.wait_gone(ROLE_BINDING, names.rbac, names.namespace, timeout_s=60)
        live = None
    if live is None:
        _create(kube, ROLE_BINDING, binding, names, emit, "rolebinding")
    elif live.get("subjects") != binding["subjects"]:
        kube.modify(
            ROLE_BINDING, names.rbac, lambda _: {"subjects": binding["subjects"]}, names.namespace, current=live
        )
        emit(Applied("rolebinding", names.rbac, "updated"))
    else:
        emit(Applied("rolebinding", names.rbac, "reused"))


def _describe(rule: dict) -> str:
    group = rule["apiGroups"][0]
    resources = ",".join(f"{r}.{group}" if group else r for r in rule["resources"])
    return f"{','.join(rule['verbs'])} on {resources}"


# -- stop --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stopped:
    deleted: tuple[str, ...]  # "Kind name" of what was deleted
    kept: tuple[str, ...]  # "Kind name" of the user's objects left in place


def stop(kube: Kube, names: Names, *, everything: bool, timeout_s: float) -> Stopped:
    """Delete the dev pod (and with ``everything`` its RoleBinding, Role and ServiceAccount) and wait
    until the pod is gone. The user's Secret is always kept."""
    rbac = [(ROLE_BINDING, names.rbac), (ROLE, names.rbac), (SERVICE_ACCOUNT, names.rbac)]
    targets = [(pod.KIND, names.pod), *rbac]
    live = _found(kube, targets if everything else [(pod.KIND, names.pod)], names)
    deleted = []
    for kind, name in targets:
        if live.get(kind) is not None and kube.delete(kind, name, names.namespace):
            deleted.append(f"{kind.kind} {name}")
    if live[pod.KIND] is not None:
        kube.wait_gone(pod.KIND, names.pod, names.namespace, timeout_s=timeout_s)
    kept_kinds = [(secret.KIND, names.secret)] + ([] if everything else rbac)
    kept = [f"{kind.kind} {name}" for kind, name in kept_kinds
            if (obj := kube.find(kind, name, names.namespace)) is not None and refusal(kind, obj, names) is None]
    return Stopped(tuple(deleted), tuple(kept))
