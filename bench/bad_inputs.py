"""Times the bad-input corpus (tests/cli/test_bad_inputs.py): wall time, CPU time and peak RSS per row.

Targets (benchmark, not test): every bad input refused (exit 2) within 1 s and 200 MiB. On a
shared, loaded machine wall time swells; the CPU column (user + system) shows the work itself.

    .venv/bin/python bench/bad_inputs.py [--runs 3] [-k SUBSTRING]
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

from test_bad_inputs import CORPUS, EXE  # noqa: E402

TARGET_S, TARGET_MIB = 1.0, 200.0


def measure(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS (MiB) and exit code of one cold run."""
    start = time.perf_counter()
    proc = subprocess.Popen([EXE, *argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("-k", default="", help="only rows whose name contains this")
    args = parser.parse_args()
    print(f"{'case':<40} {'median s':>9} {'cpu s':>6} {'peak MiB':>9} {'exit':>5}")
    slow = 0
    for name, build in CORPUS.items():
        if args.k not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            case = build(cwd)
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": tmp,
                "NRL_K8S_USER": "bench",
                "KUBECONFIG": f"{tmp}/none",
                **case.env,
            }
            runs = [measure(case.argv, cwd, env) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        mib = max(r[2] for r in runs)
        code = runs[-1][3]
        ok = wall <= TARGET_S and mib <= TARGET_MIB and code == 2
        slow += not ok
        print(f"{name:<40} {wall:>9.3f} {cpu:>6.3f} {mib:>9.1f} {code:>5}  {'ok' if ok else 'MISSED'}")
    print(f"\n{slow} row(s) missed the target (exit 2 within {TARGET_S:g} s and {TARGET_MIB:g} MiB)")


if __name__ == "__main__":
    main()
