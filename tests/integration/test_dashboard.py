"""`nrl-k8s dashboard` against the sandbox, as a subprocess: the Ray dashboard of a RayJob's cluster
(HTTP and the job log tail websocket), a DGD's OpenAI frontend, Ctrl-C, and bad flags. The printed URL
carries the session's token: opened as a browser opens it, it logs the client in (a cookie); without
the token nothing is relayed."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from kubernetes import client
from sandbox_harness import DEADLINE_S, NRL_K8S, Gate, eventually, interruptible, observe, run_cli

ROOT = Path(__file__).resolve().parents[2]
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]


@pytest.fixture
def cli(sandbox, sandbox_namespace):
    job = f"d-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig), "NRL_K8S_USER": "it"}
    names = [f"infra.namespace={sandbox_namespace}", f"infra.kuberay.training.name={job}",
             f"infra.dynamo.serving.name={job}-dgd"]

    def invoke(*args: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        return run_cli([*args, *PAIR, *names, *extra], env=env,
                              timeout=DEADLINE_S)

    @contextlib.contextmanager
    def dashboard(*args: str, extra_env: dict | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
        """`nrl-k8s dashboard ARGS` running; yields (the URL it printed, the process), then Ctrl-C."""
        proc = interruptible([NRL_K8S, "dashboard", *args, *PAIR, *names], {**env, **(extra_env or {})})
        try:
            ready, _, _ = select.select([proc.stdout], [], [], DEADLINE_S)
            url = proc.stdout.readline().strip() if ready else ""
            assert url.startswith("http://127.0.0.1:"), (url, proc.poll(), proc.stderr.read() if proc.poll() else "")
            yield url, proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            proc.wait(DEADLINE_S)

    invoke.job, invoke.ns, invoke.dashboard = job, sandbox_namespace, dashboard
    invoke.custom = client.CustomObjectsApi(sandbox.api_client())
    return invoke


def token_of(url: str) -> str:
    """The token of the URL the relay printed."""
    (token,) = parse_qs(urlsplit(url).query)["token"]
    return token


@contextlib.contextmanager
def browser(url: str) -> Iterator[httpx.Client]:
    """A client that opened the printed ``url`` as a browser does: the token's redirect set the
    relay's cookie, which authenticates what it asks next (relative to the relay's root)."""
    with httpx.Client(base_url=url.partition("?")[0], timeout=DEADLINE_S) as client:
        login = client.get(url)
        assert login.status_code == 302 and login.headers["location"] == "/", (login.status_code, login.text)
        assert "token" not in login.headers["location"] and len(client.cookies) == 1
        yield client


def answered(client: httpx.Client, path: str, **headers: str):
    """The JSON of a 200 answer to GET ``path`` through the relay; None for any other answer (the API
    server answers 503 while the Service has no ready endpoint)."""
    response = client.get(path, headers=headers)
    return response.json() if response.status_code == 200 else None


def stopped(proc: subprocess.Popen) -> tuple[str, str]:
    """Ctrl-C the relay; (the rest of its stdout, its stderr) once it has exited 0 without a traceback."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0 and "Traceback" not in err, err
    return out, err


# -- a minimal websocket client (RFC 6455): enough for a server that pushes text -------------------

def ws_connect(url: str, path: str, header: str) -> socket.socket:
    """A websocket through the relay at ``url``, authenticated by ``header`` (a Cookie or an Authorization)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S)
    key = base64.b64encode(secrets.token_bytes(16)).decode()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{header}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        more = sock.recv(1)  # byte by byte: frames that follow stay in the socket
        assert more, head
        head += more
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise EOFError(f"the connection ended after {len(data)} of {size} bytes")
        data += more
    return data


def ws_texts(sock: socket.socket) -> Iterator[str]:
    """Each text frame, until the server's close frame (answered) or the end of the connection (a
    RayJob's cluster is deleted as its job ends: its head may go before it has said goodbye)."""
    while True:
        try:
            first, second = _exactly(sock, 2)
        except EOFError:
            return
        size = second & 0x7F
        if size >= 126:
            size = int.from_bytes(_exactly(sock, 2 if size == 126 else 8), "big")
        payload = _exactly(sock, size)
        opcode = first & 0x0F
        if opcode == 0x8:
            mask = secrets.token_bytes(4)
            sock.sendall(
                bytes([0x88, 0x80 | len(payload[:2])])
                + mask
                + bytes(b ^ mask[i % 4] for i, b in enumerate(payload[:2]))
            )
            return
        if opcode in (0x0, 0x1):
            yield payload.decode()


