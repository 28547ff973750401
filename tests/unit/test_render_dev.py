"""`dev`: the dev pod and its RBAC as rendered, the Role against what nrl-k8s asks the cluster for,
the pod's startup script, the kubectl command, and the values `setup-secrets` reads."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

import pytest
from sandbox_harness import eventually

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds import deployment, dgd, dra, raycluster, rayjob, secret, service
from nrl_k8s.kinds.base import MANAGED_BY
from nrl_k8s.ops import dev
from nrl_k8s.ops.probe import Permission, grants, run_permissions
from nrl_k8s_sandbox.pids import group_members

NAMES = dev.Names("alice", "rl")
OWNED = {**MANAGED_BY, "nrl-k8s/owner": "alice"}


def granted(permission: Permission) -> bool:
    return any(grants(rule, permission) for rule in dev.role_rules())


# -- the Role ------------------------------------------------------------------------------------
RENDERED = [rayjob.KIND, raycluster.KIND, *dgd.KINDS, *dra.KINDS, deployment.KIND, service.KIND, secret.KIND]


def test_the_role_grants_every_permission_a_run_is_checked_for():
    """`check` and the run's preflight ask for these (probe.run_permissions), for every kind nrl-k8s renders."""
    needed = run_permissions([{"apiVersion": k.api_version, "kind": k.kind} for k in RENDERED], proxy=True)
    assert needed and [p for p in needed if not granted(p)] == []


@pytest.mark.parametrize("permission", [
    Permission("watch", "rayjobs", "ray.io"),  # every wait is a watch
    Permission("watch", "dynamographdeployments", "nvidia.com"),
    Permission("list", "pods"), Permission("watch", "pods"),
    Permission("list", "events"),  # why a wait failed
    Permission("get", "pods/log"),  # logs --source head|worker|dgd
    Permission("create", "pods/exec"),  # the exec submitter, kubectl exec
    Permission("update", "services/proxy"),  # package upload through the dashboard (PUT)
    Permission("get", "pods/proxy"), Permission("create", "pods/proxy"),  # status: the RL fleet of a DGD
    Permission("delete", "configmaps"),  # the endpoint registry --replace resets
    Permission("create", "resourceclaimtemplates", "resource.k8s.io"),
    Permission("create", "computedomains", "resource.nvidia.com"),
    Permission("patch", "deployments", "apps"),
], ids=str)
def test_the_role_grants_what_nrl_k8s_calls(permission):
    assert granted(permission)


@pytest.mark.parametrize("permission", [
    Permission("create", "roles", "rbac.authorization.k8s.io"),  # no escalation from the pod
    Permission("create", "rolebindings", "rbac.authorization.k8s.io"),
    Permission("get", "nodes"), Permission("create", "namespaces"),
    Permission("delete", "pods"), Permission("create", "pods"),  # pods are made by the operators
    Permission("create", "serviceaccounts"), Permission("create", "pods/portforward"),
    Permission("get", "pods/attach"), Permission("create", "persistentvolumeclaims"),
], ids=str)
def test_the_role_grants_nothing_else(permission):
    assert not granted(permission)


def test_the_role_has_no_wildcards():
    for rule in dev.role_rules():
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert not rule.get("resourceNames")


# -- the objects ---------------------------------------------------------------------------------
def test_render_the_rbac_and_the_pod():
    plan = dev.render(NAMES, "nemo-rl:1")
    (sa_kind, sa), (role_kind, role), (rb_kind, rb), (pod_kind, pod) = plan.objects
    assert [k.kind for k in (sa_kind, role_kind, rb_kind, pod_kind)] == ["ServiceAccount", "Role", "RoleBinding", "Pod"]
    for obj in (sa, role, rb):
        assert obj["metadata"] == {"name": "alice-dev", "namespace": "rl", "labels": OWNED}
    assert role["rules"] == dev.role_rules()
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "alice-dev"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "alice-dev", "namespace": "rl"}]

    assert pod["metadata"] == {"name": "alice-dev-pod", "namespace": "rl",
                               "labels": {**OWNED, "nrl-k8s/component": "dev-pod"}}
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "alice-dev" and spec["restartPolicy"] == "Never"
    assert "imagePullSecrets" not in spec and "volumes" not in spec
    (container,) = spec["containers"]
    assert container["name"] == "dev" and container["image"] == "nemo-rl:1"
    assert container["envFrom"] == [{"secretRef": {"name": "alice-secrets", "optional": True}}]
    assert {"name": "NRL_K8S_USER", "value": "alice"} in container["env"]  # ${user:} in the pod = outside
    assert container["command"] == ["/bin/sh", "-c", dev.STARTUP]
    requested = {**container["resources"]["requests"], **container["resources"]["limits"]}
    assert not [r for r in requested if "gpu" in r]
    assert "nvidia.com/gpu.product" in str(spec["affinity"])


def test_render_without_an_image_leaves_it_out():
    (container,) = dev.render(NAMES, None).pod["spec"]["containers"]
    assert "image" not in container


@pytest.mark.parametrize("image", ["", "nemo rl:1", " x"])
def test_a_bad_image_is_refused(image):
    with pytest.raises(ConfigError, match="--image"):
        dev.render(NAMES, image)


INFRA = {"namespace": "rl", "image": "nemo-rl:infra", "imagePullSecrets": ["nvcr", {"name": "other"}],
         "workspace": {"kind": "pvc", "pvcName": "ws", "mountPath": "/ws"},
         "hf_cache": {"kind": "hostPath", "mountPath": "/hf"}}


