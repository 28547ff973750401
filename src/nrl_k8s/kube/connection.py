"""Where the API server is and how to trust it: our own transport instead of the official client.

``from_kubeconfig`` follows kubectl: the KUBECONFIG files are merged (``config.kubeconfig.merge``),
paths are relative to the file that sets them and ``*-data`` wins over a path. ``in_cluster``
uses a pod's service account. ``Kube`` (urllib3) and ``Dashboard.via_api_proxy`` (httpx) share
one ``Connection``: its SSLContext, proxy and ``headers()`` (see ``credentials``).
"""

from __future__ import annotations

import base64
import http.client
import os
import queue
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3

from nrl_k8s.config.kubeconfig import merge as merge_kubeconfig
from nrl_k8s.errors import ConfigError
from nrl_k8s.kube.credentials import Headers, TokenFile, as_mapping, load_cert_chain, user_auth
from nrl_k8s.kube.errors import HandshakeTimeout, NoClusterError
from nrl_k8s.redact import redact_text

__all__ = ["REACH_S", "Connection", "TLSContext", "from_kubeconfig", "in_cluster", "tls_context"]

_VIEW = "check it with `kubectl config view`"
#: Seconds to reach the API server: every connection's TCP connect and TLS handshake (urllib3,
#: httpx, websockets) and, until the server has answered once, its answer (``client.Tuning.reach_s``;
#: over TLS a finished handshake gives the first answer ``client.Tuning.first_answer_s``).
REACH_S = 3.0


class _IdleConnections(queue.SimpleQueue):
    """A connection pool's idle connections in a queue with no lock written in Python.

    urllib3's default, ``queue.LifoQueue``, takes its lock in ``threading.Condition.__enter__``,
    a Python function: a Ctrl-C raised in the main thread just after that lock is taken leaves it
    held, and the next request of any thread (a rollback's) waits for it forever.
    ``SimpleQueue.get``/``put`` are single C calls, which a signal cannot split. urllib3 fills a new
    pool with ``None`` (an empty slot, a new connection) and reads an empty queue the same way, so
    ``None`` is not kept; ``Full`` past ``maxsize`` tells urllib3 to close the extra connection."""

    def __init__(self, maxsize: int):
        super().__init__()
        self.maxsize = maxsize

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if item is None:
            return
        if self.qsize() >= self.maxsize:
            raise queue.Full
        super().put(item)


