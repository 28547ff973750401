"""``httpx`` without its command-line tool.

``import httpx`` also imports ``httpx._main`` (the ``httpx`` console command) and with it click,
pygments and rich.syntax, which are installed (Ray needs click, rich needs pygments): ~0.1 s of
every live command, for a tool nrl-k8s never runs. A stand-in is registered first; calling
``httpx.main`` still works (it loads the real one). Import httpx as ``from ._httpx import httpx``.

``ApiServerAuth`` gives an httpx client the kube connection's credentials (the dashboard through
the API server's service proxy, ``podexec`` on a pod's exec subresource).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Generator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nrl_k8s.kube.connection import Connection


def _real_main(*args, **kwargs):
    sys.modules.pop("httpx._main", None)
    from httpx._main import main

    return main(*args, **kwargs)


if "httpx" not in sys.modules:
    _stand_in = types.ModuleType("httpx._main", "stand-in: the real module loads when httpx.main is called")
    _stand_in.__dict__["main"] = _real_main
    sys.modules.setdefault("httpx._main", _stand_in)

import httpx  # noqa: E402

__all__ = ["ApiServerAuth", "httpx"]


class ApiServerAuth(httpx.Auth):
    """The connection's current auth headers on every request (exec and file tokens change); a
    401 is retried once with refreshed ones (``Connection.refresh``). Connecting (TCP and TLS
    handshake) may take ``connection.REACH_S`` at most, as with every path to the API server."""

    def __init__(self, connection: Connection):
        self.connection = connection

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from nrl_k8s.kube.connection import REACH_S

        timeout = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {**timeout, "connect": min(timeout.get("connect") or REACH_S, REACH_S)}
        sent = self.connection.headers()
        request.headers.update(sent)
        response = yield request
        if response.status_code == 401 and self.connection.refresh(sent):
            request.headers.pop("Authorization", None)
            request.headers.update(self.connection.headers())
            yield request
