"""Benchmark: `nrl-k8s sandbox up` to ready (budget 20 s on a 2-core machine) against its floor,
etcd and kube-apiserver alone started the same way (the baseline, measured in the same run),
`down` leaving no process behind, and the control plane's cold build.

    .venv/bin/python bench/sandbox_up.py [--runs N] [--cold] [--suite [--baseline REV]]

Each run starts a sandbox in a fresh temporary directory through the installed CLI, times
until `up` returns (it returns only once everything answers), runs `down`, and checks that no
process it started (anything carrying the sandbox marker) is still alive. The floor runs the
daemon's first two steps (certificates, etcd and kube-apiserver until /readyz) in this process.
Prints each run, the medians and their ratio. The cold build is
the one `sandbox build` recorded on this machine; `--cold` measures it again from nothing (empty
Go module and build caches in a temporary folder: about a quarter of an hour on 2 cores).
`--suite` then times the whole test suite before (``--baseline``, the simulator's last commit by
default) and after (HEAD) on this machine, as `bench/suite_time.py` does (both suites, one after
the other: about half an hour).
Exits 1 if the real median is over budget or anything was left behind.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import suite_time

from nrl_k8s_sandbox.controlplane import binaries
from nrl_k8s_sandbox.pids import alive, marked, start_time

BUDGET_S = 20.0
NRL_K8S = str(Path(sys.executable).with_name("nrl-k8s"))


def one_run(directory: Path) -> tuple[float, list[int]]:
    """(seconds to ready, pids still alive after down)."""
    began = time.monotonic()
    subprocess.run([NRL_K8S, "sandbox", "up", "--dir", str(directory)], check=True, capture_output=True, text=True)
    elapsed = time.monotonic() - began
    started = {pid: start_time(pid) for pid in marked(directory)}
    subprocess.run([NRL_K8S, "sandbox", "down", "--dir", str(directory)], check=True, capture_output=True, text=True)
    left = [pid for pid, began_at in started.items() if alive(pid) and start_time(pid) == began_at]
    return elapsed, left


def floor_run(directory: Path) -> tuple[float, list[int]]:
    """(seconds until etcd and kube-apiserver alone answer, pids still alive after stopping them)."""
    from nrl_k8s_sandbox.controlplane import serve

    began, temp = time.monotonic(), tempfile.tempdir
    plane = serve.Plane(directory, {})  # the daemon's temp dir becomes this process's: given back after
    try:
        serve.certificates(plane)
        serve.api_server(plane)
        elapsed = time.monotonic() - began
        pids = [p.pid for p in plane.processes.running.values()]
    finally:
        plane.stop()
        shutil.rmtree(plane.scratch, ignore_errors=True)
        tempfile.tempdir = temp
    return elapsed, [pid for pid in pids if alive(pid)]


def cold_build() -> tuple[float, int]:
    """(seconds, bytes of binaries) of a build from empty caches."""
    with tempfile.TemporaryDirectory(prefix="nrl-cold-build-") as scratch:
        env = {**os.environ, "XDG_CACHE_HOME": f"{scratch}/cache", "GOCACHE": f"{scratch}/go-build",
               "GOMODCACHE": f"{scratch}/go-mod", "GOFLAGS": "-modcacherw"}
        env.pop(binaries.ENV_BIN, None)
        began = time.monotonic()
        subprocess.run([NRL_K8S, "sandbox", "build"], check=True, env=env)
        seconds = time.monotonic() - began
        return seconds, binaries.disk_usage(binaries.Installed(Path(scratch) / "cache/nrl-k8s/control-plane"
                                                               / binaries.key() / "bin", Path(scratch)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="measure a cold build of the control plane again")
    parser.add_argument("--suite", action="store_true", help="time the whole test suite at --baseline and at HEAD")
    parser.add_argument("--baseline", default=suite_time.BASELINE)
    args = parser.parse_args()
    if args.cold:
        seconds, size = cold_build()
        print(f"cold build: {seconds:.0f} s, binaries {size / 2**20:.0f} MiB")
    else:
        record = binaries.recorded_build()
        print("cold build (recorded by `sandbox build`): "
              + (f"{record['seconds']:.0f} s, {record['bytes'] / 2**20:.0f} MiB" if record else "not recorded"))
    medians, leaks = {}, []
    for label, run_one in (("floor", floor_run), ("sandbox up", one_run)):
        times = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="nrl-sandbox-bench-") as scratch:
                elapsed, left = run_one(Path(scratch))
            times.append(elapsed)
            leaks += left
            print(f"{label} run {run + 1}: to ready {elapsed:.2f}s, processes left after down: {len(left)}")
        medians[label] = statistics.median(times)
    up, floor = medians["sandbox up"], medians["floor"]
    verdict = "OK" if up <= BUDGET_S and not leaks else "FAIL"
    print(f"median to ready: sandbox up {up:.2f}s (budget {BUDGET_S:.0f}s), etcd + kube-apiserver alone {floor:.2f}s, "
          f"ratio {up / floor:.2f}; leftover processes: {leaks or 'none'} -> {verdict}")
    if args.suite:
        suite_time.compare(args.baseline)
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())
