"""`dev setup-secrets | connect | stop` against the sandbox, through the installed CLI.

In the sandbox kwok plays the dev pod (Running, nothing executes in it), and kwok's kubelet
answers `kubectl exec` into such a pod with an error: only Ray heads, Job pods and stubs are
local processes (sandbox/controlplane/kubelet.py). So what runs the COMMAND is a
stand-in `kubectl` on PATH that records its argv and exits 7: the tests check the command
nrl-k8s hands to kubectl and that its exit code is passed on. The RBAC is checked through the
API server: `kubectl auth can-i --as` the dev pod's ServiceAccount with the admin kubeconfig, and
nrl-k8s itself run with that ServiceAccount's token, as it would run inside the pod.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from sandbox_harness import NRL_K8S, eventually, run_cli, unique

from nrl_k8s.ops.dev import SHELL, role_rules

ROOT = Path(__file__).resolve().parents[2]
MANAGED = {"app.kubernetes.io/managed-by": "nrl-k8s"}
HF, WANDB, PIPED = "hf_s3cr3t_" + unique("v"), "wandb_s3cr3t_" + unique("v"), "piped_s3cr3t_" + unique("v")
VALUES = (HF, WANDB, PIPED)


class User:
    """One user of the sandbox: runs the CLI as them, with a stand-in kubectl first on PATH."""

    def __init__(self, sandbox, namespace: str, tmp_path: Path):
        self.name, self.ns, self.sandbox = unique("u"), namespace, sandbox
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.argv_file = tmp_path / "kubectl-argv.json"
        kubectl = self.bin / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\nimport json, sys\n"
                           f"json.dump(sys.argv[1:], open({str(self.argv_file)!r}, 'w'))\nsys.exit(7)\n")
        kubectl.chmod(0o755)
        self.env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(tmp_path / "home"), "NRL_K8S_USER": self.name,
                    "KUBECONFIG": str(sandbox.kubeconfig), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        self.printed = ""  # everything every command printed, to look for values
        self.core = client.CoreV1Api(sandbox.api_client())
        self.rbac = client.RbacAuthorizationV1Api(sandbox.api_client())

    @property
    def secret(self) -> str:
        return f"{self.name}-secrets"

    @property
    def account(self) -> str:
        return f"{self.name}-dev"

    @property
    def pod(self) -> str:
        return f"{self.name}-dev-pod"

    def __call__(self, *args: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
        full_env = {**self.env, **(env or {})}
        if stdin is None:
            result = run_cli(list(args), env=full_env)
        else:
            result = subprocess.run(
                [NRL_K8S, *args], input=stdin, capture_output=True, text=True, env=full_env, timeout=300
            )
        self.printed += result.stdout + result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def can(self, verb: str, resource: str, *, namespace: str | None = None) -> bool:
        """`kubectl auth can-i ... --as` the dev pod's ServiceAccount, asked with the admin kubeconfig;
        ``resource`` may name a subresource (``pods/exec``: kubectl would read ``exec`` as an object name)."""
        resource, _, sub = resource.partition("/")
        answer = self.sandbox.kubectl(
            "--kubeconfig",
            self.sandbox.info["admin_kubeconfig"],
            "auth",
            "can-i",
            verb,
            resource,
            *([f"--subresource={sub}"] if sub else []),
            "-n",
            namespace or self.ns,
            f"--as=system:serviceaccount:{self.ns}:{self.account}",
            check=False,
        )
        assert answer.returncode in (0, 1), answer.stderr
        return answer.returncode == 0

    def as_service_account(self, tmp_path: Path) -> dict:
        """The env of nrl-k8s run with the dev pod's ServiceAccount token (what it gets in the pod)."""
        token = self.sandbox.kubectl("-n", self.ns, "create", "token", self.account).stdout.strip()
        config = yaml.safe_load(Path(self.sandbox.kubeconfig).read_text())
        context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
        context["context"]["user"] = "dev-pod"
        config["users"] = [{"name": "dev-pod", "user": {"token": token}}]
        path = tmp_path / "dev-pod.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return {"KUBECONFIG": str(path)}


@pytest.fixture
def user(sandbox, sandbox_namespace, tmp_path) -> User:
    return User(sandbox, sandbox_namespace, tmp_path)


