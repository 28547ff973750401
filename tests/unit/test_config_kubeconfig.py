"""Namespace inference: service-account file, kube context, default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nrl_k8s.config import current_namespace
from nrl_k8s.errors import ConfigError


def kubeconfig(current: str | None, contexts: dict[str, str | None]) -> str:
    lines = [f"current-context: {current}" if current else "", "contexts:"]
    for name, namespace in contexts.items():
        lines.append(f"- name: {name}\n  context:\n    cluster: c\n    user: u")
        if namespace:
            lines.append(f"    namespace: {namespace}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "sa, files, kubeconfig_var, context, expected",
    [
        ("team-sa\n", {}, None, None, ("team-sa", "in-cluster")),
        ("team-sa", {"k": kubeconfig("dev", {"dev": "dev-ns"})}, "k", None, ("team-sa", "in-cluster")),
        ("  \n", {"k": kubeconfig("dev", {"dev": "dev-ns"})}, "k", None, ("dev-ns", "kube-context")),
        (None, {"k": kubeconfig("dev", {"dev": "dev-ns"})}, "k", None, ("dev-ns", "kube-context")),
        (
            None,
            {"k": kubeconfig("dev", {"dev": "dev-ns", "prod": "prod-ns"})},
            "k",
            "prod",
            ("prod-ns", "kube-context"),
        ),
        (
            "team-sa",
            {"k": kubeconfig("dev", {"dev": "dev-ns", "prod": "prod-ns"})},
            "k",
            "prod",
            ("prod-ns", "kube-context"),
        ),
        (
            None,
            {
                "a": kubeconfig("second", {"first": "a-ns"}),
                "b": kubeconfig("ignored", {"second": "b-ns", "first": "shadowed"}),
            },
            "a:b",
            None,
            ("b-ns", "kube-context"),
        ),
        (
            None,
            {"a": kubeconfig("x", {"x": "from-a"}), "b": kubeconfig(None, {"x": "from-b"})},
            "b:a",
            None,
            ("from-b", "kube-context"),
        ),
        (None, {"b": kubeconfig("x", {"x": "ns"})}, "missing:b", None, ("ns", "kube-context")),
        (None, {"k": kubeconfig("dev", {"dev": None})}, "k", None, ("default", "default")),
        (None, {"k": kubeconfig("ghost", {"dev": "dev-ns"})}, "k", None, ("default", "default")),
        (None, {"k": kubeconfig(None, {"dev": "dev-ns"})}, "k", None, ("default", "default")),
        (None, {"k": ""}, "k", None, ("default", "default")),
        (None, {}, None, None, ("default", "default")),
        (None, {".kube/config": kubeconfig("home", {"home": "home-ns"})}, None, None, ("home-ns", "kube-context")),
    ],
    ids=[
        "in-cluster",
        "in-cluster-beats-kubeconfig",
        "blank-sa-file-ignored",
        "current-context",
        "explicit-context",
        "explicit-context-beats-in-cluster",
        "first-current-context-first-context-entry-win",
        "current-context-from-later-file",
        "missing-kubeconfig-entries-skipped",
        "context-without-namespace",
        "current-context-not-defined",
        "no-current-context",
        "empty-kubeconfig",
        "nothing-at-all",
        "home-kube-config",
    ],
)
def test_current_namespace(tmp_path, sa, files, kubeconfig_var, context, expected):
    sa_file = tmp_path / "sa-namespace"
    if sa is not None:
        sa_file.write_text(sa)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {"HOME": str(tmp_path)}
    if kubeconfig_var:
        env["KUBECONFIG"] = os.pathsep.join(str(tmp_path / p) for p in kubeconfig_var.split(":"))
    assert current_namespace(context, env, sa_namespace_file=sa_file) == expected


@pytest.mark.parametrize(
    "files, context, message",
    [
        ({"k": kubeconfig("dev", {"dev": "dev-ns"})}, "nope", "kube context 'nope' not found"),
        ({}, "nope", "kube context 'nope' not found (no kubeconfig file found)"),
        ({"k": "contexts: [\n"}, None, "k:2: "),
        ({"k": "- a\n"}, None, "k: top level must be a mapping"),
    ],
    ids=[
        "unknown-explicit-context",
        "explicit-context-without-kubeconfig",
        "malformed-kubeconfig",
        "non-mapping-kubeconfig",
    ],
)
def test_current_namespace_errors(tmp_path, files, context, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "k")}
    with pytest.raises(ConfigError) as err:
        current_namespace(context, env, sa_namespace_file=tmp_path / "no-sa")
    assert message in err.value.message
    assert err.value.hint


def test_default_service_account_path_is_the_kubernetes_one(tmp_path, monkeypatch):
    from nrl_k8s.config import kubeconfig as module

    assert module.SA_NAMESPACE_FILE == Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    sa_file = tmp_path / "ns"
    sa_file.write_text("patched")
    monkeypatch.setattr(module, "SA_NAMESPACE_FILE", sa_file)
    assert current_namespace(None, {"HOME": str(tmp_path)}) == ("patched", "in-cluster")
