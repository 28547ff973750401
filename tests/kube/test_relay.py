"""nrl_k8s.relay.server over real sockets: HTTP and upgraded connections, through a Connection from a real
kubeconfig (CA, client certificate, token; a CONNECT proxy), and the session token every request
must prove (the URL's, the cookie it buys, the Authorization header; cookie requests that may change
something only from the relay's own pages).

The API server's service proxy is played by a loopback HTTPS server requiring client certificates
(``ProxyLike``: it streams, redirects the way the API server rewrites redirects, echoes bodies and
upgrades); the real API server's service proxy (the sandbox's) relays them to the session's
``backend`` pod (``conftest.Backend``).
"""

from __future__ import annotations

import contextlib
import http.client as http_client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import httpx
import pytest
import yaml
from sandbox_harness import unique
from tls_pki import connect_proxy, make_pki
from upgrade_backend import GREETING, UpgradeEcho, serving

from nrl_k8s.errors import ConfigError
from nrl_k8s.kube.connection import Connection, from_kubeconfig
from nrl_k8s.relay.server import Relay, Upstream, cookie_name

UPSTREAM = Upstream("team", "web", 80, "the test service")
PREFIX = UPSTREAM.prefix
WAIT_S = 60.0  # generous: every wait here ends as soon as the bytes arrive


class ProxyLike(UpgradeEcho):
    """The service proxy of Service web:80 in namespace team, as the real API server answers it."""

    seen: list[dict]
    release: threading.Event

    def __getattr__(self, name: str):
        if name.startswith("do_"):
            return self.serve
        raise AttributeError(name)

    def serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else self._chunked()
        self.seen.append({"method": self.command, "path": self.path, "authorization": self.headers.get("Authorization"),
                          "client": dict(i[0] for i in self.connection.getpeercert()["subject"])["commonName"],
                          "body": body, "headers": dict(self.headers.items()), "from": self.client_address})
        if self.upgrade():
            return
        rest = self.path.removeprefix(PREFIX)
        if rest == "/old":  # the API server moved the backend's `Location: /new?x=1` under its prefix
            self._send(302, b"", {"Location": f"{PREFIX}/new?x=1"})
        elif rest == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"first;", b"second"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.release.wait(WAIT_S)  # the second part only once the client has read the first
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._send(
                200,
                json.dumps({"method": self.command, "echo": body.decode()}).encode(),
                {"Content-Type": "application/json"},
            )

    do_GET = serve

    def _chunked(self) -> bytes:
        if self.headers.get("Transfer-Encoding") != "chunked":
            return b""
        parts = []
        while size := int(self.rfile.readline().strip(), 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(parts)

    def _send(self, code: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def api(pki):
    """(URL of the TLS server playing the API server, the requests it saw, the stream's release)."""
    handler = type("Handler", (ProxyLike,), {"seen": [], "release": threading.Event()})
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*pki["server"])
    context.load_verify_locations(pki["ca"])
    context.verify_mode = ssl.CERT_REQUIRED
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    with serving(httpd) as port:
        yield f"https://127.0.0.1:{port}", handler.seen, handler.release
    handler.release.set()


def connection(tmp_path, pki: dict, server: str, proxy: str | None = None) -> Connection:
    cluster = {"server": server, "certificate-authority": pki["ca"], **({"proxy-url": proxy} if proxy else {})}
    user = {"token": "tok-1", "client-certificate": pki["client"][0], "client-key": pki["client"][1]}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
        "current-context": "c", "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    return from_kubeconfig(str(tmp_path / "kubeconfig"), None)[0]


@contextlib.contextmanager
def relaying(conn: Connection, upstream: Upstream = UPSTREAM) -> Iterator[Relay]:
    relay = Relay(conn, upstream, port=0)
    thread = threading.Thread(target=relay.serve_forever, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.close()
        thread.join(WAIT_S)


def authorized(relay: Relay) -> dict[str, str]:
    """The header a script sends the relay's token in."""
    return {"Authorization": f"token {relay.token}"}


def client(relay: Relay, **kwargs) -> httpx.Client:
    """An httpx client of the relay sending its token in the Authorization header."""
    return httpx.Client(base_url=relay.url, timeout=WAIT_S, headers=authorized(relay), **kwargs)


def upgrade(relay: Relay, path: str, protocol: str = "echo", mark: str = "",
            headers: dict[str, str] | None = None) -> tuple[socket.socket, bytes]:
    """A raw upgrade request to the relay (``mark``: its X-Test-Mark header; ``headers``: default the
    token's Authorization header); (the socket, what came back up to and with the blank line and beyond)."""
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT_S)
    extra = {**({"X-Test-Mark": mark} if mark else {}), **(authorized(relay) if headers is None else headers)}
    lines = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{relay.port}\r\nConnection: Upgrade\r\nUpgrade: {protocol}\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{lines}\r\n".encode()
    )
    return sock, read_until(sock, b"\r\n\r\n")


