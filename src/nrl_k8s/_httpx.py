"""``httpx`` without its command-line tool.

``import httpx`` also imports ``httpx._main`` (the ``httpx`` console command) and with it click,
pygments and rich.syntax, which are installed (Ray needs click, rich needs pygments): ~0.1 s of
every live command, for a tool nrl-k8s never runs. A stand-in is registered first; calling
``httpx.main`` still works (it loads the real one). Import httpx as ``from ._httpx import httpx``.
"""

from __future__ import annotations

import sys
import types


def _real_main(*args, **kwargs):
    sys.modules.pop("httpx._main", None)
    from httpx._main import main

    return main(*args, **kwargs)


if "httpx" not in sys.modules:
    _stand_in = types.ModuleType("httpx._main", "stand-in: the real module loads when httpx.main is called")
    _stand_in.main = _real_main
    sys.modules.setdefault("httpx._main", _stand_in)

import httpx  # noqa: E402

__all__ = ["httpx"]
