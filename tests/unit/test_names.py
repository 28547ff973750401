"""Kubernetes name validation: RFC 1123 labels with per-kind length limits."""

from __future__ import annotations

import pytest

from nrl_k8s.errors import ConfigError
from nrl_k8s.kinds.names import validate_name

VALID = [
    ("simple", "train", 63),
    ("digits and dashes", "qwen3-0-6b", 63),
    ("starts with digit", "3x", 63),
    ("single char", "a", 63),
    ("at rayjob limit", "a" * 47, 47),
]


@pytest.mark.parametrize("name, max_len", [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid(name, max_len):
    assert validate_name(name, what="RayJob name", where="infra.kuberay.training.name", max_len=max_len) == name


INVALID = [
    ("uppercase", "Train", 63, "not a valid Kubernetes name", "'train'"),
    ("underscore", "my_job", 63, "not a valid Kubernetes name", "'my-job'"),
    ("dot", "a.b", 63, "not a valid Kubernetes name", "'a-b'"),
    ("leading dash", "-a", 63, "not a valid Kubernetes name", "'a'"),
    ("trailing dash", "a-", 63, "not a valid Kubernetes name", "'a'"),
    ("too long", "a" * 48, 47, "48 characters, more than 47", "at most 47"),
    ("empty", "", 63, "non-empty string", "lowercase"),
    ("not a string", 42, 63, "non-empty string", "lowercase"),
    ("none", None, 63, "non-empty string", "lowercase"),
]


@pytest.mark.parametrize("name, max_len, message, hint", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(name, max_len, message, hint):
    with pytest.raises(ConfigError) as info:
        validate_name(name, what="RayJob name", where="infra.kuberay.training.name", max_len=max_len)
    assert info.value.message.startswith("infra.kuberay.training.name: ")
    assert message in info.value.message
    assert hint in info.value.hint


@pytest.mark.parametrize("name", ["1run", "9-train"])
def test_kuberay_and_service_names_must_start_with_a_letter(name):
    assert validate_name(name, what="DGD name", where="x") == name  # an RFC 1123 label is fine elsewhere
    with pytest.raises(ConfigError, match="must start with a letter"):
        validate_name(name, what="RayJob name", where="x", letter_first=True)
