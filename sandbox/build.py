"""What the sandbox needs built once per machine: the control plane's Go binaries
(``controlplane/binaries.py``) and Dynamo's runtime venv (``dynamo_runtime/venv.py``), side by side.

``nrl-k8s sandbox build`` runs it, and so does ``make setup``, as ``python -m nrl_k8s_sandbox.build``
while pip installs nrl-k8s's own dependencies: it needs none of them (the standard library and
``nrl_k8s.errors`` only), so the Go builds, the longest part of a first ``make setup``, start at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from nrl_k8s.errors import NrlK8sError

from .controlplane import binaries
from .dynamo_runtime import venv


def build(progress: Callable[[str], None], kueue: bool = False) -> list[str]:
    """Build both unless they are there (Dynamo's venv installs while Go compiles), Kueue only if
    ``kueue``; a line on each."""
    if binaries.ready(kueue) is None:
        binaries.toolchain()  # no Go: say so before anything starts
    with ThreadPoolExecutor(1) as pool:
        runtime = pool.submit(venv.build, progress)
        where, seconds = binaries.build(progress, kueue)
        folder, installed = runtime.result()
    size = binaries.disk_usage(where) / 2**20
    return [f"control plane {binaries.key()} in {where.bin.parent}: {size:.0f} MiB"
            + (f", built in {seconds:.0f} s" if seconds else " (already built)"),
            f"Dynamo's runtime {venv.key()} in {folder}"
            + (f", installed in {installed:.0f} s" if installed else " (already installed)")]


def main(argv: list[str] = sys.argv[1:]) -> int:
    """``python -m nrl_k8s_sandbox.build [--kueue]``."""
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if argv not in ([], ["--kueue"]):
        say(f"error: unknown arguments {' '.join(argv)!r}\nhint: python -m nrl_k8s_sandbox.build [--kueue]")
        return 2
    try:
        for line in build(say, kueue=argv == ["--kueue"]):
            say(line)
    except NrlK8sError as err:
        say(f"error: {err.message}" + (f"\nhint: {err.hint}" if err.hint else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
