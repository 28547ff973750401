"""Who nrl-k8s is to the API server: the auth headers of a kubeconfig user (token, token file,
exec plugin, oidc id-token, username and password) and client certificates loaded from memory.

A credential is a callable returning the headers to send now: token files are re-read after
TOKEN_TTL_S (service-account tokens rotate), an exec plugin runs again once its credential expired.
Both also have ``refresh(sent)``: the API server answered 401 to the headers ``sent``, so the next
call reads the file or runs the plugin again (as client-go does); the caller retries once.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from nrl_k8s.errors import ConfigError, CredentialError
from nrl_k8s.redact import redact_text

__all__ = ["ExecPlugin", "Headers", "TokenFile", "as_mapping", "load_cert_chain", "user_auth"]

EXEC_APIS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TOKEN_TTL_S = 60.0
Headers = Callable[[], Mapping[str, str]]


def user_auth(user: dict, base: Path, cluster: dict, tls: ssl.SSLContext | None) -> Headers | None:
    """kubectl's order: an auth-provider, a token (file), an exec plugin, a username and password."""
    if user.get("auth-provider"):
        provider = as_mapping(user["auth-provider"], "auth-provider")
        if provider.get("name") != "oidc":
            raise ConfigError(f"auth-provider '{provider.get('name')}' is not supported",
                              hint="use an exec credential plugin instead (e.g. gke-gcloud-auth-plugin, kubelogin)")
        token = (provider.get("config") or {}).get("id-token")
        if not token:
            raise ConfigError(
                "the oidc auth-provider has no id-token", hint="log in again, or use an exec credential plugin"
            )
        return lambda: {"Authorization": f"Bearer {token}"}
    if user.get("token"):
        return lambda: {"Authorization": f"Bearer {user['token']}"}
    if user.get("tokenFile"):
        return TokenFile(base / str(user["tokenFile"]))
    if user.get("exec"):
        return ExecPlugin(as_mapping(user["exec"], "exec"), base, cluster, tls)
    if user.get("username"):
        login = base64.b64encode(f"{user['username']}:{user.get('password') or ''}".encode()).decode()
        return lambda: {"Authorization": f"Basic {login}"}
    return None


