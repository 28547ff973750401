"""`nrl-k8s dashboard`: a local port relaying to one Service through the API server's service proxy.

``http://127.0.0.1:PORT/PATH`` goes to ``/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`` on the
API server with the kubeconfig's credentials and TLS (``Connection``: client certificates, tokens,
exec plugins, proxy-url). Serving at the root keeps a page's absolute links (``/api/...``) working.
Any method, request and response bodies streamed both ways (a response without a length goes to the
client chunked, chunk by chunk), keep-alive; an ``Upgrade`` request (a websocket) gets a socket of
its own to the API server and, after its ``101``, the bytes are spliced both ways until one side closes.

What the API server's proxy does that the relay undoes (Kubernetes ``apimachinery/pkg/util/proxy``):
a backend's same-host redirect comes back with its ``Location`` moved under the proxy prefix, and the
absolute links of ``text/html`` pages are moved there too. The relay strips the prefix from
``Location`` and relays a request path that already carries the prefix unchanged. The API server
consumes ``Authorization`` (a backend never sees one): the client's is dropped, the kubeconfig's sent.

Who may use it. The relay listens on 127.0.0.1 only and relays only requests addressed to a loopback
name (``Host``) and, when a browser says where a request comes from (``Origin``), coming from the
relay's own pages: another web page cannot borrow its credentials (DNS rebinding, cross-site requests).
Every request must also carry the relay's token, a random one per start (``secrets.token_urlsafe``)
that appears only in the URL printed on stdout (``http://127.0.0.1:PORT/?token=T``), as Jupyter does,
so another user of the machine cannot use the port: a ``GET``/``HEAD`` bearing it in its query gets
the HttpOnly, ``SameSite=Strict`` cookie ``nrl-k8s-relay-PORT`` and a redirect to the same URL
without it; later requests (websockets too) carry the cookie. A script sends ``Authorization: token T``
(or ``Bearer T``), or the token in the query. ``--open`` gives the browser another URL whose token
logs in once (a command line is visible to other users). Anything else is a 403 saying to open the
printed URL.
A request that may change something (any method but ``GET``, ``HEAD``, ``OPTIONS``) authenticated by
the cookie alone also needs an ``Origin`` (else a ``Referer``) that is the relay's own, since a
browser attaches cookies to requests other pages start; a header or query token cannot come from a
page that does not know it. Neither the token nor the cookie is passed on: the API server gets the
client's other cookies and the target without its ``token`` parameter.
"""

from __future__ import annotations

import hmac
import secrets
import signal
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus, urlsplit

import urllib3

from nrl_k8s.errors import ConfigError, NotFoundError, NrlK8sError
from nrl_k8s.kinds import dgd, raycluster
from nrl_k8s.kinds.service import KIND as SERVICE
from nrl_k8s.kinds.service import proxy_path
from nrl_k8s.kube.connection import REACH_S, Connection
from nrl_k8s.ops.jobs import role_cluster
from nrl_k8s.ray.dashboard import head_service
from nrl_k8s.signals import interrupts_raise

from .tunnel import CHUNK, close_socket, is_upgrade, request_head, upgrade

if TYPE_CHECKING:
    from nrl_k8s.kube.client import Kube

__all__ = ["Admitted", "Login", "Refused", "Relay", "Upstream", "admission", "cluster_dashboard", "cookie_name",
           "frontend", "local_location", "ray_dashboard", "refusal", "request_headers", "upstream_path"]

LOOPBACK = "127.0.0.1"
# hop-by-hop (RFC 9110 §7.6.1), and what the relay itself sets (Host, Authorization) or has answered (Expect)
NOT_PASSED_ON = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                           "te", "trailer", "transfer-encoding", "upgrade", "host", "authorization", "expect"})
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
TOKEN_PARAM = "token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # any other may change something


@dataclass(frozen=True)
class Upstream:
    """A Service port reached through the service proxy; ``what`` names it for people."""

    namespace: str
    service: str
    port: int
    what: str

    @property
    def prefix(self) -> str:
        return proxy_path(self.service, self.namespace, self.port)


def ray_dashboard(kube: Kube, infra: dict, role: str) -> Upstream:
    """The Ray dashboard of the role's cluster (a RayJob's suffixed cluster found as `job list` finds it)."""
    cluster, _ = role_cluster(kube, infra, role)
    return _dashboard_of(cluster, infra["namespace"], head_service(kube, cluster, infra["namespace"]))


