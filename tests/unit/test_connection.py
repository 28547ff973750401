"""nrl_k8s.kube.connection and .credentials: the kubeconfig loader (every field, merging, relative paths, errors),
exec credential plugins (a real script), and in-cluster config from a service-account directory.

TLS handshakes with what is loaded here are in tests/kube/test_connection_tls.py.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
from pathlib import Path

import pytest
import yaml
from sandbox_harness import eventually
from tls_pki import issue, pem

from nrl_k8s.errors import ConfigError, CredentialError
from nrl_k8s.kube import credentials
from nrl_k8s.kube.connection import from_kubeconfig, in_cluster
from nrl_k8s.kube.errors import NoClusterError

CERT, KEY = pem(*issue("nrl-k8s-test", None, ca=True, ip="127.0.0.1", dns="localhost"))  # a CA certificate for
# 127.0.0.1/localhost, also usable as a client certificate
CA_SUBJECT = ((("commonName", "nrl-k8s-test"),),)
SERVER = "https://127.0.0.1:6443"
EXEC_V1 = "client.authentication.k8s.io/v1"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def kubeconfig_doc(cluster: dict | None = None, user: dict | None = None, **top) -> dict:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        **top,
    }  # fmt: skip


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def load(tmp_path: Path, cluster: dict | None = None, user: dict | None = None):
    (tmp_path / "ca.crt").write_bytes(CERT)
    (tmp_path / "tls.key").write_bytes(KEY)
    (tmp_path / "token").write_text("from-file\n")
    return from_kubeconfig(str(write(tmp_path / "kubeconfig", kubeconfig_doc(cluster, user))), None)[0]


def verifies(conn) -> bool:
    return conn.ssl_context.verify_mode == ssl.CERT_REQUIRED and conn.ssl_context.check_hostname


def trusts_only_the_ca(conn) -> bool:
    return [c["subject"] for c in conn.ssl_context.get_ca_certs()] == [CA_SUBJECT] and verifies(conn)


FIELDS = {
    # name: (cluster, user, what must hold of the Connection)
    "server-with-path-prefix": (
        {"server": "https://h.example:6443/k8s/clusters/c-1/"},
        {},
        lambda c: c.host == "https://h.example:6443/k8s/clusters/c-1",
    ),
    "http-server-has-no-tls": ({"server": "http://127.0.0.1:8080"}, {}, lambda c: c.ssl_context is None),
    "no-ca-verifies-with-certifi": ({}, {}, lambda c: verifies(c) and len(c.ssl_context.get_ca_certs()) > 10),
    "certificate-authority-file": ({"certificate-authority": "ca.crt"}, {}, trusts_only_the_ca),
    "certificate-authority-data": ({"certificate-authority-data": b64(CERT)}, {}, trusts_only_the_ca),
    "ca-data-wins-over-file": (
        {"certificate-authority-data": b64(CERT), "certificate-authority": "missing.crt"},
        {},
        trusts_only_the_ca,
    ),
    "insecure-skip-tls-verify": (
        {"insecure-skip-tls-verify": True},
        {},
        lambda c: c.ssl_context.verify_mode == ssl.CERT_NONE and not c.ssl_context.check_hostname,
    ),
    "tls-server-name": ({"tls-server-name": "api.internal"}, {}, lambda c: c.ssl_context.server_name == "api.internal"),
    "proxy-url-http": (
        {"proxy-url": "http://proxy.example:3128"},
        {},
        lambda c: c.proxy == "http://proxy.example:3128",
    ),
    "proxy-url-https": (
        {"proxy-url": "https://proxy.example:3129"},
        {},
        lambda c: c.proxy == "https://proxy.example:3129",
    ),
    "no-user-credentials": ({}, {}, lambda c: c.headers() == {}),
    "token": ({}, {"token": "t0k"}, lambda c: c.headers() == {"Authorization": "Bearer t0k"}),
    "token-file-relative": ({}, {"tokenFile": "token"}, lambda c: c.headers() == {"Authorization": "Bearer from-file"}),
    "token-wins-over-token-file": (
        {},
        {"token": "inline", "tokenFile": "missing"},
        lambda c: c.headers() == {"Authorization": "Bearer inline"},
    ),
    "username-password": (
        {},
        {"username": "al:ice", "password": "pw"},
        lambda c: c.headers() == {"Authorization": f"Basic {b64('al:ice:pw')}"},
    ),
    "client-certificate-files": ({}, {"client-certificate": "ca.crt", "client-key": "tls.key"}, verifies),
    "client-certificate-data": ({}, {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)}, verifies),
    "oidc-id-token": (
        {},
        {"auth-provider": {"name": "oidc", "config": {"id-token": "jwt", "refresh-token": "r"}}},
        lambda c: c.headers() == {"Authorization": "Bearer jwt"},
    ),
}


@pytest.mark.parametrize(("cluster", "user", "holds"), FIELDS.values(), ids=FIELDS.keys())
def test_kubeconfig_fields(tmp_path, cluster, user, holds):
    assert holds(load(tmp_path, cluster, user))


ERRORS = {
    # name: (cluster, user, message, hint)
    "no-server": (
        {"server": None},
        {},
        r"cluster 'c' has no http\(s\) server URL \(server: None\)",
        "kubectl config view",
    ),
    "server-not-http": (
        {"server": "unix:///run/k8s.sock"},
        {},
        r"cluster 'c' has no http\(s\) server URL \(server: 'unix:",
        "kubectl config view",
    ),
    "socks-proxy": (
        {"proxy-url": "socks5://user:secret@proxy:1080"},
        {},
        r"proxy-url socks5://user:<redacted>@proxy:1080 is not supported: use an http:// or https:// proxy",
        None,
    ),
    "ca-file-missing": (
        {"certificate-authority": "nope.crt"},
        {},
        "cannot read certificate-authority .*nope.crt",
        None,
    ),
    "ca-data-not-base64": ({"certificate-authority-data": "%%%"}, {}, "certificate-authority-data is not base64", None),
    "ca-not-pem": (
        {"certificate-authority-data": b64("hello")},
        {},
        "the certificate authority is not a PEM certificate",
        None,
    ),
    "cert-without-key": (
        {},
        {"client-certificate": "ca.crt"},
        "a client certificate needs both client-certificate and client-key",
        None,
    ),
    "key-not-matching": (
        {},
        {"client-certificate-data": b64(CERT), "client-key-data": b64(pem(*issue("other", None))[1])},
        r"the client certificate and key do not load \(KEY_VALUES_MISMATCH\)",
        None,
    ),
    "token-file-missing": ({}, {"tokenFile": "no-token"}, "cannot read the token file .*no-token", None),
    "gcp-auth-provider": (
        {},
        {"auth-provider": {"name": "gcp", "config": {}}},
        "auth-provider 'gcp' is not supported",
        "exec credential plugin",
    ),
    "oidc-without-id-token": (
        {},
        {"auth-provider": {"name": "oidc", "config": {}}},
        "the oidc auth-provider has no id-token",
        "log in again",
    ),
    "exec-old-api": (
        {},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}},
        "exec apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported",
        None,
    ),
    "exec-without-command": ({}, {"exec": {"apiVersion": EXEC_V1}}, "exec has no command", None),
}


@pytest.mark.parametrize(("cluster", "user", "message", "hint"), ERRORS.values(), ids=ERRORS.keys())
def test_unusable_kubeconfig_entries(tmp_path, cluster, user, message, hint):
    with pytest.raises(ConfigError, match=f"^kube context 'c' is not usable: {message}") as caught:
        load(tmp_path, cluster, user)
    assert hint in caught.value.hint if hint else caught.value.hint


REFERENCES = {
    "missing-cluster": ({"cluster": "gone", "user": "u"}, "cluster 'gone' not found"),
    "missing-user": ({"cluster": "c", "user": "gone"}, "user 'gone' not found"),
    "no-cluster": ({"user": "u"}, "it names no cluster"),
}


@pytest.mark.parametrize(("context", "message"), REFERENCES.values(), ids=REFERENCES.keys())
def test_context_naming_missing_entries(tmp_path, context, message):
    doc = kubeconfig_doc()
    doc["contexts"] = [{"name": "c", "context": context}]
    with pytest.raises(ConfigError, match=f"kube context 'c' is not usable: {message}"):
        from_kubeconfig(str(write(tmp_path / "kubeconfig", doc)), None)


def test_merge_first_file_wins_and_paths_are_relative_to_their_file(tmp_path, monkeypatch):
    """kubectl: the first file setting a name wins; a path is relative to the file that sets it."""
    (tmp_path / "b" / "certs").mkdir(parents=True)
    (tmp_path / "b" / "certs" / "ca.crt").write_bytes(CERT)
    first = {
        "current-context": "second",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://first:6443", "certificate-authority": "certs/ca.crt"}}
        ],
        "contexts": [{"name": "second", "context": {"cluster": "c", "user": "u", "namespace": "from-a"}}],
    }
    second = {"current-context": "ignored",
              "clusters": [{"name": "c", "cluster": {"server": "https://shadowed:6443"}},
                           {"name": "d", "cluster": {"server": "https://second:6443",
                                                     "certificate-authority": "certs/ca.crt"}}],
              "users": [{"name": "u", "user": {"token": "from-b"}}],
              "contexts": [{"name": "second", "context": {"cluster": "d", "user": "u", "namespace": "shadowed"}},
                           {"name": "other", "context": {"cluster": "d", "user": "u"}}]}  # fmt: skip
    a, b = write(tmp_path / "a" / "config", first), write(tmp_path / "b" / "config", second)
    (tmp_path / "a" / "certs").mkdir()
    (tmp_path / "a" / "certs" / "ca.crt").write_bytes(CERT)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}{os.pathsep}{a}{os.pathsep}{b}")
    monkeypatch.chdir(tmp_path)
    conn, name, namespace = from_kubeconfig(None, None)
    assert (conn.host, name, namespace, conn.headers()) == (
        "https://first:6443",
        "second",
        "from-a",
        {"Authorization": "Bearer from-b"},
    )
    conn, name, namespace = from_kubeconfig(None, "other")
    assert (conn.host, name, namespace) == ("https://second:6443", "other", None)
    assert trusts_only_the_ca(conn)
    (tmp_path / "b" / "certs" / "ca.crt").unlink()  # b's CA path must not resolve against a/ or the cwd
    with pytest.raises(ConfigError, match="cannot read certificate-authority .*/b/certs/ca.crt"):
        from_kubeconfig(None, "other")


# -- exec credential plugins: a real executable the test writes ------------------------------------

PLUGIN = """#!{python}
import json, os, sys
from pathlib import Path

