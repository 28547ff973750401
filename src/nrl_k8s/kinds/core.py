"""Descriptors of the built-in kinds nrl-k8s touches that need no module of their own."""

from __future__ import annotations

from .base import Kind

NAMESPACE = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
EVENT = Kind("", "v1", "events", "Event")
CONFIGMAP = Kind("", "v1", "configmaps", "ConfigMap")
SERVICE_ACCOUNT = Kind("", "v1", "serviceaccounts", "ServiceAccount")
CRD = Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)
SELF_SUBJECT_ACCESS_REVIEW = Kind(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", namespaced=False
)
SELF_SUBJECT_RULES_REVIEW = Kind(
    "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", namespaced=False
)
