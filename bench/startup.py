"""Cold-start benchmark of offline commands: wall time and peak RSS, median of N runs.

Targets (benchmark, not test): `--help` <= 0.2 s, `check` on the largest example <= 0.25 s.
An earlier launcher of this kind took 0.69 s / 0.86 s and 106 MiB here; ratios are printed
against those numbers. `check` is measured twice: every run with an empty user cache ("first
run": the pod-template schema check loads jsonschema-rs and the schemas), and runs after a first
one (what an edit-and-rerun loop sees: the accepted templates are remembered).

    .venv/bin/python bench/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent)) or "nrl-k8s"
LARGEST = ["examples/grpo_qwen3_30b_dynamo.yaml", "--infra", "examples/grpo_qwen3_30b_dynamo.gb300.infra.yaml"]
CASES = {  # name: (command, target s, earlier launcher s, fresh cache every run)
    "--help": ([EXE, "--help"], 0.2, 0.69, False),
    "check, first run": ([EXE, "check", *LARGEST], 0.25, 0.86, True),
    "check, re-run": ([EXE, "check", *LARGEST], 0.25, 0.86, False),
}
BASELINE_MIB = 106.0


def measure(cmd: list[str], cache: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one cold run of `cmd` with user cache `cache`."""
    env = os.environ | {"NRL_K8S_USER": "bench", "XDG_CACHE_HOME": cache}
    start = time.perf_counter()
    pid = os.posix_spawn(cmd[0], cmd, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.chdir(ROOT)
    print(f"{'command':<26} {'median s':>9} {'target':>7} {'vs old':>7} {'peak MiB':>9} {'vs old':>7}")
    for name, (cmd, target, baseline, fresh) in CASES.items():
        with tempfile.TemporaryDirectory(prefix="nrlk8s-bench-") as cache:
            measure(cmd, cache)  # warm the page cache once; every timed run is still a fresh process
            runs = []
            for _ in range(args.runs):
                if fresh:
                    shutil.rmtree(Path(cache) / "nrl-k8s", ignore_errors=True)
                runs.append(measure(cmd, cache))
        wall = statistics.median(r[0] for r in runs)
        mib = statistics.median(r[1] for r in runs)
        verdict = "ok" if wall <= target else "SLOW"
        print(
            f"{name:<26} {wall:>9.3f} {target:>6.2f}s {wall / baseline:>6.2f}x "
            f"{mib:>9.1f} {mib / BASELINE_MIB:>6.2f}x  {verdict}"
        )


if __name__ == "__main__":
    main()
