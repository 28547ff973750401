"""Several RayClusters on one `sandbox up`, each with a real Ray head of its own: each head
Service's dashboard shows only its own jobs and packages, jobs run from their uploaded
working_dir with the head container's env, and a deleted RayCluster's jobs stop. Jobs go
through nrl-k8s's own dashboard client, as the CLI sends them."""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import sys
import zipfile

import pytest
from operator_helpers import await_endpoints, field, listening, proxy, ray_cluster_spec
from sandbox_harness import DEADLINE_S, Gate, eventually, observe, unique

from nrl_k8s.errors import DashboardError
from nrl_k8s.kube.connection import Connection, from_kubeconfig
from nrl_k8s.ray.dashboard import Dashboard
from nrl_k8s.relay.tunnel import request_head
from nrl_k8s_sandbox.ray_head import free_ports

SECRET = "head-secret"


def raycluster(name: str, head: dict | None = None) -> dict:
    spec = ray_cluster_spec(workers=0)
    spec["headGroupSpec"]["template"]["spec"]["containers"][0].update(head or {})
    if head and head.get("volumeMounts"):
        spec["headGroupSpec"]["template"]["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": SECRET}}]
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name}, "spec": spec}


def create_ready(custom, ns: str, body: dict) -> None:
    """Create the RayCluster; return once it is ready and its head Service has the head as a ready
    endpoint (the cluster's ``ready`` can come first)."""
    name = body["metadata"]["name"]
    custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", body)
    observe(custom.list_namespaced_custom_object, "ray.io", "v1", ns, "rayclusters",
            field_selector=f"metadata.name={name}",
            until=lambda o: field(o.get(name), "status", "state") == "ready")  # fmt: skip
    await_endpoints(custom.api_client, ns, f"{name}-head-svc")


@pytest.fixture(scope="module")
def clusters(api, core, custom):
    """Namespace, and RayClusters ``a`` (a head container with env, a secretKeyRef and a Secret
    volume) and ``b`` (defaults) in it."""
    ns = unique("heads")
    core.create_namespace({"metadata": {"name": ns}})
    core.create_namespaced_secret(
        ns, {"metadata": {"name": SECRET}, "stringData": {"value": "s3cr3t", "token": "tok-file"}}
    )
    a, b = unique("a"), unique("b")
    create_ready(custom, ns, raycluster(a, {
        "env": [{"name": "FROM_HEAD", "value": "head-a"}, {"name": "MINE", "value": "head"},
                {"name": "SECRET_VALUE", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "value"}}},
                {"name": "TOKEN_FILE", "value": "/etc/creds/token"}],
        "volumeMounts": [{"name": "creds", "mountPath": "/etc/creds", "readOnly": True}],
    }))  # fmt: skip
    create_ready(custom, ns, raycluster(b))
    yield ns, a, b
    core.delete_namespace(ns)


@pytest.fixture(scope="module")
def connection(sandbox) -> Connection:
    """How nrl-k8s reaches the sandbox: its own connection from the sandbox's kubeconfig."""
    return from_kubeconfig(str(sandbox.kubeconfig), None)[0]


def dashboard(connection: Connection, ns: str, cluster: str) -> Dashboard:
    return Dashboard.via_api_proxy(connection, f"{cluster}-head-svc", ns, timeout_s=60)


def finished(dash: Dashboard, submission_id: str) -> tuple[str, str]:
    """The job's whole log and final status, read through the dashboard client."""
    text = "".join(dash.follow_logs(submission_id, deadline_s=DEADLINE_S))
    return text, dash.get_job(submission_id).status


