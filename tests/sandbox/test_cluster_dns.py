"""The cluster DNS proxy (``cluster_dns.ClusterDns``) without a sandbox: callbacks that map one
Service (``web`` in ``team``, port 8265) and one pod IP to a local HTTP server, driven by the
clients a driver uses (urllib, requests, httpx, aiohttp, curl) with ``env(namespace)`` as their
env. ``socket.getaddrinfo`` refuses every name but loopback's while these run, so a success shows
that neither the client nor the proxy looked a cluster name up."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nrl_k8s_sandbox.controlplane.cluster_dns import NO_PROXY, ClusterDns, service_of

POD_CIDR = ipaddress.ip_network("10.250.0.0/16")
POD_IP = "10.250.0.7"
TIMEOUT_S = 60.0
NAMES = {
    "fqdn": "web.team.svc.cluster.local:8265",
    "svc": "web.team.svc:8265",
    "namespaced": "web.team:8265",
    "short": "web:8265",
    "pod-ip": f"{POD_IP}:8265",
}
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
CURL = shutil.which("curl")


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with what it saw, as JSON; counts them."""

    protocol_version = "HTTP/1.1"  # answers ``Expect: 100-continue``, so curl's large POST gets a 1xx first
    server: _Upstream

    def _echo(self) -> None:
        if self.headers.get("Upgrade") == "echo":
            self._upgraded()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(self.path)
        reply = json.dumps({
            "method": self.command, "path": self.path, "host": self.headers.get("Host"),
            "proxy_authorization": self.headers.get("Proxy-Authorization"),
            "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PUT = do_DELETE = _echo

    def _upgraded(self) -> None:
        """``101``, then every byte back as it comes, until the client closes."""
        self.server.seen.append(self.path)
        self.send_response(101)
        self.send_header("Connection", "Upgrade")
        self.send_header("Upgrade", "echo")
        self.end_headers()
        while data := self.rfile.read1(65536):
            self.wfile.write(data)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


class _Upstream(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[str]


@pytest.fixture(scope="module")
def server() -> Iterator[_Upstream]:
    server = _Upstream(("127.0.0.1", 0), _Echo)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def upstream(server) -> _Upstream:
    """The local HTTP server, with no request seen yet."""
    server.seen = []
    return server


@pytest.fixture(scope="module")
def dns(server) -> Iterator[ClusterDns]:
    local = server.server_address[1]
    proxy = ClusterDns(lambda ns, svc, port: local if (ns, svc, port) == ("team", "web", 8265) else None,
                       lambda ip, port: local if (ip, port) == (POD_IP, 8265) else None, POD_CIDR)
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture
def env(dns, monkeypatch) -> None:
    """This process's env as a process in ``team`` gets it (no other proxy settings), with name
    look-ups of anything but loopback refused."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    for name, value in dns.env("team").items():
        monkeypatch.setenv(name, value)
    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in LOOPBACK and (not isinstance(host, bytes) or host.decode() not in LOOPBACK):
            raise socket.gaierror(socket.EAI_NONAME, f"test: no DNS look-up of {host!r}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


def _urllib(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    try:  # a new opener: ProxyHandler reads the env when it is made (urlopen's is made once)
        with urllib.request.build_opener().open(urllib.request.Request(url, data=body), timeout=TIMEOUT_S) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _requests(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    import requests

    reply = requests.request("POST" if body is not None else "GET", url, data=body, timeout=TIMEOUT_S)
    return reply.status_code, reply.content


def _httpx(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    import httpx

    reply = httpx.request("POST" if body is not None else "GET", url, content=body, timeout=TIMEOUT_S)
    return reply.status_code, reply.content


def _aiohttp(url: str, body: bytes | None = None, trust_env: bool = True) -> tuple[int, bytes]:
    import aiohttp

    async def fetch() -> tuple[int, bytes]:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        connector = aiohttp.TCPConnector(resolver=aiohttp.ThreadedResolver())  # socket.getaddrinfo, not aiodns
        async with aiohttp.ClientSession(trust_env=trust_env, timeout=timeout, connector=connector) as session:
            async with session.request("POST" if body is not None else "GET", url, data=body) as reply:
                return reply.status, await reply.read()

    return asyncio.run(fetch())


def _curl(url: str, body: bytes | None = None, *flags: str) -> tuple[int, bytes]:
    if CURL is None:
        pytest.skip("curl is not installed")
    argv = [CURL, "-sS", "--max-time", str(int(TIMEOUT_S)), "-o", "-", "-w", "\n%{http_code}", *flags, url]
    if body is not None:
        argv[1:1] = ["--data-binary", "@-", "-H", "Content-Type: application/octet-stream"]
    done = subprocess.run(argv, input=body, capture_output=True, env=dict(os.environ), timeout=TIMEOUT_S * 2)
    out, _, code = done.stdout.rpartition(b"\n")
    return int(code), out


CLIENTS = {"urllib": _urllib, "requests": _requests, "httpx": _httpx, "aiohttp": _aiohttp, "curl": _curl}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("name", NAMES)
def test_cluster_names_reach_the_process_behind_them(env, upstream, client, name):
    status, body = CLIENTS[client](f"http://{NAMES[name]}/api/jobs/?limit=1")
    assert status == 200, body
    seen = json.loads(body)
    assert seen["path"] == "/api/jobs/?limit=1"  # origin form upstream
    assert seen["host"] == NAMES[name]  # the Host the pod's server would see
    assert seen["proxy_authorization"] is None  # the credentials stay with the proxy


@pytest.mark.parametrize("client", ["urllib", "requests", "httpx", "aiohttp", "curl"])
def test_a_post_body_is_streamed_through(env, client):
    body = os.urandom(3 << 20)  # 3 MiB: curl sends ``Expect: 100-continue``; the answer comes after a 1xx
    status, reply = CLIENTS[client]("http://web.team.svc.cluster.local:8265/api/jobs/", body)
    assert status == 200, reply
    seen = json.loads(reply)
    assert (seen["method"], seen["length"], seen["sha256"]) == ("POST", len(body), hashlib.sha256(body).hexdigest())


def test_a_session_reuses_nothing_it_should_not(env, upstream):
    """Each answer says ``Connection: close``, so a client that keeps connections opens a new one."""
    import requests

    with requests.Session() as session:
        for i in range(5):
            reply = session.get(f"http://web.team.svc:8265/{i}", timeout=TIMEOUT_S)
            assert reply.status_code == 200 and reply.headers["Connection"] == "close"
    assert upstream.seen == [f"/{i}" for i in range(5)]


def _raw(dns: ClusterDns, request: bytes, then: bytes = b"") -> bytes:
    """Send ``request`` to the proxy, and ``then`` once it has answered a CONNECT; all it sends back."""
    with socket.create_connection(("127.0.0.1", dns.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request)
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
        if then and reply.startswith(b"HTTP/1.1 200"):
            sock.sendall(then)
        while chunk := sock.recv(65536):
            reply += chunk
        return reply


def _auth(namespace: str, token: str) -> str:
    return "Proxy-Authorization: Basic " + base64.b64encode(f"{namespace}:{token}".encode()).decode()


def _token(dns: ClusterDns) -> str:
    return dns.url("team").rpartition("@")[0].rpartition(":")[2]


@pytest.mark.parametrize("name", ["web.team.svc.cluster.local:8265", "web:8265", f"{POD_IP}:8265"])
def test_connect_splices_a_tunnel(dns, name):
    connect = f"CONNECT {name} HTTP/1.1\r\nHost: {name}\r\n{_auth('team', _token(dns))}\r\n\r\n".encode()
    reply = _raw(dns, connect, b"GET /tunnelled HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200")
    assert json.loads(reply.rpartition(b"\r\n\r\n")[2])["path"] == "/tunnelled"


def test_an_upgrade_is_spliced_after_its_101(dns, upstream):
    request = (f"GET http://web.team.svc:8265/upgrade HTTP/1.1\r\nHost: web.team.svc:8265\r\n"
               f"Connection: Upgrade\r\nUpgrade: echo\r\n{_auth('team', _token(dns))}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", dns.port), timeout=TIMEOUT_S) as sock:
        sock.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head and (chunk := sock.recv(65536)):
            head += chunk
        assert head.startswith(b"HTTP/1.1 101 ") and head.endswith(b"\r\n\r\n")
        for message in (b"ping", b"pong" * 1000):
            sock.sendall(message)
            echoed = b""
            while len(echoed) < len(message) and (chunk := sock.recv(65536)):
                echoed += chunk
            assert echoed == message
    assert upstream.seen == ["/upgrade"]


def test_curl_tunnels_with_connect(env):
    status, body = _curl("http://web.team.svc:8265/through", None, "--proxytunnel")
    assert status == 200 and json.loads(body)["path"] == "/through"


@pytest.mark.parametrize("credentials", [
    pytest.param(None, id="none"),
    pytest.param(("team", "not-the-token"), id="wrong-token"),
    pytest.param(("team", ""), id="empty-token"),
    pytest.param(("Not_A_Namespace", None), id="bad-namespace"),
    pytest.param("Bearer {token}", id="not-basic"),
    pytest.param("Basic !!!", id="not-base64"),
])
@pytest.mark.parametrize("method", ["GET", "CONNECT"])
def test_without_the_token_the_answer_is_407_and_nothing_else(dns, upstream, credentials, method):
    token = _token(dns)
    if isinstance(credentials, tuple):
        header = _auth(credentials[0], token if credentials[1] is None else credentials[1]) + "\r\n"
    elif isinstance(credentials, str):
        header = "Proxy-Authorization: " + credentials.format(token=token) + "\r\n"
    else:
        header = ""
    target = "web.team.svc:8265" if method == "CONNECT" else "http://web.team.svc:8265/secret"
    reply = _raw(dns, f"{method} {target} HTTP/1.1\r\nHost: web.team.svc:8265\r\n{header}\r\n".encode(),
                 b"GET /secret HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
    assert b'Proxy-Authenticate: Basic realm="nrl-k8s sandbox"' in reply
    assert upstream.seen == []


@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_token_in_the_env_gets_407(env, monkeypatch, upstream, dns, client):
    wrong = dns.url("team").replace(_token(dns), "not-the-token")
    monkeypatch.setenv("HTTP_PROXY", wrong)
    monkeypatch.setenv("http_proxy", wrong)
    status, _ = CLIENTS[client]("http://web.team.svc:8265/secret")
    assert status == 407
    assert upstream.seen == []


@pytest.mark.parametrize(("target", "named"), [
    ("http://example.com/", "example.com:80"),
    ("http://example.com:8265/", "example.com:8265"),
    ("http://db.team.svc.cluster.local:8265/", "db.team.svc.cluster.local:8265"),  # no such Service
    ("http://web.other.svc:8265/", "web.other.svc:8265"),  # not in that namespace
    ("http://web.team.svc:80/", "web.team.svc:80"),  # not that port
    ("http://10.250.0.8:8265/", "10.250.0.8:8265"),  # no such pod
    ("http://192.0.2.1:8265/", "192.0.2.1:8265"),  # outside the pod network
    ("http://127.0.0.1:{local}/", "127.0.0.1:{local}"),  # loopback is not a cluster address
    ("http://[::1]:{local}/", "::1:{local}"),
    ("http://web.team.svc.cluster.example:8265/", "web.team.svc.cluster.example:8265"),
])
def test_anything_else_is_502_naming_it(env, dns, upstream, target, named):
    local = upstream.server_address[1]
    target, named = target.format(local=local), named.format(local=local)
    line = f"{named} is not a cluster address of this sandbox\n"
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\n{_auth('team', _token(dns))}\r\n\r\n".encode()
    reply = _raw(dns, request)
    assert reply.startswith(b"HTTP/1.1 502 Bad Gateway\r\n") and reply.endswith(line.encode())
    if "127.0.0.1" not in target and "::1" not in target:  # clients send loopback direct (no_proxy)
        for client in (_requests, _curl):
            status, body = client(target)
            assert (status, body.decode()) == (502, line)
    assert upstream.seen == []


def test_connect_to_anything_else_is_502(dns, upstream):
    auth = _auth("team", _token(dns))
    for target in ("example.com:443", "db.team.svc:8265", "192.0.2.1:443", f"127.0.0.1:{upstream.server_address[1]}"):
        reply = _raw(dns, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 502 Bad Gateway\r\n"), target
        assert reply.endswith(f"{target} is not a cluster address of this sandbox\n".encode())
    assert upstream.seen == []


def test_aiohttp_follows_the_env_only_with_trust_env(env):
    assert _aiohttp("http://web.team.svc:8265/", trust_env=True)[0] == 200
    import aiohttp

    with pytest.raises(aiohttp.ClientConnectorError):  # it looked the name up itself (refused here)
        _aiohttp("http://web.team.svc:8265/", trust_env=False)


@pytest.mark.parametrize("client", CLIENTS)
def test_no_proxy_keeps_loopback_direct(env, upstream, client):
    """Through the proxy 127.0.0.1 would be a 502: a 200 means the client went direct."""
    status, body = CLIENTS[client](f"http://127.0.0.1:{upstream.server_address[1]}/direct")
    assert status == 200, body
    assert json.loads(body)["path"] == "/direct"


def test_env_names_the_proxy_for_the_namespace(dns):
    url = f"http://team:{_token(dns)}@127.0.0.1:{dns.port}"
    assert dns.env("team") == {"HTTP_PROXY": url, "http_proxy": url, "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}
    assert len(_token(dns)) >= 32
    assert dns.url("other").startswith(f"http://other:{_token(dns)}@")


def test_a_request_not_meant_for_a_proxy_is_400(dns):
    auth = _auth("team", _token(dns))
    for line in ("GET / HTTP/1.1", "GET https://web.team.svc/ HTTP/1.1", "CONNECT web.team.svc HTTP/1.1"):
        assert _raw(dns, f"{line}\r\nHost: web\r\n{auth}\r\n\r\n".encode()).startswith(b"HTTP/1.1 400 "), line


@pytest.mark.parametrize(("host", "expected"), [
    ("web.team.svc.cluster.local", ("team", "web")),
    ("WEB.Team.svc.cluster.local.", ("team", "web")),
    ("web.team.svc", ("team", "web")),
    ("web.team", ("team", "web")),
    ("web", ("mine", "web")),
    ("example.com", ("com", "example")),  # a Service ``example`` in namespace ``com``: none, so 502
    ("web.team.svc.cluster", None),
    ("a.web.team.svc.cluster.local", None),
    ("www.example.com", None),
    ("web_x.team", None),
    ("-web.team", None),
    ("", None),
    ("a" * 64, None),
])
def test_service_of_reads_the_names_a_pod_resolves(host, expected):
    assert service_of(host, "mine") == expected


def test_the_proxy_listens_on_loopback_only(dns):
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    port = f"{dns.port:04X}"
    mine = [line.split()[1] for line in listening if line.split()[1].endswith(f":{port}") and line.split()[3] == "0A"]
    assert mine == [f"0100007F:{port}"]
