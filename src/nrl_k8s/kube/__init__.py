"""Kubernetes access: the one client (``client.Kube``), its transport, credentials and typed errors,
the watch-with-deadline wait, pod exec and the failure diagnosis of pods."""
