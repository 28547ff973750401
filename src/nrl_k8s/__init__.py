"""nrl-k8s: launch NeMo-RL runs on Kubernetes with KubeRay and NVIDIA Dynamo.

The core library never imports typer or rich (the CLI lives in ``nrl_k8s_cli``),
and nothing imported by offline commands pulls in ``kubernetes``, ``ray`` or ``httpx``.
"""

__version__ = "0.1.0"
