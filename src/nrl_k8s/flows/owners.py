"""The one ownerReferences patch every flow sends: link an owner, unlink one, or move an object
from one owner to another in a single patch (never a moment without an owner)."""

from __future__ import annotations


def owners_patch(live: dict, add: dict | None = None, remove: str | None = None) -> dict | None:
    """The merge patch making ``add`` (an ownerReference) an owner of ``live`` in place of its owner
    of uid ``remove`` (either may be None); None when ``live`` is so already."""
    before = live["metadata"].get("ownerReferences") or []
    after = [o for o in before if o.get("uid") != remove]
    if add is not None and not any(o.get("uid") == add["uid"] for o in after):
        after.append(add)
    return None if after == before else {"metadata": {"ownerReferences": after or None}}
