"""A simulated Kubernetes API server for the local sandbox (HTTP on loopback, in-memory state).

What it simulates: bearer-token authentication, legacy discovery, CRUD/list/watch/patch/
server-side apply/delete with garbage collection on core kinds (namespaces, pods, services,
configmaps, secrets, events, serviceaccounts), apps/v1 deployments and resource.k8s.io/v1
resourceclaimtemplates (stored; deployments are run by ``operators/deployments.py``),
CustomResourceDefinitions and the custom resources they define (with ``/status``),
SelfSubjectAccessReview and SelfSubjectRulesReview, ``pods/log`` (what each simulated container printed, see ``pod_logs``;
streamed with ``follow``), the service proxy to loopback backends (a Ray head Service's dashboard
port through ``head_proxy``: that cluster's jobs and packages only, a job gets what its head
container would give it; upgrade requests such as the Ray log tail websocket are relayed),
``Table`` output for kubectl, and API-level faults (see ``faults.py``).
Request bodies are bounded like the real server's (3 MiB, ``413 RequestEntityTooLarge``), and
128 MiB through the service proxy (package uploads; Ray's dashboard takes under 100 MiB). Bodies
are JSON, YAML, or protobuf for the kinds ``kubectl create`` / ``auth can-i`` send that way
(``protobuf.py``); answers are always JSON (``406`` for a client that accepts no JSON). A
Secret's ``stringData`` is merged into ``data`` on every write (``store.encode_string_data``).
Patch and apply semantics are simplified as documented in ``patch.py`` and ``apply.py``; store,
watch and GC rules are in ``store.py``.

What it does not: scheduling, kubelets, networking or DNS, admission webhooks, real RBAC
(only the ``rbac-deny`` fault), schema validation of custom resources, protobuf answers, HTTP/2.

Transport: one loopback port speaks plain HTTP and, sniffed from the first byte, TLS with a
self-signed certificate (``ca_pem``) — kubectl only sends bearer tokens over TLS.

Admin endpoints (either token): ``GET /sandbox/faults``, ``PUT /sandbox/faults`` with
``{"set": {NAME: VALUE|null}, "clear": [NAME]}``, ``GET /sandbox/stats`` (request counts by
``"VERB RESOURCE"`` for the user token; discovery documents count as ``get discovery``),
``DELETE /sandbox/stats``.
"""

from __future__ import annotations

import base64
import binascii
import json
import queue
import select
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from nrl_k8s.sandbox import apply as ssa
from nrl_k8s.sandbox import protobuf, tables
from nrl_k8s.sandbox.discovery import SERVER_VERSION, OpenApi, ResourceType
from nrl_k8s.sandbox.driver_env import DriverEnv
from nrl_k8s.sandbox.faults import Faults
from nrl_k8s.sandbox.head_proxy import HeadDashboard
from nrl_k8s.sandbox.patch import PatchError, json_patch, merge_patch, parse_json, strategic_merge
from nrl_k8s.sandbox.pids import open_private
from nrl_k8s.sandbox.pod_logs import LogQuery, PodLogs, container_state
from nrl_k8s.sandbox.proxy import ServiceProxy
from nrl_k8s.sandbox.selectors import SelectorError, matcher
from nrl_k8s.sandbox.statuses import ApiStatus, forbidden
from nrl_k8s.sandbox.store import Store, now
from nrl_k8s.sandbox.tls import self_signed, server_context
from nrl_k8s.tunnel import is_upgrade

USER = "sandbox-user"
OPERATOR = "sandbox-operator"
_TRUE = ("1", "t", "T", "true", "True", "TRUE")
RULE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
_WATCH_POLL_S = 0.5
_DEFAULT_WATCH_TIMEOUT_S = 1800
MAX_BODY_BYTES = 3 * 1024 * 1024  # the real API server's limit for a request body
MAX_PROXY_BODY_BYTES = 128 * 1024 * 1024  # above Ray's dashboard limit (100 MiB) for package uploads


