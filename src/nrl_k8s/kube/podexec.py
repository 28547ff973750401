"""Commands in a pod's container through the API server's exec subresource (``pods/exec``).

As ``kubectl exec`` does since Kubernetes 1.30: a websocket to
``/api/v1/namespaces/NS/pods/POD/exec?command=...`` with the kube connection's TLS, proxy and
credentials (``_httpx.ApiServerAuth``), subprotocol ``v5.channel.k8s.io`` (else
``v4.channel.k8s.io``). Every message is binary, its first byte a channel: 0 stdin, 1 stdout,
2 stderr, 3 the command's end (a ``Status``: Success, or Failure with the exit code), 255 a
close signal (v5: "stdin is over"). Nothing here puts data on a command line: callers pass
fixed scripts and paths as ``argv`` and everything else on stdin.

Refusals of the upgrade (403, 404, ...) become the typed errors of ``kube_errors.api_error``.
Live commands only (it imports httpx).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from nrl_k8s.errors import ApiError
from nrl_k8s.kinds.pod import KIND as POD
from nrl_k8s.kube import websocket as _websocket
from nrl_k8s.kube.client import kind_path
from nrl_k8s.kube.closing import Closing
from nrl_k8s.kube.errors import HttpError, Op, api_error

from ._httpx import ApiServerAuth, httpx

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, CLOSE = 0, 1, 2, 3, 255
_STDIN_CHUNK = 256 * 1024


class ExecDropped(ApiError):
    """The exec stream ended without the command's end (the connection broke)."""


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit code (None: unknown, see ``error``), its output."""

    code: int | None
    stdout: bytes
    stderr: bytes
    error: str = ""  # the Status message of a failure that is not an exit code

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


class PodExec(Closing):
    """Runs commands in the pods of one namespace; close it (or use it as a context manager)."""

    def __init__(self, connection, namespace: str, *, timeout_s: float = 30.0):
        self.connection, self.namespace = connection, namespace
        self._client = httpx.Client(base_url=connection.host, auth=ApiServerAuth(connection),
                                    verify=connection.ssl_context or True, proxy=connection.proxy, timeout=timeout_s)

    def close(self) -> None:
        self._client.close()

    def run(self, pod: str, argv: list[str], *, container: str | None = None, stdin: bytes | None = None,
            timeout_s: float = 120.0) -> Finished:
        """Run ``argv`` to its end (``stdin``: its whole input); ExecDropped when the stream breaks first."""
        out: dict[int, list[bytes]] = {STDOUT: [], STDERR: []}
        deadline = time.monotonic() + timeout_s
        with self._open(pod, argv, container, stdin is not None) as ws:
            if stdin is not None:
                _send_stdin(ws, stdin)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ExecDropped(f"{self._what(pod, argv)} did not end within {timeout_s:g}s")
                message = self._receive(ws, pod, argv, left)
                if message is None:
                    continue
                channel, data = message
                if channel == ERROR:
                    code, error = _status(data)
                    return Finished(code, b"".join(out[STDOUT]), b"".join(out[STDERR]), error)
                if channel in out:
                    out[channel].append(data)

    def stream(
        self, pod: str, argv: list[str], *, container: str | None = None, idle_s: float = 5.0
    ) -> Iterator[bytes]:
        """The stdout of ``argv`` as it comes; ``b""`` after each ``idle_s`` without output (so the
        caller can check its deadline); ends with the command. ExecDropped when the stream breaks."""
        with self._open(pod, argv, container, False) as ws:
            while True:
                message = self._receive(ws, pod, argv, idle_s)
                if message is None:
                    yield b""
                    continue
                channel, data = message
                if channel == ERROR:
                    return
                if channel == STDOUT and data:
                    yield data

    # -- the websocket ------------------------------------------------------------------------
    def _open(self, pod: str, argv: list[str], container: str | None, stdin: bool):
        query = [("command", word) for word in argv] + [("stdout", "true"), ("stderr", "true")]
        if stdin:
            query.append(("stdin", "true"))
        if container:
            query.append(("container", container))
        path = kind_path(POD, self.namespace, pod, "exec") + "?" + urlencode(query, quote_via=quote)
        return _Opened(self, pod, argv, path)

    def _receive(self, ws, pod: str, argv: list[str], timeout: float) -> tuple[int, bytes] | None:
        try:
            message = ws.receive_bytes(timeout)
        except _websocket.Closed:
            raise ExecDropped(f"{self._what(pod, argv)}: the API server closed the stream before the command ended",
                              hint="try again; `kubectl exec` into the pod shows whether it answers") from None
        except _websocket.Dropped as exc:
            raise ExecDropped(f"{self._what(pod, argv)}: the connection broke ({exc})",
                              hint="try again; is the API server reachable?") from None
        if not message:
            return None if message is None else (-1, b"")
        return message[0], message[1:]

    def _what(self, pod: str, argv: list[str]) -> str:
        return f"exec {argv[0]} in pod {self.namespace}/{pod}"

    def _op(self, pod: str) -> Op:
        return Op("create", POD, self.namespace, pod, "exec")


class _Opened:
    """``with``: the open websocket; the upgrade refused becomes the typed API error."""

    def __init__(self, owner: PodExec, pod: str, argv: list[str], path: str):
        self.owner, self.pod, self.argv, self.path = owner, pod, argv, path
        self._context: AbstractContextManager | None = None

    def __enter__(self):
        self._context = context = _websocket.connect(self.owner._client, self.path, PROTOCOLS)
        try:
            return context.__enter__()
        except _websocket.Refused as exc:
            response = exc.response
            error = HttpError(response.status_code, response.reason_phrase, response.content, response.headers)
            raise api_error(error, self.owner._op(self.pod), self.owner.connection.host) from None
        except _websocket.Dropped as exc:
            raise ExecDropped(f"{self.owner._what(self.pod, self.argv)}: the upgrade failed ({exc})") from None
        except httpx.HTTPError as exc:
            raise ExecDropped(f"{self.owner._what(self.pod, self.argv)}: {type(exc).__name__}: {exc}",
                              hint="check that the cluster is reachable: `kubectl cluster-info`") from None

    def __exit__(self, *exc_info):
        assert self._context is not None  # entered
        return self._context.__exit__(*exc_info)


def _send_stdin(ws, data: bytes) -> None:
    """``data`` on the stdin channel, then (v5) the signal that stdin is over."""
    for start in range(0, len(data), _STDIN_CHUNK):
        ws.send_bytes(bytes([STDIN]) + data[start:start + _STDIN_CHUNK])
    if ws.protocol == PROTOCOLS[0]:
        ws.send_bytes(bytes([CLOSE, STDIN]))


def _status(data: bytes) -> tuple[int | None, str]:
    """(exit code, failure message) of the error channel's ``Status``: (0, "") on Success."""
    try:
        status = json.loads(data) if data else {}
    except ValueError:
        return None, data.decode("utf-8", errors="replace")
    if status.get("status") == "Success":
        return 0, ""
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), ""
            except (TypeError, ValueError):
                break
    return None, status.get("message") or "the command failed"
