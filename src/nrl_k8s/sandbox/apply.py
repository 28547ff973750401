"""Server-side apply and ``metadata.managedFields``, with a simplified ownership model.

Field sets are sets of leaf paths. A path step is a map key, or ``("k", KEY_JSON)`` for an item
of a list merged by key (see ``patch.MERGE_KEYS``); other lists, scalars and empty maps are
leaves. They are stored in ``managedFields`` in the real ``FieldsV1`` shape (``f:spec``,
``k:{"name":"x"}``, ``.``).

Simplified conflict model:

- every write records an entry per (manager, operation): ``Apply`` for server-side apply,
  ``Update`` for create/update/patch (manager = ``fieldManager`` or the User-Agent's product);
- an apply conflicts (409, reason ``Conflict``) when a *different* manager owns a leaf the
  applied configuration sets **to a different value**; ``force=true`` takes ownership instead;
- an apply merges the configuration into the live object (maps recurse, keyed lists merge by
  key, other lists and scalars replace) and removes the leaves this manager applied before but
  no longer applies, unless another manager also owns them;
- an update/patch makes its manager the owner of every leaf it added or changed, taking it away
  from the others.

Not modelled: per-version schemas, ``x-kubernetes-list-type: set``, granular unions.
"""

from __future__ import annotations

import copy
import json

from nrl_k8s.sandbox.patch import merge_key
from nrl_k8s.sandbox.statuses import ApiStatus

Path = tuple  # tuple of str | tuple[str, str]
_IGNORED_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)


def leaf_paths(obj: object, prefix: Path = (), field: str = "") -> dict[Path, object]:
    """Every leaf path of ``obj`` and its value."""
    if isinstance(obj, dict) and obj:
        out: dict[Path, object] = {}
        for key, value in obj.items():
            if prefix == () and key in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and key in _IGNORED_METADATA:
                continue
            out.update(leaf_paths(value, prefix + (key,), key))
        return out
    if isinstance(obj, list) and obj and (mk := merge_key(field, obj)) and all(isinstance(i, dict) and mk in i for i in obj):
        out = {}
        for item in obj:
            out.update(leaf_paths(item, prefix + (("k", json.dumps({mk: item[mk]}, separators=(",", ":"))),)))
        return out
    return {prefix: obj} if prefix else {}


def _step(container: object, step: object) -> object:
    if isinstance(step, tuple):
        (key, value), = json.loads(step[1]).items()
        return next((i for i in container or [] if isinstance(i, dict) and i.get(key) == value), None)
    return container.get(step) if isinstance(container, dict) else None


def value_at(obj: object, path: Path) -> object:
    for step in path:
        obj = _step(obj, step)
        if obj is None:
            return None
    return obj


def remove_path(obj: dict, path: Path) -> None:
    """Remove a leaf; removing a keyed item's key field removes the whole item."""
    parents = [obj]
    for step in path[:-1]:
        nxt = _step(parents[-1], step)
        if nxt is None:
            return
        parents.append(nxt)
    last, parent = path[-1], parents[-1]
    if len(path) >= 2 and isinstance(path[-2], tuple) and isinstance(last, str) and json.loads(path[-2][1]).get(last) is not None:
        grand = parents[-2]
        field = path[-3] if len(path) >= 3 else None
        if isinstance(field, str) and isinstance(grand, dict):
            grand[field] = [i for i in grand.get(field) or [] if i is not parent]
        return
    if isinstance(parent, dict):
        parent.pop(last, None)


def to_fields_v1(paths: set[Path]) -> dict:
    root: dict = {}
    for path in paths:
        node = root
        for step in path:
            key = f"k:{step[1]}" if isinstance(step, tuple) else f"f:{step}"
            node = node.setdefault(key, {})
            if isinstance(step, tuple):
                node.setdefault(".", {})
    return root