def cluster_dashboard(kube: Kube, cluster: str, namespace: str) -> Upstream:
    """The Ray dashboard of the live RayCluster ``cluster`` (no run config); NotFoundError when there is none."""
    live = kube.find(raycluster.KIND, cluster, namespace)
    if live is None:
        raise NotFoundError(f"no RayCluster {cluster} in namespace {namespace}",
                            hint=f"list the RayClusters nrl-k8s manages with `nrl-k8s -n {namespace} cluster list`")
    return _dashboard_of(cluster, namespace, raycluster.head_service_of(live))


def _dashboard_of(cluster: str, namespace: str, service: str) -> Upstream:
    return Upstream(namespace, service, raycluster.DASHBOARD_PORT, f"the Ray dashboard of RayCluster {cluster}")


def frontend(kube: Kube, infra: dict, key: str) -> Upstream:
    """The OpenAI frontend Service of the DGD ``infra.dynamo.KEY``; NotFoundError when it is not running."""
    meta = dgd.render(infra, key)["metadata"]
    service = dgd.frontend_service(meta["name"])
    if kube.find(SERVICE, service, meta["namespace"]) is None:
        raise NotFoundError(f"no Service {service} in namespace {meta['namespace']}: DGD {meta['name']} is not serving",
                            hint=f"bring it up with `nrl-k8s cluster up RECIPE --target dynamo.{key}` "
                                 "(or `nrl-k8s run RECIPE`; RECIPE: its run config)")
    return Upstream(meta["namespace"], service, dgd.FRONTEND_PORT, f"the frontend of DGD {meta['name']}")


# -- rewriting (pure) ----------------------------------------------------------------------------------

def upstream_path(prefix: str, path: str) -> str:
    """The API server path for a request target: under ``prefix``, unless the API server already put it
    there (links in the HTML pages it proxied)."""
    if not path.startswith("/"):  # an absolute-form target (a client that takes us for a proxy)
        parts = urlsplit(path)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if path == prefix or path.startswith((prefix + "/", prefix + "?")):
        return path
    return prefix + path


