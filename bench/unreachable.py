"""How long every live command takes to fail when the API server cannot be reached.

Four failures (tests/cli/unreachable_servers.py): the port refuses, the server accepts and never
answers, the TLS handshake never finishes, the exec credential plugin never returns. Target
(benchmark, not test): one error line, exit 1, within 5 s each (before the bound: 59-63 s for
most commands, 179 s for `run --raycluster`, 235-242 s for `run --rayjob`, 30-32 s per hung
plugin). Each row prints the median seconds, the ratio to the target and whether the command kept
the contract (exit 1, one `error:` line naming the server, no traceback); a command still running
at ``--cap`` is killed and shown as ``>CAP``. ``nrl-k8s --version`` is the startup baseline.

    .venv/bin/python bench/unreachable.py [--runs 1] [--cap 90] [-k SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "cli"))

from unreachable_servers import COMMANDS, EXE, FAILURES, broken  # noqa: E402

TARGET_S = 5.0


def timed(argv: list[str], env: dict, cwd: str, cap: float) -> tuple[float, subprocess.CompletedProcess | None]:
    """Seconds and the finished run (None: still running at ``cap``, then killed)."""
    start = time.perf_counter()
    try:
        done = subprocess.run([EXE, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=cap)
    except subprocess.TimeoutExpired:
        return cap, None
    return time.perf_counter() - start, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--cap", type=float, default=90.0, help="kill a command after this many seconds")
    parser.add_argument("-k", default="", help="only rows whose name contains this")
    args = parser.parse_args()
    print(f"{'failure':10} {'command':26} {'seconds':>8} {'/ 5 s':>6}  verdict")
    with tempfile.TemporaryDirectory() as tmp:
        home = {"HOME": tmp, "XDG_CACHE_HOME": tmp, "NRL_K8S_USER": "bench", "PATH": os.environ["PATH"]}
        base = statistics.median(timed(["--version"], home, tmp, args.cap)[0] for _ in range(args.runs))
        print(f"{'-':10} {'--version (startup)':26} {base:8.2f} {base / TARGET_S:6.2f}")
        for kind, (failure, what) in FAILURES.items():
            for name, argv in COMMANDS.items():
                if args.k not in f"{kind} {name}":
                    continue
                with failure(Path(tmp)) as (config, server, _):
                    runs = [timed(argv, {**home, "KUBECONFIG": str(config)}, tmp, args.cap) for _ in range(args.runs)]
                took = statistics.median(t for t, _ in runs)
                verdicts = {"still running" if done is None else broken(done, server, what) or "ok" for _, done in runs}
                shown = f">{args.cap:.0f}" if "still running" in verdicts else f"{took:.2f}"
                mark = "" if took <= TARGET_S else "  OVER"
                print(f"{kind:10} {name:26} {shown:>8} {took / TARGET_S:6.2f}  {', '.join(sorted(verdicts))}{mark}",
                      flush=True)


if __name__ == "__main__":
    main()
