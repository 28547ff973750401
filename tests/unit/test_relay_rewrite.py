"""nrl_k8s.relay's request and response rewriting (pure): request paths onto the service proxy's
prefix, Location headers back to the relay's root, headers passed on, and who may use the relay."""

from __future__ import annotations

import pytest

from nrl_k8s.relay import Upstream, local_location, refusal, request_headers, upstream_path

PREFIX = Upstream("team", "rc-head-svc", 8265, "the dashboard").prefix
SERVER = "https://api.example:6443"

PATHS = {
    "root": ("/", f"{PREFIX}/"),
    "api call with query": ("/api/jobs/?limit=5", f"{PREFIX}/api/jobs/?limit=5"),
    "percent-encoding kept": ("/logs/a%2Fb%20c", f"{PREFIX}/logs/a%2Fb%20c"),
    "a link the API server already moved under the prefix": (f"{PREFIX}/static/main.js", f"{PREFIX}/static/main.js"),
    "the prefix itself": (PREFIX, PREFIX),
    "the prefix with a query": (f"{PREFIX}?x=1", f"{PREFIX}?x=1"),
    "a longer service name is not the prefix": (f"{PREFIX}x/y", f"{PREFIX}{PREFIX}x/y"),
    "absolute-form target": ("http://127.0.0.1:8265/api/version?x=1", f"{PREFIX}/api/version?x=1"),
}


@pytest.mark.parametrize(("path", "expected"), PATHS.values(), ids=PATHS.keys())
def test_upstream_path(path, expected):
    assert upstream_path(PREFIX, path) == expected


def test_upstream_prefix_names_namespace_service_and_port():
    assert PREFIX == "/api/v1/namespaces/team/services/rc-head-svc:8265/proxy"


LOCATIONS = {
    # name: (Location from the API server, API server URL, as the relay sends it)
    "moved under the prefix": (f"{PREFIX}/new?x=1", SERVER, "/new?x=1"),
    "the prefix itself": (PREFIX, SERVER, "/"),
    "with a fragment": (f"{PREFIX}/#/jobs", SERVER, "/#/jobs"),
    "on the API server's own host": (f"{SERVER}{PREFIX}/a", SERVER, "/a"),
    "behind a path prefix (Rancher)": (f"https://r.example/k8s/clusters/c-1{PREFIX}/a", "https://r.example/k8s/clusters/c-1", "/a"),
    "path-only behind a path prefix": (f"/k8s/clusters/c-1{PREFIX}/a", "https://r.example/k8s/clusters/c-1", "/a"),
    "another host is left alone": (f"https://sso.example{PREFIX}/a", SERVER, f"https://sso.example{PREFIX}/a"),
    "another service is left alone": ("/api/v1/namespaces/team/services/other:80/proxy/a", SERVER,
                                      "/api/v1/namespaces/team/services/other:80/proxy/a"),
    "a relative location is left alone": ("next/page", SERVER, "next/page"),
}


@pytest.mark.parametrize(("location", "server", "expected"), LOCATIONS.values(), ids=LOCATIONS.keys())
def test_local_location(location, server, expected):
    assert local_location(location, PREFIX, server) == expected


def test_request_headers_drop_hop_by_hop_host_and_the_clients_authorization():
    sent = [("Host", "127.0.0.1:8265"), ("Expect", "100-continue"), ("Authorization", "Bearer client-own"), ("Connection", "keep-alive, X-Trace"),
            ("Keep-Alive", "timeout=5"), ("X-Trace", "1"), ("Transfer-Encoding", "chunked"), ("TE", "trailers"),
            ("Accept", "application/json"), ("Cookie", "a=1"), ("Cookie", "b=2"), ("Proxy-Authorization", "Basic x")]
    assert request_headers(sent, {"Authorization": "Bearer kube"}) == [
        ("Accept", "application/json"), ("Cookie", "a=1"), ("Cookie", "b=2"), ("Authorization", "Bearer kube")]


def test_request_headers_of_an_upgrade_keep_upgrade():
    sent = [("Host", "localhost:1"), ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Key", "k=="),
            ("Sec-WebSocket-Version", "13")]
    assert request_headers(sent, {}, upgrade=True) == [
        ("Sec-WebSocket-Key", "k=="), ("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket"), ("Connection", "Upgrade")]


WHO = {
    # name: (Host, Origin, refused)
    "curl": ("127.0.0.1:8265", None, False),
    "localhost": ("localhost:8265", None, False),
    "ipv6 loopback": ("[::1]:8265", None, False),
    "no Host (HTTP/1.0)": (None, None, False),
    "the relay's own page": ("127.0.0.1:8265", "http://127.0.0.1:8265", False),
    "the relay's page by name": ("localhost:8265", "http://localhost:8265", False),
    "DNS rebinding": ("evil.example:8265", None, True),
    "another site's page": ("127.0.0.1:8265", "https://evil.example", True),
    "another local port": ("127.0.0.1:8265", "http://127.0.0.1:3000", True),
    "an opaque origin": ("127.0.0.1:8265", "null", True),
    "a malformed Host": ("[::1", None, True),
    "a malformed Origin": ("127.0.0.1:8265", "http://127.0.0.1:99999", True),
}


@pytest.mark.parametrize(("host", "origin", "refused"), WHO.values(), ids=WHO.keys())
def test_refusal(host, origin, refused):
    why = refusal(host, origin, 8265)
    assert bool(why) == refused
    if refused:
        assert "nrl-k8s dashboard relays only" in why