here = Path(__file__).parent
runs = here / "runs"
runs.write_text(str(int(runs.read_text()) + 1 if runs.exists() else 1))
(here / "exec-info.json").write_text(os.environ["KUBERNETES_EXEC_INFO"])
(here / "argv.json").write_text(json.dumps(sys.argv[1:]))
mode = os.environ["PLUGIN_MODE"]
if mode == "fail":
    print("warming up", file=sys.stderr)
    print("refresh failed for token=s3cr3t-value: expired", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("not json, but s3cr3t-value")
    sys.exit(0)
if mode == "hang":  # a plugin stuck, with a child of its own
    import subprocess, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    (here / "pids").write_text(f"{{os.getpid()}} {{child.pid}}")
    time.sleep(3600)
status = {{"token": "tok-" + runs.read_text()}} if mode == "token" else {{
    "clientCertificateData": (here / "cert.pem").read_text(),
    "clientKeyData": (here / "key.pem").read_text()}} if mode == "cert" else {{}}
if os.environ.get("EXPIRES"):
    status["expirationTimestamp"] = os.environ["EXPIRES"]
print(json.dumps({{"apiVersion": os.environ.get("ANSWER_API", "{api}"), "kind": "ExecCredential", "status": status}}))
"""


def plugin_kubeconfig(tmp_path: Path, mode: str, *, api: str = EXEC_V1, expires: str = "", cluster_info: bool = False,
                      **env: str) -> str:
    """A kubeconfig whose user runs ./bin/plugin (relative to the kubeconfig) with PLUGIN_MODE=mode."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    script = tmp_path / "bin" / "plugin"
    script.write_text(PLUGIN.format(python=sys.executable, api=api))
    script.chmod(0o700)
    (tmp_path / "bin" / "cert.pem").write_bytes(CERT)
    (tmp_path / "bin" / "key.pem").write_bytes(KEY)
    variables = {"PLUGIN_MODE": mode, "EXPIRES": expires, **env}
    exec_spec = {"apiVersion": api, "command": "./bin/plugin", "args": ["get-token", "--cluster", "c 1"],
                 "env": [{"name": k, "value": v} for k, v in variables.items()], "provideClusterInfo": cluster_info,
                 "interactiveMode": "Never"}
    cluster = {"certificate-authority-data": b64(CERT), "tls-server-name": "api.internal",
               "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"audience": "kube"}}]}
    return str(write(tmp_path / "kubeconfig", kubeconfig_doc(cluster, {"exec": exec_spec})))


def runs(tmp_path: Path) -> int:
    path = tmp_path / "bin" / "runs"
    return int(path.read_text()) if path.exists() else 0


@pytest.mark.parametrize("api", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
def test_exec_plugin_token_is_cached_until_it_expires(tmp_path, monkeypatch, api):
    monkeypatch.chdir("/")  # the command is relative to the kubeconfig, not the working directory
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "token", api=api, expires="2999-01-01T00:00:00Z"), None)[0]
    assert runs(tmp_path) == 0  # run on the first request, not before
    assert conn.headers() == conn.headers() == {"Authorization": "Bearer tok-1"}
    assert runs(tmp_path) == 1
    assert json.loads((tmp_path / "bin" / "argv.json").read_text()) == ["get-token", "--cluster", "c 1"]
    assert json.loads((tmp_path / "bin" / "exec-info.json").read_text()) == {
        "apiVersion": api, "kind": "ExecCredential", "spec": {"interactive": False}}


def test_exec_plugin_runs_again_once_expired(tmp_path):
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "token", expires="2000-01-01T00:00:00+00:00"), None)[0]
    assert [conn.headers()["Authorization"] for _ in range(3)] == ["Bearer tok-1", "Bearer tok-2", "Bearer tok-3"]


