"""Every kind nrl-k8s renders, by its ``apiVersion`` and ``kind``: the descriptor of a rendered object."""

from __future__ import annotations

from . import deployment, dgd, dra, lease, raycluster, rayjob, secret, service
from .base import Kind

_BY_KIND = {(k.api_version, k.kind): k for k in (deployment.KIND, service.KIND, secret.KIND, raycluster.KIND,
                                                 rayjob.KIND, lease.KIND, *dgd.KINDS, *dra.KINDS)}


def kind_of(manifest: dict) -> Kind:
    """The descriptor of a manifest nrl-k8s rendered, in its own version (KeyError for any other kind)."""
    return _BY_KIND[(manifest["apiVersion"], manifest["kind"])]
