"""Resource types the sandbox serves and the discovery documents that describe them.

``Registry`` holds the built-in types plus one type per served version of every installed
CustomResourceDefinition; the API server asks it which paths exist and renders ``/api``,
``/api/v1``, ``/apis`` and ``/apis/GROUP/VERSION`` from it (legacy, non-aggregated discovery).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-nrl-k8s-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    has_status: bool = False
    subresources: tuple[str, ...] = ()  # besides status: "log", "proxy"
    verbs: tuple[str, ...] = VERBS
    categories: tuple[str, ...] = ()
    printer_columns: tuple[dict, ...] = field(default=(), compare=False)
    custom: bool = False
    storage_version: str = ""  # a CRD's storage version, when it serves several (objects are kept in it)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_api_version(self) -> str:
        return f"{self.group}/{self.storage_version}" if self.storage_version else self.api_version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: objects of one group+plural share storage across versions."""
        return (self.group, self.plural)


def _core(plural, kind, namespaced=True, short=(), status=False, sub=(), categories=()):
    return ResourceType("", "v1", plural, kind, namespaced, tuple(short), status, tuple(sub), VERBS, tuple(categories))


BUILTIN_TYPES = (
    _core("namespaces", "Namespace", namespaced=False, short=("ns",), status=True),
    _core("pods", "Pod", short=("po",), status=True, sub=("log",), categories=("all",)),
    _core("services", "Service", short=("svc",), status=True, sub=("proxy",), categories=("all",)),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("secrets", "Secret"),
    _core("events", "Event", short=("ev",)),
    _core("serviceaccounts", "ServiceAccount", short=("sa",)),
    ResourceType("apps", "v1", "deployments", "Deployment", True, ("deploy",), True, (), VERBS, ("all",)),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate"),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
        True,
    ),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False, verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False, verbs=("create",)),
)


def types_from_crd(crd: dict) -> list[ResourceType]:
    """One ResourceType per served version of a CustomResourceDefinition object."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    types = []
    storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), "")
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                has_status="status" in (version.get("subresources") or {}),
                categories=tuple(names.get("categories") or ()),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                custom=True,
                storage_version=storage,
            )
        )
    return types


class Registry:
    """Built-in types plus CRD-defined ones; not locked itself (the store's lock guards it)."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {
            (t.group, t.version, t.plural): t for t in BUILTIN_TYPES
        }
        self._crd_types: dict[str, list[ResourceType]] = {}

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def add_crd(self, crd: dict) -> list[ResourceType]:
        self.remove_crd(crd["metadata"]["name"])
        types = types_from_crd(crd)
        self._crd_types[crd["metadata"]["name"]] = types
        for t in types:
            self._types[(t.group, t.version, t.plural)] = t
        return types

    def remove_crd(self, name: str) -> list[ResourceType]:
        types = self._crd_types.pop(name, [])
        for t in types:
            self._types.pop((t.group, t.version, t.plural), None)
        return types

    def all_types(self) -> list[ResourceType]:
        return list(self._types.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Group name → served versions, in registration order (the core group excluded)."""
        groups: dict[str, list[str]] = {}
        for t in self._types.values():
            if t.group and t.version not in groups.setdefault(t.group, []):
                groups[t.group].append(t.version)
        return groups

    def api_versions(self) -> dict:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }

    def api_group_list(self) -> dict:
        groups = []
        for name, versions in self.group_versions().items():
            entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
            groups.append({"name": name, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group: str) -> dict | None:
        versions = self.group_versions().get(group)
        if not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries, "preferredVersion": entries[0]}

    def resource_list(self, group: str, version: str) -> dict | None:
        types = [t for t in self._types.values() if t.group == group and t.version == version]
        if not types:
            return None
        resources = []
        for t in types:
            entry = {
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": list(t.verbs),
            }
            if t.short_names:
                entry["shortNames"] = list(t.short_names)
            if t.categories:
                entry["categories"] = list(t.categories)
            resources.append(entry)
            sub_common = {"singularName": "", "namespaced": t.namespaced}
            if t.has_status:
                resources.append({"name": f"{t.plural}/status", **sub_common, "kind": t.kind, "verbs": ["get", "patch", "update"]})
            if "log" in t.subresources:
                resources.append({"name": f"{t.plural}/log", **sub_common, "kind": t.kind, "verbs": ["get"]})
            if "proxy" in t.subresources:
                resources.append(
                    {
                        "name": f"{t.plural}/proxy",
                        **sub_common,
                        "kind": "ServiceProxyOptions",
                        "verbs": ["create", "delete", "get", "patch", "update"],
                    }
                )
        body = {"kind": "APIResourceList", "groupVersion": types[0].api_version, "resources": resources}
        if group:
            body["apiVersion"] = "v1"
        return body


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenApi:
    """Minimal OpenAPI v3 documents: one PATCH operation per kind, tagged with its GVK and
    accepting ``fieldValidation``, so kubectl leaves validation to the server; no schemas."""

    def __init__(self, registry: Registry):
        self._registry = registry

    def _types(self) -> dict[tuple[str, str], list[ResourceType]]:
        grouped: dict[tuple[str, str], list[ResourceType]] = {}
        for t in self._registry.all_types():
            grouped.setdefault((t.group, t.version), []).append(t)
        return grouped

    def index(self) -> dict:
        paths = {}
        for (group, version), types in self._types().items():
            digest = hashlib.sha256(repr(sorted((t.plural, t.kind) for t in types)).encode()).hexdigest()[:16].upper()
            paths[_gv_path(group, version)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(group, version)}?hash={digest}"}
        return {"paths": paths}

    def group_version(self, path: str) -> dict | None:
        types = next((ts for (g, v), ts in self._types().items() if _gv_path(g, v) == path), None)
        if types is None:
            return None
        paths = {}
        for t in types:
            scope = "/namespaces/{namespace}" if t.namespaced else ""
            paths[f"/{path}{scope}/{t.plural}/{{name}}"] = {
                "patch": {
                    "operationId": f"patch{t.kind}",
                    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
                }
            }
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
            "paths": paths,
            "components": {"schemas": {}},
        }