def test_exec_plugin_without_expiry_runs_once(tmp_path):
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "token"), None)[0]
    assert conn.headers() == conn.headers() == {"Authorization": "Bearer tok-1"}
    assert runs(tmp_path) == 1


def test_exec_plugin_gets_cluster_info_when_asked(tmp_path):
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "token", cluster_info=True), None)[0]
    conn.headers()
    assert json.loads((tmp_path / "bin" / "exec-info.json").read_text())["spec"] == {
        "interactive": False,
        "cluster": {"server": SERVER, "tls-server-name": "api.internal", "certificate-authority-data": b64(CERT),
                    "config": {"audience": "kube"}},
    }  # fmt: skip


def test_exec_plugin_client_certificate_goes_into_the_tls_context(tmp_path, monkeypatch):
    monkeypatch.setattr(credentials.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "cert"), None)[0]
    assert conn.headers() == {}  # loaded into conn.ssl_context (the handshake: tests/kube/test_connection_tls.py)
    assert runs(tmp_path) == 1
    assert list((tmp_path / "tmp").iterdir()) == []  # the key's file is gone once loaded


FAILURES = {
    "exit-code": ("fail", {}, r"exec plugin `\S+/bin/plugin get-token --cluster 'c 1'` failed \(exit 3\): warming up\n"
                              r"refresh failed for token=<redacted> expired$"),
    "not-json": ("garbage", {}, "did not print a valid client.authentication.k8s.io/v1 ExecCredential"),
    "wrong-api-version": ("token", {"ANSWER_API": "client.authentication.k8s.io/v1beta1"}, "did not print a valid"),
    "no-credential": ("none", {}, "printed neither a token nor a client certificate and key"),
}


