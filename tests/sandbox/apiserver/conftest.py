"""Fixtures: an in-process sandbox ApiServer on a free loopback port and official clients for it."""

from __future__ import annotations

import base64
import shutil
import subprocess

import httpx
import pytest
import yaml
from kubernetes import client
from sandbox_harness import DEADLINE_S

from nrl_k8s.sandbox.apiserver import ApiServer
from nrl_k8s.sandbox.crds import ALL_CRDS
from nrl_k8s.sandbox.faults import Faults

USER_TOKEN = "user-token"
OPERATOR_TOKEN = "operator-token"


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def pod_logs():
    """Where ``pods/log`` reads from (None: the server's default); a test module may override it."""
    return None


@pytest.fixture
def server(faults: Faults, pod_logs):
    api_server = ApiServer(user_token=USER_TOKEN, operator_token=OPERATOR_TOKEN, faults=faults, history_size=50,
                           pod_logs=pod_logs)
    port = api_server.start()
    api_server.url = f"http://127.0.0.1:{port}"
    yield api_server
    api_server.stop()


def make_client(server: ApiServer, token: str | None = USER_TOKEN) -> client.ApiClient:
    config = client.Configuration(host=server.url, api_key={"authorization": f"Bearer {token}"} if token else {})
    return client.ApiClient(config)


@pytest.fixture
def client_for(server: ApiServer):
    """Build an ApiClient for ``token`` ("user", "operator", None or any other string)."""
    tokens = {"user": USER_TOKEN, "operator": OPERATOR_TOKEN}
    made = []

    def build(token: str | None) -> client.ApiClient:
        made.append(make_client(server, tokens.get(token, token)))
        return made[-1]

    yield build
    for api_client in made:
        api_client.close()


@pytest.fixture
def http(server: ApiServer):
    """An httpx client on the server with the user token, for calls the official client cannot make."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {USER_TOKEN}"}) as session:
        yield session


@pytest.fixture
def api(server: ApiServer):
    with make_client(server) as api_client:
        yield api_client


@pytest.fixture
def operator_api(server: ApiServer):
    with make_client(server, OPERATOR_TOKEN) as api_client:
        yield api_client


@pytest.fixture
def core(api) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
def crds(server: ApiServer) -> None:
    for crd in ALL_CRDS:
        server.install_crd(crd)


@pytest.fixture
def kubectl(server, tmp_path):
    """Run the real kubectl (TLS, user token) against ``server``; its stdout (it must succeed)."""
    port = server.url.rsplit(":", 1)[1]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": {"server": f"https://127.0.0.1:{port}", "certificate-authority-data": base64.b64encode(server.ca_pem).decode()}}],
        "users": [{"name": "user", "user": {"token": "user-token"}}],
        "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": "user", "namespace": "default"}}],
        "current-context": "sandbox",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    base = [shutil.which("kubectl"), "--kubeconfig", str(path), "--cache-dir", str(tmp_path / "cache")]

    def raw(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(base + list(args), input=stdin, capture_output=True, text=True, timeout=DEADLINE_S)

    def run(*args: str, stdin: str | None = None) -> str:
        done = raw(*args, stdin=stdin)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run.base = base
    run.raw = raw  # the CompletedProcess, whatever the exit code
    return run
