"""Benchmark: `nrl-k8s sandbox up` to ready (budget 15 s on a 2-core machine), and `down`
leaving no process behind.

    .venv/bin/python bench/sandbox_up.py [--runs N]

Each run starts a sandbox in a fresh temporary directory through the installed CLI, times
until `up` returns (it returns only once the API server, the operators and the Ray dashboard
answer), runs `down`, and checks that no process it started (the recorded pids, the Ray head's
process group, anything carrying the sandbox marker) is still alive. Prints each run and the
median; exits 1 if the median is over budget or anything was left behind.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nrl_k8s.sandbox.pids import alive, group_members, marked, read_pid, start_time

BUDGET_S = 15.0
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))


def one_run(directory: Path) -> tuple[float, list[int]]:
    """(seconds to ready, pids still alive after down)."""
    began = time.monotonic()
    subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(directory)], check=True, capture_output=True, text=True)
    elapsed = time.monotonic() - began
    ray_head = read_pid(directory / "ray-head.pid")
    pids = set(marked(directory)) | set(group_members(ray_head) if ray_head else [])
    started = {pid: start_time(pid) for pid in pids}
    subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(directory)], check=True, capture_output=True, text=True)
    left = [pid for pid, began_at in started.items() if alive(pid) and start_time(pid) == began_at]
    return elapsed, left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    times, leaks = [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="nrl-sandbox-bench-") as scratch:
            elapsed, left = one_run(Path(scratch))
        times.append(elapsed)
        leaks += left
        print(f"run {run + 1}: up to ready {elapsed:.2f}s, processes left after down: {len(left)}")
    median = statistics.median(times)
    verdict = "OK" if median <= BUDGET_S and not leaks else "FAIL"
    print(f"median up to ready: {median:.2f}s (budget {BUDGET_S:.0f}s); leftover processes: {leaks or 'none'} -> {verdict}")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