@pytest.mark.parametrize(("mode", "env", "message"), FAILURES.values(), ids=FAILURES.keys())
def test_exec_plugin_failure_is_one_clear_error_without_the_secret(tmp_path, mode, env, message):
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, mode, **env), None)[0]
    with pytest.raises(CredentialError, match=message) as caught:
        conn.headers()
    assert "s3cr3t" not in caught.value.message and "PLUGIN_MODE" not in caught.value.message
    assert caught.value.hint and caught.value.exit_code == 1


def test_a_plugin_that_never_gave_a_credential_is_not_run_again(tmp_path):
    """Every thread of a command would otherwise wait for it in turn (a hung one: 4 s each)."""
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "fail"), None)[0]
    messages = set()
    for _ in range(3):
        with pytest.raises(CredentialError) as caught:
            conn.headers()
        messages.add(caught.value.message)
    assert len(messages) == 1 and runs(tmp_path) == 1


def test_a_plugin_that_never_answers_is_stopped_with_its_children(tmp_path, monkeypatch):
    monkeypatch.setitem(credentials.EXEC_TIMEOUT_S, False, 2.0)  # a deadline, not a measurement
    conn = from_kubeconfig(plugin_kubeconfig(tmp_path, "hang"), None)[0]
    with pytest.raises(CredentialError, match="did not answer within 2s") as caught:
        conn.headers()
    assert caught.value.exit_code == 1
    for pid in map(int, (tmp_path / "bin" / "pids").read_text().split()):  # the plugin, and its child (its group)
        eventually(lambda pid=pid: not _running(pid), what=f"process {pid} gone")


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed process its parent has not reaped yet is dead all the same)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_exec_plugin_that_is_not_installed(tmp_path):
    doc = kubeconfig_doc(user={"exec": {"apiVersion": EXEC_V1, "command": "no-such-plugin-xyz",
                                        "installHint": "install it with `brew install xyz`"}})
    conn = from_kubeconfig(str(write(tmp_path / "kubeconfig", doc)), None)[0]
    with pytest.raises(CredentialError, match="exec plugin `no-such-plugin-xyz` cannot run") as caught:
        conn.headers()
    assert caught.value.hint == "install it with `brew install xyz`"


