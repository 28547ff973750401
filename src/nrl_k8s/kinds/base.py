"""What every resource kind shares: its descriptor, common labels and metadata (readiness is
``kinds.readiness``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, cast

from nrl_k8s.kinds import k8s_rules

from ..errors import InfraError

MANAGED_BY = {"app.kubernetes.io/managed-by": "nrl-k8s"}
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=nrl-k8s"


def managed(obj: dict) -> bool:
    """Whether nrl-k8s created ``obj`` (it carries the managed-by label)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in MANAGED_BY.items())


OWNER_LABEL = "nrl-k8s/owner"  # the ${user:} who made it (src/nrl_k8s/defaults.yaml puts it on everything)


def maker(obj: dict, user: str | None) -> str | None:
    """Who made ``obj``, when it is not ``user``'s own nrl-k8s object: else None."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not managed(obj):
        return "someone else (it has no nrl-k8s managed-by label)"
    if labels.get(OWNER_LABEL) != user:
        return f"user {labels[OWNER_LABEL]!r}" if labels.get(OWNER_LABEL) else f"nrl-k8s without an {OWNER_LABEL} label"
    return None


def labelled(obj: dict, key: str, value: str) -> dict:
    """A copy of ``obj`` with one more label (``obj`` is left alone)."""
    metadata = obj["metadata"]
    return {**obj, "metadata": {**metadata, "labels": {**(metadata.get("labels") or {}), key: value}}}


@dataclass(frozen=True)
class Kind:
    """A Kubernetes resource kind as data (group "" is the core API)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def resource_name(kind: Kind) -> str:
    """``rayjobs.ray.io`` for grouped kinds, ``pods`` for the core group (as kubectl names them)."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def delete_command(kind: Kind, name: str, namespace: str) -> str:
    """The kubectl command that deletes one object (printed for what a run leaves behind)."""
    return f"kubectl -n {namespace} delete {resource_name(kind)} {name}"


def k8s_str(value: Any) -> str:
    """A label or env value as the string Kubernetes and shells expect (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def str_map(mapping: dict) -> dict:
    """``mapping`` with keys and values as strings (labels, annotations, selectors)."""
    return {str(k): k8s_str(v) for k, v in mapping.items()}


_T = TypeVar("_T")


def without_nulls(value: _T) -> _T:
    """A copy of ``value`` without null mapping entries (Kubernetes reads null as unset)."""
    if isinstance(value, dict):
        return cast(_T, {k: without_nulls(v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return cast(_T, [without_nulls(v) for v in value])
    return value


def object_metadata(
    name: str, namespace: str, labels: list[dict | None], annotations: list[dict | None], *, key: tuple
) -> dict:
    """Metadata with label and annotation layers merged low to high; no empty annotations.

    ``key`` is the infra key of the object, named when the merged annotations are too large.
    """
    metadata = {"name": name, "namespace": namespace, "labels": str_map(_merge(labels))}
    merged = _merge(annotations)
    if merged:
        metadata["annotations"] = str_map(merged)
        try:
            k8s_rules.annotations(metadata["annotations"])
        except k8s_rules.Invalid as bad:
            raise InfraError(
                (*key, "annotations"), f"together with the inherited ones: {bad.problem}", bad.hint
            ) from None
    return metadata


def label_template(template: dict, layers: list[dict | None]) -> None:
    """Give a pod template the label layers of its object (managed-by, infra, scheduler queue,
    the entry's own: ``nrl-k8s/owner``, ``disagg.*``...); a label the template sets wins."""
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = str_map({**_merge(layers), **(metadata.get("labels") or {})})


def _merge(layers: list[dict | None]) -> dict:
    out: dict = {}
    for layer in layers:
        out.update(layer or {})
    return out


def owner_reference(obj: dict) -> dict:
    """A non-controlling ownerReference to ``obj`` (any kind), for garbage collection only.

    Kubernetes ignores owners in another namespace (and may then delete the dependent), so
    only point a namespaced object at an owner in its own namespace.
    """
    metadata = obj.get("metadata") or {}
    if not metadata.get("uid") or not metadata.get("name"):
        raise ValueError("owner_reference needs an object read from the API server (metadata.name and uid)")
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }


def owned(manifest: dict, owner: dict) -> dict:
    """A copy of ``manifest`` created with ``owner`` already in its ownerReferences (no window
    in which it has none)."""
    return {**manifest, "metadata": {**manifest["metadata"], "ownerReferences": [owner_reference(owner)]}}


def owners_patch(live: dict, add: dict | None = None, remove: str | None = None) -> dict | None:
    """The one ownerReferences patch: the merge patch making ``add`` (an ownerReference) an owner of
    ``live`` in place of its owner of uid ``remove`` (either may be None; moving an object from one
    owner to another is one patch, never a moment without an owner); None when it is so already."""
    before = live["metadata"].get("ownerReferences") or []
    after = [o for o in before if o.get("uid") != remove]
    if add is not None and not any(o.get("uid") == add["uid"] for o in after):
        after.append(add)
    return None if after == before else {"metadata": {"ownerReferences": after or None}}