def _truthy(value: str | None) -> bool:
    return value in _TRUE


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    user: str
    raw_query: str

    def param(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, default)


@dataclass
class Route:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    rest: str  # what follows ``proxy`` for the service proxy


class Response:
    """A complete (non-streaming) reply."""

    def __init__(self, code: int, body: object, content_type: str = "application/json", headers: dict | None = None):
        self.code = code
        self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.content_type = content_type
        self.headers = headers or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_HttpServer"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return

    def _serve(self) -> None:
        limit = MAX_PROXY_BODY_BYTES if "/proxy" in urlsplit(self.path).path else MAX_BODY_BYTES
        try:
            body = self._body(limit)
        except ApiStatus as exc:
            self.close_connection = True  # the rest of the body is not read
            ApiServer.send(self, Response(exc.code, exc.body()))
            return
        self.server.api.handle(self, body)

    def _body(self, limit: int) -> bytes:
        """The request body (Content-Length or chunked), at most ``limit`` bytes, else 413."""
        too_large = ApiStatus(413, f"Request entity too large: limit is {limit}")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks, size = [], 0
            while (length := int(self.rfile.readline(1024).split(b";")[0].strip() or b"0", 16)) > 0:
                size += length
                if size > limit:
                    raise too_large
                chunks.append(self.rfile.read(length))
                self.rfile.readline(1024)  # the CRLF after each chunk
            while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > limit:
            raise too_large
        return self.rfile.read(length) if length else b""

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "ApiServer"
    ssl_context: ssl.SSLContext | None = None

    def finish_request(self, request: socket.socket, client_address: tuple) -> None:
        """Serve one connection, upgrading it to TLS when it starts with a TLS handshake."""
        if self.ssl_context is not None:
            try:
                if request.recv(1, socket.MSG_PEEK) == b"\x16":
                    request = self.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        try:
            self.RequestHandlerClass(request, client_address, self)
        finally:
            if isinstance(request, ssl.SSLSocket):
                request.close()


