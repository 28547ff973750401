"""``python -m nrl_k8s_sandbox serve ...``: the daemon entry point that ``sandbox up`` launches."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrl_k8s.errors import NrlK8sError

from .process import parse_faults


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nrl_k8s_sandbox")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the sandbox in the foreground (use `nrl-k8s sandbox up`)")
    serve.add_argument("--dir", type=Path, required=True)
    serve.add_argument("--ready-fd", type=int, help="write 'ready' to this inherited fd once everything answers")
    serve.add_argument("--fault", action="append", default=[], metavar="NAME[=VALUE]")
    args = parser.parse_args(argv)
    from .controlplane.serve import serve as run

    try:
        return run(args.dir, args.ready_fd, parse_faults(args.fault))
    except NrlK8sError as err:
        print(f"error: {err.message}" + (f"\nhint: {err.hint}" if err.hint else ""), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