# urllib3 types QueueCls as LifoQueue; it calls only get, put and qsize on it.
class _HTTPPool(urllib3.HTTPConnectionPool):
    QueueCls = _IdleConnections  # type: ignore[assignment]


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    QueueCls = _IdleConnections  # type: ignore[assignment]

    def _validate_conn(self, conn) -> None:  # connects: TCP, then the TLS handshake
        try:
            super()._validate_conn(conn)
        except TimeoutError as exc:  # the socket's own: a TCP connect timeout is urllib3's ConnectTimeoutError
            raise HandshakeTimeout(conn, f"the TLS handshake with {self.host} did not finish") from exc


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class Connection:
    """One API server: ``host`` (scheme://host:port[/prefix]), TLS (None for http), proxy and auth headers."""

    def __init__(self, host: str, *, ssl_context: ssl.SSLContext | None = None, proxy: str | None = None,
                 auth: Headers | None = None):
        self.host, self.ssl_context, self.proxy, self._auth = host.rstrip("/"), ssl_context, proxy, auth

    def headers(self) -> dict[str, str]:
        """The auth headers to send now (from a fresh credential when the last one expired)."""
        return dict(self._auth()) if self._auth else {}

    def refresh(self, sent: dict[str, str]) -> bool:
        """The API server answered 401 to ``sent``: whether a retry may get other headers (an exec
        plugin runs again, a token file is read again); a fixed token cannot change."""
        refresh = getattr(self._auth, "refresh", None)
        return bool(refresh and refresh(sent))

    def pool(self, maxsize: int) -> urllib3.PoolManager:
        """A urllib3 pool for this server (callers pass retries=False: retrying is theirs)."""
        options: dict[str, Any] = {
            "maxsize": maxsize,
            **({"ssl_context": self.ssl_context} if self.ssl_context else {}),
        }
        manager = (urllib3.ProxyManager(self.proxy, proxy_headers=self._proxy_headers(), **options) if self.proxy
                   else urllib3.PoolManager(**options))
        manager.pool_classes_by_scheme = _POOLS
        return manager

    def open_socket(self, timeout_s: float) -> socket.socket:
        """A blocking socket connected to the API server (TLS on https; through an http:// proxy-url by
        CONNECT) for a protocol upgrade such as a websocket, which a pooled connection cannot hand over."""
        server = urlsplit(self.host)
        port = server.port or (443 if self.ssl_context else 80)
        proxy = urlsplit(self.proxy) if self.proxy else None
        if proxy and proxy.scheme != "http":
            raise ConfigError(f"a websocket through proxy-url {redact_text(str(self.proxy))} is not supported",
                              hint="use an http:// proxy-url; plain HTTP requests do work through this one")
        host, host_port = (proxy.hostname, proxy.port or 80) if proxy else (server.hostname, port)
        if host is None or server.hostname is None:
            raise ConfigError(f"no host name in {redact_text(str(self.proxy if proxy else self.host))}",
                              hint="give the server (or proxy-url) as http(s)://HOST[:PORT]")
        conn: http.client.HTTPConnection
        if self.ssl_context:
            conn = http.client.HTTPSConnection(host, host_port, timeout=timeout_s, context=self.ssl_context)
        else:
            conn = http.client.HTTPConnection(host, host_port, timeout=timeout_s)
        if proxy:
            conn.set_tunnel(server.hostname, port, headers=self._proxy_headers())
        conn.connect()
        conn.sock.settimeout(None)
        return conn.sock

    def _proxy_headers(self) -> dict[str, str]:
        parts = urlsplit(self.proxy)
        login = f"{unquote(parts.username)}:{unquote(parts.password or '')}" if parts.username else None
        return urllib3.make_headers(proxy_basic_auth=login)


class TLSContext(ssl.SSLContext):
    """A client SSLContext that checks (and sends as SNI) ``server_name`` when set: tls-server-name."""

    server_name: str | None = None

    def wrap_socket(self, sock, *args, **kwargs):
        return super().wrap_socket(sock, *args, **{**kwargs, **self._named()})

    def wrap_bio(self, incoming, outgoing, *args, **kwargs):  # TLS inside an https proxy's tunnel
        return super().wrap_bio(incoming, outgoing, *args, **{**kwargs, **self._named()})

    def _named(self) -> dict:
        return {"server_hostname": self.server_name} if self.server_name else {}


def tls_context(*, ca_pem: str | None = None, insecure: bool = False, server_name: str | None = None) -> TLSContext:
    """Verify the server against ``ca_pem``, else certifi's bundle (as the official client did)."""
    context = TLSContext(ssl.PROTOCOL_TLS_CLIENT)
    context.server_name = server_name
    if insecure:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context
    try:
        if ca_pem is None:
            import certifi

            context.load_verify_locations(cafile=certifi.where())
        else:
            context.load_verify_locations(cadata=ca_pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"the certificate authority is not a PEM certificate ({exc})") from None
    return context


def from_kubeconfig(kubeconfig: str | None, context: str | None) -> tuple[Connection, str, str | None]:
    """The Connection of kube context ``context`` (else the current one), its name and its namespace."""
    files = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    existing = [p for p in files.split(os.pathsep) if p and Path(p).expanduser().is_file()]
    if not existing:
        if kubeconfig:
            raise ConfigError(f"kubeconfig {kubeconfig} not found", hint="pass an existing file or unset it")
        raise NoClusterError(
            f"no Kubernetes cluster configured: no kubeconfig at {files} and not running in a pod",
            hint="set KUBECONFIG or pass --context; `nrl-k8s sandbox up` starts a local sandbox",
        )
    try:
        current, merged = merge_kubeconfig([Path(p).expanduser() for p in existing])
    except ConfigError as exc:
        raise NoClusterError(f"cannot read kubeconfig: {exc.message}", hint=_VIEW) from None
    name = context or current
    if name not in merged["contexts"]:
        where = os.pathsep.join(existing)
        if context:
            raise ConfigError(
                f"kube context '{context}' not found in {where}",
                hint="list contexts with `kubectl config get-contexts`",
            )
        raise NoClusterError(
            f"no current context in {where}", hint="pass --context or `kubectl config use-context NAME`"
        )
    try:
        ctx = as_mapping(merged["contexts"][name][0], f"context '{name}'")
        return _connect(ctx, merged), name, ctx.get("namespace") or None
    except ConfigError as exc:
        raise ConfigError(f"kube context '{name}' is not usable: {exc.message}", hint=exc.hint or _VIEW) from None


