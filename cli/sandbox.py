"""`nrl-k8s sandbox ...`: the local simulated control plane (see nrl_k8s.sandbox)."""

import typer

app = typer.Typer(help="Run a local simulated Kubernetes control plane with KubeRay, Dynamo and a real Ray head.")
