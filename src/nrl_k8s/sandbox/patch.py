"""Patch algorithms: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

Strategic merge is simplified: instead of the per-type OpenAPI schema, a list is merged by
key when its *field name* appears in ``MERGE_KEYS`` (``containers``/``volumes``/``env``/... by
``name``, ``ownerReferences`` by ``uid``, ``ports`` by ``containerPort`` or ``port`` depending on
what the items carry, ...); ``finalizers`` merge as a set of strings; every other list is
replaced. Directives handled: ``$patch: delete|replace|merge`` (maps and list items),
``$retainKeys``, ``$deleteFromPrimitiveList/FIELD``; ``$setElementOrder/FIELD`` is accepted and
ignored (merged items keep the live order, new ones are appended).
"""

from __future__ import annotations

import copy
import json

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "conditions": "type",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "ports": None,  # containerPort for container ports, port for service ports
}
SET_LISTS = ("finalizers",)


class PatchError(ValueError):
    """A patch that cannot be applied to the object (HTTP 422)."""


def merge_key(field: str, items: list) -> str | None:
    """The key list ``field`` is merged by, or None when it is atomic (replaced whole)."""
    if field not in MERGE_KEYS:
        return None
    key = MERGE_KEYS[field]
    if key is None:
        dicts = [i for i in items if isinstance(i, dict)]
        key = "containerPort" if any("containerPort" in i for i in dicts) else "port"
    return key


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386: maps merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: object, parts: list[str], path: str) -> object:
    current = doc
    for part in parts:
        try:
            current = current[int(part)] if isinstance(current, list) else current[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"path {path!r} does not exist") from None
    return current


def _index(container: list, part: str, path: str, *, insert: bool) -> int:
    if part == "-" and insert:
        return len(container)
    if not part.isdigit() or int(part) > len(container) - (0 if insert else 1):
        raise PatchError(f"index {part!r} out of range in {path!r}")
    return int(part)


def _get(doc: object, path: str) -> object:
    return copy.deepcopy(_container(doc, _pointer(path), path))


def _remove(doc: object, path: str) -> object:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _container(doc, parts[:-1], path)
    if isinstance(parent, list):
        return parent.pop(_index(parent, parts[-1], path, insert=False))
    if not isinstance(parent, dict) or parts[-1] not in parent:
        raise PatchError(f"path {path!r} does not exist")
    return parent.pop(parts[-1])


def _add(doc: object, path: str, value: object, *, replace: bool) -> object:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _container(doc, parts[:-1], path)
    if isinstance(parent, list):
        index = _index(parent, parts[-1], path, insert=not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    elif isinstance(parent, dict):
        if replace and parts[-1] not in parent:
            raise PatchError(f"path {path!r} does not exist")
        parent[parts[-1]] = value
    else:
        raise PatchError(f"path {path!r} does not name a container")
    return doc


def json_patch(target: object, operations: object) -> object:
    """RFC 6902 add/remove/replace/move/copy/test."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "path" not in op or "op" not in op:
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace"):
            if "value" not in op:
                raise PatchError(f"operation {kind} on {path!r} needs a value")
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=kind == "replace")
        elif kind == "remove":
            _remove(doc, path)
        elif kind in ("move", "copy"):
            value = _remove(doc, op["from"]) if kind == "move" else _get(doc, op["from"])
            doc = _add(doc, path, value, replace=False)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"test operation on {path!r} failed")
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


def _merge_keyed_list(live: list, patch: list, key: str) -> list:
    result = copy.deepcopy(live)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"list item {item!r} has no merge key {key!r}")
        position = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        directive = item.get("$patch")
        if directive == "delete":
            if position is not None:
                result.pop(position)
        elif position is None:
            result.append(strategic_merge({}, item))
        elif directive == "replace":
            result[position] = {k: v for k, v in item.items() if k != "$patch"}
        else:
            result[position] = strategic_merge(result[position], item)
    return result


def strategic_merge(live: object, patch: object) -> object:
    """Apply a (simplified) strategic merge patch; see the module docstring."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = copy.deepcopy(live) if isinstance(live, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in SET_LISTS:
            current = list(result.get(key) or [])
            result[key] = current + [v for v in value if v not in current]
        elif isinstance(value, list) and isinstance(result.get(key), list) and (mk := merge_key(key, value + result[key])):
            result[key] = _merge_keyed_list(result[key], value, mk)
        elif isinstance(value, list) and (mk := merge_key(key, value)):
            result[key] = _merge_keyed_list([], value, mk)
        else:
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def parse_json(body: bytes) -> object:
    """Decode a JSON request body (PatchError when it is not JSON)."""
    try:
        return json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PatchError(f"invalid JSON: {exc}") from None