def _connect(ctx: dict, merged: dict) -> Connection:
    cluster, cluster_base = _entry(merged["clusters"], ctx.get("cluster"), "cluster")
    user, user_base = _entry(merged["users"], ctx.get("user"), "user") if ctx.get("user") else ({}, Path())
    server, proxy = cluster.get("server"), cluster.get("proxy-url") or None
    parts = urlsplit(server) if isinstance(server, str) else None
    if not isinstance(server, str) or parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"cluster '{ctx['cluster']}' has no http(s) server URL (server: {server!r})")
    if proxy and urlsplit(str(proxy)).scheme not in ("http", "https"):
        raise ConfigError(f"proxy-url {redact_text(str(proxy))} is not supported: use an http:// or https:// proxy")
    ca = _data(cluster, "certificate-authority", cluster_base)
    tls = None
    if parts.scheme == "https":
        tls = tls_context(
            ca_pem=ca.decode("ascii", "replace") if ca else None,
            server_name=cluster.get("tls-server-name"),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )
        cert, key = _data(user, "client-certificate", user_base), _data(user, "client-key", user_base)
        if bool(cert) != bool(key):
            raise ConfigError("a client certificate needs both client-certificate and client-key")
        if cert and key:
            load_cert_chain(tls, cert, key)
    info = {"server": server, "tls-server-name": cluster.get("tls-server-name"), "proxy-url": proxy,
            "insecure-skip-tls-verify": cluster.get("insecure-skip-tls-verify"),
            "certificate-authority-data": base64.b64encode(ca).decode() if ca else None,
            "config": next((e.get("extension") for e in cluster.get("extensions") or []
                            if isinstance(e, dict) and e.get("name") == "client.authentication.k8s.io/exec"), None)}
    auth = user_auth(user, user_base, {k: v for k, v in info.items() if v}, tls)
    return Connection(server, ssl_context=tls, proxy=proxy, auth=auth)


def in_cluster(account: Path, env: Mapping[str, str] = os.environ) -> Connection:
    """A pod's service account: KUBERNETES_SERVICE_HOST/PORT, ``account``/token (re-read) and ca.crt."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    try:
        if not host or not port:
            raise ConfigError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set")
        ca = _read(account / "ca.crt", "ca.crt")
        if not ca:
            raise ConfigError(f"{account / 'ca.crt'} is empty")
        host = f"[{host}]" if ":" in host else host
        return Connection(f"https://{host}:{port}", ssl_context=tls_context(ca_pem=ca.decode("ascii", "replace")),
                          auth=TokenFile(account / "token"))
    except ConfigError as exc:
        raise NoClusterError(
            f"in-cluster config is not usable: {exc.message}", hint="check the pod's service account mount"
        ) from None


def _entry(entries: dict, name: object, what: str) -> tuple[dict, Path]:
    if not isinstance(name, str) or name not in entries:
        raise ConfigError(f"{what} '{name}' not found" if name else f"it names no {what}")
    value, base = entries[name]
    return as_mapping(value, f"{what} '{name}'"), base


def _data(section: dict, field: str, base: Path) -> bytes | None:
    """``FIELD-data`` (base64) or the file ``FIELD`` names, relative to ``base``; None if neither."""
    if section.get(f"{field}-data"):
        try:
            return base64.b64decode(str(section[f"{field}-data"]), validate=True)
        except ValueError:
            raise ConfigError(f"{field}-data is not base64") from None
    if not section.get(field):
        return None
    return _read(base / Path(str(section[field])).expanduser(), field)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