# -- in-cluster: a fake service-account directory -----------------------------------------------

def account(tmp_path: Path, token: str = "sa-token-1") -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(CERT)
    return directory


@pytest.mark.parametrize(("host", "url"), [("10.0.0.1", "https://10.0.0.1:443"), ("fd00::1", "https://[fd00::1]:443")],
                         ids=["ipv4", "ipv6"])
def test_in_cluster(tmp_path, host, url):
    conn = in_cluster(account(tmp_path), {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"})
    assert (conn.host, conn.headers()) == (url, {"Authorization": "Bearer sa-token-1"})
    assert trusts_only_the_ca(conn)


def test_in_cluster_token_is_re_read_so_rotation_works(tmp_path, monkeypatch):
    directory = account(tmp_path)
    conn = in_cluster(directory, {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    (directory / "token").write_text("sa-token-2")
    assert conn.headers() == {"Authorization": "Bearer sa-token-1"}  # cached for TOKEN_TTL_S
    monkeypatch.setattr(credentials, "TOKEN_TTL_S", -1.0)
    assert conn.headers() == {"Authorization": "Bearer sa-token-2"}
    (directory / "token").unlink()  # a failed re-read keeps the last token
    assert conn.headers() == {"Authorization": "Bearer sa-token-2"}


IN_CLUSTER_ERRORS = {
    "no-port": ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, None, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"),
    "empty-token": ({}, "token", "the token file .*token is empty"),
    "no-ca": ({}, "ca.crt", "cannot read ca.crt"),
}


@pytest.mark.parametrize(("env", "emptied", "message"), IN_CLUSTER_ERRORS.values(), ids=IN_CLUSTER_ERRORS.keys())
def test_unusable_in_cluster_config(tmp_path, env, emptied, message):
    directory = account(tmp_path)
    if emptied == "token":
        (directory / "token").write_text("\n")
    elif emptied:
        (directory / emptied).unlink()
    env = env or {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(NoClusterError, match=f"in-cluster config is not usable: {message}") as caught:
        in_cluster(directory, env)
    assert "service account" in caught.value.hint