def load_cert_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``context.load_cert_chain`` from memory: the ssl module reads only files, so the PEMs go to
    0600 files in a private 0700 directory, removed once loaded."""
    with tempfile.TemporaryDirectory(prefix="nrl-k8s-") as tmp:
        paths = [os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")]
        for path, data in zip(paths, (cert_pem, key_pem), strict=True):
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
                handle.write(data)
        try:
            context.load_cert_chain(*paths)
        except ssl.SSLError as exc:
            raise ConfigError(f"the client certificate and key do not load ({exc.reason or exc})") from None


class TokenFile:
    """``Bearer <token>`` from a file, re-read after TOKEN_TTL_S; the last token when a re-read fails."""

    def __init__(self, path: Path):
        self.path, self._token, self._read_at = path, "", 0.0
        self()  # a missing or empty file fails now

    def __call__(self) -> dict[str, str]:
        if not self._token or time.monotonic() - self._read_at > TOKEN_TTL_S:
            try:
                self._token = self.path.read_text(encoding="utf-8").strip() or self._token
            except OSError as exc:
                if not self._token:
                    raise ConfigError(f"cannot read the token file {self.path}: {exc.strerror}") from None
            if not self._token:
                raise ConfigError(f"the token file {self.path} is empty")
            self._read_at = time.monotonic()
        return {"Authorization": f"Bearer {self._token}"}

    def refresh(self, sent: Mapping[str, str]) -> bool:
        if sent.get("Authorization") == f"Bearer {self._token}":
            self._read_at = float("-inf")  # the next call reads the file again
        return True


#: How long an exec credential plugin may take: non-interactive (a hung one ends the command in
#: about 5 s, as an API server that does not answer does), or with the terminal (a person logs in).
EXEC_TIMEOUT_S = {False: 4.0, True: 300.0}
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: have Linux SIGKILL it when nrl-k8s dies (even by kill -9); elsewhere a no-op."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _kill(plugin: subprocess.Popen, *, group: bool) -> None:
    try:
        os.killpg(plugin.pid, signal.SIGKILL) if group else plugin.kill()
    except ProcessLookupError:
        pass
    plugin.wait()


class ExecPlugin:
    """A client-go exec credential plugin: run for a token or a client certificate, again once expired."""

    def __init__(self, spec: Mapping, base: Path, cluster: dict, tls: ssl.SSLContext | None):
        api, command = spec.get("apiVersion"), spec.get("command")
        if api not in EXEC_APIS:
            raise ConfigError(f"exec apiVersion {api!r} is not supported (use {' or '.join(EXEC_APIS)})")
        if not isinstance(command, str) or not command:
            raise ConfigError("exec has no command")
        self.argv = [str(base / command) if os.sep in command else command, *map(str, spec.get("args") or [])]
        self.env = {str(e.get("name")): str(e.get("value", "")) for e in spec.get("env") or [] if isinstance(e, dict)}
        self.interactive = spec.get("interactiveMode") != "Never" and sys.stdin is not None and sys.stdin.isatty()
        self.info = {"apiVersion": api, "kind": "ExecCredential", "spec": {"interactive": self.interactive}}
        self.server = cluster.get("server")
        if spec.get("provideClusterInfo"):
            self.info["spec"]["cluster"] = cluster
        self.hint = (
            spec.get("installHint")
            or "run it yourself to see why; check the user's exec entry with `kubectl config view`"
        )
        self.tls, self._lock = tls, threading.Lock()
        self._headers: dict[str, str] | None = None
        self._expires: datetime | None = None
        self._worked = False  # it has given a credential
        self._failed: CredentialError | None = None  # why it failed before it ever did: it is not run again

    def __call__(self) -> dict[str, str]:
        with self._lock:
            if self._failed is not None:  # every thread of the command would wait for it in turn
                raise CredentialError(self._failed.message, hint=self._failed.hint)
            if self._headers is None or (self._expires and datetime.now(UTC) >= self._expires):
                try:
                    self._headers, self._expires = self._run()
                except CredentialError as exc:
                    self._failed = None if self._worked else exc
                    raise
                self._worked = True
            return self._headers

    def refresh(self, sent: Mapping[str, str]) -> bool:
        with self._lock:
            if self._headers is not None and dict(sent) == self._headers:  # not renewed by another thread meanwhile
                self._headers = None
        return True

    def _run(self) -> tuple[dict[str, str], datetime | None]:
        shown = redact_text(shlex.join(self.argv))
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(self.info)}
        quiet = None if self.interactive else subprocess.PIPE  # an interactive plugin may prompt on stderr
        limit = EXEC_TIMEOUT_S[self.interactive]
        try:
            # its own process group (unless it needs the terminal), killed whole on a timeout, and
            # killed by the kernel if nrl-k8s itself dies first
            plugin = subprocess.Popen(self.argv, env=env, stdout=subprocess.PIPE, stderr=quiet,
                                      stdin=None if self.interactive else subprocess.DEVNULL,
                                      start_new_session=not self.interactive, preexec_fn=_die_with_parent)
        except OSError as exc:
            raise CredentialError(f"exec plugin `{shown}` cannot run: {exc.strerror}", hint=self.hint) from None
        try:
            out, err = plugin.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill(plugin, group=not self.interactive)
            raise CredentialError(f"cannot reach the API server at {self.server}: its exec credential plugin `{shown}` "
                                  f"did not answer within {limit:g}s", hint=self.hint) from None
        finally:
            if plugin.poll() is None:  # interrupted (Ctrl-C): never leave it behind
                _kill(plugin, group=not self.interactive)
        done = subprocess.CompletedProcess(self.argv, plugin.returncode, out, err)
        if done.returncode != 0:
            tail = redact_text((done.stderr or b"").decode(errors="replace").strip()[-300:])  # never stdout: the token
            detail = f": {tail}" if tail else " (its output is above)" if self.interactive else ""
            raise CredentialError(f"exec plugin `{shown}` failed (exit {done.returncode}){detail}", hint=self.hint)
        try:
            doc = json.loads(done.stdout)
            if (doc["kind"], doc["apiVersion"]) != ("ExecCredential", self.info["apiVersion"]):
                raise ValueError("not the ExecCredential asked for")
            status = doc["status"]
            token, cert, key = (status.get(k) for k in ("token", "clientCertificateData", "clientKeyData"))
            expiry = status.get("expirationTimestamp")
            expires = datetime.fromisoformat(expiry) if expiry else None
            expires = expires.replace(tzinfo=expires.tzinfo or UTC) if expires else None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CredentialError(
                f"exec plugin `{shown}` did not print a valid {self.info['apiVersion']} ExecCredential", hint=self.hint
            ) from None
        if not (token or cert and key) or bool(cert) != bool(key):
            raise CredentialError(f"exec plugin `{shown}` printed neither a token nor a client certificate and key",
                              hint=self.hint)
        if cert:
            if self.tls is None:
                raise CredentialError(f"exec plugin `{shown}` gave a client certificate for a server without https")
            load_cert_chain(self.tls, cert.encode(), key.encode())
        return ({"Authorization": f"Bearer {token}"} if token else {}), expires


def as_mapping(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} is not a mapping")
    return value
