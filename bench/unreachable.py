"""How long a live command takes to fail against an API server that is not there.

Target (benchmark, not test): one error line, exit 1, within 5 s (upstream: ~1 s; nrl-k8s before
`Tuning.first_contact_s`: 232 s for `run`). The baseline is `nrl-k8s --version`, measured in the
same run; each case prints its median seconds and its ratio to it.

    .venv/bin/python bench/unreachable.py [--runs 3]
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

ROOT = Path(__file__).resolve().parent.parent
EXE = shutil.which("nrl-k8s", path=str(Path(sys.executable).parent)) or "nrl-k8s"
PAIR = [str(ROOT / "examples/sandbox.yaml"), "--infra", str(ROOT / "examples/sandbox.infra.yaml")]
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team}}]
"""
CASES = {
    "status": ["status", *PAIR],
    "run --rayjob --no-wait": ["run", "--rayjob", "--no-wait", *PAIR],
    "cluster list": ["cluster", "list"],
}
TARGET_S = 5.0


def seconds(argv: list[str], env: dict, expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run([EXE, *argv], env=env, capture_output=True)
    took = time.perf_counter() - start
    if done.returncode != expect:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}, not {expect}:\n{done.stderr.decode()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "kubeconfig"
        config.write_text(KUBECONFIG)
        env = {**os.environ, "KUBECONFIG": str(config), "NRL_K8S_USER": "bench", "XDG_CACHE_HOME": tmp}
        base = statistics.median(seconds(["--version"], env, 0) for _ in range(runs))
        print(f"{'nrl-k8s --version (baseline)':32} {base:6.2f} s")
        for name, argv in CASES.items():
            took = statistics.median(seconds(argv, env, 1) for _ in range(runs))
            mark = "ok" if took <= TARGET_S else f"over the {TARGET_S:.0f} s target"
            print(f"{name:32} {took:6.2f} s  {took / base:5.1f}x baseline  {mark}")


if __name__ == "__main__":
    main()