def local_location(location: str, prefix: str, server: str) -> str:
    """A ``Location`` the API server moved under ``prefix`` (path-only, or on the API server ``server``,
    whose own path prefix is dropped too) as the relay serves it; any other location is kept."""
    parts, base = urlsplit(location), urlsplit(server)
    if parts.netloc and (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
        return location
    path = parts.path
    if base.path.strip("/") and path.startswith(base.path.rstrip("/") + "/"):
        path = path[len(base.path.rstrip("/")):]
    if path != prefix and not path.startswith(prefix + "/"):
        return location
    rest = path[len(prefix):] or "/"
    return rest + (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def request_headers(headers: list[tuple[str, str]], auth: dict[str, str], *, upgrade: bool = False,
                    drop_cookie: str | None = None) -> list[tuple[str, str]]:
    """The client's end-to-end headers plus ``auth``, without the cookie ``drop_cookie`` (a ``Cookie``
    left empty is dropped); an upgrade keeps ``Upgrade`` and says ``Connection: Upgrade``."""
    named = {
        token.strip().lower() for key, value in headers if key.lower() == "connection" for token in value.split(",")
    }
    kept = [(k, v) for k, v in headers if k.lower() not in NOT_PASSED_ON and k.lower() not in named]
    if drop_cookie is not None:
        kept = [(k, _without_cookie(v, drop_cookie) if k.lower() == "cookie" else v) for k, v in kept]
        kept = [(k, v) for k, v in kept if k.lower() != "cookie" or v]
    if upgrade:
        kept += [(k, v) for k, v in headers if k.lower() == "upgrade"] + [("Connection", "Upgrade")]
    return kept + list(auth.items())


def refusal(host: str | None, origin: str | None, port: int) -> str | None:
    """Why a request may not use the relay (None: it may): only loopback names, and only the relay's own pages."""
    if host is not None and _address(f"//{host}")[1] not in _LOOPBACK_NAMES:
        return f"nrl-k8s dashboard relays only requests for 127.0.0.1 or localhost, not for {host}"
    if origin is not None and not _own(origin, port):
        return (
            f"nrl-k8s dashboard relays only requests from its own pages (http://{LOOPBACK}:{port}), not from {origin}"
        )
    return None


def cookie_name(port: int) -> str:
    """The relay's cookie; one per port, as cookies are shared by every port of a host."""
    return f"nrl-k8s-relay-{port}"


@dataclass(frozen=True)
class Admitted:
    """Relay the request, to ``target`` (the client's without its ``token`` parameter)."""

    target: str


@dataclass(frozen=True)
class Login:
    """A valid token in a page's URL: set the cookie and redirect to ``location`` (the URL without it);
    ``once``: the one-time token it was (to be used up)."""

    location: str
    once: str | None = None


@dataclass(frozen=True)
class Refused:
    """Answer 403 with ``why``."""

    why: str


Admission = Admitted | Login | Refused


def admission(token: str, port: int, method: str, target: str, headers: list[tuple[str, str]], *,
              upgrade: bool = False, once: frozenset[str] = frozenset()) -> Admission:
    """Whether a request to the relay on ``port`` proves it knows ``token`` (see the module): by its
    ``Authorization`` header, its query or the relay's cookie (then, for a method that may change
    something, only from the relay's own pages). A page's URL may instead carry one of the one-time
    tokens ``once`` (the URL given to a browser's command line, which others may read)."""
    target, offered = _without_token(target)
    page = method in ("GET", "HEAD") and not upgrade
    if any(_same(t, token) for t in offered):
        return Login(target) if page else Admitted(target)
    if page and (used := next((o for t in offered for o in once if _same(t, o)), None)):
        return Login(target, once=used)
    if any(_same(t, token) for t in _authorization_tokens(headers)):
        return Admitted(target)
    if not any(_same(t, token) for t in _cookies(headers, cookie_name(port))):
        return Refused(f"nrl-k8s dashboard: this relay needs its token: open the URL it printed "
                       f"(http://{LOOPBACK}:{port}/?token=...), or send it as 'Authorization: token TOKEN'")
    if method not in SAFE_METHODS:
        source = _header(headers, "Origin") or _header(headers, "Referer")
        if source is None or not _own(source, port):
            return Refused(f"nrl-k8s dashboard relays a {method} only from its own pages (Origin or Referer "
                           f"http://{LOOPBACK}:{port}); scripts send 'Authorization: token TOKEN'")
    return Admitted(target)


def _same(offered: str, token: str) -> bool:
    return hmac.compare_digest(offered.encode(), token.encode())


def _without_token(target: str) -> tuple[str, list[str]]:
    """(``target`` in origin form without its ``token`` parameters, their values)."""
    if not target.startswith("/"):  # absolute form
        parts = urlsplit(target)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    path, mark, query = target.partition("?")
    kept, tokens = [], []
    for item in query.split("&") if mark else []:
        name, _, value = item.partition("=")
        if unquote_plus(name) == TOKEN_PARAM:
            tokens.append(unquote_plus(value))
        else:
            kept.append(item)
    return path + (f"?{'&'.join(kept)}" if kept else ""), tokens


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name.lower()), None)


def _authorization_tokens(headers: list[tuple[str, str]]) -> list[str]:
    """The credentials of ``Authorization: token T`` and ``Authorization: Bearer T`` headers."""
    found = []
    for key, value in headers:
        scheme, _, credential = value.strip().partition(" ")
        if key.lower() == "authorization" and scheme.lower() in ("token", "bearer"):
            found.append(credential.strip())
    return found


def _cookies(headers: list[tuple[str, str]], name: str) -> list[str]:
    """The values of the cookie ``name`` in every ``Cookie`` header."""
    return [value.strip() for key, header in headers if key.lower() == "cookie"
            for cookie_name_, _, value in (pair.strip().partition("=") for pair in header.split(";"))
            if cookie_name_ == name]


def _without_cookie(header: str, name: str) -> str:
    """A ``Cookie`` header without the cookie ``name``."""
    return "; ".join(
        pair.strip() for pair in header.split(";") if pair.strip() and pair.strip().partition("=")[0] != name
    )


def _own(url: str, port: int) -> bool:
    """Whether ``url`` (an Origin or a Referer) is on the relay: http, a loopback name, its port."""
    return _address(url) in {("http", name, port) for name in _LOOPBACK_NAMES}


def _address(url: str) -> tuple[str, str | None, int | None]:
    """(scheme, host name, port) of a URL; a malformed one has no host."""
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname, parts.port
    except ValueError:
        return "", None, None


# -- the server --------------------------------------------------------------------------------------

