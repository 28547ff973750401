"""Benchmark: a newcomer's first `make demo` (or `make setup`), from a fresh clone with every cache empty.

    .venv/bin/python bench/first_demo.py [--rev REV] [--target demo|setup]

The clone (of this repository at REV, HEAD by default) gets empty Go build and module caches, an
empty pip and uv cache and an empty nrl-k8s cache (``XDG_CACHE_HOME``, ``GOCACHE``, ``GOMODCACHE``), all in
a temporary folder removed afterwards, so the machine's own caches are neither used nor touched;
Go modules come from the Go module proxy and wheels from PyPI. make runs each recipe line through a
shell that records its start, wall time and CPU time (its own and its children's); lines overlap
when make runs them side by side. Then what ``sandbox build`` recorded (each ``go build``'s wall and
CPU time, Dynamo's runtime's wall time), and the machine's load over the run: the CPU time every
process used (``/proc/stat``) against this run's own, so a run on a busy machine says so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: make's SHELL: runs the recipe line with /bin/sh and appends what it took to $NRL_BENCH_STEPS
TIMED_SHELL = """#!{python}
import json, os, resource, subprocess, sys, time
began = time.time()
code = subprocess.call(["/bin/sh", *sys.argv[1:]])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.environ["NRL_BENCH_STEPS"], "a") as log:
    print(json.dumps({{"line": sys.argv[-1], "start": began, "end": time.time(),
                      "cpu": used.ru_utime + used.ru_stime}}), file=log)
sys.exit(code)
"""


def busy_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used since boot (user, nice, system, irq)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / os.sysconf("SC_CLK_TCK")


def cold_env(scratch: Path, steps: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(scratch / "cache"), "GOCACHE": str(scratch / "go-build"),
           "GOMODCACHE": str(scratch / "go-mod"), "NRL_BENCH_STEPS": str(steps),
           "NRL_K8S_DEMO_DIR": str(scratch / "sandbox")}
    for name in ("NRL_K8S_CONTROL_PLANE_BIN", "NRL_K8S_DYNAMO_RUNTIME", "PIP_CACHE_DIR", "UV_CACHE_DIR", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(ROOT)))
    return env


def run(rev: str, target: str, scratch: Path) -> int:
    tree, steps, shell = scratch / "clone", scratch / "steps.jsonl", scratch / "timed-sh"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", rev], check=True)
    shell.write_text(TIMED_SHELL.format(python=sys.executable))
    shell.chmod(0o755)
    load_before, began = busy_cpu_seconds(), time.time()
    mine_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(["make", "-C", str(tree), f"SHELL={shell}", target], env=cold_env(scratch, steps),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, load = time.time() - began, busy_cpu_seconds() - load_before
    mine_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = (mine_after.ru_utime + mine_after.ru_stime) - (mine_before.ru_utime + mine_before.ru_stime)
    print(f"make {target} at {rev} from nothing: exit {done.returncode}")
    print(f"{'start':>6} {'wall':>6} {'cpu':>6}  recipe line (seconds)")
    for step in map(json.loads, steps.read_text().splitlines() if steps.exists() else []):
        line = " ".join(step["line"].split())
        print(f"{step['start'] - began:6.0f} {step['end'] - step['start']:6.0f} {step['cpu']:6.0f}  {line[:110]}")
    for record in (scratch / "cache/nrl-k8s").glob("*/*/build.json"):
        for part in json.loads(record.read_text()).get("steps", []):
            print(f"  {record.parent.parent.name}: {part['name']}: "
                  f"wall {part['seconds']:.0f} s, CPU {part['cpu']:.0f} s")
    for complete in (scratch / "cache/nrl-k8s/dynamo").glob("*/.complete"):  # venv.build writes its seconds
        print(f"  dynamo: {complete.parent.name}: wall {float(complete.read_text()):.0f} s")
    print(f"total: wall {wall:.0f} s ({wall / 60:.1f} min), CPU {mine:.0f} s; machine {load:.0f} CPU-s over the run "
          f"on {os.cpu_count()} cores, so {max(load - mine, 0):.0f} CPU-s by other processes (the sandbox daemon "
          f"the demo starts among them); load average now {os.getloadavg()[0]:.1f}")
    if done.returncode:
        print(done.stderr[-3000:])
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--target", choices=("demo", "setup"), default="demo")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="nrl-first-demo-"))
    try:
        return run(args.rev, args.target, scratch)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)  # the Go module cache is read-only
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
