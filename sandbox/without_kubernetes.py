"""``python -m nrl_k8s_sandbox.without_kubernetes SCRIPT ARGS...``: one of Ray's Python processes (its
dashboard, its dashboard agent) run as ``python SCRIPT ARGS...`` would, with the ``kubernetes`` client
unimportable. Why: ``ray_start.py``."""

import os
import runpy
import sys

sys.modules["kubernetes"] = None  # type: ignore[assignment]  # `import kubernetes` raises ImportError
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(sys.argv[0])  # as `python SCRIPT` sets it
runpy.run_path(sys.argv[0], run_name="__main__")