def from_fields_v1(fields: dict, prefix: Path = ()) -> set[Path]:
    paths: set[Path] = set()
    for key, sub in (fields or {}).items():
        if key == ".":
            continue
        step = ("k", key[2:]) if key.startswith("k:") else key[2:]
        children = {k: v for k, v in (sub or {}).items() if k != "."}
        paths |= from_fields_v1(children, prefix + (step,)) if children else {prefix + (step,)}
    return paths


def _entries(obj: dict) -> list[dict]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _set_entries(obj: dict, entries: list[dict]) -> None:
    entries = [e for e in entries if e.get("fieldsV1")]
    if entries:
        obj.setdefault("metadata", {})["managedFields"] = entries
    else:
        obj.get("metadata", {}).pop("managedFields", None)


def _owned(entry: dict) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _entry(manager: str, operation: str, api_version: str, paths: set[Path], when: str, subresource: str | None) -> dict:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": when,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _merge(live: object, applied: object, field: str = "") -> object:
    if isinstance(live, dict) and isinstance(applied, dict):
        result = copy.deepcopy(live)
        for key, value in applied.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = _merge(result.get(key), value, key)
        return result
    if isinstance(live, list) and isinstance(applied, list) and (mk := merge_key(field, live + applied)):
        result = copy.deepcopy(live)
        for item in applied:
            index = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(mk) == item.get(mk)), None)
            if index is None:
                result.append(copy.deepcopy(item))
            else:
                result[index] = _merge(result[index], item)
        return result
    return copy.deepcopy(applied)


def _render(path: Path) -> str:
    return "".join(f"[{step[1].replace(':', '=', 1).strip('{}')}]" if isinstance(step, tuple) else f".{step}" for step in path)


def apply(live: dict, applied: dict, *, manager: str, force: bool, api_version: str, when: str, subresource: str | None = None) -> dict:
    """Return ``live`` with the applied configuration merged in and managedFields updated."""
    applied_leaves = leaf_paths(applied)
    entries = _entries(live)
    conflicts: list[tuple[str, Path]] = []
    for entry in entries:
        if entry["manager"] == manager and entry.get("operation") == "Apply":
            continue
        for path in _owned(entry) & applied_leaves.keys():
            if value_at(live, path) != applied_leaves[path]:
                conflicts.append((entry["manager"], path))
    if conflicts and not force:
        listing = "\n".join(f'conflict with "{m}": {_render(p)}' for m, p in sorted(conflicts, key=str))
        count = len(conflicts)
        raise ApiStatus(409, f"Apply failed with {count} conflict{'s' if count > 1 else ''}: {listing}", reason="Conflict")
    previous = next((e for e in entries if e["manager"] == manager and e.get("operation") == "Apply"), None)
    others = [e for e in entries if e is not previous]
    taken = {p for _, p in conflicts} if force else set()
    others = [dict(e, fieldsV1=to_fields_v1(_owned(e) - taken)) for e in others]
    result = _merge(live, {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")})
    still_owned = set().union(*(_owned(e) for e in others)) if others else set()
    for path in sorted((_owned(previous) if previous else set()) - applied_leaves.keys() - still_owned, key=len, reverse=True):
        remove_path(result, path)
    _set_entries(result, others + [_entry(manager, "Apply", api_version, set(applied_leaves), when, subresource)])
    return result


def track_update(old: dict | None, new: dict, *, manager: str, api_version: str, when: str, subresource: str | None = None) -> dict:
    """Record ``manager`` (operation Update) as owner of every leaf that ``new`` adds or changes."""
    old_leaves = leaf_paths(old or {})
    changed = {p for p, v in leaf_paths(new).items() if old_leaves.get(p, object()) != v}
    entries = _entries(old or {})
    if not changed:
        _set_entries(new, entries)
        return new
    mine = next((e for e in entries if e["manager"] == manager and e.get("operation") == "Update"), None)
    rest = [dict(e, fieldsV1=to_fields_v1(_owned(e) - changed)) for e in entries if e is not mine]
    owned = (_owned(mine) if mine else set()) | changed
    current = leaf_paths(new).keys()
    _set_entries(new, rest + [_entry(manager, "Update", api_version, owned & current, when, subresource)])
    return new