def package(files: dict[str, str]) -> tuple[str, bytes]:
    """A working_dir package as `ray job submit --working-dir` uploads it: (its name, the zip)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in sorted(files.items()):
            archive.writestr(path, text)
    data = buffer.getvalue()
    return f"_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip", data


def test_each_head_service_shows_only_its_own_jobs(connection, api, clusters, tmp_path):
    ns, a, b = clusters
    gate = Gate(tmp_path)
    with dashboard(connection, ns, a) as dash_a, dashboard(connection, ns, b) as dash_b:
        job_a = dash_a.submit(gate.entrypoint("echo from-a"), submission_id=unique("job-a"), metadata={"k": "v"})
        job_b = dash_b.submit("echo from-b", submission_id=unique("job-b"))

        assert [j.submission_id for j in dash_a.list_jobs()] == [job_a]
        assert [j.submission_id for j in dash_b.list_jobs()] == [job_b]
        assert dash_a.get_job(job_a).metadata == {"k": "v"}  # the sandbox's tag is not shown
        assert dash_a.get_job(job_b) is None
        for method, path in [("GET", f"api/jobs/{job_a}"), ("GET", f"api/jobs/{job_a}/logs"),
                             ("POST", f"api/jobs/{job_a}/stop"), ("DELETE", f"api/jobs/{job_a}")]:  # fmt: skip
            code, body = proxy(api, method, ns, f"{b}-head-svc:8265", path)
            assert (code, body.decode()) == (404, f"Job {job_a} does not exist"), (method, path)
        with pytest.raises(DashboardError, match=f"no job {job_a}"):
            next(dash_b.follow_logs(job_a))  # the log tail websocket (an upgrade request) likewise
        assert dash_a.get_job(job_a).status in ("PENDING", "RUNNING")  # the 404s touched nothing

        gate.open()
        for dash, job, output in ((dash_a, job_a, "from-a\n"), (dash_b, job_b, "from-b\n")):
            text, status = finished(dash, job)
            assert status == "SUCCEEDED" and output in text, text
        # Ids are per cluster, as with separate heads: b may use the id a used.
        assert dash_b.submit("echo again", submission_id=job_a) == job_a
        text, status = finished(dash_b, job_a)
        assert status == "SUCCEEDED" and "again\n" in text and dash_a.get_job(job_a).status == "SUCCEEDED"


def test_the_log_tail_websocket_reaches_only_the_clusters_own_job(connection, clusters):
    """An upgrade through a head Service's proxy is scoped like its other job calls; sent on nrl-k8s's
    own upgraded connection (TLS to the sandbox, its credentials)."""
    ns, a, b = clusters
    with dashboard(connection, ns, a) as dash:
        job = dash.submit("echo tailed")
        assert finished(dash, job)[1] == "SUCCEEDED"

    def answer(cluster: str) -> bytes:
        sock = connection.open_socket(DEADLINE_S)
        with sock:
            path = f"/api/v1/namespaces/{ns}/services/{cluster}-head-svc:8265/proxy/api/jobs/{job}/logs/tail"
            headers = [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
                       ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), *connection.headers().items()]
            sock.sendall(request_head("GET", path, connection.host.split("//")[1], headers))
            reply = sock.makefile("rb")
            head = b"".join(iter(reply.readline, b"\r\n"))
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            return head + b"\r\n" + reply.read(length)

    assert answer(a).startswith(b"HTTP/1.1 101 Switching Protocols")
    refused = answer(b)
    assert refused.startswith(b"HTTP/1.1 404 ") and refused.endswith(f"Job {job} does not exist".encode())


def test_a_package_exists_only_for_the_cluster_it_was_uploaded_through(api, clusters):
    ns, a, b = clusters
    name, data = package({"x.txt": unique("content")})
    assert proxy(api, "GET", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}")[0] == 404
    assert proxy(api, "PUT", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}", data)[0] == 200
    assert proxy(api, "GET", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}")[0] == 200
    assert proxy(api, "GET", ns, f"{b}-head-svc:dashboard", f"api/packages/gcs/{name}")[0] == 404


def test_a_job_runs_in_its_uploaded_working_dir_with_the_head_containers_env(connection, api, clusters):
    ns, a, _ = clusters
    recipe = f"grpo:\n  run: {unique('recipe')}\n"
    name, data = package({"nrl_k8s_run.yaml": recipe, "code/uploaded.txt": "an uploaded file\n"})
    assert proxy(api, "PUT", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}", data)[0] == 200
    entrypoint = 'cat nrl_k8s_run.yaml code/uploaded.txt; echo "$FROM_HEAD $MINE $SECRET_VALUE"; cat "$TOKEN_FILE"'
    with dashboard(connection, ns, a) as dash:
        job = dash.submit(entrypoint, runtime_env={"working_dir": f"gcs://{name}", "env_vars": {"MINE": "job"}})
        text, status = finished(dash, job)
        details = dash.get_job(job)
    assert status == "SUCCEEDED", text
    # Ray interleaves lines of its own with the driver's output
    assert all(part in text for part in (recipe, "an uploaded file\n", "head-a job s3cr3t\n", "tok-file")), text
    assert "s3cr3t" not in json.dumps(details.metadata)  # nor the added env in what the client is shown
    code, body = proxy(api, "GET", ns, f"{a}-head-svc:8265", f"api/jobs/{job}")
    assert code == 200 and json.loads(body)["runtime_env"]["env_vars"] == {"MINE": "job"}


def test_a_package_of_almost_100_mib_passes_the_proxy(api, clusters):
    ns, a, _ = clusters
    data = bytes(100 * 1024 * 1024 - 1024)  # Ray's dashboard takes bodies under 100 MiB
    name = f"_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip"
    code, body = proxy(api, "PUT", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}", data)
    assert code == 200, body[:500]
    assert proxy(api, "GET", ns, f"{a}-head-svc:8265", f"api/packages/gcs/{name}")[0] == 200


def test_a_daemon_on_the_head_is_reached_through_its_port_and_stops_with_its_raycluster(
    connection, api, core, custom, clusters, tmp_path
):
    ns, _, _ = clusters
    name, (port,) = unique("daemon"), free_ports(1)
    # KubeRay's head Service carries the ports the head container declares (Ray's own only when
    # none are) and its metrics port: declare Ray's with the daemon's, as nrl-k8s's rendering does
    ports = {"dashboard": 8265, "client": 10001, "gcs-server": 6379, "web": port}
    create_ready(custom, ns, raycluster(name, {"ports": [{"containerPort": n, "name": k} for k, n in ports.items()]}))
    service = core.read_namespaced_service(f"{name}-head-svc", ns)
    assert ports.items() <= {p.name: p.port for p in service.spec.ports}.items()
    (tmp_path / "index.html").write_text("served by the daemon\n")
    # pods share this machine's network: the sandbox serves the head's port on a free one it names
    served = f"$NRL_K8S_SANDBOX_PORT_{port}"
    server = f"echo {served} > {shlex.quote(str(tmp_path / 'port'))}; exec " + shlex.join(
        [sys.executable, "-m", "http.server", "PORT", "--bind", "127.0.0.1", "--directory", str(tmp_path)]
    ).replace("PORT", served)
    with dashboard(connection, ns, name) as dash:
        daemon = dash.submit(server, submission_id=unique("daemon"))
        body = eventually(lambda: (reply := proxy(api, "GET", ns, f"{name}-head-svc:web", "index.html"))[0] == 200
                          and reply[1],
                          what="the daemon answering through the head Service")  # fmt: skip
        assert body == b"served by the daemon\n"
        assert dash.get_job(daemon).status == "RUNNING"

    custom.delete_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
    # its head went with the RayCluster's pod, and took the daemon with it
    local = int((tmp_path / "port").read_text())
    eventually(lambda: not listening(local), what="the daemon stopped with its RayCluster")