def read_until(sock: socket.socket, marker: bytes, data: bytes = b"") -> bytes:
    while marker not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    return data


def until_closed(sock: socket.socket) -> bytes:
    return read_until(sock, b"\0never sent")


def test_http_through_the_relay_carries_the_kubeconfig_credentials(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay, client(relay) as http:
        got = http.get("/api/version")  # the token's Authorization header is the relay's, never passed on
        posted = http.post("/api/jobs/", json={"entrypoint": "echo hi"})
        patched = http.patch("/x", content=b"raw bytes")
        chunked = http.put("/y", content=iter([b"in ", b"chunks"]))
        head = http.head("/z")
        custom = http.request("PROPFIND", "/w")
    assert got.json() == {"method": "GET", "echo": ""}
    assert posted.json() == {"method": "POST", "echo": '{"entrypoint":"echo hi"}'}
    assert (patched.json()["echo"], chunked.json()["echo"]) == ("raw bytes", "in chunks")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    assert custom.json()["method"] == "PROPFIND"
    assert [(s["method"], s["path"]) for s in seen] == [
        ("GET", f"{PREFIX}/api/version"), ("POST", f"{PREFIX}/api/jobs/"), ("PATCH", f"{PREFIX}/x"),
        ("PUT", f"{PREFIX}/y"), ("HEAD", f"{PREFIX}/z"), ("PROPFIND", f"{PREFIX}/w")]
    assert {(s["authorization"], s["client"]) for s in seen} == {("Bearer tok-1", "alice")}
    assert all(s["headers"]["Host"] == url.removeprefix("https://") for s in seen)
    assert not any(relay.token in json.dumps(s["headers"]) + s["path"] for s in seen)


def test_keep_alive_a_streamed_response_and_redirects(tmp_path, pki, api):
    url, seen, release = api
    with relaying(connection(tmp_path, pki, url)) as relay, client(relay) as http:
        with http.stream("GET", "/stream") as streamed:
            assert streamed.headers["transfer-encoding"] == "chunked"
            parts = streamed.iter_raw()
            assert next(parts) == b"first;"  # before the server sends the rest: relayed as it came
            release.set()
            assert b"".join(parts) == b"second"
        moved = http.get("/old")
        again = http.get(f"{PREFIX}/again")  # a link the API server moved under its prefix in a page
        kept = http_client.HTTPConnection("127.0.0.1", relay.port, timeout=WAIT_S)
        answers = []
        for _ in range(2):
            kept.request("GET", "/api/version", headers=authorized(relay))
            answers.append((kept.sock, kept.getresponse().read()))
        kept.close()
    assert moved.status_code == 302 and moved.headers["location"] == "/new?x=1"
    assert again.status_code == 200 and seen[-3]["path"] == f"{PREFIX}/again"
    assert answers[0][0] is answers[1][0] and answers[0][1] == answers[1][1]  # one client connection
    assert len({s["from"] for s in seen}) == 1  # and one pooled connection to the API server


def test_an_upgraded_connection_is_spliced_both_ways(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        sock, answer = upgrade(relay, "/ws")
        with sock:
            assert answer.startswith(b"HTTP/1.1 101 ")
            assert read_until(sock, GREETING, answer.split(b"\r\n\r\n", 1)[1]).endswith(b"hello\n")
            for word in (b"one", b"two" * 50000):
                sock.sendall(word)
                assert len(read_until(sock, word.upper()[-3:])) >= 3
    assert seen[0]["path"] == f"{PREFIX}/ws"
    assert (seen[0]["headers"]["Upgrade"], seen[0]["headers"]["Connection"]) == ("echo", "Upgrade")
    assert (seen[0]["authorization"], seen[0]["client"]) == ("Bearer tok-1", "alice")
    assert seen[0]["headers"]["Sec-WebSocket-Key"] == "dGhlIHNhbXBsZSBub25jZQ=="
    assert relay.token not in json.dumps(seen[0]["headers"])


def test_a_refused_upgrade_is_relayed_with_its_body(tmp_path, pki, api):
    url, _, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        sock, answer = upgrade(relay, "/denied")
        with sock:
            answer = read_until(sock, b"upgrade refused", answer)
            assert answer.startswith(b"HTTP/1.1 403 ") and answer.endswith(b'"upgrade refused"}')
            assert sock.recv(1) == b""  # and the connection ends


def test_through_a_connect_proxy(tmp_path, pki, api):
    url, seen, _ = api
    with connect_proxy() as (proxy_url, tunnels), relaying(connection(tmp_path, pki, url, proxy_url)) as relay:
        assert httpx.get(relay.url + "api/version", headers=authorized(relay), timeout=WAIT_S).json()["method"] == "GET"
        sock, answer = upgrade(relay, "/ws")
        with sock:
            assert answer.startswith(b"HTTP/1.1 101 ")
    assert tunnels == [f"CONNECT {url.removeprefix('https://')}"] * 2


def test_foreign_hosts_and_origins_are_refused_before_anything_is_sent(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        rebound = httpx.get(relay.url, headers={"Host": "evil.example"}, timeout=WAIT_S)
        cross = httpx.post(relay.url + "api/jobs/", headers={"Origin": "https://evil.example"}, timeout=WAIT_S)
        own = httpx.get(relay.url, headers={"Origin": relay.url.rstrip("/"), **authorized(relay)}, timeout=WAIT_S)
    assert (rebound.status_code, cross.status_code, own.status_code) == (403, 403, 200)
    assert "only requests for 127.0.0.1 or localhost" in rebound.text
    assert len(seen) == 1


def test_without_the_token_nothing_is_relayed(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        wrong = ("y" if relay.token.startswith("x") else "x") + relay.token[1:]  # never the token itself
        refused = {
            "no token": httpx.get(relay.url + "api/jobs/", timeout=WAIT_S),
            "a wrong token in the URL": httpx.get(f"{relay.url}?token={wrong}", timeout=WAIT_S),
            "a wrong header token": httpx.get(relay.url, headers={"Authorization": f"token {wrong}"}, timeout=WAIT_S),
            "a wrong cookie": httpx.get(
                relay.url, headers={"Cookie": f"{cookie_name(relay.port)}={wrong}"}, timeout=WAIT_S
            ),
            "a POST": httpx.post(relay.url + "api/jobs/", json={"entrypoint": "echo hi"}, timeout=WAIT_S),
        }
        sock, upgraded = upgrade(relay, "/ws", headers={})
        sock.close()
    assert {name: r.status_code for name, r in refused.items()} == dict.fromkeys(refused, 403)
    assert all("open the URL it printed" in r.text and r.headers["content-type"].startswith("text/plain")
               for r in refused.values())
    assert upgraded.startswith(b"HTTP/1.1 403 ")
    assert seen == []


def test_the_token_in_the_url_buys_a_cookie(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay, httpx.Client(base_url=relay.url, timeout=WAIT_S) as browser:
        login = browser.get(f"/api/jobs/?limit=5&token={relay.token}")
        browser.cookies.set("theme", "dark", domain="127.0.0.1")  # another cookie of the host: passed on
        page = browser.get(login.headers["location"])  # with the cookie the redirect set
        sock, upgraded = upgrade(relay, "/ws", headers={"Cookie": f"{cookie_name(relay.port)}={relay.token}"})
        sock.close()
    assert login.status_code == 302 and login.headers["location"] == "/api/jobs/?limit=5"
    assert login.headers["connection"] == "close"  # the relay closes it: the client must not reuse it
    attributes = [a.strip() for a in login.headers["set-cookie"].split(";")]
    assert attributes[0] == f"{cookie_name(relay.port)}={relay.token}"
    assert {"Path=/", "HttpOnly", "SameSite=Strict"} <= set(attributes)
    assert page.status_code == 200 and page.json()["method"] == "GET"
    assert upgraded.startswith(b"HTTP/1.1 101 ")
    assert [(s["method"], s["path"]) for s in seen] == [("GET", f"{PREFIX}/api/jobs/?limit=5"), ("GET", f"{PREFIX}/ws")]
    assert seen[0]["headers"]["Cookie"] == "theme=dark" and "Cookie" not in seen[1]["headers"]
    assert not any(relay.token in json.dumps(s["headers"]) + s["path"] for s in seen)


def test_an_open_url_logs_in_once(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        opened = relay.open_url()
        first, again = (httpx.get(opened, timeout=WAIT_S) for _ in range(2))
    assert opened.startswith(relay.url + "?token=") and relay.token not in opened
    assert first.status_code == 302 and first.headers["set-cookie"].startswith(
        f"{cookie_name(relay.port)}={relay.token};"
    )
    assert again.status_code == 403 and "open the URL it printed" in again.text
    assert first.headers["connection"] == again.headers["connection"] == "close"
    assert seen == []


def test_a_cookie_post_only_from_the_relays_own_pages(tmp_path, pki, api):
    url, seen, _ = api
    with relaying(connection(tmp_path, pki, url)) as relay:
        cookie = {"Cookie": f"{cookie_name(relay.port)}={relay.token}"}
        job = {"entrypoint": "echo hi"}

        def post(**headers: str) -> httpx.Response:
            return httpx.post(relay.url + "api/jobs/", json=job, headers=headers, timeout=WAIT_S)

        bare = post(**cookie)
        foreign = post(**cookie, Origin="https://evil.example")
        foreign_referer = post(**cookie, Referer="https://evil.example/page")
        refused = [r.status_code for r in (bare, foreign, foreign_referer)]
        assert seen == []  # nothing of a refused POST reached the API server
        own = post(**cookie, Origin=relay.url.rstrip("/"))
        own_referer = post(**cookie, Referer=f"http://localhost:{relay.port}/#/jobs")
        scripted = post(**authorized(relay))  # a page cannot set this header: no Origin needed
    assert refused == [403, 403, 403]
    assert "only from its own pages" in bare.text and "only from its own pages" in foreign_referer.text
    assert "only requests from its own pages" in foreign.text
    assert [r.status_code for r in (own, own_referer, scripted)] == [200, 200, 200]
    assert [(s["method"], s["path"], s["body"]) for s in seen] == [
        ("POST", f"{PREFIX}/api/jobs/", b'{"entrypoint":"echo hi"}')
    ] * 3


def test_an_unreachable_api_server_is_a_502_with_the_reason(tmp_path, pki):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"https://127.0.0.1:{unused.getsockname()[1]}"  # bound, not listening: refused
        with relaying(connection(tmp_path, pki, url)) as relay:
            answer = httpx.get(relay.url + "api/version", headers=authorized(relay), timeout=WAIT_S)
            sock, upgraded = upgrade(relay, "/ws")
            sock.close()
    assert answer.status_code == 502 and "did not answer" in answer.text
    assert upgraded.startswith(b"HTTP/1.1 502 ")


def test_port_choice(tmp_path, pki):
    conn = connection(tmp_path, pki, "https://127.0.0.1:1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with Relay(conn, Upstream("team", "web", port, "w")) as relay:  # its own port is taken: any free one
            assert relay.port not in (0, port) and relay.url == f"http://127.0.0.1:{relay.port}/"
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            Relay(conn, UPSTREAM, port=port)
    with Relay(conn, Upstream("team", "web", port, "w")) as relay:  # free again: its own port
        assert relay.port == port


def test_closing_the_relay_closes_its_connections(tmp_path, pki, api):
    url, _, _ = api
    relay = Relay(connection(tmp_path, pki, url), UPSTREAM, port=0)
    thread = threading.Thread(target=relay.serve_forever, daemon=True)
    thread.start()
    sock, answer = upgrade(relay, "/ws")
    idle = socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT_S)
    with sock, idle:
        assert answer.startswith(b"HTTP/1.1 101 ")
        relay.close()
        thread.join(WAIT_S)
        assert not thread.is_alive()
        for end in (sock, idle):  # a tunnel and a connection not yet served (reset when still in the backlog)
            with contextlib.suppress(ConnectionResetError):
                until_closed(end)  # returns at the end of the stream; one left open would time out
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", relay.port), timeout=WAIT_S)


# -- the real API server's service proxy relays upgrades ------------------------------------------

def test_relayed_through_the_api_servers_service_proxy(sandbox, kube, backend):
    mark = unique("upgrade")
    with relaying(kube.connection, Upstream(backend.namespace, backend.service, backend.port, "web")) as relay:
        assert httpx.get(relay.url, headers=authorized(relay), timeout=WAIT_S).text == "ok"
        sock, answer = upgrade(relay, "/ws?follow=1", mark=mark)
        with sock:
            assert answer.startswith(b"HTTP/1.1 101 ")
            read_until(sock, GREETING, answer.split(b"\r\n\r\n", 1)[1])
            sock.sendall(b"ping")
            assert read_until(sock, b"PING").endswith(b"PING")
        sock, answer = upgrade(relay, "/denied")
        with sock:
            assert read_until(sock, b"upgrade refused", answer).startswith(b"HTTP/1.1 403 ")
    assert sandbox.request_counts() == {"get services/proxy": 3}
    (seen,) = [r for r in backend.requests() if r["headers"].get("X-Test-Mark") == mark]
    # kube-apiserver drops the query of an upgraded request it proxies (kubernetes/kubernetes#77142)
    assert seen["path"].partition("?")[0] == "/ws"
    assert seen["headers"]["Upgrade"] == "echo" and "Authorization" not in seen["headers"]