class ApiServer:
    def __init__(
        self,
        *,
        user_token: str,
        operator_token: str,
        faults: Faults,
        state_file: Path | None = None,
        history_size: int = 1000,
        tls: bool = True,
        drivers: DriverEnv | None = None,
        pod_logs: PodLogs | None = None,
    ):
        self._tokens = {user_token: USER, operator_token: OPERATOR}
        self.faults = faults
        self.state_file = Path(state_file) if state_file else None
        self.store = Store(history_size=history_size)
        self._proxy = ServiceProxy()
        self._heads = HeadDashboard(drivers, self._proxy) if drivers is not None else None
        self.pod_logs = pod_logs or PodLogs()
        self._counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._http: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self.ca_pem: bytes | None = None
        self._ssl_context: ssl.SSLContext | None = None
        if tls:
            self.ca_pem, key_pem = self_signed()
            self._ssl_context = server_context(self.ca_pem, key_pem)

    # ------------------------------------------------------------------ lifecycle
    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Load the state file (if any), serve in background threads, return the bound port."""
        if self.state_file and self.state_file.exists():
            self.store.load(json.loads(self.state_file.read_text()))
        self.store.start_gc()
        self._http = _HttpServer((host, port), _Handler)
        self._http.api = self
        self._http.ssl_context = self._ssl_context
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), name="sandbox-apiserver", daemon=True)
        self._thread.start()
        return self._http.server_address[1]

    def stop(self) -> None:
        """Stop serving, end every watch and save the state file (if any)."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        self.store.close()
        self._proxy.close()
        if self.state_file:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            with open_private(self.state_file) as handle:
                handle.write(json.dumps(self.store.dump()))

    def install_crd(self, crd: dict) -> None:
        """Create (or replace) a CustomResourceDefinition; its resources are served at once."""
        rtype = self.store.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        name = crd["metadata"]["name"]
        with self.store.lock:
            try:
                self.store.create(rtype, None, crd)
            except ApiStatus as exc:
                if exc.code != 409:
                    raise
                self.store.update(rtype, None, name, lambda live: {**crd, "metadata": live["metadata"]})

    def request_counts(self) -> dict[str, int]:
        with self._counts_lock:
            return dict(self._counts)

    def reset_counts(self) -> None:
        with self._counts_lock:
            self._counts.clear()

    def _count(self, request: str) -> None:
        with self._counts_lock:
            self._counts[request] += 1

    # ------------------------------------------------------------------ HTTP entry
    def handle(self, handler: _Handler, body: bytes) -> None:
        split = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in handler.headers.items()}
        try:
            if split.path in ("/healthz", "/readyz", "/livez"):
                self.send(handler, Response(200, b"ok", "text/plain"))
                return
            if split.path.rstrip("/") == "/version":  # public, as system:public-info-viewer makes it
                self.send(handler, Response(200, SERVER_VERSION))
                return
            user = self._authenticate(headers)
            request = Request(handler.command, unquote(split.path), query, headers, body, user, split.query)
            response = self._dispatch(request, handler)
        except ApiStatus as exc:
            response = Response(exc.code, exc.body(), headers=exc.headers)
        if response is not None:
            self.send(handler, response)

    def _authenticate(self, headers: dict[str, str]) -> str:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        user = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            raise ApiStatus(401, "Unauthorized")
        return user

    @staticmethod
    def send(handler: _Handler, response: Response) -> None:
        handler.send_response(response.code)
        handler.send_header("Content-Type", response.content_type)
        handler.send_header("Content-Length", str(len(response.body)))
        for key, value in response.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(response.body)

    # ------------------------------------------------------------------ routing
    def _dispatch(self, req: Request, handler: _Handler) -> Response | None:
        path = req.path.rstrip("/") or "/"
        if path.startswith("/sandbox/"):
            return self._admin(req, path)
        if req.method == "GET":
            static = self._discovery(path)
            if static is not None:
                if req.user != OPERATOR:
                    self._count("get discovery")
                return static
        route = self._route(req.path)
        if route is None:
            raise ApiStatus(404, "the server could not find the requested resource")
        return self._resource(req, route, handler)

    def _discovery(self, path: str) -> Response | None:
        registry = self.store.registry
        with self.store.lock:
            if path == "/api":
                return Response(200, registry.api_versions())
            if path == "/apis":
                return Response(200, registry.api_group_list())
            if path == "/openapi/v3":
                return Response(200, OpenApi(registry).index())
            if path.startswith("/openapi/v3/"):
                document = OpenApi(registry).group_version(path.removeprefix("/openapi/v3/"))
                if document is None:
                    raise ApiStatus(404, "the server could not find the requested resource")
                return Response(200, document)
            if path.startswith("/openapi/"):
                raise ApiStatus(404, "the server could not find the requested resource")
            parts = path.strip("/").split("/")
            if parts == ["api", "v1"]:
                return Response(200, registry.resource_list("", "v1"))
            if len(parts) == 2 and parts[0] == "apis":
                group = registry.api_group(parts[1])
                return Response(200, group) if group else None
            if len(parts) == 3 and parts[0] == "apis":
                listing = registry.resource_list(parts[1], parts[2])
                return Response(200, listing) if listing else None
        return None

    def _route(self, path: str) -> Route | None:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        with self.store.lock:
            rtype = self.store.registry.lookup(group, version, rest[0])
        if rtype is None or (namespace is not None and not rtype.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and not (
            (sub in ("status", "log") and len(rest) == 3 and (rtype.has_status if sub == "status" else "log" in rtype.subresources))
            or (sub == "proxy" and "proxy" in rtype.subresources)
        ):
            return None
        proxied = "/" + "/".join(rest[3:]) + ("/" if path.endswith("/") and len(rest) > 3 else "")
        return Route(rtype, namespace, name, sub, proxied if sub == "proxy" else "")

    # ------------------------------------------------------------------ resources
    @staticmethod
    def _verb(req: Request, route: Route) -> str:
        if route.subresource == "proxy":
            return {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[req.method]
        if route.subresource == "log" and req.method != "GET":
            raise ApiStatus(405, "the server does not allow this method on the requested resource")
        if route.name is None:
            collection = {"GET": "watch" if _truthy(req.param("watch")) else "list", "POST": "create", "DELETE": "deletecollection"}
            verb = collection.get(req.method)
        else:
            verb = {"GET": "watch" if _truthy(req.param("watch")) else "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
                req.method
            )
        if verb is None:
            raise ApiStatus(405, "the server does not allow this method on the requested resource")
        return verb

    def _gate(self, req: Request, route: Route, verb: str) -> None:
        """Count user requests and inject faults and RBAC denials (operator token exempt)."""
        if req.user == OPERATOR:
            return
        rtype = route.rtype
        resource = f"{rtype.plural}/{route.subresource}" if route.subresource else rtype.plural
        self._count(f"{verb} {resource}")
        if self.faults.in_outage():
            raise ApiStatus(503, "injected fault: the API server is unavailable (api-outage)")
        if self.faults.denied(verb, resource) or (resource == "services/proxy" and self.faults.get("proxy-forbidden") is not None):
            raise forbidden(verb, resource, rtype.group, route.namespace, route.name, req.user)
        code = self.faults.take_api_error(verb, resource)
        if code is not None:
            headers = {"Retry-After": "1"} if code == 429 else {}
            raise ApiStatus(code, f"injected fault: {verb} {resource} answered {code}", headers=headers)

    def _resource(self, req: Request, route: Route, handler: _Handler) -> Response | None:
        verb = self._verb(req, route)
        self._gate(req, route, verb)
        if route.subresource not in ("proxy", "log") and not _accepts_json(req.headers.get("accept", "")):
            raise ApiStatus(406, "only the following media types are accepted: application/json")
        rtype, ns, name = route.rtype, route.namespace, route.name
        if route.subresource == "proxy":
            with self.store.lock:
                service = self.store.get(rtype, ns, name.split(":")[-2] if name.count(":") == 2 else name.split(":")[0])
            request = (service, name, req.method, route.rest, req.raw_query, req.body, req.headers)
            if is_upgrade(req.headers.get("connection"), req.headers.get("upgrade")):  # a websocket, relayed here
                upgrade = (service, name, req.method, route.rest, req.raw_query, req.headers, handler)
                heads = self._heads is not None and self._heads.serves(service, name)
                reply = self._heads.tunnel(*upgrade, self._find) if heads else self._proxy.tunnel(*upgrade)
                return None if reply is None else Response(*reply)
            if self._heads is not None and self._heads.serves(service, name):
                code, body, ctype = self._heads.forward(*request, self._find)
            else:
                code, body, ctype = self._proxy.forward(*request)
            return Response(code, body, ctype)
        if rtype.plural == "selfsubjectaccessreviews":
            return self._access_review(req)
        if rtype.plural == "selfsubjectrulesreviews":
            return self._rules_review(req)
        if route.subresource == "log":
            return self._pod_log(req, route, handler)
        dry_run = req.param("dryRun") == "All"
        if verb == "get":
            return self._output(req, rtype, self.store.get(rtype, ns, name))
        if verb == "list":
            return self._list(req, route)
        if verb == "watch":
            self._watch(req, route, handler)
            return None
        if verb == "create":
            obj = self._body_object(req, rtype)
            manager = self._manager(req)
            ssa.track_update(None, obj, manager=manager, api_version=rtype.api_version, when=now())
            return Response(201, self.store.create(rtype, ns, obj, dry_run=dry_run))
        if verb == "update":
            obj = self._body_object(req, rtype)
            self._check_identity(obj, rtype, ns)

            def replace(live: dict) -> dict:
                return ssa.track_update(
                    live, obj, manager=self._manager(req), api_version=rtype.api_version, when=now(), subresource=route.subresource
                )

            return Response(200, self.store.update(rtype, ns, name, replace, subresource=route.subresource, dry_run=dry_run))
        if verb == "patch":
            return self._patch(req, route, dry_run)
        if verb == "delete":
            return Response(200, self._delete(req, route, name, dry_run))
        return self._delete_collection(req, route, dry_run)

    def _find(self, group: str, version: str, plural: str, namespace: str, name: str) -> dict | None:
        """A stored object, or None when it (or its kind) does not exist."""
        with self.store.lock:
            rtype = self.store.registry.lookup(group, version, plural)
            try:
                return None if rtype is None else self.store.get(rtype, namespace, name)
            except ApiStatus:
                return None

    @staticmethod
    def _manager(req: Request) -> str:
        agent = req.headers.get("user-agent", "unknown").split("/")[0]
        return req.param("fieldManager") or agent

    @staticmethod
    def _body_object(req: Request, rtype: ResourceType) -> dict:
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip()
        decodes_protobuf = (rtype.api_version, rtype.kind) in protobuf.KINDS
        if ctype == protobuf.MEDIA_TYPE and decodes_protobuf:
            try:
                obj = protobuf.decode(req.body)
            except protobuf.Unsupported as exc:
                raise ApiStatus(415, str(exc)) from None
            except protobuf.ProtobufError as exc:
                raise ApiStatus(400, f"the protobuf body could not be decoded: {exc}") from None
        elif ctype not in ("application/json", "application/yaml", ""):
            accepted = ", ".join(["application/json", "application/yaml"] + [protobuf.MEDIA_TYPE] * decodes_protobuf)
            raise ApiStatus(415, f"the body of the request was in an unknown format - accepted media types include: {accepted}")
        else:
            try:
                obj = parse_json(req.body)
            except PatchError as exc:
                raise ApiStatus(400, str(exc)) from None
        if not isinstance(obj, dict):
            raise ApiStatus(400, "the request body must be a JSON object")
        if obj.get("kind") not in (None, rtype.kind):
            raise ApiStatus(400, f"the kind of the body ({obj.get('kind')}) does not match the resource ({rtype.kind})")
        return obj

    @staticmethod
    def _check_identity(obj: dict, rtype: ResourceType, ns: str | None) -> None:
        body_ns = (obj.get("metadata") or {}).get("namespace")
        if rtype.namespaced and body_ns not in (None, "", ns):
            raise ApiStatus(400, "the namespace of the provided object does not match the namespace sent on the request")

    def _matcher(self, req: Request):
        try:
            return matcher(req.param("labelSelector"), req.param("fieldSelector"))
        except SelectorError as exc:
            raise ApiStatus(400, str(exc)) from None

    def _output(self, req: Request, rtype: ResourceType, obj: dict) -> Response:
        if tables.wants_table(req.headers.get("accept", "")):
            return Response(200, tables.table(rtype, [obj], self.store.resource_version))
        return Response(200, obj)

    def _list(self, req: Request, route: Route) -> Response:
        rtype = route.rtype
        items, rv = self.store.list(rtype, route.namespace, self._matcher(req))
        token = req.param("continue")
        if token:
            try:
                start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise ApiStatus(400, "continue key is not valid") from None
            items = [i for i in items if [i["metadata"].get("namespace", ""), i["metadata"]["name"]] > start]
        metadata: dict = {"resourceVersion": rv}
        limit = req.param("limit")
        if limit and limit.isdigit() and 0 < int(limit) < len(items):
            page, rest = items[: int(limit)], items[int(limit) :]
            last = page[-1]["metadata"]
            start = [last.get("namespace", ""), last["name"]]
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps({"start": start, "rv": rv}).encode()).decode()
            metadata["remainingItemCount"] = len(rest)
            items = page
        if tables.wants_table(req.headers.get("accept", "")):
            table = tables.table(rtype, items, rv)
            table["metadata"].update({k: v for k, v in metadata.items() if k != "resourceVersion"})
            return Response(200, table)
        return Response(200, {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": metadata, "items": items})

    def _watch(self, req: Request, route: Route, handler: _Handler) -> None:
        match = self._matcher(req)
        if route.name is not None:
            inner = match
            match = lambda obj: obj["metadata"]["name"] == route.name and inner(obj)  # noqa: E731
        timeout = req.param("timeoutSeconds")
        deadline_s = int(timeout) if timeout and timeout.isdigit() else _DEFAULT_WATCH_TIMEOUT_S
        as_table = tables.wants_table(req.headers.get("accept", ""))
        try:
            watch = self.store.watch(route.rtype, route.namespace, match, req.param("resourceVersion"))
        except ApiStatus as exc:
            if exc.code != 410:
                raise
            self._stream(handler, iter([("ERROR", exc.body())]), as_table=False, rtype=route.rtype)
            return
        try:
            self._stream(handler, self._events(watch, handler, deadline_s), as_table=as_table, rtype=route.rtype)
        finally:
            self.store.unwatch(watch)

    @staticmethod
    def _events(watch, handler: _Handler, deadline_s: float):
        deadline = time.monotonic() + deadline_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = watch.queue.get(timeout=min(_WATCH_POLL_S, left))
            except queue.Empty:
                if _peer_closed(handler.connection):
                    return
                continue
            if item is None:
                return
            yield item

    def _stream(self, handler: _Handler, events, *, as_table: bool, rtype: ResourceType) -> None:
        def chunks():
            for kind, obj in events:
                if as_table and kind != "ERROR":
                    obj = tables.table(rtype, [obj], obj["metadata"].get("resourceVersion", ""))
                yield json.dumps({"type": kind, "object": obj}).encode() + b"\n"

        _send_chunked(handler, "application/json", chunks())

    def _pod_log(self, req: Request, route: Route, handler: _Handler) -> Response | None:
        """``pods/NAME/log``: the container's output (``pod_logs``), streamed with ``follow``."""
        query = LogQuery.parse(req.query)
        pod = self.store.get(route.rtype, route.namespace, route.name)
        container = self.pod_logs.container(pod, query)
        source = self.pod_logs.source(pod, container, self._find)
        lines, cursor = source.read(0, final=not query.follow)
        first = query.format(query.tail(lines))
        if not query.follow:
            return Response(200, first[: query.limit_bytes], "text/plain")

        def ended() -> bool:
            live = self._find("", "v1", "pods", route.namespace, route.name)
            return live is None or live["metadata"]["uid"] != pod["metadata"]["uid"] or \
                "terminated" in container_state(live.get("status") or {}, container)

        def chunks():
            nonlocal cursor
            yield first
            while not _peer_closed(handler.connection):
                done = ended()
                if not done:
                    source.wait(cursor, _WATCH_POLL_S)
                more, cursor = source.read(cursor, final=done)
                yield query.format(more)
                if done:
                    return

        _send_chunked(handler, "text/plain", _limited(chunks(), query.limit_bytes))
        return None

    def _patch(self, req: Request, route: Route, dry_run: bool) -> Response:
        rtype, ns, name = route.rtype, route.namespace, route.name
        ctype = req.headers.get("content-type", "").split(";")[0].strip()
        if ctype == "application/apply-patch+yaml":
            return self._server_side_apply(req, route, dry_run)
        algorithms = {
            "application/merge-patch+json": merge_patch,
            "application/json-patch+json": json_patch,
        }
        if not rtype.custom:
            algorithms["application/strategic-merge-patch+json"] = strategic_merge
        if ctype not in algorithms:
            accepted = ", ".join(list(algorithms) + ["application/apply-patch+yaml"])
            raise ApiStatus(415, f"the body of the request was in an unknown format - accepted media types include: {accepted}")
        try:
            patch = parse_json(req.body)
        except PatchError as exc:
            raise ApiStatus(400, str(exc)) from None

        def patched(live: dict) -> dict:
            try:
                result = algorithms[ctype](live, patch)
            except PatchError as exc:
                raise ApiStatus(422, str(exc), name=name, group=rtype.group, kind=rtype.plural) from None
            if not isinstance(result, dict):
                raise ApiStatus(422, "the patch does not produce an object", name=name)
            return ssa.track_update(
                live, result, manager=self._manager(req), api_version=rtype.api_version, when=now(), subresource=route.subresource
            )

        return Response(200, self.store.update(rtype, ns, name, patched, subresource=route.subresource, dry_run=dry_run))

    def _server_side_apply(self, req: Request, route: Route, dry_run: bool) -> Response:
        rtype, ns, name = route.rtype, route.namespace, route.name
        manager = req.param("fieldManager")
        if not manager:
            raise ApiStatus(
                422,
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                group="meta.k8s.io",
                kind="PatchOptions",
            )
        try:
            applied = yaml.safe_load(req.body or b"")
        except yaml.YAMLError as exc:
            raise ApiStatus(400, f"error decoding YAML: {exc}") from None
        if not isinstance(applied, dict):
            raise ApiStatus(400, "the apply configuration must be an object")
        meta = applied.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise ApiStatus(400, f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        force = _truthy(req.param("force"))
        options = {"manager": manager, "force": force, "api_version": rtype.api_version, "subresource": route.subresource}
        with self.store.lock:
            try:
                self.store.get(rtype, ns, name)
            except ApiStatus as exc:
                if exc.code != 404 or route.subresource:
                    raise
                created = ssa.apply({"metadata": {"name": name}}, applied, when=now(), **options)
                return Response(201, self.store.create(rtype, ns, created, dry_run=dry_run))
            return Response(
                200,
                self.store.update(
                    rtype, ns, name, lambda live: ssa.apply(live, applied, when=now(), **options), subresource=route.subresource, dry_run=dry_run
                ),
            )

    def _delete_options(self, req: Request) -> tuple[str, dict]:
        options = {}
        if req.body:
            try:
                options = parse_json(req.body) or {}
            except PatchError as exc:
                raise ApiStatus(400, str(exc)) from None
        propagation = req.param("propagationPolicy") or options.get("propagationPolicy") or "Background"
        if _truthy(req.param("orphanDependents")) or options.get("orphanDependents") is True:
            propagation = "Orphan"
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise ApiStatus(400, f"propagationPolicy: Unsupported value: {propagation!r}")
        return propagation, options.get("preconditions") or {}

    def _delete(self, req: Request, route: Route, name: str, dry_run: bool) -> dict:
        propagation, preconditions = self._delete_options(req)
        if route.rtype.plural == "namespaces" and name in ("default", "kube-system", "kube-public"):
            raise ApiStatus(403, f'namespaces "{name}" is forbidden: this namespace may not be deleted', name=name, kind="namespaces")
        return self.store.delete(
            route.rtype,
            route.namespace,
            name,
            propagation=propagation,
            precondition_uid=preconditions.get("uid"),
            precondition_rv=preconditions.get("resourceVersion"),
            dry_run=dry_run,
        )

    def _delete_collection(self, req: Request, route: Route, dry_run: bool) -> Response:
        propagation, _ = self._delete_options(req)
        rtype = route.rtype
        items, rv = self.store.list(rtype, route.namespace, self._matcher(req))
        deleted = []
        for item in items:
            meta = item["metadata"]
            try:
                deleted.append(self.store.delete(rtype, meta.get("namespace"), meta["name"], propagation=propagation, dry_run=dry_run))
            except ApiStatus as exc:
                if exc.code != 404:
                    raise
        return Response(200, {"kind": f"{rtype.kind}List", "apiVersion": rtype.api_version, "metadata": {"resourceVersion": rv}, "items": deleted})

    def _access_review(self, req: Request) -> Response:
        review = self._body_object(req, self.store.registry.lookup("authorization.k8s.io", "v1", "selfsubjectaccessreviews"))
        attrs = (review.get("spec") or {}).get("resourceAttributes") or {}
        resource = attrs.get("resource", "")
        if attrs.get("subresource"):
            resource = f"{resource}/{attrs['subresource']}"
        allowed = req.user == OPERATOR or not self.faults.denied(attrs.get("verb", ""), resource)
        review.update(apiVersion="authorization.k8s.io/v1", kind="SelfSubjectAccessReview")
        review.setdefault("metadata", {})["creationTimestamp"] = None
        review["status"] = {"allowed": allowed} if allowed else {"allowed": False, "reason": "denied by the sandbox rbac-deny fault"}
        return Response(201, review)

    def _rules_review(self, req: Request) -> Response:
        """What the sandbox grants, as RBAC rules: everything (one wildcard rule) unless ``rbac-deny``
        is set, then per resource (and subresource) the verbs it leaves; ``rules-incomplete``
        answers like a webhook authorizer: incomplete, listing only the self reviews."""
        review = self._body_object(req, self.store.registry.lookup("authorization.k8s.io", "v1", "selfsubjectrulesreviews"))
        self_reviews = {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}
        status: dict = {"incomplete": False, "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*"]}]}
        if self.faults.get("rules-incomplete") is not None and req.user != OPERATOR:
            status.update(incomplete=True, resourceRules=[self_reviews],
                          evaluationError="webhook authorizer does not support user rule resolution")
        elif self.faults.get("rbac-deny") is None or req.user == OPERATOR:
            status["resourceRules"] = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
        else:
            rules = [self_reviews]
            with self.store.lock:
                types = self.store.registry.all_types()
            resources = {}  # (group, resource) once, whatever the versions
            for rtype in types:
                subresources = (["status"] if rtype.has_status else []) + list(rtype.subresources)
                for resource in [rtype.plural, *(f"{rtype.plural}/{sub}" for sub in subresources)]:
                    resources[rtype.group, resource] = [verb for verb in RULE_VERBS if not self.faults.denied(verb, resource)]
            rules += [{"verbs": verbs, "apiGroups": [group], "resources": [resource]}
                      for (group, resource), verbs in resources.items() if verbs]
            status["resourceRules"] = rules
        review.update(apiVersion="authorization.k8s.io/v1", kind="SelfSubjectRulesReview", status=status)
        review.setdefault("metadata", {})["creationTimestamp"] = None
        return Response(201, review)

    # ------------------------------------------------------------------ admin
    def _admin(self, req: Request, path: str) -> Response:
        if path == "/sandbox/faults" and req.method == "GET":
            return Response(200, self.faults.active())
        if path == "/sandbox/faults" and req.method == "PUT":
            try:
                change = parse_json(req.body) or {}
                for fault, value in (change.get("set") or {}).items():
                    self.faults.set(fault, value)
                for fault in change.get("clear") or []:
                    self.faults.clear(fault)
            except (PatchError, ValueError, AttributeError) as exc:
                raise ApiStatus(400, str(exc)) from None
            return Response(200, self.faults.active())
        if path == "/sandbox/stats" and req.method == "GET":
            return Response(200, self.request_counts())
        if path == "/sandbox/stats" and req.method == "DELETE":
            self.reset_counts()
            return Response(200, {})
        raise ApiStatus(404, "the server could not find the requested resource")


def _send_chunked(handler: _Handler, content_type: str, chunks) -> None:
    """A 200 streamed with chunked encoding, one chunk per non-empty item of ``chunks``."""
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    try:
        for chunk in chunks:
            if chunk:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except OSError:  # the client went away (broken pipe, reset, or a TLS error at shutdown)
        handler.close_connection = True


def _limited(chunks, limit: int | None):
    """``chunks`` cut off after ``limit`` bytes in total (None: no limit)."""
    left = limit
    for chunk in chunks:
        if left is not None:
            chunk, left = chunk[:left], left - len(chunk[:left])
        yield chunk
        if left == 0:
            return


def _accepts_json(accept: str) -> bool:
    """Whether an Accept header admits the JSON the sandbox answers in (protobuf is never sent)."""
    types = [part.split(";")[0].strip() for part in accept.split(",")]
    return not accept.strip() or any(t in ("application/json", "application/*", "*/*", "application/yaml") for t in types)


def _peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (readable with no data).

    Clients send nothing more on a watch connection, so a readable TLS socket (which cannot
    be peeked) means a close alert or EOF.
    """
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return isinstance(sock, ssl.SSLSocket) or sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
