"""The sandbox's long-lived example driver: runs from the uploaded working directory, then does
one RL step against the run's Dynamo graph.

It reads the final recipe nrl-k8s staged as ``nrl_k8s_run.yaml`` in its working directory and
prints the DGD name injected into it, then prints ``examples/sandbox_code/message.txt`` (uploaded
with ``launch.rayUploadPaths``), then runs ``rl_step.py`` on that recipe (generation, and on every
worker pause, weight update from disk, resume). Exits 1 when any of it fails. Standard library only.
"""

import os
import re
import sys
from pathlib import Path

import rl_step


def main() -> int:
    recipe = Path("nrl_k8s_run.yaml")
    message = Path("examples/sandbox_code/message.txt")
    if not recipe.is_file() or not message.is_file():
        print(f"missing {recipe if not recipe.is_file() else message} in {Path.cwd()}", file=sys.stderr)
        return 1
    found = re.search(r"^\s*dgd_name:\s*(\S+)\s*$", recipe.read_text(), re.MULTILINE)
    if found is None:
        print(f"{recipe}: no policy.generation.dynamo_cfg.dgd_name", file=sys.stderr)
        return 1
    print(f"dgd_name: {found.group(1)}")
    print(f"message: {message.read_text().strip()}")
    print(f"run={os.environ.get('NRL_K8S_RUN_ID', '-')}")
    return rl_step.main(str(recipe))


if __name__ == "__main__":
    sys.exit(main())
