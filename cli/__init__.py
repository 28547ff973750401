"""The nrl-k8s command layer: the only code that imports typer and rich."""