class Relay:
    """A loopback HTTP server relaying to ``upstream`` through ``connection``'s API server."""

    def __init__(self, connection: Connection, upstream: Upstream, port: int | None = None):
        """``port``: None = the upstream's own port when free, else any free one; 0 = any free one."""
        self.connection, self.upstream = connection, upstream
        self._server = _bind(port, upstream.port)
        self._server.relay = self
        self._pool = connection.pool(maxsize=64)  # browsers open 6 connections per host; websockets use none
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._serving = threading.Event()
        self.port = self._server.server_address[1]
        self.url = f"http://{LOOPBACK}:{self.port}/"
        self.token = secrets.token_urlsafe(32)  # this start's; shown only in token_url
        self.token_url = f"{self.url}?{TOKEN_PARAM}={self.token}"
        self._once: set[str] = set()
        self._cookie = f"{cookie_name(self.port)}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def serve_forever(self) -> None:
        """Serve until ``close`` (from another thread) or KeyboardInterrupt."""
        self._serving.set()
        try:
            self._server.serve_forever(poll_interval=0.2)
        finally:
            self._serving.clear()

    def run(self) -> None:
        """Serve until Ctrl-C or SIGTERM, then close every connection; returns normally."""
        with interrupts_raise():
            try:
                self.serve_forever()
            except KeyboardInterrupt:
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the closing short
            finally:
                self.close()

    def close(self) -> None:
        """Stop listening and close every connection (clients, tunnels, the pool's)."""
        if self._serving.is_set():
            self._server.shutdown()
        self._server.server_close()
        with self._lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            close_socket(sock)
        self._pool.clear()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_url(self) -> str:
        """A URL for a browser's command line (other users may read it): its token logs in once."""
        once = secrets.token_urlsafe(32)
        with self._lock:
            self._once.add(once)
        return f"{self.url}?{TOKEN_PARAM}={once}"

    def _use(self, once: str | None) -> bool:
        """Use up the one-time token ``once`` (None: not one); False when it was already used."""
        with self._lock:
            if once is None or once in self._once:
                self._once.discard(once or "")
                return True
            return False

    def track(self, sock: socket.socket, opened: bool = True) -> None:
        with self._lock:
            if opened:
                self._open.add(sock)
            else:
                self._open.discard(sock)

    def handle(self, h: _Handler) -> None:
        upgrading = is_upgrade(h.headers.get("Connection"), h.headers.get("Upgrade"))
        why = refusal(h.headers.get("Host"), h.headers.get("Origin"), self.port)
        with self._lock:
            once = frozenset(self._once)
        verdict = Refused(why) if why else admission(self.token, self.port, h.command, h.path, h.headers.items(),
                                                      upgrade=upgrading, once=once)
        if isinstance(verdict, Login) and not self._use(verdict.once):
            verdict = Refused("nrl-k8s dashboard: that one-time URL was used already; open the URL the relay printed")
        if isinstance(verdict, Refused):
            _reply(h, 403, verdict.why)
        elif isinstance(verdict, Login):
            h.send_response_only(302)
            h.send_header("Connection", "close")  # a GET's body, if any, is not read
            h.send_header("Location", verdict.location)
            h.send_header("Set-Cookie", self._cookie)
            h.send_header("Cache-Control", "no-store")
            h.send_header("Content-Length", "0")
            h.end_headers()
        elif upgrading:
            self._tunnel(h, verdict.target)
        else:
            self._forward(h, verdict.target)

    def _headers(self, h: _Handler, auth: dict[str, str], upgrade: bool = False) -> list[tuple[str, str]]:
        return request_headers(h.headers.items(), auth, upgrade=upgrade, drop_cookie=cookie_name(self.port))

    def _forward(self, h: _Handler, target: str) -> None:
        try:
            body, chunked = _request_body(h)
        except ValueError:
            return _reply(
                h, 400, f"nrl-k8s dashboard: Content-Length {h.headers.get('Content-Length')!r} is not a number"
            )
        try:
            url = self.connection.host + upstream_path(self.upstream.prefix, target)
            headers = self._headers(h, self.connection.headers())
            response = self._pool.urlopen(h.command, url, body=body, headers=urllib3.HTTPHeaderDict(headers),
                                          chunked=chunked, retries=False, redirect=False, preload_content=False,
                                          decode_content=False, timeout=urllib3.Timeout(connect=REACH_S))
        except (urllib3.exceptions.HTTPError, NrlK8sError) as exc:
            return _reply(h, 502, f"nrl-k8s dashboard: the API server at {self.connection.host} did not answer: {exc}")
        done = False
        try:
            self._respond(h, response)
            done = True
        finally:
            if done:
                response.release_conn()
            else:
                h.close_connection = True
                response.close()

    def _respond(self, h: _Handler, response) -> None:
        """The response's status and end-to-end headers (Location moved back to the root), then its body
        as it arrives: with its length, else chunked (an HTTP/1.0 client: until the connection ends)."""
        h.send_response_only(response.status, response.reason or None)
        for key, value in response.headers.items():
            if key.lower() == "location":
                value = local_location(value, self.upstream.prefix, self.connection.host)
            if key.lower() not in NOT_PASSED_ON and key.lower() != "content-length":
                h.send_header(key, value)
        length = response.headers.get("Content-Length")
        bodiless = h.command == "HEAD" or response.status in (204, 304) or response.status < 200
        chunked = not bodiless and length is None and h.request_version == "HTTP/1.1"
        if length is not None:
            h.send_header("Content-Length", length)
        elif chunked:
            h.send_header("Transfer-Encoding", "chunked")
        elif not bodiless:
            h.close_connection = True
            h.send_header("Connection", "close")
        h.end_headers()
        if bodiless:
            return
        while data := response.read1(CHUNK, decode_content=False):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if chunked:
            h.wfile.write(b"0\r\n\r\n")

    def _tunnel(self, h: _Handler, target: str) -> None:
        """An upgrade: its own socket to the API server, the request head, then bytes both ways."""
        h.close_connection = True
        server = urlsplit(self.connection.host)
        try:
            auth = self.connection.headers()
            upstream = self.connection.open_socket(REACH_S)
        except (OSError, NrlK8sError) as exc:
            return _reply(h, 502, f"nrl-k8s dashboard: cannot reach the API server at {self.connection.host}: {exc}")
        self.track(upstream)
        try:
            path = server.path.rstrip("/") + upstream_path(self.upstream.prefix, target)
            upgrade(h, upstream, request_head(h.command, path, server.netloc, self._headers(h, auth, upgrade=True)))
        except OSError:
            pass
        finally:
            self.track(upstream, opened=False)
            close_socket(upstream)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    relay: Relay

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the address (slow where DNS is)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = LOOPBACK, self.server_address[1]

    def finish_request(self, request, client_address) -> None:
        self.relay.track(request)
        try:
            super().finish_request(request, client_address)
        finally:
            self.relay.track(request, opened=False)

    def handle_error(self, request, client_address) -> None:
        """A client or the API server went away mid-request: nothing to report."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def __getattr__(self, name: str):
        if name.startswith("do_"):  # any method
            return self._relay
        raise AttributeError(name)

    def _relay(self) -> None:
        self.server.relay.handle(self)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Quiet: the relay prints its URL and nothing per request."""