def no_value_printed(user: User) -> None:
    assert not [v for v in VALUES if v in user.printed]


def infra_reading_the_secret(tmp_path: Path, namespace: str) -> Path:
    """An infra like upstream's: the sandbox example's, its DGD worker reading ${user:}-secrets."""
    path = tmp_path / "dev.infra.yaml"
    path.write_text(f"defaults: {ROOT / 'examples/sandbox.infra.yaml'}\nnamespace: {namespace}\n"
                    "dynamo:\n  serving:\n    overrides:\n      services:\n"
                    "        VllmDecodeWorker: {envFromSecret: '${user:}-secrets'}\n")
    return path


# -- setup-secrets ----------------------------------------------------------------------------------
def test_setup_secrets_makes_the_secret_a_dgd_reads_and_never_prints_a_value(user, tmp_path):
    token = tmp_path / "wandb"
    token.write_text(WANDB + "\n")
    first = user(
        "dev",
        "setup-secrets",
        "-n",
        user.ns,
        "--from-env",
        "HF_TOKEN",
        "--from-file",
        f"WANDB_API_KEY={token}",
        env={"HF_TOKEN": HF},
    )
    assert first.returncode == 0, first.stderr
    assert "HF_TOKEN" in first.stdout and "WANDB_API_KEY" in first.stdout and user.secret in first.stdout
    piped = user("dev", "setup-secrets", "-n", user.ns, "--from-file", "PIPED=/dev/stdin", stdin=PIPED + "\n")
    assert piped.returncode == 0, piped.stderr

    secret = user.core.read_namespaced_secret(user.secret, user.ns)
    assert secret.metadata.labels == {**MANAGED, "nrl-k8s/owner": user.name} and secret.type == "Opaque"
    assert {k: base64.b64decode(v).decode() for k, v in secret.data.items()} == {
        "HF_TOKEN": HF, "WANDB_API_KEY": WANDB, "PIPED": PIPED}  # merged, one final newline dropped

    # A DGD written as upstream's are (envFromSecret: ${user:}-secrets) reads it: the operator's
    # Deployment for the worker takes its env from the Secret.
    infra = infra_reading_the_secret(tmp_path, user.ns)
    up = user("cluster", "up", "-t", "dynamo.serving", str(ROOT / "examples/sandbox.yaml"), "--infra", str(infra))
    assert up.returncode == 0, up.stderr
    dgd = f"{user.name}-sandbox-dgd"
    deployment = client.AppsV1Api(user.sandbox.api_client()).read_namespaced_deployment(
        f"{dgd}-vllmdecodeworker", user.ns
    )
    main = next(c for c in deployment.spec.template.spec.containers if c.name == "main")
    assert [ref.secret_ref.name for ref in main.env_from] == [user.secret]
    pods = user.core.list_namespaced_pod(user.ns, label_selector=f"nvidia.com/dynamo-graph-deployment-name={dgd},"
                                                                 "nvidia.com/dynamo-component-type=worker").items
    assert pods and all(any(ref.secret_ref and ref.secret_ref.name == user.secret
                            for c in p.spec.containers for ref in c.env_from or []) for p in pods)
    assert (
        user(
            "cluster", "down", "-t", "dynamo.serving", str(ROOT / "examples/sandbox.yaml"), "--infra", str(infra)
        ).returncode
        == 0
    )
    no_value_printed(user)


@pytest.mark.parametrize(
    "args",
    [
        ["dev", "setup-secrets", f"HF_TOKEN={HF}"],  # upstream's NAME=VALUE arguments (shell history, `ps`)
        ["dev", "setup-secrets", "--from-env", f"HF_TOKEN={HF}"],
        ["dev", "setup-secrets", "--from-env", "NOT_SET_ANYWHERE"],
        ["dev", "setup-secrets", "--from-file", HF],
        ["dev", "setup-secrets"],
        ["dev", "connect", "--image", ""],
        ["dev", "stop", "-n", "Not_A_Namespace"],
        ["-n", "one", "dev", "stop", "-n", "another"],
        ["dev", "connect", "--infra", "/nonexistent/infra.yaml"],
    ],
    ids=[
        "name=value",
        "from-env name=value",
        "unset",
        "value as file",
        "nothing",
        "image",
        "namespace",
        "two namespaces",
        "infra",
    ],
)
def test_bad_input_is_refused_before_connecting_and_never_echoes_a_value(args):
    """Exit 2 with one error line and a hint, no cluster needed (there is none here)."""
    env = {"PATH": "/usr/bin:/bin", "NRL_K8S_USER": "nobody", "KUBECONFIG": "/nonexistent"}
    result = run_cli(args, env=env)
    assert result.returncode == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error.startswith("error: ") and hint.startswith("hint: ")
    assert HF not in result.stdout + result.stderr


