"""kubectl against the sandbox, as a user types it: the everyday commands a cluster serves (exec
with stdin, cp, logs, port-forward, explain, auth, nodes, scale) and the refusals a real API
server makes (strict field validation, a mistyped field). An exec'd shell gets what the head reads
from a Secret, which no API object holds (issue 30)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import httpx
import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, eventually, observe, unique

from nrl_k8s_sandbox.controlplane import binaries
from nrl_k8s_sandbox.ray_head import free_ports

RAYCLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: {name}, namespace: {ns}}}
spec:
  headGroupSpec:
    rayStartParams: {{}}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
          env:
          - {{name: GREETING, value: hello-from-the-head}}
          - {{name: HEAD_TOKEN, valueFrom: {{secretKeyRef: {{name: head-secret, key: token}}}}}}
          ports: [{{containerPort: 8265, name: dashboard}}]
"""


HEAD_SECRET = f"head-s3cr3t-{uuid.uuid4().hex[:8]}"  # the head reads it by secretKeyRef


@pytest.fixture(scope="module")
def namespace(sandbox):
    name = unique("kc")
    sandbox.kubectl("create", "namespace", name)
    sandbox.kubectl("create", "secret", "generic", "head-secret", "-n", name, f"--from-literal=token={HEAD_SECRET}")
    yield name
    sandbox.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture(scope="module")
def head(sandbox, namespace) -> str:
    """A RayCluster made by the real KubeRay operator; the name of its (Ready) head pod."""
    name = unique("rc")
    sandbox.kubectl("apply", "-f", "-", stdin=RAYCLUSTER.format(name=name, ns=namespace))
    with sandbox.api_client() as api:
        pods = observe(client.CoreV1Api(api).list_namespaced_pod, namespace,
                       label_selector=f"ray.io/cluster={name},ray.io/node-type=head",
                       until=lambda pods: any(c["type"] == "Ready" and c["status"] == "True"
                                              for p in pods.values() for c in p["status"].get("conditions") or []))
    return next(iter(pods))


def test_version_is_the_built_one(sandbox):
    report = json.loads(sandbox.kubectl("version", "-o", "json").stdout)
    assert report["serverVersion"]["gitVersion"] == binaries.KUBERNETES
    assert report["clientVersion"]["gitVersion"] == binaries.KUBERNETES


