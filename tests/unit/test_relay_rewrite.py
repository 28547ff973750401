"""nrl_k8s.relay.server's request and response rewriting (pure): request paths onto the service proxy's
prefix, Location headers back to the relay's root, headers passed on, and who may use the relay
(loopback names, its own pages, the session token)."""

from __future__ import annotations

import pytest

from nrl_k8s.relay.server import (
    Admitted,
    Login,
    Refused,
    Upstream,
    admission,
    cookie_name,
    local_location,
    refusal,
    request_headers,
    upstream_path,
)

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
    "behind a path prefix (Rancher)": (
        f"https://r.example/k8s/clusters/c-1{PREFIX}/a",
        "https://r.example/k8s/clusters/c-1",
        "/a",
    ),
    "path-only behind a path prefix": (f"/k8s/clusters/c-1{PREFIX}/a", "https://r.example/k8s/clusters/c-1", "/a"),
    "another host is left alone": (f"https://sso.example{PREFIX}/a", SERVER, f"https://sso.example{PREFIX}/a"),
    "another service is left alone": (
        "/api/v1/namespaces/team/services/other:80/proxy/a",
        SERVER,
        "/api/v1/namespaces/team/services/other:80/proxy/a",
    ),
    "a relative location is left alone": ("next/page", SERVER, "next/page"),
}


@pytest.mark.parametrize(("location", "server", "expected"), LOCATIONS.values(), ids=LOCATIONS.keys())
def test_local_location(location, server, expected):
    assert local_location(location, PREFIX, server) == expected


def test_request_headers_drop_hop_by_hop_host_and_the_clients_authorization():
    sent = [
        ("Host", "127.0.0.1:8265"),
        ("Expect", "100-continue"),
        ("Authorization", "Bearer client-own"),
        ("Connection", "keep-alive, X-Trace"),
        ("Keep-Alive", "timeout=5"),
        ("X-Trace", "1"),
        ("Transfer-Encoding", "chunked"),
        ("TE", "trailers"),
        ("Accept", "application/json"),
        ("Cookie", "a=1"),
        ("Cookie", "b=2"),
        ("Proxy-Authorization", "Basic x"),
    ]
    assert request_headers(sent, {"Authorization": "Bearer kube"}) == [
        ("Accept", "application/json"), ("Cookie", "a=1"), ("Cookie", "b=2"), ("Authorization", "Bearer kube")]


def test_request_headers_of_an_upgrade_keep_upgrade():
    sent = [("Host", "localhost:1"), ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Key", "k=="),
            ("Sec-WebSocket-Version", "13")]
    assert request_headers(sent, {}, upgrade=True) == [
        ("Sec-WebSocket-Key", "k=="),
        ("Sec-WebSocket-Version", "13"),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
    ]


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


def test_request_headers_drop_the_relays_cookie_only():
    sent = [("Cookie", "a=1; nrl-k8s-relay-8265=T; b=2"), ("Cookie", "nrl-k8s-relay-8265=T"),
            ("Cookie", "nrl-k8s-relay-8000=other"), ("Authorization", "token T")]
    assert request_headers(sent, {}, drop_cookie=cookie_name(8265)) == [
        ("Cookie", "a=1; b=2"), ("Cookie", "nrl-k8s-relay-8000=other")]


