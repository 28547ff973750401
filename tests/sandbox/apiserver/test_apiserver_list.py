"""List semantics: label/field selectors, all namespaces, pagination, list resourceVersion."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from nrl_k8s.sandbox.selectors import SelectorError, parse_label_selector

LABELS = {
    "a": {"app": "ray", "tier": "head"},
    "b": {"app": "ray", "tier": "worker"},
    "c": {"app": "dynamo"},
    "d": {},
}


@pytest.fixture
def labelled(core):
    for name, labels in LABELS.items():
        core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("app=ray", ["a", "b"]),
        ("app==ray", ["a", "b"]),
        ("app!=ray", ["c", "d"]),
        ("tier in (head, worker)", ["a", "b"]),
        ("app notin (ray)", ["c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("app=ray,tier!=head", ["b"]),
        ("", ["a", "b", "c", "d"]),
    ],
    ids=["eq", "double-eq", "neq", "in", "notin", "exists", "not-exists", "and", "empty"],
)
def test_label_selectors(core, labelled, selector, expected):
    items = core.list_namespaced_config_map("default", label_selector=selector).items
    assert [cm.metadata.name for cm in items] == expected


def test_bad_label_selector_is_400(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default", label_selector="app in ray")
    assert err.value.status == 400


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("metadata.name=b", ["b"]),
        ("metadata.name!=b", ["a", "c", "d"]),
        ("metadata.namespace=default", ["a", "b", "c", "d"]),
        ("metadata.namespace==kube-system", []),
    ],
    ids=["name", "not-name", "namespace", "other-namespace"],
)
def test_field_selectors(core, labelled, selector, expected):
    items = core.list_namespaced_config_map("default", field_selector=selector).items
    assert [cm.metadata.name for cm in items] == expected


def test_field_selector_on_dotted_path_for_events(core):
    for name, target in (("e1", "pod-a"), ("e2", "pod-b")):
        core.create_namespaced_event("default", {"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": target, "namespace": "default"}})
    items = core.list_namespaced_event("default", field_selector="involvedObject.name=pod-b,involvedObject.namespace=default").items
    assert [e.metadata.name for e in items] == ["e2"]


def test_list_across_namespaces_and_per_namespace(core):
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "x"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "y"}})
    everywhere = core.list_config_map_for_all_namespaces()
    assert [(c.metadata.namespace, c.metadata.name) for c in everywhere.items] == [("default", "y"), ("team", "x")]
    assert [c.metadata.name for c in core.list_namespaced_config_map("team").items] == ["x"]
    assert core.list_namespaced_config_map("absent").items == []


def test_list_resource_version_is_the_latest(core):
    made = core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    assert core.list_namespaced_config_map("default").metadata.resource_version == made.metadata.resource_version


def test_pagination_with_limit_and_continue(core, labelled):
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map("default", limit=3, _continue=token)
        pages += 1
        seen += [cm.metadata.name for cm in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == len(LABELS) - len(seen)
    assert (seen, pages) == (["a", "b", "c", "d"], 2)


def test_invalid_continue_token_is_400(core):
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map("default", _continue="not-a-token")
    assert err.value.status == 400


@pytest.mark.parametrize("text", ["a b", "x in (", "=v"], ids=["space", "unclosed", "no-key"])
def test_selector_parser_rejects_garbage(text):
    with pytest.raises(SelectorError):
        parse_label_selector(text)
