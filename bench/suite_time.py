"""Benchmark: the whole test suite's wall time at HEAD against an earlier commit (the baseline,
measured in the same run, on the same machine).

    .venv/bin/python bench/suite_time.py [--baseline REV]

Each side is a fresh `git clone` of this repository at its commit, set up the way `make setup`
does it (a venv from that commit's own requirements, the control plane from the user cache, so
the one-time Go build is not counted) and run with that commit's own pytest options. Prints
each side's wall time, pass/fail counts and the ratio. The default baseline, ``BASELINE``, is the
last commit whose suite ran on the Python simulator. Takes as long as both suites together.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# pytest's last line, "=== 2 failed, 10 passed in 3.1s ===" (or bare with -q)
SUMMARY = re.compile(r"^=* *(\d+ \w+(?:, \d+ \w+)*) in [0-9.]+s", re.MULTILINE)
TAIL_LINES = 40
#: the last commit whose suite ran on the Python simulator
BASELINE = "ef94ef7"


def run_suite(rev: str, scratch: Path) -> tuple[float, str]:
    """(seconds of `make test` after set-up, pytest's summary line) at ``rev``."""
    tree = scratch / rev
    subprocess.run(["git", "clone", "-q", str(ROOT), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", rev], check=True)
    subprocess.run(["make", "-C", str(tree), "setup"], check=True, capture_output=True)
    began = time.monotonic()
    done = subprocess.run(["make", "-C", str(tree), "test"], capture_output=True, text=True)
    seconds = time.monotonic() - began
    found = SUMMARY.findall(done.stdout)
    if done.returncode:  # what failed, before the clone is removed
        print(f"--- {rev}: make test exited {done.returncode}; its output ends:")
        print("\n".join((done.stdout + done.stderr).splitlines()[-TAIL_LINES:]), flush=True)
    return seconds, found[-1] if found else f"no pytest summary (make exited {done.returncode})"


def compare(baseline: str) -> None:
    """Run the suite at ``baseline`` and at HEAD, one after the other; print both and their ratio."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="nrl-suite-bench-") as scratch:
        results = {rev: run_suite(rev, Path(scratch)) for rev in (baseline, head)}
    for rev, (seconds, summary) in results.items():
        print(f"suite at {rev}: {seconds / 60:.1f} min ({summary})")
    print(f"suite ratio HEAD/baseline: {results[head][0] / results[baseline][0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    compare(parser.parse_args().baseline)


if __name__ == "__main__":
    main()
