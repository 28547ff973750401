"""The interpreter the Makefile makes .venv from, against ``python3`` on PATH: CPU-seconds of the
same Python work in each, median of N runs, and the ratio.

The work is what most of the suite's CPU is: importing a large package tree (the standard
library's asyncio, email, http, json, ssl, xml... with their bytecode already compiled) and
running plain Python (dicts, strings, small objects). Both interpreters must be Python 3.11.

    .venv/bin/python bench/interpreter.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

IMPORTS = "import asyncio, email.parser, http.client, json, ssl, xml.etree.ElementTree, logging.handlers, " \
          "concurrent.futures, unittest, argparse, decimal, dataclasses, typing, urllib.request, zipfile"
LOOP = """
class Node:
    def __init__(self, key, value): self.key, self.value = key, value
    def weight(self): return len(self.key) + self.value
index = {}
for i in range(300_000):
    index[f"k{i}"] = Node(f"k{i}", i)
total = sum(node.weight() for node in index.values())
"""
WORK = {"imports": IMPORTS, "plain Python": LOOP}


def makefile_interpreter() -> str:
    """What ``make`` takes for PY."""
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "--eval=print-py: ; @echo $(PY)", "print-py"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return executable(out)


def executable(command: str) -> str:
    """The interpreter ``command`` runs (not a launcher in front of it, such as pyenv's shim)."""
    return subprocess.run([command, "-c", "import sys; print(sys.executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def cpu_seconds(python: str, code: str) -> float:
    pid = os.posix_spawn(python, [python, "-c", code], os.environ)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{python} failed on the benchmark's code")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    chosen, baseline = makefile_interpreter(), executable("python3")
    print(f"make's PY: {chosen}\nbaseline:  {baseline} (python3 on PATH)")
    if os.path.realpath(chosen) == os.path.realpath(baseline):
        print("the same interpreter: nothing to compare")
        return
    print(f"{'work':<14} {'PY CPU-s':>9} {'python3':>9} {'ratio':>6}")
    for name, code in WORK.items():
        times: dict[str, list[float]] = {chosen: [], baseline: []}
        for _ in range(args.runs):  # interleaved, so a change in the machine's speed hits both
            for python in times:
                times[python].append(cpu_seconds(python, code))
        ours, theirs = (statistics.median(times[p]) for p in (chosen, baseline))
        print(f"{name:<14} {ours:>9.3f} {theirs:>9.3f} {ours / theirs:>5.2f}x")


if __name__ == "__main__":
    main()