# -- connect and stop -------------------------------------------------------------------------------
def test_connect_starts_the_dev_pod_with_working_rbac_and_stop_removes_it(user, tmp_path):
    no_image = user("dev", "connect", "-n", user.ns)  # nothing to reuse and no image: bad input, nothing applied
    assert no_image.returncode == 2 and "--image" in no_image.stderr
    assert (
        user.core.list_namespaced_service_account(user.ns, field_selector=f"metadata.name={user.account}").items == []
    )

    command = ["sh", "-c", "echo 'a b' && exit 3"]
    connected = user("dev", "connect", "-n", user.ns, "--image", "busybox:1.36", "--", *command)
    assert connected.returncode == 7, connected.stderr  # the stand-in kubectl's exit code is ours
    assert json.loads(user.argv_file.read_text()) == [
        "-n",
        user.ns,
        "exec",
        "-i",
        user.pod,
        "-c",
        "dev",
        "--",
        *command,
    ]

    pod = user.core.read_namespaced_pod(user.pod, user.ns)
    assert pod.status.phase == "Running"
    assert pod.metadata.labels["nrl-k8s/owner"] == user.name and pod.spec.service_account_name == user.account
    (container,) = pod.spec.containers
    assert container.image == "busybox:1.36" and not (container.resources.limits or {}).get("nvidia.com/gpu")
    assert [(ref.secret_ref.name, ref.secret_ref.optional) for ref in container.env_from] == [(user.secret, True)]
    binding = user.rbac.read_namespaced_role_binding(user.account, user.ns)
    assert binding.role_ref.name == user.account and binding.metadata.labels["nrl-k8s/owner"] == user.name

    # What nrl-k8s calls is allowed to the pod's ServiceAccount; the rest is not.
    for verb, resource in [
        ("create", "rayjobs.ray.io"),
        ("watch", "rayclusters.ray.io"),
        ("patch", "dynamographdeployments.nvidia.com"),
        ("create", "resourceclaimtemplates.resource.k8s.io"),
        ("delete", "computedomains.resource.nvidia.com"),
        ("create", "secrets"),
        ("list", "pods"),
        ("get", "pods/log"),
        ("create", "pods/exec"),
        ("create", "services/proxy"),
        ("delete", "configmaps"),
        ("list", "events"),
        ("create", "deployments.apps"),
    ]:
        eventually(
            lambda verb=verb, resource=resource: user.can(verb, resource), what=f"{verb} {resource} allowed"
        )  # RBAC's cache follows a watch
    for verb, resource, namespace in [
        ("create", "rolebindings.rbac.authorization.k8s.io", None),
        ("delete", "pods", None),
        ("create", "pods/portforward", None),
        ("create", "rayjobs.ray.io", "default"),
        ("create", "namespaces", None),
    ]:
        assert not user.can(verb, resource, namespace=namespace), f"{verb} {resource} {namespace}"

    # nrl-k8s itself, with the pod's identity: `check` verifies every permission a run needs.
    infra = infra_reading_the_secret(tmp_path, user.ns)
    checked = user(
        "check", str(ROOT / "examples/sandbox.yaml"), "--infra", str(infra), env=user.as_service_account(tmp_path)
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "RBAC create rayjobs.ray.io" in checked.stdout and "denied" not in checked.stdout

    # Again without kubectl on PATH: the running pod is reused (no image needed) and the command printed.
    (tmp_path / "empty").mkdir()
    no_kubectl = {"PATH": str(tmp_path / "empty")}
    printed = user("dev", "connect", "-n", user.ns, env=no_kubectl)
    assert printed.returncode == 0, printed.stderr
    assert shlex.split(printed.stdout) == ["kubectl", "-n", user.ns, "exec", "-i", user.pod, "-c", "dev", "--", *SHELL]
    assert user("dev", "connect", "-n", user.ns, "--", "true", env=no_kubectl).returncode == 1
    assert user.core.read_namespaced_pod(user.pod, user.ns).metadata.uid == pod.metadata.uid

    # A Role an older nrl-k8s made (other rules) is brought up to date by the next connect.
    user.rbac.patch_namespaced_role(user.account, user.ns, {"rules": [{"apiGroups": [""], "resources": ["pods"],
                                                                       "verbs": ["get"]}]})
    assert user("dev", "connect", "-n", user.ns, env=no_kubectl).returncode == 0
    role = json.loads(user.rbac.read_namespaced_role(user.account, user.ns, _preload_content=False).data)
    assert role["rules"] == role_rules()

    stopped = user("dev", "stop", "-n", user.ns)
    assert stopped.returncode == 0, stopped.stderr
    assert f"deleted: Pod {user.pod}" in stopped.stdout and f"kept: ServiceAccount {user.account}" in stopped.stdout
    assert user.core.list_namespaced_pod(user.ns, field_selector=f"metadata.name={user.pod}").items == []
    assert user.rbac.read_namespaced_role(user.account, user.ns)
    everything = user("dev", "stop", "-n", user.ns, "--all")
    assert everything.returncode == 0 and f"deleted: Role {user.account}" in everything.stdout
    assert user.rbac.list_namespaced_role(user.ns, field_selector=f"metadata.name={user.account}").items == []
    assert "no dev pod" in user("dev", "stop", "-n", user.ns).stdout


# -- other owners ---------------------------------------------------------------------------------
def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    first, *rest = result.stderr.splitlines()
    assert first.startswith("error: ") and all(w in first for w in words), result.stderr
    assert [line for line in rest if not line.startswith("hint: ")] == []


def test_objects_of_another_owner_are_never_touched(user, tmp_path):
    core = user.core
    core.create_namespaced_secret(user.ns, {"metadata": {"name": user.secret}, "stringData": {"OLD": "kept"}})
    refused(user("dev", "setup-secrets", "-n", user.ns, "--from-env", "HF_TOKEN", env={"HF_TOKEN": HF}),
            f"Secret {user.secret}", "not created by nrl-k8s")
    core.patch_namespaced_secret(user.secret, user.ns, {"metadata": {"labels": {**MANAGED, "nrl-k8s/owner": "bob"}}})
    refused(user("dev", "setup-secrets", "-n", user.ns, "--from-env", "HF_TOKEN", env={"HF_TOKEN": HF}),
            f"Secret {user.secret}", "bob")
    assert set(core.read_namespaced_secret(user.secret, user.ns).data) == {"OLD"}

    core.create_namespaced_service_account(user.ns, {"metadata": {"name": user.account}})
    refused(user("dev", "connect", "-n", user.ns, "--image", "busybox:1.36"), f"ServiceAccount {user.account}")
    assert user.rbac.list_namespaced_role(user.ns, field_selector=f"metadata.name={user.account}").items == []
    assert core.list_namespaced_pod(user.ns, field_selector=f"metadata.name={user.pod}").items == []

    core.delete_namespaced_service_account(user.account, user.ns)
    core.create_namespaced_pod(user.ns, {"metadata": {"name": user.pod, "labels": {**MANAGED, "nrl-k8s/owner": "bob"}},
                                         "spec": {"containers": [{"name": "dev", "image": "busybox:1.36"}]}})
    refused(user("dev", "stop", "-n", user.ns), f"Pod {user.pod}", "bob")
    refused(user("dev", "connect", "-n", user.ns), f"Pod {user.pod}", "bob")
    assert core.read_namespaced_pod(user.pod, user.ns).metadata.labels["nrl-k8s/owner"] == "bob"
    assert (
        user.core.list_namespaced_service_account(user.ns, field_selector=f"metadata.name={user.account}").items == []
    )
    no_value_printed(user)