TOKEN, PORT = "s3cret-Token_x", 8265
COOKIE = ("Cookie", f"theme=dark; {cookie_name(PORT)}={TOKEN}")
OWN = ("Origin", f"http://127.0.0.1:{PORT}")
SHORT = "needs its token"
CROSS = "only from its own pages"
ADMISSIONS = {
    # name: (method, target, headers, upgrade, expected: Admitted(target) | Login(location) | Refused text)
    "nothing": ("GET", "/", [], False, SHORT),
    "a wrong token in the query": ("GET", "/?token=guess", [], False, SHORT),
    "a wrong header token": ("GET", "/api/jobs/", [("Authorization", "token guess")], False, SHORT),
    "a wrong cookie": ("GET", "/", [("Cookie", f"{cookie_name(PORT)}=guess")], False, SHORT),
    "another port's cookie": ("GET", "/", [("Cookie", f"{cookie_name(8000)}={TOKEN}")], False, SHORT),
    "the token as another cookie's value": ("GET", "/", [("Cookie", f"x={TOKEN}")], False, SHORT),
    "an empty token": ("GET", "/?token=", [("Authorization", "token ")], False, SHORT),
    "a token prefix": ("GET", f"/?token={TOKEN[:-1]}", [], False, SHORT),
    "a non-ASCII token": ("GET", "/?token=%C3%A9", [("Authorization", "token \u00e9")], False, SHORT),
    "Basic auth": ("GET", "/", [("Authorization", f"Basic {TOKEN}")], False, SHORT),
    "the token in a page URL: log in": ("GET", f"/jobs/?token={TOKEN}", [], False, Login("/jobs/")),
    "the token among other parameters": (
        "GET",
        f"/api/jobs/?a=1&token={TOKEN}&b=%20",
        [],
        False,
        Login("/api/jobs/?a=1&b=%20"),
    ),
    "HEAD with the token: log in": ("HEAD", f"/?token={TOKEN}", [], False, Login("/")),
    "absolute-form target with the token": ("GET", f"http://127.0.0.1:{PORT}/x?token={TOKEN}", [], False, Login("/x")),
    "a websocket with the token in the query": ("GET", f"/ws?token={TOKEN}", [], True, Admitted("/ws")),
    "a POST with the token in the query": ("POST", f"/api/jobs/?token={TOKEN}", [], False, Admitted("/api/jobs/")),
    "header token": ("GET", "/api/jobs/", [("Authorization", f"token {TOKEN}")], False, Admitted("/api/jobs/")),
    "Bearer header token": ("GET", "/v1/models", [("authorization", f"Bearer {TOKEN}")], False, Admitted("/v1/models")),
    "header token POST without Origin": (
        "POST",
        "/api/jobs/",
        [("Authorization", f"token {TOKEN}")],
        False,
        Admitted("/api/jobs/"),
    ),
    "cookie GET": ("GET", "/api/jobs/", [COOKIE], False, Admitted("/api/jobs/")),
    "cookie websocket": ("GET", "/ws", [COOKIE], True, Admitted("/ws")),
    "cookie GET with a stale token in the query": ("GET", "/?token=old&x=1", [COOKIE], False, Admitted("/?x=1")),
    "cookie POST without Origin or Referer": ("POST", "/api/jobs/", [COOKIE], False, CROSS),
    "cookie DELETE without Origin": ("DELETE", "/api/jobs/j", [COOKIE], False, CROSS),
    "cookie PUT from another site": ("PUT", "/x", [COOKIE, ("Origin", "https://evil.example")], False, CROSS),
    "cookie PATCH from another local port": (
        "PATCH",
        "/x",
        [COOKIE, ("Origin", "http://127.0.0.1:3000")],
        False,
        CROSS,
    ),
    "cookie POST from an opaque origin": ("POST", "/x", [COOKIE, ("Origin", "null")], False, CROSS),
    "cookie POST with a foreign Referer": ("POST", "/x", [COOKIE, ("Referer", "https://evil.example/a")], False, CROSS),
    "cookie POST over https Referer": ("POST", "/x", [COOKIE, ("Referer", f"https://127.0.0.1:{PORT}/")], False, CROSS),
    "cookie custom method without Origin": ("PROPFIND", "/x", [COOKIE], False, CROSS),
    "cookie POST from the relay's page": ("POST", "/api/jobs/", [COOKIE, OWN], False, Admitted("/api/jobs/")),
    "cookie POST from the relay's page by name": (
        "POST",
        "/x",
        [COOKIE, ("Origin", f"http://localhost:{PORT}")],
        False,
        Admitted("/x"),
    ),
    "cookie DELETE with the relay's Referer": (
        "DELETE",
        "/x",
        [COOKIE, ("Referer", f"http://127.0.0.1:{PORT}/#/jobs")],
        False,
        Admitted("/x"),
    ),
    "cookie OPTIONS without Origin": ("OPTIONS", "/x", [COOKIE], False, Admitted("/x")),
    "a one-time token in a page URL": ("GET", "/?a=1&token=once-1", [], False, Login("/?a=1", once="once-1")),
    "a one-time token on a websocket": ("GET", "/ws?token=once-1", [], True, SHORT),
    "a one-time token on a POST": ("POST", "/api/jobs/?token=once-1", [], False, SHORT),
    "a one-time token as a header": ("GET", "/", [("Authorization", "token once-1")], False, SHORT),
    "a one-time token as the cookie": ("GET", "/", [("Cookie", f"{cookie_name(PORT)}=once-1")], False, SHORT),
}


@pytest.mark.parametrize(
    ("method", "target", "headers", "upgrade", "expected"), ADMISSIONS.values(), ids=ADMISSIONS.keys()
)
def test_admission(method, target, headers, upgrade, expected):
    got = admission(TOKEN, PORT, method, target, headers, upgrade=upgrade, once=frozenset({"once-1"}))
    if isinstance(expected, str):
        assert isinstance(got, Refused) and expected in got.why and TOKEN not in got.why
    else:
        assert got == expected
