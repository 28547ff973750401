"""Namespace inference without the `kubernetes` package: service-account file, then kubeconfig."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nrl_k8s.errors import ConfigError

from .files import load_mapping

KUBECONFIG_MAX_BYTES = 16 << 20  # inline certificates of many clusters add up
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # a pod's token, ca.crt and namespace
SA_NAMESPACE_FILE = SERVICE_ACCOUNT_DIR / "namespace"


def current_namespace(
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    sa_namespace_file: Path | None = None,
) -> tuple[str, str]:
    """Return `(namespace, source)` with source "in-cluster", "kube-context" or "default".

    Without an explicit `context`, the in-cluster service-account namespace wins; then the
    namespace of the kube context (`context`, else `current-context`); then "default".
    An explicit `context` that no kubeconfig file defines is a ConfigError.
    """
    env = os.environ if env is None else env
    if context is None:
        namespace = _read_namespace_file(sa_namespace_file or SA_NAMESPACE_FILE)
        if namespace:
            return namespace, "in-cluster"
    namespace = context_namespace(context, env)
    if namespace:
        return namespace, "kube-context"
    return "default", "default"


def kubeconfig_files(env: Mapping[str, str]) -> list[Path]:
    """`$KUBECONFIG` (a path-separated list) or `~/.kube/config`; only files that exist."""
    if env.get("KUBECONFIG"):
        candidates = [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
    else:
        home = Path(env["HOME"]) if env.get("HOME") else Path.home()
        candidates = [home / ".kube" / "config"]
    return [p for p in candidates if p.is_file()]


def merge(files: list[Path]) -> tuple[str | None, dict[str, dict[str, tuple[object, Path]]]]:
    """kubectl's merge of kubeconfig files: the current-context, and each cluster, user and context
    by name, of the first file that sets it; each entry with its file's directory (its paths' base)."""
    current: str | None = None
    merged: dict[str, dict[str, tuple[object, Path]]] = {"clusters": {}, "users": {}, "contexts": {}}
    for path in files:
        config = load_mapping(path, max_bytes=KUBECONFIG_MAX_BYTES)
        current = current or config.get("current-context") or None
        for section, entries in merged.items():
            for entry in config.get(section) or []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    entries.setdefault(entry["name"], (entry.get(section[:-1]) or {}, path.absolute().parent))
    return current, merged


def context_namespace(context: str | None, env: Mapping[str, str]) -> str | None:
    """The namespace of `context` (else the current context) in the merged kubeconfig, if any."""
    files = kubeconfig_files(env)
    current, merged = merge(files)
    contexts = {name: entry for name, (entry, _) in merged["contexts"].items()}
    name = context or current
    if name is None:
        return None
    if name not in contexts:
        if context is None:
            return None
        where = ", ".join(str(p) for p in files) or "no kubeconfig file found"
        raise ConfigError(
            f"kube context '{context}' not found ({where})", hint="list contexts with `kubectl config get-contexts`"
        )
    entry = contexts[name]
    namespace = entry.get("namespace") if isinstance(entry, dict) else None
    return namespace if isinstance(namespace, str) and namespace else None


def _read_namespace_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def has_cluster_config(env: Mapping[str, str] | None = None) -> bool:
    """Whether a cluster is configured at all (a kubeconfig file, or a pod's service account)."""
    env = os.environ if env is None else env
    in_pod = bool(env.get("KUBERNETES_SERVICE_HOST")) and SA_NAMESPACE_FILE.parent.joinpath("token").is_file()
    return in_pod or bool(kubeconfig_files(env))