def test_dashboard_relays_the_rayjob_clusters_dashboard_and_the_dgd_frontend(cli, tmp_path):
    gate = Gate(tmp_path)  # the job logs two lines, then waits for the test: it runs while the test looks
    entrypoint = f"echo relay-one; echo relay-two; {gate.entrypoint()}"
    run = cli("run", "--no-wait", extra=("infra.launch.entrypoint=" + json.dumps(entrypoint),))
    assert run.returncode == 0, run.stderr
    job = cli.custom.get_namespaced_custom_object("ray.io", "v1", cli.ns, "rayjobs", cli.job)
    cluster, job_id = job["status"]["rayClusterName"], job["status"]["jobId"]
    assert cluster != cli.job  # the RayJob's suffixed cluster, found through the RayJob

    with cli.dashboard("--port", "0") as (url, proc), browser(url) as page:
        token, base = token_of(url), url.partition("?")[0]
        assert urlsplit(url).path == "/" and len(token) >= 32
        # the RayJob has its job id before its cluster's head is up: wait for the dashboard to answer
        version = eventually(lambda: answered(page, "api/version"), what="the Ray dashboard through the relay")
        assert version["ray_version"]
        refused = httpx.get(f"{base}api/version", timeout=DEADLINE_S)  # no token: refused, whoever asks
        assert refused.status_code == 403 and "open the URL it printed" in refused.text
        wrong = httpx.get(f"{base}?token={token[::-1]}", timeout=DEADLINE_S)
        assert wrong.status_code == 403
        jobs = eventually(lambda: [j for j in answered(page, "api/jobs/") or [] if j["submission_id"] == job_id],
                          what=f"job {job_id} listed through the relay")
        assert jobs[0]["status"] in ("PENDING", "RUNNING")
        cookie = "Cookie: " + "; ".join(f"{k}={v}" for k, v in page.cookies.items())
        tail = ws_connect(url, f"/api/jobs/{job_id}/logs/tail", cookie)  # open while the job waits on the gate
        with tail:
            out, err = stopped(proc)
            while tail.recv(65536):  # Ctrl-C closed the relayed websocket too (else: a timeout)
                pass
    assert out == "" and f"the Ray dashboard of RayCluster {cluster}" in err and err.rstrip().endswith("stopped")
    assert token not in err and "Authorization: token TOKEN" in err

    models_url = tmp_path / "opened"  # the DGD serves until the job ends (then GC deletes it)
    opener = tmp_path / "browser"
    opener.write_text(
        f"#!{sys.executable}\nimport pathlib, sys\npathlib.Path({str(models_url)!r}).write_text(sys.argv[1])\n"
    )
    opener.chmod(0o700)
    with (
        cli.dashboard("--target", "dynamo.serving", "--port", "0", "--open", extra_env={"BROWSER": str(opener)}) as (
            url,
            proc,
        ),
        httpx.Client(base_url=url.partition("?")[0], timeout=DEADLINE_S) as script,
    ):
        bearer = {"Authorization": f"Bearer {token_of(url)}"}  # as an OpenAI client sends its api_key
        models = eventually(lambda: answered(script, "v1/models", **bearer), what="the DGD frontend through the relay")
        assert script.get("v1/models").status_code == 403
        assert eventually(models_url.is_file, what="the browser opened")
        opened = models_url.read_text()  # not the printed URL: a token that logs in once
        assert opened.partition("?")[0] == url.partition("?")[0] and token_of(opened) != token_of(url)
        logins = [httpx.get(opened, timeout=DEADLINE_S).status_code for _ in range(2)]
        assert logins == [302, 403]
        _, err = stopped(proc)
    assert models["object"] == "list" and models["data"][0]["object"] == "model"
    assert f"the frontend of DGD {cli.job}-dgd" in err

    with cli.dashboard("--port", "0") as (url, proc):
        with ws_connect(url, f"/api/jobs/{job_id}/logs/tail", f"Authorization: token {token_of(url)}") as tail:
            texts, logged = ws_texts(tail), ""
            while "relay-two\n" not in logged:  # printed before the gate: the job still runs (else: a timeout)
                logged += next(texts)
            lines = logged.splitlines()  # Ray's own "Running entrypoint" line lands before or after the first
            assert "relay-one" in lines and lines.index("relay-one") < lines.index("relay-two")
            gate.open()
            for _ in texts:  # the stream ends with the job (else: a timeout)
                pass
        stopped(proc)
    observe(cli.custom.list_namespaced_custom_object, "ray.io", "v1", cli.ns, "rayjobs",
            field_selector=f"metadata.name={cli.job}",
            until=lambda o: (o[cli.job].get("status") or {}).get("jobDeploymentStatus") == "Complete")


BAD = {
    "unknown target": (["--target", "dynamo.nope"], "unknown --target 'dynamo.nope'", "dynamo.serving"),
    "a RayCluster target": (["--target", "kuberay.training"], "unknown --target 'kuberay.training'", "--role ROLE"),
    "role and target": (
        ["--role", "training", "--target", "dynamo.serving"],
        "--role and --target cannot be used together",
        "--role ROLE",
    ),
    "undeclared role": (["--role", "gym"], "infra.kuberay.gym: is not set", "declare kuberay.gym"),
}


@pytest.mark.parametrize(("args", "error", "hint"), BAD.values(), ids=BAD.keys())
def test_bad_flags_exit_2_with_one_line(cli, args, error, hint):
    result = cli("dashboard", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and error in lines[0] and lines[1].startswith("hint:") and hint in lines[1], result.stderr


def test_nothing_running_is_one_clear_error(cli):
    result = cli("dashboard", "--target", "dynamo.serving")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"no Service {cli.job}-dgd-frontend in namespace {cli.ns}" in result.stderr
    assert "cluster up" in result.stderr and "--target dynamo.serving" in result.stderr