def test_get_nodes_shows_gpu_nodes(sandbox):
    nodes = json.loads(sandbox.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    gpu = [n for n in nodes if n["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-GB300"]
    assert gpu and all(n["status"]["capacity"]["nvidia.com/gpu"] == "4" for n in gpu)
    assert all(c["status"] == "True" for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready")
    table = sandbox.kubectl("get", "nodes").stdout
    assert table.split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]


def test_explain_rayjob_spec(sandbox):
    text = sandbox.kubectl("explain", "rayjob.spec").stdout
    assert "entrypoint" in text and "submissionMode" in text


def test_auth_whoami_and_can_i_list(sandbox):
    assert "nrl-k8s-user" in sandbox.kubectl("auth", "whoami").stdout
    rules = sandbox.kubectl("auth", "can-i", "--list").stdout
    assert "*.*" in rules  # the sandbox user is bound to cluster-admin by RBAC


def test_strict_field_validation_refuses_unknown_fields(sandbox, namespace):
    bad = RAYCLUSTER.format(name=unique("rc"), ns=namespace).replace(
        "rayStartParams: {}", "rayStartParams: {}\n    bogusField: 1"
    )
    result = sandbox.kubectl("apply", "--validate=strict", "-f", "-", stdin=bad, check=False)
    assert result.returncode != 0 and "bogusField" in result.stderr


def test_mistyped_field_is_refused(sandbox, namespace):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": unique("d"), "namespace": namespace},
                  "spec": {"replicas": "two", "selector": {"matchLabels": {"a": "b"}},
                           "template": {"metadata": {"labels": {"a": "b"}},
                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    result = sandbox.kubectl("apply", "-f", "-", stdin=json.dumps(deployment), check=False)
    assert result.returncode != 0
    assert sandbox.kubectl("get", "deploy", "-n", namespace, "-o", "name").stdout.strip() == ""


def test_scale_deployment(sandbox, namespace):
    name = unique("d")
    sandbox.kubectl("create", "deployment", name, "-n", namespace, "--image=busybox", "--replicas=1")
    sandbox.kubectl("scale", f"deployment/{name}", "-n", namespace, "--replicas=3")
    with sandbox.api_client() as api:
        observe(client.AppsV1Api(api).list_namespaced_deployment, namespace, field_selector=f"metadata.name={name}",
                until=lambda ds: ds.get(name, {}).get("status", {}).get("readyReplicas") == 3)
    assert name in sandbox.kubectl("get", "deploy", "-n", namespace).stdout


def test_exec_into_the_head_pod(sandbox, namespace, head):
    result = sandbox.kubectl(
        "exec",
        "-n",
        namespace,
        head,
        "--",
        "sh",
        "-c",
        'echo "$GREETING"; python -c "import ray; ray.init(); print(\'alive\', len(ray.nodes()))"',
    )
    assert "hello-from-the-head" in result.stdout
    assert "alive 1" in result.stdout  # the driver reached the pod's own Ray head


SHELLS = {
    "bash -c": (["bash", "-c", 'echo "token=$HEAD_TOKEN"'], None),
    "a bash script sh starts": (["sh", "-c", 'echo "echo token=\\$HEAD_TOKEN" > s.sh && bash s.sh; rm -f s.sh'],
                                None),  # the exec submitter's way: sh, then bash driver.sh
    "interactive bash": (["bash", "-i"], 'echo "token=$HEAD_TOKEN"\n'),
    "interactive sh": (["sh", "-i"], 'echo "token=$HEAD_TOKEN"\n'),
}


@pytest.mark.parametrize(("command", "stdin"), SHELLS.values(), ids=SHELLS)
def test_an_exec_shell_gets_what_the_head_reads_from_a_secret_and_no_exec_object_holds_it(
        sandbox, namespace, head, command, stdin):
    result = sandbox.kubectl("exec", *(["-i"] if stdin else []), "-n", namespace, head, "--", *command, stdin=stdin)
    assert f"token={HEAD_SECRET}" in result.stdout, result.stdout + result.stderr
    execs = sandbox.kubectl("get", "execs.kwok.x-k8s.io", "-n", namespace, "-o", "json").stdout
    assert "hello-from-the-head" in execs and HEAD_SECRET not in execs


def test_exec_passes_stdin_and_its_end(sandbox, namespace, head):
    """`kubectl exec -i` ends when its stdin does, as on a cluster: `kubectl cp` rests on it."""
    result = sandbox.kubectl("exec", "-i", "-n", namespace, head, "--", "cat", stdin="through stdin\n")
    assert result.stdout == "through stdin\n"


def test_cp_a_file_into_the_head_pod_and_back(sandbox, namespace, head, tmp_path):
    (tmp_path / "sent.txt").write_text("copied in\n")
    folder = sandbox.kubectl("exec", "-n", namespace, head, "--", "mktemp", "-d").stdout.strip()
    sandbox.kubectl("cp", "-n", namespace, str(tmp_path / "sent.txt"), f"{head}:{folder}/sent.txt")
    sandbox.kubectl("cp", "-n", namespace, f"{head}:{folder}/sent.txt", str(tmp_path / "back.txt"))
    assert (tmp_path / "back.txt").read_text() == "copied in\n"
    sandbox.kubectl("exec", "-n", namespace, head, "--", "rm", "-r", folder)


def test_logs_of_the_head_pod(sandbox, namespace, head):
    text = eventually(lambda: sandbox.kubectl("logs", "-n", namespace, head, check=False).stdout,
                      what="the head pod's log")
    assert "Ray runtime started" in text


def test_port_forward_to_the_head_service(sandbox, namespace, head):
    cluster = head.rsplit("-head-", 1)[0]
    port = free_ports(1)[0]
    kubectl = str(sandbox.info["bin"]) + "/kubectl"
    forward = subprocess.Popen([kubectl, "port-forward", "-n", namespace, f"svc/{cluster}-head-svc", f"{port}:8265"],
                               env={**os.environ, "KUBECONFIG": str(sandbox.kubeconfig)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "Forwarding from" in forward.stdout.readline()

        def version():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/version", timeout=10).json()
            except httpx.HTTPError:
                return None
        assert eventually(version, what="the dashboard through port-forward")["ray_version"]
    finally:
        forward.terminate()
        forward.wait(DEADLINE_S)