def _bind(port: int | None, preferred: int) -> _Server:
    """Listen on ``port``; None: on ``preferred`` when it is free, else on any free port."""
    try:
        return _Server((LOOPBACK, preferred if port is None else port), _Handler)
    except OSError as exc:
        if port is not None:
            raise ConfigError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror}",
                              hint="pick another --port, or --port 0 for any free one") from None
    return _Server((LOOPBACK, 0), _Handler)


def _reply(h: BaseHTTPRequestHandler, code: int, text: str) -> None:
    """The relay's own answer, and the connection closed: the client is told so (``Connection: close``),
    or it may send its next request on a connection about to go."""
    body = (text + "\n").encode()
    h.send_response_only(code)
    h.send_header("Content-Type", "text/plain; charset=utf-8")
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Connection", "close")  # sets close_connection
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


def _request_body(h: BaseHTTPRequestHandler) -> tuple[object, bool]:
    """(body, chunked) to send on: the client's bytes streamed, never read whole. ValueError: a bad length."""
    if (h.headers.get("Transfer-Encoding") or "").lower() == "chunked":
        return _chunks(h.rfile), True
    length = int(h.headers.get("Content-Length") or 0)
    return (_Exactly(h.rfile, length), False) if length > 0 else (None, False)


class _Exactly:
    """The next ``length`` bytes of a stream, as a file (urllib3 sends it in blocks)."""

    def __init__(self, stream, length: int):
        self.stream, self.left = stream, length

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(self.left if size < 0 else min(size, self.left)) if self.left else b""
        self.left -= len(data)
        return data


def _chunks(stream) -> Iterator[bytes]:
    """The data of a chunked body, chunk by chunk (trailers are dropped)."""
    while (size := int(stream.readline(1024).split(b";")[0].strip() or b"0", 16)) > 0:
        yield stream.read(size)
        stream.readline(1024)  # the CRLF after each chunk
    while stream.readline(1024) not in (b"\r\n", b"\n", b""):  # trailers
        pass
