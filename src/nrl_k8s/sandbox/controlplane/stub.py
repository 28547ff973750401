"""``python -m nrl_k8s.sandbox.controlplane.stub``: a pod's stand-in process, run by the local kubelet.

``frontend --model M --port P [--unavailable-for S]``: a Dynamo frontend (``FrontendStub``).
``http --label L --port P [--port Q ...]``: a Deployment pod, 200 on every GET, one server per port.
It prints to stdout (the pod's log) and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from ..frontend_stub import FrontendStub, HttpStub


class _Stdout:
    def write(self, text: str) -> None:
        print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nrl_k8s.sandbox.controlplane.stub")
    parser.add_argument("kind", choices=("frontend", "http"))
    parser.add_argument("--model", default="")
    parser.add_argument("--label", default="")
    parser.add_argument("--port", type=int, action="append", default=[])
    parser.add_argument("--unavailable-for", type=float, default=0.0)
    args = parser.parse_args(argv)
    out = _Stdout()
    if args.kind == "frontend":
        stubs: list[HttpStub] = [FrontendStub(args.model, args.unavailable_for, out, port=args.port[0])]
    else:
        stubs = [HttpStub(args.label, out, port=port) for port in args.port]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    for stub in stubs:
        stub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