def test_render_for_an_infra_takes_its_image_pull_secrets_and_storage():
    pod = dev.render_for_infra(NAMES, None, INFRA).pod
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "nemo-rl:infra"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "nvcr"}, {"name": "other"}]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["workspace", "hf-cache"]
    assert container["volumeMounts"] == [
        {"name": "workspace", "mountPath": "/ws"},
        {"name": "hf-cache", "mountPath": "/hf"},
    ]
    assert {"name": "HF_HOME", "value": "/hf"} in container["env"]
    assert dev.render_for_infra(NAMES, "mine:2", INFRA).pod["spec"]["containers"][0]["image"] == "mine:2"


@pytest.mark.parametrize("user, namespace", [("Alice", "rl"), ("a" * 60, "rl"), ("alice", "RL"), ("alice", "")])
def test_names_that_kubernetes_refuses(user, namespace):
    with pytest.raises(ConfigError):
        dev.names_for(user, namespace)


# -- ownership -----------------------------------------------------------------------------------
def obj(labels: dict) -> dict:
    return {"metadata": {"name": "alice-secrets", "labels": labels}}


def test_only_objects_nrl_k8s_made_for_this_user_are_theirs():
    assert dev.refusal(secret.KIND, obj(OWNED), NAMES) is None
    other = dev.refusal(secret.KIND, obj({**MANAGED_BY, "nrl-k8s/owner": "bob"}), NAMES)
    assert other is not None and "Secret alice-secrets" in other.message and "bob" in other.message
    assert other.exit_code == 2
    for labels in ({}, {"nrl-k8s/owner": "alice"}, {**MANAGED_BY}):
        refused = dev.refusal(secret.KIND, obj(labels), NAMES)
        assert refused is not None and "not created by nrl-k8s" in refused.message


# -- the pod's command and the kubectl command ----------------------------------------------------
def test_the_startup_script_installs_the_ssh_key_and_ends_on_sigterm(tmp_path):
    """It ends with exit 0 on SIGTERM, and its ``sleep`` with it."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SSH_KEY_NAME": "id_test", "SSH_KEY_CONTENT": "KEY\nLINE"}
    process = subprocess.Popen(["/bin/sh", "-c", dev.STARTUP], env=env, start_new_session=True)
    try:
        key = tmp_path / ".ssh" / "id_test"
        eventually(lambda: key.is_file() and key.read_text() == "KEY\nLINE\n", what="the key installed")
        assert key.stat().st_mode & 0o077 == 0 and (tmp_path / ".ssh").stat().st_mode & 0o077 == 0
        eventually(lambda: "sleep" in _commands(process.pid), what="the script sleeping")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        eventually(lambda: group_members(process.pid) == [], what="its sleep ended with it")
    finally:
        process.kill()


def _commands(pgid: int) -> list[str]:
    """The command names of process group ``pgid``'s live members."""
    names = []
    for pid in group_members(pgid):
        with contextlib.suppress(OSError):
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
    return names


def test_exec_argv_is_an_argv_not_a_shell_line():
    command = ["sh", "-c", "echo 'a b'; exit 3"]
    assert dev.exec_argv("kubectl", NAMES, command, tty=False, context=None) == [
        "kubectl", "-n", "rl", "exec", "-i", "alice-dev-pod", "-c", "dev", "--", *command]
    shell = dev.exec_argv("/bin/kubectl", NAMES, None, tty=True, context="prod")
    assert shell[:7] == ["/bin/kubectl", "--context", "prod", "-n", "rl", "exec", "-i"] and "-t" in shell
    assert shell[shell.index("--") + 1:] == dev.SHELL


# -- setup-secrets values -------------------------------------------------------------------------
VALUE = "hf_s3cr3t"


def test_values_from_env_files_and_an_ssh_key(tmp_path):
    (tmp_path / "token").write_text(VALUE + "\n")
    (tmp_path / "crlf").write_bytes(b"v\r\n")
    (tmp_path / "id_ed25519").write_text("-----KEY-----\n")
    values = dev.secret_values(["HF_TOKEN"], [f"WANDB_API_KEY={tmp_path / 'token'}", f"X={tmp_path / 'crlf'}"],
                               str(tmp_path / "id_ed25519"), {"HF_TOKEN": VALUE})
    assert values == {"HF_TOKEN": VALUE, "WANDB_API_KEY": VALUE, "X": "v", "SSH_KEY_NAME": "id_ed25519",
                      "SSH_KEY_CONTENT": "-----KEY-----\n"}


@pytest.mark.parametrize("from_env, from_file, env", [
    ([], [], {}),  # nothing to store
    ([f"HF_TOKEN={VALUE}"], [], {}),  # NAME=VALUE out of habit
    (["HF_TOKEN"], [], {}),  # not set
    (["HF_TOKEN"], [], {"HF_TOKEN": ""}),  # empty
    (["HF-TOKEN"], [], {"HF-TOKEN": VALUE}),  # not an env name
    (["HF_TOKEN", "HF_TOKEN"], [], {"HF_TOKEN": VALUE}),  # twice
    ([], [VALUE], {}),  # a value where KEY=PATH belongs
    ([], [f"HF_TOKEN={VALUE}"], {}),  # a value where the path belongs: no such file
    ([], ["HF_TOKEN=/"], {}),  # a directory
], ids=["nothing", "name=value", "unset", "empty", "bad-name", "twice", "no-key", "value-as-path", "directory"])
def test_bad_values_are_refused_without_echoing_a_value(from_env, from_file, env):
    with pytest.raises(ConfigError) as refused:
        dev.secret_values(from_env, from_file, None, env)
    assert VALUE not in refused.value.message + (refused.value.hint or "")


def test_a_binary_file_is_refused(tmp_path):
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        dev.secret_values([], [f"K={tmp_path / 'bin'}"], None, {})
